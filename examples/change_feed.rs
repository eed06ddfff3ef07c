//! A read model built from a change feed: the headcount per department.
//!
//! `Employee` declares `#[feed]`: every hire, transfer and departure records its change in
//! its own transaction; the relay sequences the changes into the feed's log; a group of
//! consumers (`headcount`) folds them into a headcount per department, from the
//! beginning. Midway its consumer is killed — no goodbye, no last checkpoint — and a
//! new member of the group goes on from the checkpoint once the dead one's lease lapses.
//! Then retention trims the whole log, and a second group (`headcount-v2`) rebuilds the
//! read model from scratch: from the beginning of a trimmed log, it reads a snapshot of
//! the table interleaved with the log. Both read models equal a count by scan.
//!
//! Everything runs on real parts in one process: a SQLite file for the tables and the
//! feed, the relay, and the consumers on the worker runtime.
//!
//! `cargo run --example change_feed`

#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tablekit::core::{IfMatch, SqliteStore};
use tablekit::patterns::feed::{self, Position};
use tablekit::patterns::index::{InlineSink, Relay, handlers};
use tablekit::prelude::*;
use tablekit::workers::OperationError;
use tablekit::workers::changes::Change;
use tablekit::workers::feed::Feed;

/// An employee, its department the PartitionKey: a transfer is a delete in one
/// partition and an insert in another.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    kind = "Employee",
    partition_key = "{department}",
    row_key = "{id:05}"
)]
#[feed(retention = "7d", shares = 8)]
struct Employee {
    department: String,
    id: u32,
    name: String,
}

const DEPARTMENTS: [&str; 6] = ["sales", "ops", "it", "legal", "hr", "finance"];

/// A read model kept idempotent: per employee the newest change seen, so a change
/// delivered again (after a crash) or older than one already seen changes nothing.
#[derive(Default)]
struct Headcount {
    /// Employee id → (version, department), `None` department once gone.
    employees: BTreeMap<u32, (i64, Option<String>)>,
}

impl Headcount {
    fn apply(&mut self, change: &Change<Employee>) {
        // A transfer deletes the employee in one partition and inserts it in another:
        // the key of an employee here is its id with its department.
        let id = change.value.id;
        let department = change.value.department.clone();
        let entry = self
            .employees
            .entry(key(id, &department))
            .or_insert((i64::MIN, None));
        if change.version <= entry.0 {
            return;
        }
        *entry = match change.change {
            ChangeKind::Delete => (change.version, None),
            _ => (change.version, Some(department)),
        };
    }

    fn per_department(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for (_, department) in self.employees.values() {
            if let Some(department) = department {
                *counts.entry(department.clone()).or_default() += 1;
            }
        }
        counts
    }
}

use tablekit::patterns::changes::ChangeKind;

/// One key per (employee, department): ids below 100,000, six departments.
fn key(id: u32, department: &str) -> u32 {
    let d = DEPARTMENTS
        .iter()
        .position(|d| *d == department)
        .unwrap_or(0) as u32;
    d * 100_000 + id
}

