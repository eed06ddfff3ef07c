//! Migration on demand: entities stored under an older version of their type are
//! rewritten through the write path (the new version's index follows), counted by stored
//! version, resumable from a checkpoint, and a write landing between the migration's read
//! and its rewrite wins.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use tablekit_core::{Entity, MemoryStore, Query, TableStore};
use tablekit_derive::Entity;
use tablekit_patterns::index::{AuditOptions, IndexedTable, audit, migrate};

use support::{Held, Hold};

/// The first version: a name, no email, one index.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "People",
    kind = "Person",
    version = 1,
    partition_key = "{team}",
    row_key = "p_{id:03}",
    crate = "tablekit_core"
)]
#[index(name = "by_name", partition_key = "{team}", row_key = "name_{name}")]
struct PersonV1 {
    team: String,
    id: u32,
    name: String,
}

fn upgrade(entity: &mut Entity, from: u32) -> Result<(), String> {
    if from == 1 {
        let name = match entity.properties.get("name") {
            Some(tablekit_core::Value::String(name)) => name.to_lowercase(),
            _ => return Err("no name".into()),
        };
        entity
            .properties
            .insert("email".into(), format!("{name}@example.com").into());
    }
    Ok(())
}

/// The second version: an email, read from version 1 by the upcast, with an index of
/// its own in another table.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "People",
    kind = "Person",
    version = 2,
    partition_key = "{team}",
    row_key = "p_{id:03}",
    upcast = upgrade,
    crate = "tablekit_core"
)]
#[index(name = "by_name", partition_key = "{team}", row_key = "name_{name}")]
#[index(
    name = "by_email",
    table = "PeopleByEmail",
    partition_key = "{email}",
    row_key = "{id}"
)]
struct Person {
    team: String,
    id: u32,
    name: String,
    email: String,
}

async fn seed(store: &MemoryStore, old: u32, new: u32) {
    let v1 = IndexedTable::<PersonV1, _>::options()
        .inline_apply()
        .build(store.clone())
        .unwrap();
    v1.create().await.unwrap();
    for id in 0..old {
        v1.insert(&PersonV1 {
            team: format!("t{}", id % 2),
            id,
            name: format!("Name{id}"),
        })
        .await
        .unwrap();
    }
    let v2 = IndexedTable::<Person, _>::options()
        .inline_apply()
        .build(store.clone())
        .unwrap();
    v2.create().await.unwrap();
    for id in old..old + new {
        v2.insert(&Person {
            team: format!("t{}", id % 2),
            id,
            name: format!("Name{id}"),
            email: format!("name{id}@example.com"),
        })
        .await
        .unwrap();
    }
}

async fn emails(store: &MemoryStore) -> usize {
    store
        .query_all("PeopleByEmail", Query::new())
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn older_entities_are_rewritten_through_the_write_path_and_counted_by_version() {
    let store = MemoryStore::new();
    seed(&store, 30, 10).await;
    assert_eq!(
        emails(&store).await,
        10,
        "only version 2 writes have the new index"
    );
    let people = IndexedTable::<Person, _>::options()
        .inline_apply()
        .build(store.clone())
        .unwrap();

    let report = migrate(&people, &AuditOptions::default()).await.unwrap();
    assert_eq!(report.versions.get(&1), Some(&30), "{report:?}");
    assert_eq!(report.versions.get(&2), Some(&10), "{report:?}");
    assert_eq!(
        (report.rewritten, report.conflicts, report.unreadable),
        (30, 0, 0)
    );
    assert_eq!(report.older(2), 30);
    assert_eq!(
        emails(&store).await,
        40,
        "the new index followed every rewrite"
    );
    let stored = store
        .get("People", "t0", "p_000", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.properties.get("EntityVersion"),
        Some(&tablekit_core::Value::Int32(2))
    );
    assert_eq!(
        stored.properties.get("email"),
        Some(&tablekit_core::Value::String("name0@example.com".into()))
    );
    let audit = audit(&store, "People", &AuditOptions::default())
        .await
        .unwrap();
    assert!(audit.is_clean(), "{audit:?}");

    // A second run finds nothing older: it writes nothing.
    let again = migrate(&people, &AuditOptions::default()).await.unwrap();
    assert_eq!(again.versions.get(&2), Some(&40));
    assert_eq!(again.rewritten, 0);
}

#[tokio::test]
async fn a_stopped_migration_resumes_from_its_checkpoint() {
    let store = MemoryStore::new();
    seed(&store, 50, 0).await;
    let people = IndexedTable::<Person, _>::options()
        .inline_apply()
        .build(store.clone())
        .unwrap();
    let stopped = migrate(
        &people,
        &AuditOptions {
            job: Some("migrate-people".into()),
            progress_every: 5,
            // Each partition holds its name copies first (`name_…` sorts before `p_…`).
            stop_after: Some(40),
            ..AuditOptions::default()
        },
    )
    .await
    .unwrap();
    assert!(
        stopped.scanned >= 40 && stopped.rewritten > 0,
        "{stopped:?}"
    );
    assert!(stopped.rewritten < 50, "{stopped:?}");
    let resumed = migrate(
        &people,
        &AuditOptions {
            job: Some("migrate-people".into()),
            progress_every: 5,
            ..AuditOptions::default()
        },
    )
    .await
    .unwrap();
    assert!(resumed.resumed);
    assert_eq!(
        resumed.versions.get(&1),
        Some(&50),
        "counts kept across the stop: {resumed:?}"
    );
    assert_eq!(resumed.rewritten, 50, "{resumed:?}");
    assert_eq!(emails(&store).await, 50);
}

#[tokio::test]
async fn a_write_landing_between_the_read_and_the_rewrite_wins() {
    let held = Held::new(Hold::SecondRead("p_001"));
    seed(&held.inner, 3, 0).await;
    let people = IndexedTable::<Person, _>::options()
        .inline_apply()
        .build(held.clone())
        .unwrap();
    held.arm();
    let writer = IndexedTable::<Person, _>::options()
        .inline_apply()
        .build(held.inner.clone())
        .unwrap();
    let options = AuditOptions::default();
    let (report, ()) = tokio::join!(migrate(&people, &options), async {
        // The migration read p_001 and is inside its rewrite: another writer changes it.
        held.reached().await;
        writer
            .upsert(&Person {
                team: "t1".into(),
                id: 1,
                name: "Renamed".into(),
                email: "renamed@example.com".into(),
            })
            .await
            .unwrap();
        held.release();
    });
    let report = report.unwrap();
    assert_eq!((report.rewritten, report.conflicts), (2, 1), "{report:?}");
    let stored = writer.get("t1", "p_001").await.unwrap().unwrap();
    assert_eq!(
        stored.value.name, "Renamed",
        "the concurrent write was kept"
    );
}
