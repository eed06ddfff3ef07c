//! The archive in the simulated world: the director asks now and then for a member to be
//! archived, the archive worker moves it, and the check asserts each archive left its
//! entity in exactly one table, with its blobs.

use std::rc::Rc;

use tablekit_core::{TableStore, random};
use tablekit_workers::archive::{ArchiveOperation, Archiver};
use tablekit_workers::queue::Queue;
use tablekit_workers::{Envelope, Registry};

use super::workers::consume;
use super::{ARCHIVE, IDS, Store, TEAMS, World};
use crate::model::{Key, Model};

pub(super) async fn request_archive(world: &World) -> bool {
    let team = TEAMS[(random::u64() % 2) as usize];
    let id = (random::u64() % u64::from(IDS)) as u32;
    let key: Key = ("Member", team.to_owned(), format!("m_{id:02}"));
    {
        let model = world.model.borrow();
        if model.archived.contains(&key) || model.in_flight(&key) {
            return false;
        }
    }
    let op = ArchiveOperation {
        source_table: "Members".into(),
        target_table: ARCHIVE.into(),
        partition_key: key.1.clone(),
        row_key: key.2.clone(),
    };
    let Ok(envelope) = Envelope::new(&op) else {
        return false;
    };
    let Ok(body) = envelope.to_bytes() else {
        return false;
    };
    world.log(format!("director: archive {key:?}"));
    {
        let mut model = world.model.borrow_mut();
        model.archived.push(key.clone());
        model.system_remove(key, "the archive", world.now());
    }
    let _ = world
        .queue
        .send("archive", &envelope.id.to_string(), &body)
        .await;
    true
}

pub(super) async fn archive_worker(world: Rc<World>, store: Store) {
    let engine = world.engine(&store).await;
    let archiver = std::sync::Arc::new(Archiver::new(engine, Some(world.blobs.clone())));
    let registry = Registry::new().register(move |op: ArchiveOperation| {
        let archiver = archiver.clone();
        async move {
            archiver.archive(&op).await?;
            Ok(())
        }
    });
    consume(&world, "archive", &registry).await;
}

/// Every archive of the model, over the drained store.
pub(super) async fn check(world: &World, store: &Store, model: &Model) -> Vec<String> {
    let mut found = Vec::new();
    // Every archive left its entity in exactly one table, with its blobs.
    for key in &model.archived {
        let primary = store
            .get("Members", &key.1, &key.2, None)
            .await
            .ok()
            .flatten();
        let archived = store
            .get(ARCHIVE, &key.1, &key.2, None)
            .await
            .ok()
            .flatten();
        if primary.is_some() && archived.is_some() {
            found.push(format!("{key:?} is in both Members and {ARCHIVE}"));
        }
        if let Some(entity) = &archived {
            for (_, name, _) in tablekit_patterns::large::addresses(entity) {
                if !matches!(world.blobs.get(&name).await, Ok(Some(_))) {
                    found.push(format!("the archived {key:?} lost its blob {name}"));
                }
            }
        }
    }
    found
}
