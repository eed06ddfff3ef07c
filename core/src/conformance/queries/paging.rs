//! Cases about paging: `top`, continuation tokens and their text form, resuming past a
//! range, streams, and the last page.

use futures::TryStreamExt;

use super::{MAX_PAGES, every_page, page_of, pairs, seed_grid};
use crate::conformance::{
    all_entities, drop_table, expect_kind, insert_all, insert_batched, keys_of, new_table,
    row_keys_of,
};
use crate::error::ErrorKind;
use crate::model::Entity;
use crate::query::{ContinuationToken, Query};
use crate::store::TableStore;

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
