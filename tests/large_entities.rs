//! Large entities on every backend pair — memory tables with memory blobs, a SQLite file
//! with local blob files, Azurite tables with Azurite blobs: blob fields and oversized
//! properties offloaded, read back transparently or lazily, replaced blobs deleted after
//! the commit (in process, or by the relay after a crash), orphans swept.

#![allow(missing_docs)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use tablekit::core::blob::BlobStore;
use tablekit::core::fault::{FaultyStore, Timing};
use tablekit::core::{AnyStore, Query};
use tablekit::patterns::consistency::outbox;
use tablekit::patterns::index::{InlineSink, OutboxSink, Relay};
use tablekit::patterns::large::{ADDRESS_PREFIX, LargeTable};
use tablekit::prelude::*;

/// The README's employee photo (its "Large entities" section): a blob field.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Staff",
    kind = "Staff",
    partition_key = "{department}",
    row_key = "{id:06}"
)]
struct Staff {
    department: String,
    id: u32,
    name: String,
    #[entity(blob)]
    photo: Option<Vec<u8>>,
    /// Not declared a blob: moved out only when it would break a limit.
    notes: String,
}

fn staff(id: u32, photo: Option<Vec<u8>>, notes: String) -> Staff {
    Staff {
        department: "Ops".into(),
        id,
        name: format!("N{id}"),
        photo,
        notes,
    }
}

async fn blob_count(blobs: &BlobStore) -> usize {
    blobs.list("large/").await.expect("list").len()
}

async fn large_entities_round_trip_and_clean_up(store: AnyStore, blobs: BlobStore) {
    let table = LargeTable::<Staff, _>::options()
        .inline_cleanup()
        .build(store.clone(), blobs.clone());
    table.open().await.expect("open");
    let ann = staff(1, Some(vec![1u8; 300_000]), "short".into());
    table.insert(&ann).await.expect("insert");
    let raw = store
        .get("Staff", "Ops", "000001", None)
        .await
        .expect("get")
        .expect("there");
    assert!(raw.get("photo").is_none(), "the photo is not in the entity");
    assert!(
        raw.get(&format!("{ADDRESS_PREFIX}photo")).is_some(),
        "its address is"
    );
    assert_eq!(
        raw.get("notes"),
        Some(&Value::from("short")),
        "small values stay"
    );
    assert_eq!(
        table
            .get("Ops", "000001")
            .await
            .expect("get")
            .map(|s| s.value),
        Some(ann.clone()),
        "read back transparently"
    );
    let lazy = table
        .get_lazy("Ops", "000001")
        .await
        .expect("get")
        .expect("there");
    assert_eq!(lazy.blob_addresses().len(), 1);
    assert_eq!(lazy.load().await.expect("load").value, ann);

    // Replacing the photo deletes the old blob after the commit; the same photo again
    // writes nothing.
    table
        .upsert(&staff(1, Some(vec![2u8; 300_000]), "short".into()))
        .await
        .expect("replace");
    assert_eq!(blob_count(&blobs).await, 1, "the replaced blob is gone");
    table
        .upsert(&staff(1, Some(vec![2u8; 300_000]), "short".into()))
        .await
        .expect("same again");
    assert_eq!(blob_count(&blobs).await, 1);

    // An entity that would pass 1 MiB: its largest values move out until it fits; a
    // string over 64 KiB moves out too.
    let big = staff(2, None, "x".repeat(1_200_000));
    table
        .insert(&big)
        .await
        .expect("an entity over 1 MiB is stored");
    assert_eq!(
        table
            .get("Ops", "000002")
            .await
            .expect("get")
            .map(|s| s.value),
        Some(big)
    );
    assert_eq!(blob_count(&blobs).await, 2);

    // Deleting an entity deletes its blobs.
    table
        .delete("Ops", "000002", IfMatch::Any)
        .await
        .expect("delete");
    table
        .delete("Ops", "000001", IfMatch::Any)
        .await
        .expect("delete");
    assert_eq!(blob_count(&blobs).await, 0);
    table.flush().await;
    assert!(
        outbox::scan(&store, "Staff")
            .await
            .expect("outbox")
            .is_empty()
    );
}

