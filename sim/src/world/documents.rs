//! The documents of the simulated world: a `LargeTable` (blob fields and oversized values
//! through the one write path's blob declaration, no index record), written by the
//! writers beside the indexed types; its orphaned blobs (a write that failed after its
//! upload) are swept in the drain, and each document's final state is checked against
//! the model like any key.

use std::time::Duration;

use tablekit_core::{IfMatch, random};
use tablekit_patterns::consistency::Engine;
use tablekit_patterns::large::LargeTable;

use super::written::answer_of;
use super::{IDS, Store, TEAMS, World};
use crate::entities::Document;
use crate::model::{Answer, Effect, Key};

/// The model's name of the type.
const NAME: &str = "Document";

/// The table of documents over `store`, committing through `engine`.
pub(super) fn documents(
    world: &World,
    store: &Store,
    engine: &Engine<Store>,
) -> LargeTable<Document, Store> {
    LargeTable::options()
        .engine(engine.clone())
        .build(store.clone(), world.blobs.clone())
}

fn key_of(id: u32) -> String {
    format!("d_{id:02}")
}

fn document(world: &World, team: String, id: u32) -> Document {
    let rev = world.rev();
    Document {
        team,
        id,
        rev,
        body: random::u64()
            .is_multiple_of(2)
            .then(|| format!("body {rev}").into_bytes()),
        // Over the 64 KiB a property may hold, one time in four: offloaded too.
        text: if random::u64().is_multiple_of(4) {
            format!("{rev} ").repeat(20_000)
        } else {
            format!("text {rev}")
        },
    }
}

/// One write of a document: insert, upsert, replace (with or without the ETag read) or
/// delete; an unknown outcome is retried, as the error asks, up to twice.
pub(super) async fn write_document(world: &World, table: &LargeTable<Document, Store>, n: usize) {
    let team = TEAMS[(random::u64() % 2) as usize].to_owned();
    let id = (random::u64() % u64::from(IDS)) as u32;
    let key: Key = (NAME, team.clone(), key_of(id));
    let value = document(world, team.clone(), id);
    let choice = random::u64() % 100;
    let etag = if (40..60).contains(&choice) || choice >= 90 {
        match table.get(&team, &key_of(id)).await {
            Ok(Some(stored)) => stored.etag.map(IfMatch::ETag),
            _ => None,
        }
    } else {
        None
    };
    let if_match = etag.clone().unwrap_or(IfMatch::Any);
    let put = Effect::Put {
        rev: value.rev,
        expires: None,
        ttl: None,
        unknown_expiry: false,
    };
    let (what, effect) = match choice {
        0..=24 => ("insert", put),
        25..=39 => ("upsert", put),
        40..=74 => ("replace", put),
        _ => ("delete", Effect::Remove),
    };
    let what = format!(
        "writer{n} {what} {key:?} rev {} {}",
        value.rev,
        if etag.is_some() { "if-match" } else { "any" }
    );
    let at = world
        .model
        .borrow_mut()
        .start(key, what.clone(), effect, world.now());
    world.log(format!("{what}: start"));
    let mut answer = Answer::Pending;
    for attempt in 0..3 {
        let result = match choice {
            0..=24 => table.insert(&value).await.map(drop),
            25..=39 => table.upsert(&value).await.map(drop),
            40..=74 => table.replace(&value, if_match.clone()).await.map(drop),
            _ => table.delete(&team, &key_of(id), if_match.clone()).await,
        };
        answer = match result {
            Ok(()) => Answer::Ok,
            Err(e) => answer_of(&e),
        };
        if !matches!(answer, Answer::Unknown(_)) || attempt == 2 {
            break;
        }
        world.log(format!("{what}: unknown outcome, retried"));
    }
    world.log(format!("{what}: {answer:?}"));
    world.model.borrow_mut().end(at, answer, world.now());
}

/// Deletes the blobs no document references (what a write that failed after its upload
/// left): the drain's sweep, once no write is in flight. How many it deleted.
pub(super) async fn sweep(world: &World, store: &Store) -> Result<usize, String> {
    documents(world, store, &Engine::new(store.clone()))
        .sweep(Duration::ZERO)
        .await
        .map(|r| r.deleted)
        .map_err(|e| e.to_string())
}

/// Each document's final state against the model.
pub(super) async fn check(world: &World, store: &Store) -> Vec<String> {
    let mut found = Vec::new();
    let table = documents(world, store, &Engine::new(store.clone()));
    let model = world.model.borrow().clone();
    let now = world.now();
    for team in TEAMS {
        for id in 0..IDS {
            let key: Key = (NAME, team.to_owned(), key_of(id));
            match table.get(team, &key_of(id)).await {
                Ok(stored) => {
                    if let Some(problem) = model.check(&key, stored.map(|s| s.value.rev), now) {
                        found.push(problem);
                    }
                }
                Err(e) => found.push(format!("{key:?} does not read: {e}")),
            }
        }
    }
    found
}
