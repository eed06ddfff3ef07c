//! Cases about queries: key order, the four query classes, `top`, continuation tokens and
//! their text form, streams, projection and filters on the Timestamp.

mod keys;
mod paging;
mod select;

pub use keys::*;
pub use paging::*;
pub use select::*;

use super::insert_all;
use crate::model::Entity;
use crate::query::{Page, Query};
use crate::store::TableStore;

/// The most pages a case follows before deciding the continuation never ends.
const MAX_PAGES: usize = 2_000;

/// Runs one page of `query`, failing the case on an error.
async fn page_of<S: TableStore>(store: &S, table: &str, query: &Query) -> Page {
    store
        .query(table, query)
        .await
        .unwrap_or_else(|e| panic!("query {query:?} on `{table}` failed: {e}"))
}

/// Follows the continuation of `query` to the end, checking every page holds at most
/// `page_limit` entities; returns the entities and the number of pages.
async fn every_page<S: TableStore>(
    store: &S,
    table: &str,
    query: Query,
    page_limit: usize,
) -> (Vec<Entity>, usize) {
    let mut entities = Vec::new();
    let mut query = query;
    for pages in 1..=MAX_PAGES {
        let page = page_of(store, table, &query).await;
        assert!(
            page.entities.len() <= page_limit,
            "page {pages} holds {} entities; at most {page_limit} allowed",
            page.entities.len()
        );
        entities.extend(page.entities);
        match page.continuation {
            Some(token) => query = query.continue_from(Some(token)),
            None => return (entities, pages),
        }
    }
    panic!("the continuation did not end after {MAX_PAGES} pages");
}

/// The entities of a query's single page, which must be the last one.
async fn only_page<S: TableStore>(store: &S, table: &str, filter: &str) -> Vec<Entity> {
    let query = Query::parse(filter).unwrap_or_else(|e| panic!("filter {filter:?}: {e}"));
    let page = page_of(store, table, &query).await;
    assert!(
        page.continuation.is_none(),
        "a query for a handful of entities has one page ({filter})"
    );
    page.entities
}

/// Key pairs as owned strings.
fn pairs(keys: &[(&str, &str)]) -> Vec<(String, String)> {
    keys.iter()
        .map(|(pk, rk)| ((*pk).to_owned(), (*rk).to_owned()))
        .collect()
}

/// Partitions `p1` and `p2`, rows `r1` to `r5` each, with `N` 1‥5 and 11‥15.
async fn seed_grid<S: TableStore>(store: &S, table: &str) {
    let mut entities = Vec::new();
    for (p, base) in [("p2", 10), ("p1", 0)] {
        for r in (1..=5).rev() {
            entities.push(Entity::new(p, format!("r{r}")).with("N", base + r));
        }
    }
    insert_all(store, table, entities).await;
}
