//! `IndexedTable::options()`: the settings may come in any order and `open` returns the
//! opened table. A blob store given after `inline_apply` reaches the inline sink, an
//! `engine` keeps a `sink` given before it, and the table's name, retries and look-up
//! settings hold whatever their order.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use tablekit_core::blob::BlobStore;
use tablekit_core::{MemoryStore, TableStore};
use tablekit_derive::Entity;
use tablekit_patterns::consistency::{Engine, Envelope};
use tablekit_patterns::index::{IndexedTable, OutboxSink};

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Tags",
    kind = "Tag",
    partition_key = "{owner}",
    row_key = "{id}",
    crate = "tablekit_core"
)]
#[index_entity(name = "by_label", key = "{label}", storage = "blob")]
struct Tag {
    owner: String,
    id: String,
    label: String,
}

fn tag(id: &str) -> Tag {
    Tag {
        owner: "ann".into(),
        id: id.into(),
        label: "red".into(),
    }
}

/// A blob-kept id list is written by the inline sink only with the blob store: in both
/// orders of `blobs` and `inline_apply` the list holds the tag once `insert` returns.
#[tokio::test]
async fn the_blob_store_reaches_the_inline_sink_in_either_order() {
    for blobs_first in [true, false] {
        let blobs = BlobStore::memory();
        let options = IndexedTable::<Tag, _>::options();
        let options = if blobs_first {
            options.blobs(blobs.clone()).inline_apply()
        } else {
            options.inline_apply().blobs(blobs.clone())
        };
        let tags = options.open(MemoryStore::new()).await.unwrap();
        tags.insert(&tag("t1")).await.unwrap();
        let listed = tags.list(Tag::BY_LABEL).key("red").ids().await.unwrap();
        assert_eq!(
            listed
                .iter()
                .map(|r| r.row_key.as_str())
                .collect::<Vec<_>>(),
            ["t1"],
            "blobs first: {blobs_first}"
        );
    }
}

/// A sink that counts what it is given.
#[derive(Default)]
struct Counted(AtomicUsize);

impl OutboxSink for Counted {
    fn publish<'a>(
        &'a self,
        _envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn an_engine_keeps_the_sink_given_before_or_after_it() {
    for sink_first in [true, false] {
        let store = MemoryStore::new();
        let sink = Arc::new(Counted::default());
        let engine = Engine::new(store.clone());
        let options = IndexedTable::<Tag, _>::options();
        let options = if sink_first {
            options.sink(sink.clone()).engine(engine)
        } else {
            options.engine(engine).sink(sink.clone())
        };
        let tags = options.open(store).await.unwrap();
        tags.insert(&tag("t1")).await.unwrap();
        assert_eq!(
            sink.0.load(Ordering::SeqCst),
            1,
            "the list's work went to the sink (sink first: {sink_first})"
        );
    }
}

#[tokio::test]
async fn open_returns_the_table_with_its_tables_created_and_its_name() {
    let store = MemoryStore::new();
    let tags = IndexedTable::<Tag, _>::options()
        .max_attempts(3)
        .name("Labels")
        .lookup_concurrency(2)
        .open(store.clone())
        .await
        .unwrap();
    assert_eq!(tags.table().name(), "Labels");
    let tables = store.list_tables("").await.unwrap();
    assert!(tables.iter().any(|t| t == "Labels"), "{tables:?}");
    assert!(!tables.iter().any(|t| t == "Tags"), "{tables:?}");
    assert_eq!(tags.engine().retry().max_attempts, 3);
    // `build` makes the same table without I/O; `create` opens it.
    let other = MemoryStore::new();
    let built = IndexedTable::<Tag, _>::options()
        .name("Labels")
        .build(other.clone());
    assert!(other.list_tables("").await.unwrap().is_empty());
    built.create().await.unwrap();
    assert!(
        other
            .list_tables("")
            .await
            .unwrap()
            .iter()
            .any(|t| t == "Labels")
    );
}
