//! Cases about entity group transactions: all or nothing, one partition, one operation
//! per entity, at most 100 operations and 4 MiB, and the index of the failing operation.

use super::{
    all_entities, assert_same_properties, drop_table, expect_kind, fetch, fetch_existing,
    insert_all, new_table, versions_of,
};
use crate::error::{Error, ErrorKind};
use crate::model::{Entity, IfMatch, Value};
use crate::store::{Batch, TableStore, WriteOp};

/// Checks that a failed batch names operation `index`.
#[track_caller]
fn assert_batch_index(error: &Error, index: Option<usize>, what: &str) {
    assert_eq!(
        error.batch_index(),
        index,
        "{what}: the error must name the failing operation ({error})"
    );
}

/// A Binary property of `len` bytes.
fn bytes(len: usize) -> Value {
    Value::Binary(vec![0xAB; len])
}

/// A batch applies every operation and returns one ETag per operation, in order, each the
/// one `get` returns.
pub async fn batch_applies_every_operation_and_returns_one_etag_each<S: TableStore>(store: &S) {
    let table = new_table(store, "BatchOk").await;
    let mut batch = Batch::new();
    for i in 0..5 {
        batch.insert(Entity::new("p", format!("r{i}")).with("N", i));
    }
    let etags = store
        .submit_batch(&table, batch)
        .await
        .expect("a valid batch");
    assert_eq!(etags.len(), 5, "one ETag per operation");
    for (i, etag) in etags.iter().enumerate() {
        let etag = etag.as_ref().expect("an insert in a batch returns an ETag");
        let read = fetch_existing(store, &table, "p", &format!("r{i}")).await;
        assert_eq!(
            read.etag.as_ref(),
            Some(etag),
            "ETag #{i} is the one get returns"
        );
        assert_eq!(read.get("N"), Some(&Value::Int32(i as i32)), "entity #{i}");
    }
    // ETags identify versions of one entity; entities written in one transaction may share
    // one (the table service's ETags are the transaction's timestamp).
    drop_table(store, &table).await;
}

/// An operation failing in the middle of a batch (an insert of existing keys at index 2
/// of 5) fails the batch naming index 2, and no operation of it is applied.
pub async fn batch_failing_in_the_middle_names_the_index_and_applies_nothing<S: TableStore>(
    store: &S,
) {
    let table = new_table(store, "BatchMiddle").await;
    insert_all(store, &table, vec![Entity::new("p", "r2").with("N", 2)]).await;
    let before = all_entities(store, &table).await;
    let mut batch = Batch::new();
    batch
        .insert(Entity::new("p", "r0").with("N", 0))
        .insert_or_replace(Entity::new("p", "r1").with("N", 1))
        .insert(Entity::new("p", "r2").with("N", 20))
        .insert_or_merge(Entity::new("p", "r3").with("N", 3))
        .insert(Entity::new("p", "r4").with("N", 4));
    let error = expect_kind(
        store.submit_batch(&table, batch).await,
        ErrorKind::AlreadyExists,
        "batch inserting existing keys at index 2",
    );
    assert_batch_index(&error, Some(2), "insert of existing keys at index 2");
    for rk in ["r0", "r1", "r3", "r4"] {
        assert!(
            fetch(store, &table, "p", rk).await.is_none(),
            "operation on {rk} of the failed batch must not be applied"
        );
    }
    assert_eq!(
        all_entities(store, &table).await,
        before,
        "the table is exactly as before the failed batch"
    );
    drop_table(store, &table).await;
}

/// When a batch fails, the updates and deletes before the failing operation are rolled
/// back too.
pub async fn batch_failure_rolls_back_earlier_updates_and_deletes<S: TableStore>(store: &S) {
    let table = new_table(store, "BatchRollback").await;
    insert_all(
        store,
        &table,
        vec![
            Entity::new("p", "del").with("N", 1),
            Entity::new("p", "rep").with("N", 1),
            Entity::new("p", "mer").with("N", 1),
        ],
    )
    .await;
    let before = all_entities(store, &table).await;
    let mut batch = Batch::new();
    batch
        .delete("p", "del", IfMatch::Any)
        .replace(Entity::new("p", "rep").with("M", 2), IfMatch::Any)
        .merge(Entity::new("p", "mer").with("M", 2), IfMatch::Any)
        .merge(Entity::new("p", "missing").with("M", 2), IfMatch::Any);
    let error = expect_kind(
        store.submit_batch(&table, batch).await,
        ErrorKind::NotFound,
        "batch merging into a missing entity at index 3",
    );
    assert_batch_index(&error, Some(3), "merge into a missing entity at index 3");
    let after = all_entities(store, &table).await;
    assert_eq!(
        after, before,
        "the delete, replace and merge before the failure are rolled back"
    );
    drop_table(store, &table).await;
}

