//! Cases about queries: key order, the four query classes, `top`, continuation tokens and
//! their text form, streams, projection and filters on the Timestamp.

use std::ops::Bound;

use futures::TryStreamExt;

use super::{
    all_entities, drop_table, expect_kind, fetch_existing, insert_all, insert_batched, keys_of,
    new_table, row_keys_of, write_until_later,
};
use crate::error::ErrorKind;
use crate::filter::{self, Filter};
use crate::model::{Entity, Value};
use crate::query::{ContinuationToken, Page, Query, QueryClass};
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

/// 1300 entities: 700 in partition `a`, 600 in `b`; `I` numbers them in key order and
/// `Hit` is true on every 97th.
async fn seed_1300<S: TableStore>(store: &S, table: &str) -> Vec<(String, String)> {
    let mut keys = Vec::new();
    let mut index = 0;
    for (pk, count) in [("a", 700), ("b", 600)] {
        let mut entities = Vec::new();
        for i in 0..count {
            let rk = format!("row{i:05}");
            keys.push((pk.to_owned(), rk.clone()));
            entities.push(
                Entity::new(pk, rk)
                    .with("I", index)
                    .with("Hit", index % 97 == 13),
            );
            index += 1;
        }
        insert_batched(store, table, entities).await;
    }
    keys
}

/// Entities come back ordered by PartitionKey, then RowKey, comparing the keys ordinally
/// (upper case before lower case) in the store's [`KeyOrder`](crate::store::KeyOrder).
pub async fn query_returns_entities_in_key_order<S: TableStore>(store: &S) {
    let table = new_table(store, "KeyOrder").await;
    let pks = ["b", "B", "a", "é", "\u{FF21}", "𝄞", "", "a b"];
    let rks = ["b", "B", "a", "aa", "", "ü", "\u{FF21}", "𝄞", "A0", "a0"];
    let mut entities = Vec::new();
    for pk in pks.iter().rev() {
        for rk in &rks {
            entities.push(Entity::new(*pk, *rk));
        }
    }
    insert_all(store, &table, entities).await;
    let mut expected: Vec<(String, String)> = pks
        .iter()
        .flat_map(|pk| rks.iter().map(|rk| ((*pk).to_owned(), (*rk).to_owned())))
        .collect();
    let order = store.key_order();
    expected.sort_by(|a, b| {
        order
            .compare(&a.0, &b.0)
            .then_with(|| order.compare(&a.1, &b.1))
    });
    let (all, _) = every_page(store, &table, Query::new(), 1000).await;
    assert_eq!(keys_of(&all), expected, "table scan order");

    let (partition, _) = every_page(store, &table, Query::partition("é"), 1000).await;
    let mut expected_rows: Vec<String> = rks.iter().map(|rk| (*rk).to_owned()).collect();
    expected_rows.sort_by(|a, b| order.compare(a, b));
    assert_eq!(
        row_keys_of(&partition),
        expected_rows,
        "partition scan order"
    );

    let (paged, _) = every_page(store, &table, Query::new().top(7), 7).await;
    assert_eq!(keys_of(&paged), expected, "order across pages of 7");
    drop_table(store, &table).await;
}

/// A query fixing both keys returns that one entity (or none) and is a point query.
pub async fn point_query_returns_the_entity_and_is_classified_point<S: TableStore>(store: &S) {
    let table = new_table(store, "PointQuery").await;
    seed_grid(store, &table).await;
    let query = Query::parse("PartitionKey eq 'p1' and RowKey eq 'r3'").expect("point filter");
    assert_eq!(
        query.explain(),
        QueryClass::Point {
            partition_key: "p1".into(),
            row_key: "r3".into()
        },
        "explain of a point query"
    );
    let page = page_of(store, &table, &query).await;
    assert_eq!(
        keys_of(&page.entities),
        pairs(&[("p1", "r3")]),
        "point query result"
    );
    assert_eq!(
        page.entities[0].get("N"),
        Some(&Value::Int32(3)),
        "its properties"
    );
    assert!(page.continuation.is_none(), "a point query has one page");

    let reversed = Query::parse("RowKey eq 'r3' and PartitionKey eq 'p2' and N gt 0")
        .expect("point filter with an extra condition");
    assert!(
        matches!(reversed.explain(), QueryClass::Point { ref partition_key, ref row_key } if partition_key == "p2" && row_key == "r3"),
        "the order of the terms does not matter: {:?}",
        reversed.explain()
    );
    let page = page_of(store, &table, &reversed).await;
    assert_eq!(
        keys_of(&page.entities),
        pairs(&[("p2", "r3")]),
        "reversed point query"
    );

    let missing = Query::parse("PartitionKey eq 'p1' and RowKey eq 'r9'").expect("point filter");
    let page = page_of(store, &table, &missing).await;
    assert!(
        page.entities.is_empty(),
        "a point query on a missing key finds nothing"
    );
    assert!(page.continuation.is_none(), "and has no continuation");
    drop_table(store, &table).await;
}

