//! The long scans are `Send`: an audit, a backfill and a migration of a table shared
//! through an `Arc` run as ordinary Tokio tasks on a multi-threaded runtime, and do their
//! work there; and their futures (with the other long scans': the expiry sweep, the
//! relay's passes, an import, the index streams) are `Send` for any entity type and store.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use tablekit_core::typed::{EntityType, KeyPart};
use tablekit_core::{IfMatch, MemoryStore, SqliteStore, TableStore, Value};
use tablekit_derive::Entity;
use tablekit_patterns::import::{ImportOptions, import_stream};
use tablekit_patterns::index::{
    AuditOptions, Drift, IndexedTable, InlineSink, Relay, Sweeper, handlers, migrate,
};

/// A member as first stored: version 1, no index.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Members",
    kind = "Member",
    version = 1,
    partition_key = "{team}",
    row_key = "m_{id:03}",
    crate = "tablekit_core"
)]
struct MemberV1 {
    team: String,
    id: u32,
    name: String,
}

/// The current version: an index by name, declared after the first members were stored.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Members",
    kind = "Member",
    version = 2,
    partition_key = "{team}",
    row_key = "m_{id:03}",
    crate = "tablekit_core"
)]
#[index(name = "by_name", partition_key = "{team}", row_key = "name_{name}")]
struct Member {
    team: String,
    id: u32,
    name: String,
}

const MEMBERS: u32 = 12;

fn name(id: u32) -> String {
    format!("Name{id:02}")
}

async fn sqlite() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::create(dir.path().join("scans.db"))
        .await
        .unwrap();
    (dir, store)
}

/// Members stored under version 1, before the index was declared.
async fn seed_v1(store: &SqliteStore) {
    let v1 = IndexedTable::<MemberV1, _>::options()
        .inline_apply()
        .build(store.clone())
        .unwrap();
    v1.create().await.unwrap();
    for id in 0..MEMBERS {
        v1.insert(&MemberV1 {
            team: format!("t{}", id % 2),
            id,
            name: name(id),
        })
        .await
        .unwrap();
    }
}