/// A batch touching a second partition is `InvalidInput` naming the first operation
/// outside the partition, and writes nothing.
pub async fn batch_with_mixed_partitions_names_the_index_and_writes_nothing<S: TableStore>(
    store: &S,
) {
    let table = new_table(store, "BatchMixed").await;
    let mut batch = Batch::new();
    batch
        .insert(Entity::new("p", "r0"))
        .insert(Entity::new("p", "r1"))
        .insert(Entity::new("q", "r2"))
        .insert(Entity::new("p", "r3"));
    let error = expect_kind(
        store.submit_batch(&table, batch).await,
        ErrorKind::InvalidInput,
        "batch with an operation in another partition at index 2",
    );
    assert_batch_index(&error, Some(2), "other partition at index 2");
    assert!(
        all_entities(store, &table).await.is_empty(),
        "a batch over two partitions writes nothing"
    );
    drop_table(store, &table).await;
}

/// Two operations on the same entity in one batch are `InvalidInput` naming the second,
/// and nothing is written.
pub async fn batch_with_two_operations_on_one_entity_is_invalid_input<S: TableStore>(store: &S) {
    let table = new_table(store, "BatchDuplicate").await;
    insert_all(store, &table, vec![Entity::new("p", "r0").with("N", 0)]).await;
    let before = all_entities(store, &table).await;
    let mut batch = Batch::new();
    batch
        .merge(Entity::new("p", "r0").with("N", 1), IfMatch::Any)
        .insert(Entity::new("p", "r1"))
        .delete("p", "r0", IfMatch::Any);
    let error = expect_kind(
        store.submit_batch(&table, batch).await,
        ErrorKind::InvalidInput,
        "batch with a merge and a delete of one entity",
    );
    assert_batch_index(&error, Some(2), "second operation on r0 at index 2");
    assert_eq!(
        all_entities(store, &table).await,
        before,
        "nothing is written"
    );
    drop_table(store, &table).await;
}

/// A batch of exactly 100 operations is accepted.
pub async fn batch_of_100_operations_is_accepted<S: TableStore>(store: &S) {
    let table = new_table(store, "Batch100").await;
    let mut batch = Batch::new();
    for i in 0..100 {
        batch.insert(Entity::new("p", format!("r{i:03}")).with("N", i));
    }
    let etags = store
        .submit_batch(&table, batch)
        .await
        .expect("a batch of 100");
    assert_eq!(etags.len(), 100, "one ETag per operation");
    assert_eq!(
        all_entities(store, &table).await.len(),
        100,
        "100 entities stored"
    );
    drop_table(store, &table).await;
}

/// A batch of 101 operations is `TooLarge` and writes nothing.
pub async fn batch_of_101_operations_is_too_large<S: TableStore>(store: &S) {
    let table = new_table(store, "Batch101").await;
    let mut batch = Batch::new();
    for i in 0..101 {
        batch.insert(Entity::new("p", format!("r{i:03}")));
    }
    expect_kind(
        store.submit_batch(&table, batch).await,
        ErrorKind::TooLarge,
        "batch of 101 operations",
    );
    assert!(
        all_entities(store, &table).await.is_empty(),
        "nothing is written"
    );
    drop_table(store, &table).await;
}

/// An empty batch is `InvalidInput`.
pub async fn empty_batch_is_invalid_input<S: TableStore>(store: &S) {
    let table = new_table(store, "BatchEmpty").await;
    expect_kind(
        store.submit_batch(&table, Batch::new()).await,
        ErrorKind::InvalidInput,
        "empty batch",
    );
    drop_table(store, &table).await;
}

