//! A write whose commit landed but whose answer was lost is answered `Ok`, with one read
//! on the failure path and none on the happy path; the archive's untyped delete publishes
//! the change event of a type that declares one.

use std::sync::Arc;

mod support;
use support::{Held, Hold, Kept};

use tablekit_core::fault::{FaultyStore, Timing};
use tablekit_core::{IfMatch, MemoryStore, TableStore};
use tablekit_derive::Entity;
use tablekit_patterns::consistency::Engine;
use tablekit_patterns::index::IndexedTable;
use tablekit_patterns::index::delete_indexed;
use tablekit_patterns::index::record::EntityRef;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Items",
    kind = "Item",
    partition_key = "{group}",
    row_key = "i_{id:03}",
    changes = "item-changes",
    crate = "tablekit_core"
)]
#[index(
    name = "by_name",
    table = "ItemsByName",
    partition_key = "n",
    row_key = "{name}"
)]
struct Item {
    group: String,
    id: u32,
    name: String,
}

fn item(id: u32, name: &str) -> Item {
    Item {
        group: "g".into(),
        id,
        name: name.into(),
    }
}

async fn table(
    store: &FaultyStore<MemoryStore>,
    sink: Arc<Kept>,
) -> IndexedTable<Item, FaultyStore<MemoryStore>> {
    // The entries' removal in the write, so the counted calls and the planned faults
    // fall on the write's own steps.
    let engine = Engine::options()
        .sink(sink)
        .removal_in_line()
        .build(store.clone());
    let items = IndexedTable::options()
        .engine(engine)
        .build(store.clone())
        .expect("options");
    items.create().await.expect("open");
    items
}

#[tokio::test]
async fn an_insert_whose_answer_was_lost_answers_ok_with_one_more_read() {
    let store = FaultyStore::new(MemoryStore::new());
    let items = table(&store, Arc::default()).await;
    items.insert(&item(1, "a")).await.expect("insert");
    // The happy path: how many calls an insert makes (its partition's marker is leased).
    store.reset_counters();
    items.insert(&item(4, "d")).await.expect("insert");
    let happy = store.calls();
    // The same insert with its commit's answer lost: one call more, the read-back.
    store.reset_counters();
    store.fail_write(0, Timing::AfterWrite);
    let outcome = items
        .insert(&item(2, "b"))
        .await
        .expect("recognised as landed");
    assert_eq!(store.calls(), happy + 1, "one point read per lost answer");
    assert!(outcome.etag.is_some(), "the read-back gives the ETag");
    // And the write is there, once.
    assert_eq!(
        items.get("g", "i_002").await.expect("get").map(|s| s.value),
        Some(item(2, "b"))
    );
    // A write that never reached the store stays an unknown outcome.
    store.fail_write(0, Timing::BeforeWrite);
    let err = items.insert(&item(3, "c")).await.expect_err("not landed");
    assert!(err.is_retryable(), "{err}");
    assert!(items.get("g", "i_003").await.expect("get").is_none());
}

#[tokio::test]
async fn a_delete_whose_answer_was_lost_answers_ok() {
    let store = FaultyStore::new(MemoryStore::new());
    let items = table(&store, Arc::default()).await;
    items.insert(&item(1, "a")).await.expect("insert");
    // The delete reads the primary, then commits (its answer lost).
    store.fail_write(0, Timing::AfterWrite);
    items
        .delete("g", "i_001", IfMatch::Any)
        .await
        .expect("recognised as landed");
    assert!(items.get("g", "i_001").await.expect("get").is_none());
}

#[tokio::test]
async fn the_untyped_delete_publishes_the_change_event() {
    let store = FaultyStore::new(MemoryStore::new());
    let sink = Arc::new(Kept::default());
    let items = table(&store, sink.clone()).await;
    items.insert(&item(1, "a")).await.expect("insert");
    let engine = Engine::options().sink(sink.clone()).build(store.clone());
    let at = EntityRef::new("Items", "g", "i_001");
    assert!(
        delete_indexed(&engine, &at, IfMatch::Any)
            .await
            .expect("delete")
    );
    let kept = sink.kept().expect("kept").clone();
    let last = kept.last().expect("published");
    assert_eq!(last.kind, "change");
    assert_eq!(
        last.payload.get("change").and_then(|c| c.as_str()),
        Some("delete")
    );
    // Gone to every read; what stays for the grace period is its tombstone.
    assert!(
        store
            .get("Items", "g", "i_001", None)
            .await
            .expect("get")
            .is_none_or(|e| tablekit_patterns::index::record::is_tombstone(&e))
    );
}

/// An insert planned while its key was free, committed after another insert and a delete
/// of that key: it is the entity's latest state, so its version (and its change event's)
/// must be above the delete's, or the delete's removals and event win over it.
///
/// Open: an insert's transaction can only require its row absent, and a delete leaves
/// nothing behind to conflict with. The fix is a delete that leaves its row as a
/// tombstone for a grace period (every read treating it as absent, an insert replacing it
/// under its ETag above its version, a sweep removing it after the grace), planned with
/// the one write path.
#[tokio::test]
async fn an_insert_committed_after_a_delete_of_its_key_outranks_it() {
    let store = Held::new(Hold::Insert("i_001"));
    let sink = Arc::new(Kept::default());
    let engine = Engine::options().sink(sink.clone()).build(store.clone());
    let items = IndexedTable::<Item, _>::options()
        .engine(engine)
        .build(store.clone())
        .expect("options");
    items.create().await.expect("open");
    store.arm();
    let late = {
        let items = items.clone();
        tokio::spawn(async move { items.insert(&item(1, "late")).await })
    };
    store.reached().await;
    items.insert(&item(1, "first")).await.expect("insert");
    items
        .delete("g", "i_001", IfMatch::Any)
        .await
        .expect("delete");
    store.release();
    late.await.expect("task").expect("the late insert lands");
    assert_eq!(
        items.get("g", "i_001").await.expect("get").map(|s| s.value),
        Some(item(1, "late"))
    );
    // The change event with the highest version is the late insert's.
    let kept = sink.kept().expect("kept").clone();
    let last = kept
        .iter()
        .filter(|e| e.kind == "change")
        .max_by_key(|e| e.payload.get("version").and_then(|v| v.as_i64()))
        .expect("events");
    assert_eq!(
        last.payload.get("change").and_then(|c| c.as_str()),
        Some("insert"),
        "{kept:#?}"
    );
}