/// The consumer of a group, as a task that can be killed.
fn consume(
    store: SqliteStore,
    group: &str,
    member: &str,
    model: Arc<Mutex<Headcount>>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> tablekit::Result<tokio::task::JoinHandle<tablekit::Result<u64>>> {
    let consumer = Feed::<Employee>::group(store, group)?
        .member(member)?
        .from(Position::Beginning)
        .lease(Duration::from_secs(1))
        .idle(Duration::from_millis(20));
    Ok(tokio::spawn(async move {
        let worker = consumer.consume(move |change: Change<Employee>| {
            let model = model.clone();
            async move {
                model
                    .lock()
                    .map_err(|_| OperationError::Permanent("poisoned".into()))?
                    .apply(&change);
                Ok(())
            }
        });
        let mut stop = stop;
        let report = worker
            .run(async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await?;
        Ok(report.handled)
    }))
}

/// The headcount by scanning the table, one partition per department.
async fn count_by_scan(
    employees: &IndexedTable<Employee, SqliteStore>,
) -> tablekit::Result<BTreeMap<String, usize>> {
    let mut counts = BTreeMap::new();
    for department in DEPARTMENTS {
        let n = employees.primary().key(department).all().await?.len();
        if n > 0 {
            counts.insert(department.to_owned(), n);
        }
    }
    Ok(counts)
}

/// Waits until the read model equals the count by scan (or gives up after 20 s).
async fn settle(
    model: &Arc<Mutex<Headcount>>,
    employees: &IndexedTable<Employee, SqliteStore>,
) -> tablekit::Result<BTreeMap<String, usize>> {
    let expected = count_by_scan(employees).await?;
    for _ in 0..400 {
        let now = model.lock().map(|m| m.per_department()).unwrap_or_default();
        if now == expected {
            return Ok(now);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(tablekit::Error::Unsupported(format!(
        "the read model did not settle: {:?} vs {expected:?}",
        model.lock().map(|m| m.per_department()).unwrap_or_default()
    )))
}

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let dir = tempfile::tempdir().map_err(|e| tablekit::Error::Unsupported(e.to_string()))?;
    let store = SqliteStore::create(dir.path().join("company.db")).await?;
    let employees = IndexedTable::<Employee, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())?;
    employees.create().await?;

    // The relay sequences the changes into the feed's log as they come.
    let (stop_relay, relay_stopped) = tokio::sync::watch::channel(false);
    let relay = Relay::options().alone().build(
        store.clone(),
        Arc::new(InlineSink::new(handlers(store.clone(), None))),
    );
    let relay = tokio::spawn(async move {
        let mut stopped = relay_stopped;
        relay
            .run(Duration::from_millis(20), async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await;
    });

    // 150 hires.
    for id in 0..150 {
        let department = DEPARTMENTS[id as usize % DEPARTMENTS.len()];
        employees
            .insert(&Employee {
                department: department.into(),
                id,
                name: format!("employee {id}"),
            })
            .await?;
    }
    println!("hired 150 employees in {} departments", DEPARTMENTS.len());

    // The `headcount` group reads from the beginning; its consumer is killed midway.
    let model = Arc::new(Mutex::new(Headcount::default()));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let first = consume(
        store.clone(),
        "headcount",
        "first",
        model.clone(),
        stopped.clone(),
    )?;
    while model.lock().map(|m| m.employees.len()).unwrap_or(0) < 100 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.abort();
    let _ = first.await;
    println!(
        "headcount: its consumer killed after {} employees",
        model.lock().map(|m| m.employees.len()).unwrap_or(0)
    );

    // 150 more hires, transfers and departures while nobody reads.
    for id in 150..300 {
        let department = DEPARTMENTS[id as usize % DEPARTMENTS.len()];
        employees
            .insert(&Employee {
                department: department.into(),
                id,
                name: format!("employee {id}"),
            })
            .await?;
    }
    for id in (0..300).step_by(10) {
        let from = DEPARTMENTS[id as usize % DEPARTMENTS.len()];
        employees
            .delete(from, &format!("{id:05}"), IfMatch::Any)
            .await?;
        if id % 20 == 0 {
            let to = DEPARTMENTS[(id as usize + 1) % DEPARTMENTS.len()];
            employees
                .insert(&Employee {
                    department: to.into(),
                    id,
                    name: format!("employee {id}"),
                })
                .await?;
        }
    }
    println!("150 more hires, 15 transfers and 15 departures");

    // A new member of the group goes on from the checkpoint once the lease lapses.
    let second = consume(
        store.clone(),
        "headcount",
        "second",
        model.clone(),
        stopped.clone(),
    )?;
    let counts = settle(&model, &employees).await?;
    println!("headcount (restarted): {counts:?} — equal to a count by scan");

    // Retention trims the whole log; a second group rebuilds from scratch.
    let trimmed = feed::trim(&store, "Employees", 8, Duration::ZERO).await?;
    println!(
        "retention trimmed {} changes: the log starts later than the beginning",
        trimmed.deleted
    );
    employees
        .insert(&Employee {
            department: "it".into(),
            id: 999,
            name: "late hire".into(),
        })
        .await?;
    let rebuilt = Arc::new(Mutex::new(Headcount::default()));
    let third = consume(
        store.clone(),
        "headcount-v2",
        "rebuild",
        rebuilt.clone(),
        stopped,
    )?;
    let counts_v2 = settle(&rebuilt, &employees).await?;
    println!("headcount-v2 (from a snapshot of the table, then the log): {counts_v2:?}");
    let counts = settle(&model, &employees).await?;
    println!("headcount, still following: {counts:?}");

    let _ = stop.send(true);
    let _ = stop_relay.send(true);
    let handled = second
        .await
        .map_err(|e| tablekit::Error::Unsupported(e.to_string()))??;
    let rebuilt_handled = third
        .await
        .map_err(|e| tablekit::Error::Unsupported(e.to_string()))??;
    let _ = relay.await;
    println!("the restarted member handled {handled} changes, the rebuild {rebuilt_handled}");
    Ok(())
}
