//! The writers: each issues its fixed share of operations (typed writes and batches of
//! members and badges, documents) under faults, and records each in the model with the
//! answer it got.

use std::rc::Rc;
use std::time::Duration;

use tablekit_core::typed::TypedWrite;
use tablekit_core::{IfMatch, random};
use tablekit_patterns::index::IndexedTable;

use super::written::{Written, answer_of};
use super::{IDS, Store, TEAMS, World, badges, documents, members, tallies};
use crate::entities::LegacyMember;
use crate::model::{Answer, Effect, Key};

/// A key of `kind` no archive has taken.
fn pick_key(world: &World, kind: &'static str) -> Option<(String, u32)> {
    for _ in 0..10 {
        let team = TEAMS[(random::u64() % 2) as usize].to_owned();
        let id = (random::u64() % u64::from(IDS)) as u32;
        let rk = if kind == "Member" {
            format!("m_{id:02}")
        } else {
            format!("b_{id:02}")
        };
        if !world
            .model
            .borrow()
            .archived
            .contains(&(kind, team.clone(), rk))
        {
            return Some((team, id));
        }
    }
    None
}

pub(super) async fn writer(world: Rc<World>, store: Store, n: usize) {
    let engine = world.engine(&store).await;
    let members = members(&world, &store, &engine);
    let badges = badges(&world, &store, &engine);
    let documents = documents::documents(&world, &store, &engine);
    let tallies = tallies::tallies(&store, &engine);
    // The last writer still runs the previous program for some of its member writes.
    let legacy = (n + 1 == world.options.writers).then(|| {
        IndexedTable::<LegacyMember, _>::options()
            .engine(engine.clone())
            .follow_up_elsewhere()
            .blobs(world.blobs.clone())
            .build(store.clone())
            .expect("the choice of where follow-up work is done is made")
    });
    loop {
        let done = {
            let mut started = world.started.borrow_mut();
            let count = started.entry(n).or_insert(0);
            *count += 1;
            *count > world.options.ops_per_writer
        };
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(random::u64() % 300)).await;
        match (random::u64() % 10, &legacy) {
            (0..=2, Some(legacy)) => write_one(&world, legacy, n).await,
            (0..=5, _) => write_one(&world, &members, n).await,
            (6..=8, _) => write_one(&world, &badges, n).await,
            (9, _) if random::u64().is_multiple_of(2) => {
                tallies::add_one(&world, &tallies, n).await;
            }
            _ => documents::write_document(&world, &documents, n).await,
        }
    }
    world.writers_left.set(world.writers_left.get() - 1);
    world.log(format!("writer{n}: done"));
}

async fn write_one<E: Written>(world: &World, table: &IndexedTable<E, Store>, n: usize) {
    let Some((team, id)) = pick_key(world, E::NAME) else {
        return;
    };
    let key: Key = (E::NAME, team.clone(), E::key_of(id));
    if random::u64() % 100 < 15 {
        return write_batch(world, table, n).await;
    }
    let value = E::make(world, team.clone(), id);
    let choice = random::u64() % 100;
    // Conditional writes read the ETag first.
    let etag = if (30..50).contains(&choice) || (60..75).contains(&choice) || choice >= 90 {
        match table.get(&team, &E::key_of(id)).await {
            Ok(Some(stored)) => stored.etag.map(IfMatch::ETag),
            _ => None,
        }
    } else {
        None
    };
    let if_match = etag.clone().unwrap_or(IfMatch::Any);
    let (what, effect) = match choice {
        0..=19 => ("insert", value.effect()),
        20..=39 => ("upsert", value.effect()),
        40..=59 => ("replace", value.effect()),
        60..=79 => ("update", value.updated()),
        _ => ("delete", Effect::Remove),
    };
    let what = format!(
        "writer{n} {what} {key:?} rev {} {}",
        value.rev(),
        if etag.is_some() { "if-match" } else { "any" }
    );
    let at = world
        .model
        .borrow_mut()
        .start(key.clone(), what.clone(), effect, world.now());
    world.log(format!("{what}: start"));
    // An unknown outcome is retried, as the error asks, up to twice.
    let mut answer = Answer::Pending;
    let mut unknown = false;
    for attempt in 0..3 {
        let result = match choice {
            0..=19 => table.insert(&value).await,
            20..=39 => table.upsert(&value).await,
            40..=59 => table.replace(&value, if_match.clone()).await,
            60..=79 => value.update(table, if_match.clone()).await,
            _ => table.delete(&team, &E::key_of(id), if_match.clone()).await,
        };
        answer = match result {
            Ok(_) => Answer::Ok,
            Err(e) => answer_of(&e),
        };
        if !matches!(answer, Answer::Unknown(_)) || attempt == 2 {
            break;
        }
        world.log(format!("{what}: unknown outcome, retried"));
        unknown = true;
    }
    // A retry refused after an unknown outcome (an insert finding the entity, a
    // conditional write its ETag moved) may be refused because the first attempt landed.
    if let (true, Answer::Refused(why)) = (unknown, &answer) {
        answer = Answer::Unknown(format!(
            "refused when retried after an unknown outcome: {why}"
        ));
    }
    world.log(format!("{what}: {answer:?}"));
    world.model.borrow_mut().end(at, answer, world.now());
}

async fn write_batch<E: Written>(world: &World, table: &IndexedTable<E, Store>, n: usize) {
    let mut writes = Vec::new();
    let mut records = Vec::new();
    let mut keys = Vec::new();
    for _ in 0..(2 + random::u64() % 3) {
        let Some((team, id)) = pick_key(world, E::NAME) else {
            continue;
        };
        let key: Key = (E::NAME, team.clone(), E::key_of(id));
        if keys.contains(&key) {
            continue;
        }
        keys.push(key.clone());
        let value = E::make(world, team.clone(), id);
        let (what, effect, write) = match random::u64() % 4 {
            0 => ("insert", value.effect(), TypedWrite::Insert(value.clone())),
            1 => ("upsert", value.effect(), TypedWrite::Upsert(value.clone())),
            2 => (
                "replace",
                value.effect(),
                TypedWrite::Replace(value.clone(), IfMatch::Any),
            ),
            _ => (
                "delete",
                Effect::Remove,
                TypedWrite::Delete {
                    partition_key: team.clone(),
                    row_key: E::key_of(id),
                    if_match: IfMatch::Any,
                },
            ),
        };
        let what = format!("writer{n} batch {what} {key:?} rev {}", value.rev());
        records.push(
            world
                .model
                .borrow_mut()
                .start(key, what, effect, world.now()),
        );
        writes.push(write);
    }
    world.log(format!("writer{n}: write_all of {}", writes.len()));
    let result = table.write_all(writes).await;
    let mut answers = vec![Answer::Unknown("no report".into()); records.len()];
    match result {
        Ok(report) => {
            for (at, _) in &report.written {
                answers[*at] = Answer::Ok;
            }
            for (at, e) in &report.refused {
                answers[*at] = answer_of(e);
            }
            for (ats, e) in &report.failed {
                for at in ats {
                    answers[*at] = Answer::Unknown(e.to_string());
                }
            }
        }
        Err(e) => answers.fill(Answer::Unknown(e.to_string())),
    }
    let now = world.now();
    let mut model = world.model.borrow_mut();
    for (record, answer) in records.into_iter().zip(answers) {
        let what = model.writes[record].what.clone();
        drop(model);
        world.log(format!("{what}: {answer:?}"));
        model = world.model.borrow_mut();
        model.end(record, answer, now);
    }
}