/// A batch over 4 MiB in all (five entities of about 900 KiB, each valid alone) is
/// `TooLarge`, naming no operation, and writes nothing.
pub async fn batch_over_4_mib_is_too_large<S: TableStore>(store: &S) {
    let table = new_table(store, "BatchHuge").await;
    // 14 Binary properties of 64 KiB: about 918 KB as the service counts it, under 1 MiB.
    let big = |rk: &str| {
        let mut e = Entity::new("p", rk);
        for i in 0..14 {
            e.set(format!("B{i:02}"), bytes(64 * 1024));
        }
        e
    };
    let mut batch = Batch::new();
    for i in 0..5 {
        batch.insert(big(&format!("r{i}")));
    }
    let error = expect_kind(
        store.submit_batch(&table, batch).await,
        ErrorKind::TooLarge,
        "batch of five 918 KB entities",
    );
    assert_batch_index(&error, None, "the batch as a whole is too large");
    assert!(
        all_entities(store, &table).await.is_empty(),
        "nothing is written"
    );
    store
        .insert(&table, big("alone"))
        .await
        .expect("each entity of the refused batch is valid alone");
    drop_table(store, &table).await;
}

/// A batch may mix every kind of operation; each has its own effect and the returned
/// ETags (none for the delete) are the ones `get` returns.
pub async fn batch_mixing_every_kind_of_operation_applies_each<S: TableStore>(store: &S) {
    let table = new_table(store, "BatchMixedOps").await;
    insert_all(
        store,
        &table,
        vec![
            Entity::new("p", "replace").with("A", 1).with("B", 1),
            Entity::new("p", "merge").with("A", 1).with("B", 1),
            Entity::new("p", "delete").with("A", 1),
            Entity::new("p", "upsert_replace").with("A", 1).with("B", 1),
            Entity::new("p", "upsert_merge").with("A", 1).with("B", 1),
        ],
    )
    .await;
    let merge_etag = fetch_existing(store, &table, "p", "merge")
        .await
        .etag
        .expect("a stored entity has an ETag");
    let delete_etag = fetch_existing(store, &table, "p", "delete")
        .await
        .etag
        .expect("a stored entity has an ETag");
    let mut batch = Batch::new();
    batch
        .insert(Entity::new("p", "insert").with("A", 2))
        .replace(Entity::new("p", "replace").with("B", 2), IfMatch::Any)
        .merge(Entity::new("p", "merge").with("B", 2), merge_etag.into())
        .delete("p", "delete", delete_etag.into())
        .insert_or_replace(Entity::new("p", "upsert_replace").with("B", 2))
        .insert_or_merge(Entity::new("p", "upsert_merge").with("B", 2))
        .insert_or_replace(Entity::new("p", "upsert_replace_new").with("B", 2))
        .insert_or_merge(Entity::new("p", "upsert_merge_new").with("B", 2));
    let etags = store
        .submit_batch(&table, batch)
        .await
        .expect("mixed batch");
    assert_eq!(etags.len(), 8, "one result per operation");
    assert!(etags[3].is_none(), "a delete returns no ETag");

    let expected = [
        (0, Entity::new("p", "insert").with("A", 2)),
        (1, Entity::new("p", "replace").with("B", 2)),
        (2, Entity::new("p", "merge").with("A", 1).with("B", 2)),
        (4, Entity::new("p", "upsert_replace").with("B", 2)),
        (
            5,
            Entity::new("p", "upsert_merge").with("A", 1).with("B", 2),
        ),
        (6, Entity::new("p", "upsert_replace_new").with("B", 2)),
        (7, Entity::new("p", "upsert_merge_new").with("B", 2)),
    ];
    for (index, want) in &expected {
        let read = fetch_existing(store, &table, "p", &want.row_key).await;
        assert_same_properties(
            &read.properties,
            &want.properties,
            &format!("operation {index} on {}", want.row_key),
        );
        assert_eq!(
            read.etag.as_ref(),
            etags[*index].as_ref(),
            "the ETag of operation {index} is the one get returns"
        );
    }
    assert!(
        fetch(store, &table, "p", "delete").await.is_none(),
        "the deleted entity is gone"
    );
    assert_eq!(
        all_entities(store, &table).await.len(),
        7,
        "seven entities remain"
    );
    drop_table(store, &table).await;
}

