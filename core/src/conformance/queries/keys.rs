//! Cases about which entities a query on the keys returns, and in what order: key order,
//! the four query classes, PartitionKey ranges and key conditions no key satisfies.

use std::ops::Bound;

use super::{every_page, only_page, page_of, pairs, seed_grid};
use crate::conformance::{drop_table, insert_all, keys_of, new_table, row_keys_of};
use crate::model::{Entity, Value};
use crate::query::{Query, QueryClass};
use crate::store::TableStore;

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