async fn crashes_leave_blobs_the_relay_and_the_sweep_remove(store: AnyStore, blobs: BlobStore) {
    // A writer without a sink: as if it stopped right after each commit.
    let faulty = FaultyStore::new(store.clone());
    let table = LargeTable::<Staff, _>::new(faulty.clone(), blobs.clone());
    table.open().await.expect("open");
    table
        .insert(&staff(1, Some(vec![1u8; 1000]), String::new()))
        .await
        .expect("insert");
    table
        .upsert(&staff(1, Some(vec![3u8; 1000]), String::new()))
        .await
        .expect("replace");
    assert_eq!(blob_count(&blobs).await, 2, "the replaced blob waits");
    assert_eq!(
        outbox::scan(&store, "Staff").await.expect("outbox").len(),
        1
    );
    let handlers = tablekit::patterns::index::handlers(store.clone(), Some(blobs.clone()));
    let sink: Arc<dyn OutboxSink> = Arc::new(InlineSink::new(handlers));
    let relay = Relay::options()
        .grace(Duration::ZERO)
        .build(store.clone(), sink);
    assert_eq!(relay.run_once().await.expect("relay").published, 1);
    assert_eq!(blob_count(&blobs).await, 1, "the relay deleted it");

    // The blob is written, then the entity write fails: an orphan the sweep removes,
    // leaving the blob the stored entity references.
    faulty.fail_write(0, Timing::BeforeWrite);
    table
        .upsert(&staff(1, Some(vec![9u8; 1000]), String::new()))
        .await
        .expect_err("the write fails");
    assert_eq!(blob_count(&blobs).await, 2);
    let young = table.sweep(Duration::from_secs(3600)).await.expect("sweep");
    assert_eq!(
        (young.deleted, young.young),
        (0, 1),
        "a young orphan may be a write in progress"
    );
    let swept = table.sweep(Duration::ZERO).await.expect("sweep");
    assert_eq!(swept.deleted, 1);
    assert_eq!(
        table
            .get("Ops", "000001")
            .await
            .expect("get")
            .and_then(|s| s.value.photo),
        Some(vec![3u8; 1000]),
        "the stored entity's blob is kept"
    );
    let rows = store.query_all("Staff", Query::new()).await.expect("rows");
    assert_eq!(rows.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_tables_with_memory_blobs() {
    let backend = support::memory().await.expect("memory");
    large_entities_round_trip_and_clean_up(backend.store.clone(), BlobStore::memory()).await;
    let backend = support::memory().await.expect("memory");
    crashes_leave_blobs_the_relay_and_the_sweep_remove(backend.store.clone(), BlobStore::memory())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_file_with_local_blob_files() {
    for case in 0..2 {
        let backend = support::sqlite().await.expect("sqlite");
        let dir = tempfile::tempdir().expect("a temp dir");
        let blobs = BlobStore::local(dir.path().join("blobs")).expect("blobs");
        if case == 0 {
            large_entities_round_trip_and_clean_up(backend.store.clone(), blobs).await;
        } else {
            crashes_leave_blobs_the_relay_and_the_sweep_remove(backend.store.clone(), blobs).await;
        }
    }
}

#[cfg(feature = "azure")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azurite_tables_with_azurite_blobs() {
    for case in 0..2 {
        let Some(backend) = support::azure().await else {
            return;
        };
        let Some(base) = support::azurite_blobs() else {
            return;
        };
        let container = format!("tk{}", uuid::Uuid::new_v4().simple());
        tablekit::core::azure::create_blob_container(&base, &container)
            .await
            .expect("container");
        let blobs = BlobStore::connect(&format!("azure:{base};Container={container}"))
            .expect("azure blob store");
        if case == 0 {
            large_entities_round_trip_and_clean_up(backend.store.clone(), blobs).await;
        } else {
            crashes_leave_blobs_the_relay_and_the_sweep_remove(backend.store.clone(), blobs).await;
        }
    }
}

/// What the README and `Table`'s rustdoc promise: a plain `Table` has no blob store, so a
/// blob field is an inline property there, and one over the service's 64 KiB property
/// limit is refused with nothing written.
async fn a_plain_table_stores_blob_fields_inline(store: AnyStore) {
    let table = Table::<Staff, _>::new(store.clone());
    table.create().await.expect("create");
    table
        .insert(&staff(1, Some(vec![7u8; 2048]), "n".into()))
        .await
        .expect("a small photo");
    let raw = store
        .get("Staff", "Ops", "000001", None)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(
        raw.get("photo"),
        Some(&Value::Binary(vec![7u8; 2048])),
        "inline, not an address"
    );
    let refused = table
        .insert(&staff(2, Some(vec![7u8; 100_000]), "n".into()))
        .await
        .expect_err("over 64 KiB");
    assert_eq!(refused.kind(), ErrorKind::TooLarge, "{refused}");
    assert!(
        store
            .get("Staff", "Ops", "000002", None)
            .await
            .expect("read")
            .is_none(),
        "nothing written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_table_keeps_blob_fields_inline_on_memory_and_sqlite() {
    let backend = support::memory().await.expect("memory");
    a_plain_table_stores_blob_fields_inline(backend.store.clone()).await;
    let backend = support::sqlite().await.expect("sqlite");
    a_plain_table_stores_blob_fields_inline(backend.store.clone()).await;
}

/// A write whose answer was lost (the store applied it, the answer never came) is
/// recognised as landed by its version stamp, with one point read: the caller is not
/// told `AlreadyExists` for its own insert, with or without blobs to offload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_write_whose_answer_was_lost_answers_ok() {
    let backend = support::memory().await.expect("memory");
    let faulty = FaultyStore::new(backend.store.clone());
    let blobs = BlobStore::memory();
    // The entries' removal in the write, so each planned fault falls on the write's own
    // steps.
    let table = LargeTable::<Staff, _>::options()
        .engine(
            tablekit::patterns::consistency::Engine::options()
                .removal_in_line()
                .build(faulty.clone()),
        )
        .inline_cleanup()
        .build(faulty.clone(), blobs.clone());
    table.open().await.expect("open");
    for (id, photo) in [(1, None), (2, Some(vec![7u8; 2000]))] {
        let value = staff(id, photo, "notes".into());
        faulty.fail_write(0, Timing::AfterWrite);
        table.insert(&value).await.expect("recognised as landed");
        let stored = table
            .get("Ops", &format!("{id:06}"))
            .await
            .expect("get")
            .map(|s| s.value);
        assert_eq!(stored, Some(value), "written once, as asked");
    }
    // A replace and a delete whose answers were lost: the same.
    let renamed = Staff {
        name: "Renamed".into(),
        ..staff(1, None, "notes".into())
    };
    faulty.fail_write(0, Timing::AfterWrite);
    table
        .replace(&renamed, IfMatch::Any)
        .await
        .expect("recognised as landed");
    // (A new photo: the old blob's deletion is follow-up work, so the partition's
    // pending marker is written now and leased; the delete's first write is its commit.)
    table
        .upsert(&staff(2, Some(vec![8u8; 2000]), "notes".into()))
        .await
        .expect("upsert");
    faulty.fail_write(0, Timing::AfterWrite);
    table
        .delete("Ops", "000002", IfMatch::Any)
        .await
        .expect("recognised as landed");
    assert!(table.get("Ops", "000002").await.expect("get").is_none());
    // A write that never reached the store stays an unknown outcome, and wrote nothing.
    faulty.fail_write(0, Timing::BeforeWrite);
    let err = table
        .insert(&staff(3, None, String::new()))
        .await
        .expect_err("not landed");
    assert!(err.is_retryable(), "{err}");
    assert!(table.get("Ops", "000003").await.expect("get").is_none());
}
