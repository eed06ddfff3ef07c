//! Cases about empty keys, valid for every operation, and point reads with a projection.

use super::{props, put};
use crate::conformance::{
    all_entities, assert_same_properties, drop_table, fetch_existing, keys_of, new_table,
    row_keys_of, versions_of,
};
use crate::model::{Entity, IfMatch, Value};
use crate::query::Query;
use crate::store::TableStore;

/// Empty PartitionKeys and RowKeys are valid keys for every operation.
pub async fn empty_string_keys_are_allowed<S: TableStore>(store: &S) {
    let table = new_table(store, "EmptyKeys").await;
    for (pk, rk) in [("", ""), ("", "r"), ("p", "")] {
        let etag = put(store, &table, Entity::new(pk, rk).with("N", 1)).await;
        let read = fetch_existing(store, &table, pk, rk).await;
        assert_eq!(read.key(), (pk, rk), "keys read back");
        store
            .merge(&table, Entity::new(pk, rk).with("M", 2), etag.into())
            .await
            .expect("merge with empty keys");
    }
    let point = Query::parse("PartitionKey eq '' and RowKey eq ''").expect("point filter");
    let page = store
        .query(&table, &point)
        .await
        .expect("point query on empty keys");
    assert_eq!(
        keys_of(&page.entities),
        vec![(String::new(), String::new())],
        "point query on ('', '')"
    );
    let partition = store
        .query(&table, &Query::partition(""))
        .await
        .expect("partition scan of ''");
    assert_eq!(
        row_keys_of(&partition.entities),
        vec![String::new(), "r".to_owned()],
        "partition '' holds the rows '' and 'r', in that order"
    );
    store
        .delete(&table, "", "", IfMatch::Any)
        .await
        .expect("delete ('', '')");
    let rest = all_entities(store, &table).await;
    assert_eq!(
        keys_of(&rest),
        vec![
            (String::new(), "r".to_owned()),
            ("p".to_owned(), String::new())
        ],
        "after deleting ('', '')"
    );
    drop_table(store, &table).await;
}

/// `get` with `select` returns only the selected user properties, with the keys, the
/// Timestamp and the ETag.
pub async fn get_with_select_returns_only_the_selected_properties<S: TableStore>(store: &S) {
    let table = new_table(store, "GetSelect").await;
    let etag = put(
        store,
        &table,
        Entity::new("p", "r")
            .with("A", 1)
            .with("B", "b")
            .with("C", true),
    )
    .await;
    let read = store
        .get(&table, "p", "r", Some(&["C", "A"]))
        .await
        .expect("get with select")
        .expect("the entity exists");
    let mut names: Vec<&String> = read.properties.keys().collect();
    names.sort();
    assert_eq!(names, ["A", "C"], "only the selected properties come back");
    assert_eq!(read.get("A"), Some(&Value::Int32(1)), "selected A");
    assert_eq!(read.get("C"), Some(&Value::Boolean(true)), "selected C");
    assert_eq!(read.key(), ("p", "r"), "the keys always come back");
    assert_eq!(read.etag, Some(etag), "the ETag always comes back");
    assert!(read.timestamp.is_some(), "the Timestamp always comes back");

    let system = store
        .get(
            &table,
            "p",
            "r",
            Some(&["PartitionKey", "RowKey", "Timestamp"]),
        )
        .await
        .expect("get selecting only system properties")
        .expect("the entity exists");
    assert!(
        system.properties.is_empty(),
        "selecting only system properties returns no user property: {:?}",
        system.properties
    );
    drop_table(store, &table).await;
}

/// `get` selecting a property the entity lacks omits it (no null placeholder).
pub async fn get_with_select_of_a_missing_property_omits_it<S: TableStore>(store: &S) {
    let table = new_table(store, "GetSelectMissing").await;
    put(
        store,
        &table,
        Entity::new("p", "r").with("A", 1).with("B", 2),
    )
    .await;
    let read = store
        .get(&table, "p", "r", Some(&["A", "Nope"]))
        .await
        .expect("get with select")
        .expect("the entity exists");
    assert_same_properties(
        &read.properties,
        props(&Entity::new("p", "r").with("A", 1)),
        "select [A, Nope]",
    );
    let none = store
        .get(&table, "p", "r", Some(&["Nope"]))
        .await
        .expect("get with select")
        .expect("the entity exists even when no selected property does");
    assert!(
        none.properties.is_empty(),
        "select [Nope] returns no property"
    );
    assert!(
        store
            .get(&table, "p", "missing", Some(&["A"]))
            .await
            .expect("get of a missing entity with select")
            .is_none(),
        "a missing entity stays missing with a projection"
    );
    let versions = versions_of(&all_entities(store, &table).await);
    assert_eq!(versions.len(), 1, "projection reads change nothing");
    drop_table(store, &table).await;
}