/// A batch whose operation carries a stale ETag fails with `PreconditionFailed` naming
/// it, and applies nothing.
pub async fn batch_with_a_stale_etag_fails_atomically<S: TableStore>(store: &S) {
    let table = new_table(store, "BatchStale").await;
    let stale = store
        .insert(&table, Entity::new("p", "r1").with("N", 1))
        .await
        .expect("insert");
    store
        .replace(&table, Entity::new("p", "r1").with("N", 2), IfMatch::Any)
        .await
        .expect("replace");
    let before = all_entities(store, &table).await;
    let stale_ops = [
        WriteOp::Replace(Entity::new("p", "r1").with("N", 3), stale.clone().into()),
        WriteOp::Merge(Entity::new("p", "r1").with("M", 3), stale.clone().into()),
        WriteOp::Delete {
            partition_key: "p".to_owned(),
            row_key: "r1".to_owned(),
            if_match: stale.into(),
        },
    ];
    for op in stale_ops {
        let what = format!("{op:?}");
        let mut batch = Batch::new();
        batch.insert(Entity::new("p", "r0").with("N", 0)).push(op);
        batch.insert(Entity::new("p", "r2").with("N", 2));
        let error = expect_kind(
            store.submit_batch(&table, batch).await,
            ErrorKind::PreconditionFailed,
            &format!("batch with the stale {what} at index 1"),
        );
        assert_batch_index(&error, Some(1), &what);
        assert_eq!(
            versions_of(&all_entities(store, &table).await),
            versions_of(&before),
            "the batch with the stale {what} applies nothing"
        );
    }
    drop_table(store, &table).await;
}

/// A batch holding an operation that breaks a limit fails naming that operation, with
/// the limit's kind, and writes nothing.
pub async fn batch_with_an_invalid_operation_names_its_index<S: TableStore>(store: &S) {
    let table = new_table(store, "BatchInvalidOp").await;
    let cases: [(Entity, ErrorKind, &str); 3] = [
        (
            Entity::new("p", "bad").with("bad-name", 1),
            ErrorKind::InvalidInput,
            "a property name with `-`",
        ),
        (
            Entity::new("p", "bad/key"),
            ErrorKind::InvalidInput,
            "a RowKey with `/`",
        ),
        (
            Entity::new("p", "bad").with("B", bytes(64 * 1024 + 1)),
            ErrorKind::TooLarge,
            "a Binary over 64 KiB",
        ),
    ];
    for (bad, kind, what) in cases {
        let mut batch = Batch::new();
        for i in 0..3 {
            batch.insert(Entity::new("p", format!("r{i}")));
        }
        batch.insert(bad).insert(Entity::new("p", "r4"));
        let error = expect_kind(
            store.submit_batch(&table, batch).await,
            kind,
            &format!("batch with {what} at index 3"),
        );
        assert_batch_index(&error, Some(3), what);
        assert!(
            all_entities(store, &table).await.is_empty(),
            "a batch with {what} writes nothing"
        );
    }
    drop_table(store, &table).await;
}

/// A merge in a batch that would push the stored entity past 252 properties fails with
/// `TooLarge` naming it, and the batch applies nothing.
pub async fn batch_merge_past_the_property_limit_fails_atomically<S: TableStore>(store: &S) {
    let table = new_table(store, "BatchMergeLimit").await;
    let mut stored = Entity::new("p", "full");
    for i in 0..200 {
        stored.set(format!("P{i:03}"), i);
    }
    insert_all(store, &table, vec![stored]).await;
    let before = all_entities(store, &table).await;
    let mut update = Entity::new("p", "full");
    for i in 0..53 {
        update.set(format!("Q{i:03}"), i);
    }
    let mut batch = Batch::new();
    batch
        .insert(Entity::new("p", "r0"))
        .merge(update, IfMatch::Any)
        .insert(Entity::new("p", "r2"));
    let error = expect_kind(
        store.submit_batch(&table, batch).await,
        ErrorKind::TooLarge,
        "batch merging 53 new properties into an entity with 200",
    );
    assert_batch_index(&error, Some(1), "merge past 252 properties at index 1");
    assert_eq!(
        versions_of(&all_entities(store, &table).await),
        versions_of(&before),
        "the batch applies nothing"
    );
    drop_table(store, &table).await;
}
