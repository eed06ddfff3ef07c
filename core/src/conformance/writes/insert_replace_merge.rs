//! Cases about insert, replace and merge: what each stores, and how each fails on taken
//! keys, a missing entity or a stale ETag.

use super::{made_up_etag, props, put};
use crate::conformance::{
    assert_same_properties, drop_table, expect_kind, fetch, fetch_existing, new_table,
};
use crate::error::ErrorKind;
use crate::model::{Entity, IfMatch, Value};
use crate::store::TableStore;

/// An inserted entity reads back with its keys, properties, a Timestamp and the ETag the
/// insert returned.
pub async fn insert_then_get_returns_the_entity<S: TableStore>(store: &S) {
    let table = new_table(store, "InsertGet").await;
    let entity = Entity::new("Sales", "empid_000123")
        .with("FirstName", "Jun")
        .with("Age", 47);
    let etag = put(store, &table, entity.clone()).await;
    let read = fetch_existing(store, &table, "Sales", "empid_000123").await;
    assert_eq!(
        read.key(),
        ("Sales", "empid_000123"),
        "keys of the read entity"
    );
    assert_same_properties(props(&read), props(&entity), "insert then get");
    assert_eq!(
        read.etag.as_ref(),
        Some(&etag),
        "get returns the ETag insert returned"
    );
    assert!(read.timestamp.is_some(), "a stored entity has a Timestamp");
    drop_table(store, &table).await;
}

/// Reading an entity that does not exist returns `None`, not an error.
pub async fn get_of_a_missing_entity_returns_none<S: TableStore>(store: &S) {
    let table = new_table(store, "GetMissing").await;
    put(store, &table, Entity::new("p", "r")).await;
    for (pk, rk) in [
        ("p", "other"),
        ("other", "r"),
        ("P", "r"),
        ("p", "R"),
        ("", ""),
    ] {
        assert!(
            fetch(store, &table, pk, rk).await.is_none(),
            "get({pk:?}, {rk:?}) must find nothing (keys are case-sensitive)"
        );
    }
    drop_table(store, &table).await;
}

/// Inserting over existing keys fails with `AlreadyExists` and leaves the stored entity
/// as it was.
pub async fn insert_of_an_existing_entity_fails_with_already_exists<S: TableStore>(store: &S) {
    let table = new_table(store, "InsertTwice").await;
    let etag = put(store, &table, Entity::new("p", "r").with("N", 1)).await;
    expect_kind(
        store
            .insert(&table, Entity::new("p", "r").with("N", 2))
            .await,
        ErrorKind::AlreadyExists,
        "second insert of the same keys",
    );
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_eq!(
        read.get("N"),
        Some(&Value::Int32(1)),
        "the stored value is kept"
    );
    assert_eq!(read.etag, Some(etag), "the stored ETag is kept");
    drop_table(store, &table).await;
}

/// Replace stores the new entity whole: properties it does not mention are removed.
pub async fn replace_removes_unmentioned_properties<S: TableStore>(store: &S) {
    let table = new_table(store, "Replace").await;
    let etag = put(
        store,
        &table,
        Entity::new("p", "r").with("A", 1).with("B", "b"),
    )
    .await;
    let replacement = Entity::new("p", "r").with("B", 2i64).with("C", true);
    let new_etag = store
        .replace(&table, replacement.clone(), etag.clone().into())
        .await
        .expect("replace with the current ETag");
    assert_ne!(new_etag, etag, "replace returns a fresh ETag");
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_same_properties(props(&read), props(&replacement), "after replace");
    drop_table(store, &table).await;
}

/// Replacing an entity that does not exist fails with `NotFound` and creates nothing.
pub async fn replace_of_a_missing_entity_fails_with_not_found<S: TableStore>(store: &S) {
    let table = new_table(store, "ReplaceMissing").await;
    for if_match in [IfMatch::Any, made_up_etag()] {
        expect_kind(
            store
                .replace(&table, Entity::new("p", "r").with("N", 1), if_match.clone())
                .await,
            ErrorKind::NotFound,
            &format!("replace of a missing entity with {if_match:?}"),
        );
    }
    assert!(
        fetch(store, &table, "p", "r").await.is_none(),
        "replace must not insert"
    );
    drop_table(store, &table).await;
}

/// Replace with an ETag that is no longer current fails with `PreconditionFailed` and
/// changes nothing.
pub async fn replace_with_a_stale_etag_fails_with_precondition_failed<S: TableStore>(store: &S) {
    let table = new_table(store, "ReplaceStale").await;
    let old = put(store, &table, Entity::new("p", "r").with("N", 1)).await;
    let current = store
        .replace(
            &table,
            Entity::new("p", "r").with("N", 2),
            old.clone().into(),
        )
        .await
        .expect("replace with the current ETag");
    for stale in [IfMatch::from(old), made_up_etag()] {
        expect_kind(
            store
                .replace(&table, Entity::new("p", "r").with("N", 3), stale.clone())
                .await,
            ErrorKind::PreconditionFailed,
            &format!("replace with the stale {stale:?}"),
        );
    }
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_eq!(
        read.get("N"),
        Some(&Value::Int32(2)),
        "the stored value is kept"
    );
    assert_eq!(read.etag, Some(current), "the stored ETag is kept");
    drop_table(store, &table).await;
}

