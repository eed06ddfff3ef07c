//! The tallies of the simulated world: a data series spilling to chunks (`Tally`), its
//! points added by the writers under faults. Each `add` is an ordinary indexed write of a
//! wide entity (chunk 0 and the chunk holding the point in one transaction); the check
//! reads every span and holds each point between the adds answered `Ok` and those plus
//! the adds whose outcome is unknown (an error that may have landed, or a crash in
//! flight), and audits the chunks.

use std::cell::RefCell;
use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use tablekit_core::random;
use tablekit_patterns::consistency::Engine;
use tablekit_patterns::index::{AuditOptions, IndexedTable};

use super::{Store, TEAMS, World};
use crate::entities::Tally;

/// Adds per point: (answered `Ok`, outcome unknown).
type Counts = BTreeMap<(String, DateTime<Utc>), (i64, i64)>;

thread_local! {
    /// The model of the tallies (each simulation runs on a thread of its own).
    static COUNTS: RefCell<Counts> = RefCell::default();
}

/// The tallies over `store`, committing through `engine`.
pub(super) fn tallies(store: &Store, engine: &Engine<Store>) -> IndexedTable<Tally, Store> {
    IndexedTable::options()
        .engine(engine.clone())
        .build(store.clone())
        .expect("a series needs no follow-up work")
}

/// The instants the writers add at: two spans of a day in the simulated past.
fn instant(minute: u64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_799_971_200, 0).unwrap_or_default()
        + TimeDelta::minutes(i64::try_from(minute).unwrap_or(0))
}

fn key(team: &str) -> Tally {
    Tally {
        team: team.to_owned(),
        ..Tally::default()
    }
}

/// One add of 1 to a point.
pub(super) async fn add_one(world: &World, table: &IndexedTable<Tally, Store>, n: usize) {
    let team = TEAMS[(random::u64() % 2) as usize];
    let at = instant(random::u64() % 1200);
    let point = (team.to_owned(), at);
    COUNTS.with(|c| c.borrow_mut().entry(point.clone()).or_default().1 += 1);
    let what = format!("writer{n} add {team} {at}");
    world.log(format!("{what}: start"));
    let result = table.add(&key(team), at, 1).await;
    world.log(format!("{what}: {result:?}"));
    if result.is_ok() {
        COUNTS.with(|c| {
            let mut counts = c.borrow_mut();
            let entry = counts.entry(point).or_default();
            entry.0 += 1;
            entry.1 -= 1;
        });
    }
}

/// Every span's points against the adds, and the audit of the chunks.
pub(super) async fn check(store: &Store) -> Vec<String> {
    let mut found = Vec::new();
    let table = tallies(store, &Engine::new(store.clone()));
    let counts = COUNTS.with(|c| c.borrow().clone());
    for team in TEAMS {
        let points = match table.points(&key(team), instant(0), instant(1200)).await {
            Ok(points) => points,
            Err(e) => {
                found.push(format!("the tallies of {team} do not read: {e}"));
                continue;
            }
        };
        for (at, value) in points {
            let (ok, unknown) = counts
                .get(&(team.to_owned(), at))
                .copied()
                .unwrap_or_default();
            if value < ok || value > ok + unknown {
                found.push(format!(
                    "tally {team} {at} holds {value}: {ok} adds answered Ok, {unknown} unknown"
                ));
            }
        }
    }
    match table.audit(&AuditOptions::default()).await {
        Ok(r) if !r.is_clean() => found.push(format!(
            "the audit of Tallies is not clean: first {:?}",
            r.findings.first()
        )),
        Ok(_) => {}
        Err(e) => found.push(format!("the audit of Tallies failed: {e}")),
    }
    found
}
