//! Cases about single writes (insert, replace, merge, the upserts and delete), their
//! ETags and Timestamps, and point reads with a projection.

use chrono::{DateTime, Duration, Utc};

use super::{
    assert_same_properties, drop_table, expect_kind, fetch, fetch_existing, new_table, versions_of,
    write_until_later,
};
use crate::error::ErrorKind;
use crate::model::{ETag, Entity, IfMatch, Properties, Value};
use crate::query::Query;
use crate::store::{Batch, TableStore};

/// The properties of `entity`.
fn props(entity: &Entity) -> &Properties {
    &entity.properties
}

/// Inserts `entity` into `table` and returns its ETag.
async fn put<S: TableStore>(store: &S, table: &str, entity: Entity) -> ETag {
    store
        .insert(table, entity)
        .await
        .expect("insert of a new entity")
}

/// An ETag no store hands out.
fn made_up_etag() -> IfMatch {
    IfMatch::ETag(ETag::new("W/\"datetime'2001-01-01T00:00:00Z'.made-up\""))
}

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

/// Checks that `etag`, just returned by `step`, is new and is what `get` returns now.
async fn assert_fresh_etag<S: TableStore>(
    store: &S,
    table: &str,
    step: &str,
    etag: ETag,
    seen: &mut Vec<ETag>,
) {
    assert!(
        !seen.contains(&etag),
        "{step} returned the ETag {etag} that an earlier write returned"
    );
    let read = fetch_existing(store, table, "p", "r").await;
    assert_eq!(
        read.etag.as_ref(),
        Some(&etag),
        "get must return the ETag the {step} returned"
    );
    seen.push(etag);
}

/// Every write returns a fresh ETag, different from all earlier ones, and `get` returns
/// the latest.
pub async fn every_write_returns_a_fresh_etag_that_get_returns<S: TableStore>(store: &S) {
    let table = new_table(store, "FreshETags").await;
    let same = || Entity::new("p", "r").with("N", 1);
    let mut seen = Vec::new();

    let etag = put(store, &table, same()).await;
    assert_fresh_etag(store, &table, "insert", etag, &mut seen).await;
    let etag = store
        .replace(&table, same(), IfMatch::Any)
        .await
        .expect("replace");
    assert_fresh_etag(
        store,
        &table,
        "replace with identical content",
        etag,
        &mut seen,
    )
    .await;
    let etag = store
        .merge(&table, same(), IfMatch::Any)
        .await
        .expect("merge");
    assert_fresh_etag(
        store,
        &table,
        "merge with identical content",
        etag,
        &mut seen,
    )
    .await;
    let etag = store
        .insert_or_replace(&table, same())
        .await
        .expect("insert_or_replace");
    assert_fresh_etag(store, &table, "insert_or_replace", etag, &mut seen).await;
    let etag = store
        .insert_or_merge(&table, same())
        .await
        .expect("insert_or_merge");
    assert_fresh_etag(store, &table, "insert_or_merge", etag, &mut seen).await;
    let mut batch = Batch::new();
    batch.replace(same(), IfMatch::Any);
    let etag = store
        .submit_batch(&table, batch)
        .await
        .expect("batch replace")
        .into_iter()
        .next()
        .flatten()
        .expect("a batch replace returns an ETag");
    assert_fresh_etag(store, &table, "batch replace", etag, &mut seen).await;
    store
        .delete(&table, "p", "r", IfMatch::Any)
        .await
        .expect("delete");
    let etag = put(store, &table, same()).await;
    assert_fresh_etag(store, &table, "insert after a delete", etag, &mut seen).await;
    drop_table(store, &table).await;
}

/// The store sets the Timestamp on every write, close to the current time, and it never
/// goes backwards.
pub async fn timestamp_is_set_by_the_store_and_advances_on_every_write<S: TableStore>(store: &S) {
    let table = new_table(store, "Timestamps").await;
    let before = Utc::now();
    put(store, &table, Entity::new("p", "r")).await;
    let first = fetch_existing(store, &table, "p", "r")
        .await
        .timestamp
        .expect("an inserted entity has a Timestamp");
    // Generous bounds: a remote store's clock may be a little off.
    let slack = Duration::minutes(5);
    assert!(
        first >= before - slack && first <= Utc::now() + slack,
        "the Timestamp {first} is not the time of the write ({before})"
    );
    let mut last = first;
    for step in 0..3 {
        last = write_until_later(store, &table, "p", "r", last, step).await;
    }
    let page = store
        .query(&table, &Query::partition("p"))
        .await
        .expect("query");
    assert_eq!(
        page.entities.first().and_then(|e| e.timestamp),
        Some(last),
        "query returns the Timestamp get returns"
    );
    drop_table(store, &table).await;
}

/// A Timestamp and ETag set on the entity given to a write are ignored: the store sets its
/// own.
pub async fn store_ignores_the_etag_and_timestamp_carried_by_the_entity<S: TableStore>(store: &S) {
    let table = new_table(store, "CarriedVersion").await;
    let bogus_time = DateTime::from_timestamp(1_000_000_000, 0).expect("a valid instant");
    let bogus_etag = ETag::new("W/\"bogus\"");
    let mut entity = Entity::new("p", "r").with("N", 1);
    entity.timestamp = Some(bogus_time);
    entity.etag = Some(bogus_etag.clone());
    let etag = store.insert(&table, entity.clone()).await.expect("insert");
    assert_ne!(
        etag, bogus_etag,
        "insert must not keep the ETag the entity carried"
    );
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_eq!(
        read.etag.as_ref(),
        Some(&etag),
        "get returns the store's ETag"
    );
    assert_ne!(
        read.timestamp,
        Some(bogus_time),
        "the store sets the Timestamp"
    );
    // The condition of a replace is its `if_match`, not the ETag on the entity.
    let etag = store
        .replace(&table, entity.clone(), etag.into())
        .await
        .expect("replace with the current ETag, the entity carrying a bogus one");
    store
        .merge(&table, entity, etag.into())
        .await
        .expect("merge with the current ETag, the entity carrying a bogus one");
    drop_table(store, &table).await;
}

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
        super::keys_of(&page.entities),
        vec![(String::new(), String::new())],
        "point query on ('', '')"
    );
    let partition = store
        .query(&table, &Query::partition(""))
        .await
        .expect("partition scan of ''");
    assert_eq!(
        super::row_keys_of(&partition.entities),
        vec![String::new(), "r".to_owned()],
        "partition '' holds the rows '' and 'r', in that order"
    );
    store
        .delete(&table, "", "", IfMatch::Any)
        .await
        .expect("delete ('', '')");
    let rest = super::all_entities(store, &table).await;
    assert_eq!(
        super::keys_of(&rest),
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
    let versions = versions_of(&super::all_entities(store, &table).await);
    assert_eq!(versions.len(), 1, "projection reads change nothing");
    drop_table(store, &table).await;
}