/// A query fixing the PartitionKey and bounding the RowKey returns exactly the rows in
/// the bounds and is a range query.
pub async fn range_query_returns_the_row_range_and_is_classified_range<S: TableStore>(store: &S) {
    let table = new_table(store, "RangeQuery").await;
    seed_grid(store, &table).await;
    /// A range filter, the RowKey bounds `explain` must report, and the rows it selects.
    type RangeCase<'a> = (&'a str, [Bound<&'a str>; 2], &'a [&'a str]);
    let cases: [RangeCase<'_>; 4] = [
        (
            "PartitionKey eq 'p2' and RowKey ge 'r2' and RowKey lt 'r4'",
            [Bound::Included("r2"), Bound::Excluded("r4")],
            &["r2", "r3"],
        ),
        (
            "PartitionKey eq 'p2' and RowKey gt 'r2' and RowKey le 'r4'",
            [Bound::Excluded("r2"), Bound::Included("r4")],
            &["r3", "r4"],
        ),
        (
            "RowKey gt 'r3' and PartitionKey eq 'p1'",
            [Bound::Excluded("r3"), Bound::Unbounded],
            &["r4", "r5"],
        ),
        (
            "PartitionKey eq 'p1' and RowKey lt 'r2'",
            [Bound::Unbounded, Bound::Excluded("r2")],
            &["r1"],
        ),
    ];
    for (filter, [start, end], rows) in cases {
        let query = Query::parse(filter).expect("range filter");
        match query.explain() {
            QueryClass::Range {
                partition_key,
                start: s,
                end: e,
            } => {
                assert!(
                    s.as_ref().map(String::as_str) == start
                        && e.as_ref().map(String::as_str) == end,
                    "explain of {filter}: bounds {s:?}..{e:?}, expected {start:?}..{end:?}"
                );
                assert!(
                    partition_key == "p1" || partition_key == "p2",
                    "explain of {filter}: partition {partition_key}"
                );
            }
            other => panic!("explain of {filter} should be Range, is {other:?}"),
        }
        let entities = only_page(store, &table, filter).await;
        assert_eq!(row_keys_of(&entities), rows, "result of {filter}");
        let pk = &entities[0].partition_key;
        assert!(
            entities.iter().all(|e| &e.partition_key == pk),
            "a range query stays in its partition ({filter})"
        );
    }
    drop_table(store, &table).await;
}

/// A query fixing only the PartitionKey returns the matches of that partition and is a
/// partition scan.
pub async fn partition_scan_returns_the_partition_and_is_classified_partition_scan<
    S: TableStore,
>(
    store: &S,
) {
    let table = new_table(store, "PartitionScan").await;
    seed_grid(store, &table).await;
    let whole = Query::partition("p1");
    assert_eq!(
        whole.explain(),
        QueryClass::PartitionScan {
            partition_key: "p1".into()
        },
        "explain of Query::partition"
    );
    let page = page_of(store, &table, &whole).await;
    assert_eq!(
        row_keys_of(&page.entities),
        ["r1", "r2", "r3", "r4", "r5"],
        "the whole partition p1"
    );
    let filter = "PartitionKey eq 'p2' and N gt 12";
    let filtered = Query::parse(filter).expect("partition filter");
    assert_eq!(
        filtered.explain(),
        QueryClass::PartitionScan {
            partition_key: "p2".into()
        },
        "explain of {filter}"
    );
    let entities = only_page(store, &table, filter).await;
    assert_eq!(
        keys_of(&entities),
        pairs(&[("p2", "r3"), ("p2", "r4"), ("p2", "r5")]),
        "result of {filter}"
    );
    let none = only_page(store, &table, "PartitionKey eq 'p3'").await;
    assert!(
        none.is_empty(),
        "a partition scan of an empty partition finds nothing"
    );
    drop_table(store, &table).await;
}

/// A query not fixing the PartitionKey returns every match across partitions and is a
/// table scan.
pub async fn table_scan_returns_every_match_and_is_classified_table_scan<S: TableStore>(store: &S) {
    let table = new_table(store, "TableScan").await;
    seed_grid(store, &table).await;
    assert_eq!(
        Query::new().explain(),
        QueryClass::TableScan,
        "explain of Query::new"
    );
    let everything = page_of(store, &table, &Query::new()).await;
    assert_eq!(
        everything.entities.len(),
        10,
        "Query::new returns all ten entities"
    );
    let cases: [(&str, &[(&str, &str)]); 4] = [
        ("RowKey eq 'r1'", &[("p1", "r1"), ("p2", "r1")]),
        (
            "N ge 14 or N eq 2",
            &[("p1", "r2"), ("p2", "r4"), ("p2", "r5")],
        ),
        (
            "PartitionKey eq 'p1' or PartitionKey eq 'p2' and RowKey eq 'r5'",
            &[
                ("p1", "r1"),
                ("p1", "r2"),
                ("p1", "r3"),
                ("p1", "r4"),
                ("p1", "r5"),
                ("p2", "r5"),
            ],
        ),
        (
            "not (PartitionKey eq 'p1') and N lt 13",
            &[("p2", "r1"), ("p2", "r2")],
        ),
    ];
    for (filter, expected) in cases {
        let query = Query::parse(filter).expect("table-scan filter");
        assert_eq!(
            query.explain(),
            QueryClass::TableScan,
            "explain of {filter}"
        );
        let entities = only_page(store, &table, filter).await;
        assert_eq!(keys_of(&entities), pairs(expected), "result of {filter}");
    }
    drop_table(store, &table).await;
}

/// PartitionKey bounds select a range of partitions, in key order and across pages.
pub async fn partition_key_range_query_spans_partitions<S: TableStore>(store: &S) {
    let table = new_table(store, "PartitionRange").await;
    let mut entities = Vec::new();
    for pk in ["d", "c", "b", "a", "bb", "B"] {
        for rk in ["r1", "r2"] {
            entities.push(Entity::new(pk, rk));
        }
    }
    insert_all(store, &table, entities).await;
    let cases: [(&str, &[(&str, &str)]); 4] = [
        (
            "PartitionKey ge 'b' and PartitionKey lt 'c'",
            &[("b", "r1"), ("b", "r2"), ("bb", "r1"), ("bb", "r2")],
        ),
        (
            "PartitionKey gt 'bb'",
            &[("c", "r1"), ("c", "r2"), ("d", "r1"), ("d", "r2")],
        ),
        (
            "PartitionKey le 'b' and RowKey eq 'r2'",
            &[("B", "r2"), ("a", "r2"), ("b", "r2")],
        ),
        ("PartitionKey lt 'B'", &[]),
    ];
    for (filter, expected) in cases {
        let query = Query::parse(filter).expect("PartitionKey range filter");
        assert_eq!(
            query.explain(),
            QueryClass::TableScan,
            "explain of {filter}"
        );
        let (one_page, _) = every_page(store, &table, query.clone(), 1000).await;
        assert_eq!(keys_of(&one_page), pairs(expected), "result of {filter}");
        let (by_one, _) = every_page(store, &table, query.top(1), 1).await;
        assert_eq!(
            keys_of(&by_one),
            pairs(expected),
            "result of {filter}, one per page"
        );
    }
    drop_table(store, &table).await;
}

/// Key conditions that no key can satisfy return nothing.
pub async fn contradictory_key_conditions_return_nothing<S: TableStore>(store: &S) {
    let table = new_table(store, "Contradiction").await;
    seed_grid(store, &table).await;
    for filter in [
        "PartitionKey eq 'p1' and PartitionKey eq 'p2'",
        "PartitionKey eq 'p1' and RowKey gt 'r4' and RowKey lt 'r2'",
        "RowKey eq 'r1' and RowKey eq 'r2'",
        "PartitionKey gt 'p2' and PartitionKey lt 'p1'",
        "PartitionKey eq 'p1' and RowKey eq 'r1' and RowKey ne 'r1'",
    ] {
        let (entities, _) =
            every_page(store, &table, Query::parse(filter).expect("filter"), 1000).await;
        assert!(
            entities.is_empty(),
            "{filter} must match nothing, got {entities:?}"
        );
    }
    drop_table(store, &table).await;
}

/// `top` limits a page; while more entities match, the page carries a continuation that
/// resumes right after it.
pub async fn top_limits_the_page_and_returns_a_continuation<S: TableStore>(store: &S) {
    let table = new_table(store, "Top").await;
    seed_grid(store, &table).await;
    let query = Query::partition("p1").top(2);
    let first = page_of(store, &table, &query).await;
    assert_eq!(
        row_keys_of(&first.entities),
        ["r1", "r2"],
        "first page of top 2"
    );
    let token = first
        .continuation
        .expect("more entities match, so the page has a continuation");
    let second = page_of(store, &table, &query.clone().continue_from(Some(token))).await;
    assert_eq!(
        row_keys_of(&second.entities),
        ["r3", "r4"],
        "second page of top 2"
    );
    let token = second
        .continuation
        .expect("more entities match, so the page has a continuation");
    let third = page_of(store, &table, &query.clone().continue_from(Some(token))).await;
    assert_eq!(row_keys_of(&third.entities), ["r5"], "third page of top 2");
    assert!(
        third.continuation.is_none(),
        "nothing is left after the third page"
    );

    let scan = page_of(store, &table, &Query::new().top(6)).await;
    assert_eq!(scan.entities.len(), 6, "top 6 of ten entities");
    assert!(scan.continuation.is_some(), "four more entities match");
    drop_table(store, &table).await;
}

/// More than 1000 entities come in pages of at most 1000, each resuming from the previous
/// page's token after a trip through its text form, with every entity exactly once.
pub async fn continuation_pages_through_more_than_1000_entities<S: TableStore>(store: &S) {
    let table = new_table(store, "ThousandPlus").await;
    let keys = seed_1300(store, &table).await;
    let mut seen = Vec::new();
    let mut query = Query::new();
    let mut pages = 0;
    loop {
        pages += 1;
        assert!(pages <= MAX_PAGES, "the continuation never ends");
        let page = page_of(store, &table, &query).await;
        assert!(
            page.entities.len() <= 1000,
            "page {pages} holds {} entities; a page holds at most 1000",
            page.entities.len()
        );
        seen.extend(keys_of(&page.entities));
        let Some(token) = page.continuation else {
            break;
        };
        let text = token.to_string();
        let parsed: ContinuationToken = text
            .parse()
            .unwrap_or_else(|e| panic!("the token text {text:?} does not parse back: {e}"));
        assert_eq!(parsed, token, "a token survives its text form");
        query = Query::new().continue_from(Some(parsed));
    }
    assert!(pages >= 2, "1300 entities cannot fit one page");
    assert_eq!(
        seen.len(),
        keys.len(),
        "every entity exactly once across {pages} pages"
    );
    assert_eq!(seen, keys, "pages in key order, without gaps or repeats");

    let (partition_b, _) = every_page(store, &table, Query::partition("b").top(250), 250).await;
    assert_eq!(partition_b.len(), 600, "partition b in pages of 250");
    drop_table(store, &table).await;
}

/// A continuation of a range query stays inside the range.
pub async fn range_query_continuation_stays_inside_the_range<S: TableStore>(store: &S) {
    let table = new_table(store, "RangeContinuation").await;
    seed_grid(store, &table).await;
    let query = Query::parse("PartitionKey eq 'p1' and RowKey ge 'r2' and RowKey le 'r4'")
        .expect("range filter")
        .top(1);
    let (entities, pages) = every_page(store, &table, query, 1).await;
    assert_eq!(
        keys_of(&entities),
        pairs(&[("p1", "r2"), ("p1", "r3"), ("p1", "r4")]),
        "the range, one entity per page"
    );
    assert!(pages >= 3, "three entities need three pages of one");
    drop_table(store, &table).await;
}

/// A query resumed from a token at or past the end of its key range returns an empty
/// last page; a token before the range start resumes at the range start.
pub async fn query_resumed_past_its_range_returns_an_empty_last_page<S: TableStore>(store: &S) {
    let table = new_table(store, "ResumedPast").await;
    seed_grid(store, &table).await;
    let token = |pk: &str, rk: &str| Some(ContinuationToken::new(pk, rk));
    let past = [
        (
            "partition p1 from (p2, r1)",
            Query::partition("p1").continue_from(token("p2", "r1")),
        ),
        (
            "rows up to r2 from (p1, r3)",
            Query::parse("PartitionKey eq 'p1' and RowKey le 'r2'")
                .expect("range filter")
                .continue_from(token("p1", "r3")),
        ),
        (
            "point (p1, r3) from (p1, r4)",
            Query::parse("PartitionKey eq 'p1' and RowKey eq 'r3'")
                .expect("point filter")
                .continue_from(token("p1", "r4")),
        ),
        (
            "table from (p9, '')",
            Query::new().continue_from(token("p9", "")),
        ),
    ];
    for (what, query) in &past {
        let page = page_of(store, &table, query).await;
        assert!(
            page.entities.is_empty(),
            "{what}: nothing is left, got {:?}",
            page.entities
        );
        assert!(page.continuation.is_none(), "{what}: the page is the last");
    }
    let before = Query::parse("PartitionKey eq 'p2' and RowKey ge 'r4'")
        .expect("range filter")
        .continue_from(token("p1", "r1"));
    let page = page_of(store, &table, &before).await;
    assert_eq!(
        keys_of(&page.entities),
        pairs(&[("p2", "r4"), ("p2", "r5")]),
        "a token before the range resumes at the range start"
    );
    drop_table(store, &table).await;
}

/// Text that is not a continuation token, or a token with invalid keys, is `InvalidInput`.
pub async fn garbage_continuation_token_is_invalid_input<S: TableStore>(store: &S) {
    use base64::Engine;
    let encode = |json: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
    let garbage = [
        String::new(),
        "not a token!".to_owned(),
        "%%%".to_owned(),
        encode("{}"),
        encode("[1, 2]"),
        encode(r#"{"pk": 1, "rk": "x"}"#),
        encode(r#"{"pk": "a/b", "rk": "x"}"#),
        encode(r#"{"pk": "a", "rk": "x#y"}"#),
    ];
    for text in &garbage {
        expect_kind(
            text.parse::<ContinuationToken>(),
            ErrorKind::InvalidInput,
            &format!("parsing the token text {text:?}"),
        );
    }
    // A token made from valid keys still works with the store after the round trip.
    let table = new_table(store, "TokenText").await;
    seed_grid(store, &table).await;
    let token: ContinuationToken = ContinuationToken::new("p2", "r4")
        .to_string()
        .parse()
        .expect("a valid token's text parses");
    let page = page_of(store, &table, &Query::new().continue_from(Some(token))).await;
    assert_eq!(
        keys_of(&page.entities),
        pairs(&[("p2", "r4"), ("p2", "r5")]),
        "a query resumes at the token's key, inclusive"
    );
    drop_table(store, &table).await;
}

/// `query_stream` yields every match across pages, in key order, once each.
pub async fn query_stream_yields_every_entity_across_pages<S: TableStore>(store: &S) {
    let table = new_table(store, "Stream").await;
    let keys = seed_1300(store, &table).await;
    let streamed: Vec<Entity> = store
        .query_stream(&table, Query::new())
        .try_collect()
        .await
        .expect("query_stream of the whole table");
    assert_eq!(
        keys_of(&streamed),
        keys,
        "the stream yields all 1300 entities in order"
    );
    let all = store
        .query_all(&table, Query::new())
        .await
        .expect("query_all of the whole table");
    assert_eq!(keys_of(&all), keys, "query_all yields the same");
    let hits: Vec<Entity> = store
        .query_stream(&table, Query::parse("Hit eq true").expect("filter"))
        .try_collect()
        .await
        .expect("filtered query_stream");
    let expected_hits: Vec<(String, String)> = keys
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 97 == 13)
        .map(|(_, k)| k.clone())
        .collect();
    assert_eq!(keys_of(&hits), expected_hits, "the filtered stream");
    drop_table(store, &table).await;
}

/// `query_stream` with `top` yields the first `top` matches and stops.
pub async fn query_stream_with_top_stops_after_top<S: TableStore>(store: &S) {
    let table = new_table(store, "StreamTop").await;
    seed_grid(store, &table).await;
    let all = all_entities(store, &table).await;
    for top in [1, 4, 10, 11] {
        let streamed: Vec<Entity> = store
            .query_stream(&table, Query::new().top(top))
            .try_collect()
            .await
            .expect("query_stream with top");
        let expected = keys_of(&all[..top.min(all.len())]);
        assert_eq!(keys_of(&streamed), expected, "stream with top {top}");
    }
    let filtered: Vec<Entity> = store
        .query_stream(&table, Query::parse("N gt 3").expect("filter").top(3))
        .try_collect()
        .await
        .expect("filtered query_stream with top");
    assert_eq!(
        keys_of(&filtered),
        pairs(&[("p1", "r4"), ("p1", "r5"), ("p2", "r1")]),
        "filtered stream with top 3"
    );
    drop_table(store, &table).await;
}

/// `query_stream` and `query_all` refuse `top(0)` (and `top(1001)`) with `InvalidInput`, as
/// `query` does, rather than yield nothing.
pub async fn query_stream_with_top_0_fails_with_invalid_input<S: TableStore>(store: &S) {
    let table = new_table(store, "StreamTopZero").await;
    seed_grid(store, &table).await;
    for top in [1001, 0] {
        expect_kind(
            store.query_all(&table, Query::new().top(top)).await,
            ErrorKind::InvalidInput,
            &format!("query_all with top({top})"),
        );
        let streamed: Result<Vec<Entity>, _> = store
            .query_stream(&table, Query::new().top(top))
            .try_collect()
            .await;
        expect_kind(
            streamed,
            ErrorKind::InvalidInput,
            &format!("query_stream with top({top})"),
        );
    }
    drop_table(store, &table).await;
}

/// Matches spread thinly over many entities come back once each, in order, whatever the
/// page size.
pub async fn sparse_filter_matches_across_pages_are_returned_once<S: TableStore>(store: &S) {
    let table = new_table(store, "Sparse").await;
    let keys = seed_1300(store, &table).await;
    let expected: Vec<(String, String)> = keys
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 97 == 13)
        .map(|(_, k)| k.clone())
        .collect();
    for top in [None, Some(1), Some(2), Some(5), Some(1000)] {
        let query = Query::parse("Hit eq true").expect("filter");
        let query = match top {
            Some(top) => query.top(top),
            None => query,
        };
        let (found, _) = every_page(store, &table, query, top.unwrap_or(1000)).await;
        assert_eq!(keys_of(&found), expected, "sparse matches with top {top:?}");
    }
    let within = Query::parse("PartitionKey eq 'b' and Hit eq true")
        .expect("filter")
        .top(2);
    let (found, _) = every_page(store, &table, within, 2).await;
    let expected_b: Vec<(String, String)> = expected
        .iter()
        .filter(|(pk, _)| pk == "b")
        .cloned()
        .collect();
    assert_eq!(keys_of(&found), expected_b, "sparse matches in partition b");
    drop_table(store, &table).await;
}

/// A page without a continuation is the last: every matching entity has been returned.
pub async fn page_without_continuation_is_the_last<S: TableStore>(store: &S) {
    let table = new_table(store, "LastPage").await;
    let entities: Vec<Entity> = (0..25)
        .map(|i| Entity::new("p", format!("r{i:02}")).with("Even", i % 2 == 0))
        .collect();
    insert_all(store, &table, entities).await;
    let everything = keys_of(&all_entities(store, &table).await);
    assert_eq!(everything.len(), 25, "25 entities stored");
    for top in [1, 2, 7, 12, 13, 24, 25, 26, 1000] {
        let (found, _) = every_page(store, &table, Query::new().top(top), top).await;
        assert_eq!(keys_of(&found), everything, "pages of {top} up to the last");
        let even = Query::parse("Even eq true").expect("filter").top(top);
        let (found, _) = every_page(store, &table, even, top).await;
        assert_eq!(found.len(), 13, "the 13 even entities in pages of {top}");
    }
    drop_table(store, &table).await;
}

/// A query on an empty table returns no entity and no continuation.
pub async fn query_on_an_empty_table_returns_an_empty_last_page<S: TableStore>(store: &S) {
    let table = new_table(store, "EmptyTable").await;
    for filter in [
        None,
        Some("PartitionKey eq 'p'"),
        Some("PartitionKey eq 'p' and RowKey eq 'r'"),
        Some("PartitionKey eq 'p' and RowKey gt 'a'"),
        Some("N eq 1"),
    ] {
        let query = match filter {
            Some(f) => Query::parse(f).expect("filter"),
            None => Query::new(),
        };
        let page = page_of(store, &table, &query.clone().top(5)).await;
        assert!(page.entities.is_empty(), "{filter:?} on an empty table");
        assert!(
            page.continuation.is_none(),
            "{filter:?}: no continuation on an empty table"
        );
        let streamed: Vec<Entity> = store
            .query_stream(&table, query)
            .try_collect()
            .await
            .expect("query_stream on an empty table");
        assert!(streamed.is_empty(), "{filter:?}: the stream is empty");
    }
    drop_table(store, &table).await;
}

/// A filter on `Timestamp` selects entities by the time of their last write.
pub async fn filter_on_timestamp_selects_by_write_time<S: TableStore>(store: &S) {
    let table = new_table(store, "TimestampFilter").await;
    insert_all(store, &table, vec![Entity::new("p", "early")]).await;
    let early = fetch_existing(store, &table, "p", "early")
        .await
        .timestamp
        .expect("a stored entity has a Timestamp");
    let middle = write_until_later(store, &table, "p", "middle", early, 0).await;
    let late = write_until_later(store, &table, "p", "late", middle, 0).await;
    let cases: [(Filter, &[&str]); 5] = [
        (filter::timestamp().ge(middle), &["late", "middle"]),
        (filter::timestamp().gt(middle), &["late"]),
        (filter::timestamp().lt(middle), &["early"]),
        (filter::timestamp().le(early), &["early"]),
        (filter::timestamp().eq(late), &["late"]),
    ];
    for (filter, expected) in cases {
        let text = filter.to_string();
        let parsed = Query::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        for query in [Query::with_filter(filter), parsed] {
            let page = page_of(store, &table, &query).await;
            assert_eq!(row_keys_of(&page.entities), expected, "result of {text}");
        }
    }
    let wrong_type = only_page(store, &table, "Timestamp gt 0").await;
    assert!(
        wrong_type.is_empty(),
        "Timestamp compared with an Int32 matches nothing"
    );
    drop_table(store, &table).await;
}

/// A query with `select` returns only the selected user properties but always the keys,
/// Timestamp and ETag, and still filters on properties it does not return.
pub async fn query_with_select_keeps_keys_timestamp_and_etag<S: TableStore>(store: &S) {
    let table = new_table(store, "QuerySelect").await;
    insert_all(
        store,
        &table,
        vec![
            Entity::new("p", "r1")
                .with("A", 1)
                .with("B", "b1")
                .with("C", 1.5),
            Entity::new("p", "r2").with("A", 2).with("B", "b2"),
            Entity::new("p", "r3").with("A", 3),
        ],
    )
    .await;
    let stored = all_entities(store, &table).await;
    let query = Query::parse("A le 2")
        .expect("filter")
        .select(["B", "Nope"]);
    let page = page_of(store, &table, &query).await;
    assert_eq!(
        row_keys_of(&page.entities),
        ["r1", "r2"],
        "the filter uses unselected A"
    );
    for (got, full) in page.entities.iter().zip(&stored) {
        let names: Vec<&String> = got.properties.keys().collect();
        assert_eq!(names, ["B"], "only B comes back for {}", got.row_key);
        assert_eq!(got.get("B"), full.get("B"), "the selected value");
        assert_eq!(got.key(), full.key(), "the keys come back");
        assert_eq!(got.etag, full.etag, "the ETag comes back");
        assert_eq!(got.timestamp, full.timestamp, "the Timestamp comes back");
    }
    let system = Query::partition("p").select(["RowKey", "Timestamp"]);
    let page = page_of(store, &table, &system).await;
    assert_eq!(page.entities.len(), 3, "all three entities");
    for entity in &page.entities {
        assert!(
            entity.properties.is_empty(),
            "selecting system properties only returns no user property: {entity:?}"
        );
        assert!(
            entity.etag.is_some() && entity.timestamp.is_some(),
            "{entity:?}"
        );
        assert_eq!(
            entity.partition_key, "p",
            "the PartitionKey always comes back"
        );
    }
    drop_table(store, &table).await;
}