async fn found_by_name(members: &IndexedTable<Member, SqliteStore>) -> usize {
    let mut found = 0;
    for id in 0..MEMBERS {
        let team = format!("t{}", id % 2);
        if members
            .lookup_named("by_name")
            .keys(&[&team])
            .keys(&[&name(id)])
            .get()
            .await
            .unwrap()
            .is_some_and(|m| m.id == id)
        {
            found += 1;
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawned_audit_finds_a_lost_copy_and_a_spawned_repair_puts_it_back() {
    let (_dir, store) = sqlite().await;
    let members = IndexedTable::<Member, _>::options()
        .inline_apply()
        .build(store.clone())
        .unwrap();
    members.create().await.unwrap();
    for id in 0..MEMBERS {
        members
            .insert(&Member {
                team: format!("t{}", id % 2),
                id,
                name: name(id),
            })
            .await
            .unwrap();
    }
    store
        .delete("Members", "t1", &format!("name_{}", name(3)), IfMatch::Any)
        .await
        .unwrap();
    let members = Arc::new(members);

    let table = Arc::clone(&members);
    let found = tokio::spawn(async move { table.audit(&AuditOptions::default()).await })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (found.missing, found.stale, found.orphaned, found.repaired),
        (1, 0, 0, 0),
        "{found:?}"
    );
    assert_eq!(found.findings[0].drift, Drift::Missing);

    let table = Arc::clone(&members);
    let repaired = tokio::spawn(async move {
        table
            .audit(&AuditOptions {
                repair: true,
                ..AuditOptions::default()
            })
            .await
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(repaired.repaired, 1, "{repaired:?}");
    assert_eq!(found_by_name(&members).await, MEMBERS as usize);
    assert!(
        members
            .audit(&AuditOptions::default())
            .await
            .unwrap()
            .is_clean()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawned_backfill_writes_the_copies_of_an_index_declared_later() {
    let (_dir, store) = sqlite().await;
    seed_v1(&store).await;
    let members = Arc::new(
        IndexedTable::<Member, _>::options()
            .inline_apply()
            .build(store.clone())
            .unwrap(),
    );
    members.create().await.unwrap();
    assert_eq!(
        found_by_name(&members).await,
        0,
        "no copy before the backfill"
    );

    let table = Arc::clone(&members);
    let report =
        tokio::spawn(async move { table.backfill("by_name", &AuditOptions::default()).await })
            .await
            .unwrap()
            .unwrap();
    assert_eq!(
        (report.primaries, report.repaired),
        (u64::from(MEMBERS), u64::from(MEMBERS)),
        "{report:?}"
    );
    assert_eq!(found_by_name(&members).await, MEMBERS as usize);
    assert!(
        members
            .audit(&AuditOptions::default())
            .await
            .unwrap()
            .is_clean()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawned_migration_rewrites_older_entities_under_the_current_version() {
    let (_dir, store) = sqlite().await;
    seed_v1(&store).await;
    let members = Arc::new(
        IndexedTable::<Member, _>::options()
            .inline_apply()
            .build(store.clone())
            .unwrap(),
    );
    members.create().await.unwrap();

    let table = Arc::clone(&members);
    let report = tokio::spawn(async move { migrate(&*table, &AuditOptions::default()).await })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        report.versions.get(&1),
        Some(&u64::from(MEMBERS)),
        "{report:?}"
    );
    assert_eq!(
        (report.rewritten, report.conflicts, report.unreadable),
        (u64::from(MEMBERS), 0, 0)
    );
    for id in 0..MEMBERS {
        let stored = store
            .get(
                "Members",
                &format!("t{}", id % 2),
                &format!("m_{id:03}"),
                None,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            stored.properties.get("EntityVersion"),
            Some(&Value::Int32(2))
        );
    }
    assert_eq!(
        found_by_name(&members).await,
        MEMBERS as usize,
        "the rewrites went through the write path: the index followed"
    );
}

fn assert_send<T: Send>(_: T) {}

/// Compiles only while the futures of the long scans (and the index streams) are `Send`
/// for every entity type and store: the bounds `IndexedTable` asks of them, no more.
fn scans_are_send<E, S>(table: &IndexedTable<E, S>, options: &AuditOptions)
where
    E: EntityType,
    S: TableStore + Clone + 'static,
{
    let store = table.store();
    assert_send(table.audit(options));
    assert_send(table.backfill("by_name", options));
    assert_send(migrate(table, options));
    assert_send(tablekit_patterns::index::audit(store, "Members", options));
    assert_send(tablekit_patterns::index::backfill(
        store, "Members", "by_name", options,
    ));

    let sweeper = Sweeper::new(store.clone());
    assert_send(sweeper.sweep());
    assert_send(sweeper.run(Duration::from_secs(1), std::future::pending()));
    let sink = Arc::new(InlineSink::new(handlers(store.clone(), None)));
    let relay = Relay::new(store.clone(), sink);
    assert_send(relay.run_once());
    assert_send(relay.run(Duration::from_secs(1), std::future::pending()));
    let import = ImportOptions::default();
    assert_send(import_stream(
        store,
        "Members",
        futures::stream::empty(),
        &import,
        |_| {},
    ));

    let team: &[&dyn KeyPart] = &[&"t0"];
    assert_send(table.lookup_named("by_name").keys(team).stream(10));
    assert_send(table.list_named("by_name").keys(team).stream(10));
}

#[tokio::test]
async fn scan_futures_are_send_for_any_entity_type_and_store() {
    // The futures are built and dropped, never polled.
    let options = AuditOptions::default();
    scans_are_send(
        &IndexedTable::<Member, _>::options()
            .build(MemoryStore::new())
            .unwrap(),
        &options,
    );
}
