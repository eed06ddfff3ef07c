//! Cases about what a query selects beyond the keys: entities by the Timestamp of their
//! last write, and user properties by `select`.

use super::{only_page, page_of};
use crate::conformance::{
    all_entities, drop_table, fetch_existing, insert_all, new_table, row_keys_of, write_until_later,
};
use crate::filter::{self, Filter};
use crate::model::Entity;
use crate::query::Query;
use crate::store::TableStore;

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
