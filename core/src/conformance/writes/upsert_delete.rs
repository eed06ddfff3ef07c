//! Cases about the upserts (insert-or-replace, insert-or-merge) and delete, conditional or
//! not.

use super::{made_up_etag, props, put};
use crate::conformance::{
    assert_same_properties, drop_table, expect_kind, fetch, fetch_existing, new_table,
};
use crate::error::ErrorKind;
use crate::model::{Entity, IfMatch};
use crate::store::TableStore;

/// Insert-or-replace inserts an entity that does not exist.
pub async fn insert_or_replace_inserts_a_missing_entity<S: TableStore>(store: &S) {
    let table = new_table(store, "UpsertReplaceNew").await;
    let entity = Entity::new("p", "r").with("N", 1).with("S", "s");
    let etag = store
        .insert_or_replace(&table, entity.clone())
        .await
        .expect("insert_or_replace of a new entity");
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_same_properties(props(&read), props(&entity), "after insert_or_replace");
    assert_eq!(
        read.etag,
        Some(etag),
        "get returns the ETag insert_or_replace returned"
    );
    drop_table(store, &table).await;
}

/// Insert-or-replace over a stored entity replaces it whole.
pub async fn insert_or_replace_replaces_a_stored_entity_whole<S: TableStore>(store: &S) {
    let table = new_table(store, "UpsertReplaceOld").await;
    let old = put(
        store,
        &table,
        Entity::new("p", "r").with("A", 1).with("B", 2),
    )
    .await;
    let entity = Entity::new("p", "r").with("B", "b").with("C", 3);
    let etag = store
        .insert_or_replace(&table, entity.clone())
        .await
        .expect("insert_or_replace of a stored entity");
    assert_ne!(etag, old, "insert_or_replace returns a fresh ETag");
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_same_properties(props(&read), props(&entity), "after insert_or_replace");
    assert_eq!(
        read.etag,
        Some(etag),
        "get returns the ETag insert_or_replace returned"
    );
    drop_table(store, &table).await;
}

/// Insert-or-merge inserts an entity that does not exist.
pub async fn insert_or_merge_inserts_a_missing_entity<S: TableStore>(store: &S) {
    let table = new_table(store, "UpsertMergeNew").await;
    let entity = Entity::new("p", "r").with("N", 1).with("S", "s");
    let etag = store
        .insert_or_merge(&table, entity.clone())
        .await
        .expect("insert_or_merge of a new entity");
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_same_properties(props(&read), props(&entity), "after insert_or_merge");
    assert_eq!(
        read.etag,
        Some(etag),
        "get returns the ETag insert_or_merge returned"
    );
    drop_table(store, &table).await;
}

/// Insert-or-merge over a stored entity merges into it.
pub async fn insert_or_merge_merges_into_a_stored_entity<S: TableStore>(store: &S) {
    let table = new_table(store, "UpsertMergeOld").await;
    let old = put(
        store,
        &table,
        Entity::new("p", "r").with("A", 1).with("B", 2),
    )
    .await;
    let etag = store
        .insert_or_merge(&table, Entity::new("p", "r").with("B", "b").with("C", 3))
        .await
        .expect("insert_or_merge of a stored entity");
    assert_ne!(etag, old, "insert_or_merge returns a fresh ETag");
    let read = fetch_existing(store, &table, "p", "r").await;
    let expected = Entity::new("p", "r")
        .with("A", 1)
        .with("B", "b")
        .with("C", 3);
    assert_same_properties(props(&read), props(&expected), "after insert_or_merge");
    assert_eq!(
        read.etag,
        Some(etag),
        "get returns the ETag insert_or_merge returned"
    );
    drop_table(store, &table).await;
}

/// Delete with `IfMatch::Any` removes the entity and nothing else.
pub async fn delete_removes_the_entity<S: TableStore>(store: &S) {
    let table = new_table(store, "Delete").await;
    put(store, &table, Entity::new("p", "r")).await;
    put(store, &table, Entity::new("p", "r2")).await;
    store
        .delete(&table, "p", "r", IfMatch::Any)
        .await
        .expect("delete");
    assert!(
        fetch(store, &table, "p", "r").await.is_none(),
        "the entity is gone"
    );
    assert!(
        fetch(store, &table, "p", "r2").await.is_some(),
        "its neighbour is still there"
    );
    drop_table(store, &table).await;
}

/// Delete with the current ETag removes the entity.
pub async fn delete_with_the_current_etag_removes_the_entity<S: TableStore>(store: &S) {
    let table = new_table(store, "DeleteCurrent").await;
    let etag = put(store, &table, Entity::new("p", "r")).await;
    let etag = store
        .merge(&table, Entity::new("p", "r").with("N", 1), etag.into())
        .await
        .expect("merge");
    store
        .delete(&table, "p", "r", etag.into())
        .await
        .expect("delete with the current ETag");
    assert!(
        fetch(store, &table, "p", "r").await.is_none(),
        "the entity is gone"
    );
    drop_table(store, &table).await;
}

/// Deleting an entity that does not exist fails with `NotFound`.
pub async fn delete_of_a_missing_entity_fails_with_not_found<S: TableStore>(store: &S) {
    let table = new_table(store, "DeleteMissing").await;
    for if_match in [IfMatch::Any, made_up_etag()] {
        expect_kind(
            store.delete(&table, "p", "r", if_match.clone()).await,
            ErrorKind::NotFound,
            &format!("delete of a missing entity with {if_match:?}"),
        );
    }
    let etag = put(store, &table, Entity::new("p", "r")).await;
    store
        .delete(&table, "p", "r", etag.clone().into())
        .await
        .expect("delete");
    expect_kind(
        store.delete(&table, "p", "r", etag.into()).await,
        ErrorKind::NotFound,
        "second delete of the same entity",
    );
    drop_table(store, &table).await;
}

/// Delete with an ETag that is no longer current fails with `PreconditionFailed` and
/// keeps the entity.
pub async fn delete_with_a_stale_etag_fails_with_precondition_failed<S: TableStore>(store: &S) {
    let table = new_table(store, "DeleteStale").await;
    let old = put(store, &table, Entity::new("p", "r").with("N", 1)).await;
    let current = store
        .replace(&table, Entity::new("p", "r").with("N", 2), IfMatch::Any)
        .await
        .expect("replace");
    for stale in [IfMatch::from(old), made_up_etag()] {
        expect_kind(
            store.delete(&table, "p", "r", stale.clone()).await,
            ErrorKind::PreconditionFailed,
            &format!("delete with the stale {stale:?}"),
        );
    }
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_eq!(read.etag, Some(current), "the entity is kept unchanged");
    drop_table(store, &table).await;
}

/// `delete_if_exists` returns `true` when it deleted the entity, `false` when there was
/// none.
pub async fn delete_if_exists_reports_whether_it_deleted<S: TableStore>(store: &S) {
    let table = new_table(store, "DeleteIfExists").await;
    put(store, &table, Entity::new("p", "r")).await;
    assert!(
        store
            .delete_if_exists(&table, "p", "r")
            .await
            .expect("delete_if_exists of a stored entity"),
        "the first call deletes and returns true"
    );
    assert!(
        fetch(store, &table, "p", "r").await.is_none(),
        "the entity is gone"
    );
    assert!(
        !store
            .delete_if_exists(&table, "p", "r")
            .await
            .expect("delete_if_exists of a missing entity"),
        "the second call finds nothing and returns false"
    );
    drop_table(store, &table).await;
}