/// Replace with `IfMatch::Any` applies whatever version is stored.
pub async fn replace_with_if_match_any_overwrites_any_version<S: TableStore>(store: &S) {
    let table = new_table(store, "ReplaceAny").await;
    put(
        store,
        &table,
        Entity::new("p", "r").with("N", 1).with("Old", 1),
    )
    .await;
    store
        .merge(&table, Entity::new("p", "r").with("N", 2), IfMatch::Any)
        .await
        .expect("merge");
    let etag = store
        .replace(&table, Entity::new("p", "r").with("N", 3), IfMatch::Any)
        .await
        .expect("replace with IfMatch::Any");
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_same_properties(
        props(&read),
        props(&Entity::new("p", "r").with("N", 3)),
        "after replace with IfMatch::Any",
    );
    assert_eq!(
        read.etag,
        Some(etag),
        "get returns the ETag replace returned"
    );
    drop_table(store, &table).await;
}

/// Merge keeps the stored properties the update does not mention.
pub async fn merge_keeps_unmentioned_properties<S: TableStore>(store: &S) {
    let table = new_table(store, "MergeKeeps").await;
    let etag = put(
        store,
        &table,
        Entity::new("p", "r")
            .with("A", 1)
            .with("B", "two")
            .with("C", 3.5),
    )
    .await;
    store
        .merge(&table, Entity::new("p", "r").with("B", "deux"), etag.into())
        .await
        .expect("merge with the current ETag");
    let read = fetch_existing(store, &table, "p", "r").await;
    let expected = Entity::new("p", "r")
        .with("A", 1)
        .with("B", "deux")
        .with("C", 3.5);
    assert_same_properties(props(&read), props(&expected), "after merge");
    drop_table(store, &table).await;
}

/// Merge overwrites the properties it mentions (even with another type) in place and
/// appends the new ones after the stored ones.
pub async fn merge_overwrites_mentioned_properties_and_appends_new_ones<S: TableStore>(store: &S) {
    let table = new_table(store, "MergeOverwrites").await;
    put(
        store,
        &table,
        Entity::new("p", "r").with("A", 1).with("B", 2).with("C", 3),
    )
    .await;
    let update = Entity::new("p", "r")
        .with("D", "new")
        .with("B", 20i64)
        .with("A", "one");
    store
        .merge(&table, update, IfMatch::Any)
        .await
        .expect("merge with IfMatch::Any");
    let read = fetch_existing(store, &table, "p", "r").await;
    let expected = Entity::new("p", "r")
        .with("A", "one")
        .with("B", 20i64)
        .with("C", 3)
        .with("D", "new");
    assert_same_properties(props(&read), props(&expected), "after merge");
    drop_table(store, &table).await;
}

/// Merging into an entity that does not exist fails with `NotFound` and creates nothing.
pub async fn merge_of_a_missing_entity_fails_with_not_found<S: TableStore>(store: &S) {
    let table = new_table(store, "MergeMissing").await;
    for if_match in [IfMatch::Any, made_up_etag()] {
        expect_kind(
            store
                .merge(&table, Entity::new("p", "r").with("N", 1), if_match.clone())
                .await,
            ErrorKind::NotFound,
            &format!("merge into a missing entity with {if_match:?}"),
        );
    }
    assert!(
        fetch(store, &table, "p", "r").await.is_none(),
        "merge must not insert"
    );
    drop_table(store, &table).await;
}

/// Merge with an ETag that is no longer current fails with `PreconditionFailed` and
/// changes nothing.
pub async fn merge_with_a_stale_etag_fails_with_precondition_failed<S: TableStore>(store: &S) {
    let table = new_table(store, "MergeStale").await;
    let old = put(store, &table, Entity::new("p", "r").with("N", 1)).await;
    let current = store
        .merge(
            &table,
            Entity::new("p", "r").with("N", 2),
            old.clone().into(),
        )
        .await
        .expect("merge with the current ETag");
    expect_kind(
        store
            .merge(&table, Entity::new("p", "r").with("M", 3), old.into())
            .await,
        ErrorKind::PreconditionFailed,
        "merge with a stale ETag",
    );
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_same_properties(
        props(&read),
        props(&Entity::new("p", "r").with("N", 2)),
        "after the refused merge",
    );
    assert_eq!(read.etag, Some(current), "the stored ETag is kept");
    drop_table(store, &table).await;
}

/// Merge with `IfMatch::Any` applies to whatever version is stored.
pub async fn merge_with_if_match_any_applies_to_any_version<S: TableStore>(store: &S) {
    let table = new_table(store, "MergeAny").await;
    put(store, &table, Entity::new("p", "r").with("N", 1)).await;
    store
        .replace(&table, Entity::new("p", "r").with("N", 2), IfMatch::Any)
        .await
        .expect("replace");
    let etag = store
        .merge(&table, Entity::new("p", "r").with("M", 3), IfMatch::Any)
        .await
        .expect("merge with IfMatch::Any");
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_same_properties(
        props(&read),
        props(&Entity::new("p", "r").with("N", 2).with("M", 3)),
        "after merge with IfMatch::Any",
    );
    assert_eq!(read.etag, Some(etag), "get returns the ETag merge returned");
    drop_table(store, &table).await;
}
