//! The expiry sweeper's cost against the size of the table it serves: one
//! `Sweeper::sweep` pass deleting 1,000 expired entities from tables of 10^4 and 10^5
//! (and, with `BENCH_SIZES`, 10^6) entities of an expiring type, next to what a sweeper
//! without the expiry index would do to find them — filter the whole table on the expiry
//! property (`TablekitExpires le datetime'…'`), timed on the same table in the same run.
//! The sweeper reads the expiry index's entries of the hours up to now, so its median
//! should not grow with the table (target: at most 1.2x from 10^4 to 10^5); the scan's
//! grows with it.
//!
//! Each table holds entities of `Invite` (an `#[entity(expires)]` field and a unique
//! value), over `min(1000, n / 100)` partitions: `n - 1000` expire in 30 days, 1,000 a
//! minute after the start. They are written as an `IndexedTable` writes them (the
//! primary with its index record; the expiry entry in `<table>Expiry`; the reservation of
//! its unique code), by `bulk_import` in entity group transactions (not measured). The
//! clock stands two minutes after the start. Before each pass the 1,000 expired
//! entities are written again; the pass deletes each through the indexed delete, its
//! follow-up work (the expiry entry, the reservation) applied inline, and its
//! `SweepReport` is checked (1,000 deleted), so the bench cannot time an empty pass.
//! The tables take turns pass by pass, so a disturbance of the machine falls on every
//! size alike.
//!
//! Besides the whole pass, each round times the sweeper's find alone (the expiry index's
//! query) next to the scan, both finding the same 1,000 entities.
//!
//! `cargo bench -p tablekit-patterns --bench expiry_sweep` (`BENCH_SIZES`, default
//! `10000,100000`; `BENCH_PASSES`, default 7). SQLite files in a temporary directory.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Duration, Utc};
use tablekit_core::clock::ManualClock;
use tablekit_core::typed::{EXPIRES_PROPERTY, EntityType, Record};
use tablekit_core::{AnyStore, Entity as Row, Query, TableStore, Value, filter};
use tablekit_derive::Entity;
use tablekit_patterns::import::bulk_import;
use tablekit_patterns::index::internals::expiry::{
    EXPIRY_INDEX, entry_target, expired_query, expiry_table,
};
use tablekit_patterns::index::record::{CopyTarget, UniqueTarget};
use tablekit_patterns::index::record::{copy_of, next_version};
use tablekit_patterns::index::unique::Reservation;
use tablekit_patterns::index::{
    EntityRef, IndexRecord, IndexedTable, InlineSink, Sweeper, Target, handlers,
};

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Invites",
    kind = "Invite",
    partition_key = "{team}",
    row_key = "{code}",
    crate = "tablekit_core"
)]
#[unique(name = "code", key = "{code}")]
struct Invite {
    team: String,
    code: String,
    email: String,
    #[entity(expires)]
    ends: Option<DateTime<Utc>>,
}

const EXPIRED: usize = 1000;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn start() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-24T10:15:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn table_name(n: usize) -> String {
    format!("Invites{n}")
}

/// The rows an indexed write of `invite` leaves: the primary (in `table`), its expiry
/// entry, its reservation.
fn rows_of(invite: &Invite, table: &str) -> (Row, Row, Row) {
    let mut primary = invite.to_entity().unwrap();
    let source = EntityRef::new(table, &primary.partition_key, &primary.row_key);
    let version = next_version(None);
    let ends = invite.ends.unwrap();
    let entry = entry_target(&source, ends);
    let reservation_at = EntityRef::new(
        format!("{table}Unique"),
        invite.code.clone(),
        "code".to_owned(),
    );
    let mut targets = std::collections::BTreeSet::new();
    targets.insert(entry.clone());
    targets.insert(Target::from(UniqueTarget {
        name: "code".to_owned(),
        at: reservation_at.clone(),
    }));
    IndexRecord { version, targets }
        .write(&mut primary)
        .unwrap();
    let Some(CopyTarget { at, .. }) = entry.get::<CopyTarget>() else {
        unreachable!("an expiry entry is a copy")
    };
    let entry = copy_of(
        &primary,
        &source,
        version,
        EXPIRY_INDEX,
        at,
        Some(&[]),
        Invite::KIND_PROPERTY,
    )
    .unwrap();
    let reservation = Reservation {
        at: reservation_at,
        name: "code".to_owned(),
        holder: source,
        version,
        lease_until: start(),
        intent: None,
        etag: None,
    }
    .entity()
    .unwrap();
    (primary, entry, reservation)
}

async fn import(store: &AnyStore, table: &str, rows: Vec<Row>) {
    let count = rows.len();
    let report = bulk_import(store, table, rows, 8, |_, _| {}).await.unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failed.first());
    assert_eq!(report.written, count);
}

/// Writes `invites` as indexed writes would, in bulk.
async fn write(store: &AnyStore, table: &str, invites: impl Iterator<Item = Invite>) {
    let (mut primaries, mut entries, mut reservations) = (Vec::new(), Vec::new(), Vec::new());
    for invite in invites {
        let (p, e, r) = rows_of(&invite, table);
        primaries.push(p);
        entries.push(e);
        reservations.push(r);
        if primaries.len() == 50_000 {
            import(store, table, std::mem::take(&mut primaries)).await;
            import(store, &expiry_table(table), std::mem::take(&mut entries)).await;
            import(
                store,
                &format!("{table}Unique"),
                std::mem::take(&mut reservations),
            )
            .await;
        }
    }
    import(store, table, primaries).await;
    import(store, &expiry_table(table), entries).await;
    import(store, &format!("{table}Unique"), reservations).await;
}

fn invite(i: usize, partitions: usize, ends: DateTime<Utc>, tag: &str) -> Invite {
    Invite {
        team: format!("t{:04}", i % partitions),
        code: format!("{tag}{i:07}"),
        email: format!("guest{i}@contoso.com"),
        ends: Some(ends),
    }
}

struct Subject {
    n: usize,
    table: String,
    partitions: usize,
    store: AnyStore,
    sweeper: Sweeper<AnyStore>,
    sweeps: Vec<f64>,
    finds: Vec<f64>,
    scans: Vec<f64>,
    entries: usize,
}

impl Subject {
    async fn open(store: AnyStore, n: usize, clock: &ManualClock) -> Self {
        let table = table_name(n);
        // Only opened here: the sweeper applies the deletes' follow-up work inline.
        let invites = IndexedTable::<Invite, _>::options()
            .name(&table)
            .follow_up_elsewhere()
            .build(store.clone())
            .unwrap();
        invites.create().await.unwrap();
        let partitions = (n / 100).clamp(1, 1000);
        let started = Instant::now();
        let late = start() + Duration::days(30);
        write(
            &store,
            &table,
            (0..n - EXPIRED).map(|i| invite(i, partitions, late, "late")),
        )
        .await;
        println!(
            "seeded {table}: {} entities over {partitions} partitions in {:.1} s",
            n - EXPIRED,
            started.elapsed().as_secs_f64()
        );
        let sweeper = Sweeper::options()
            .sink(Arc::new(InlineSink::new(handlers(store.clone(), None))))
            .clock(clock.shared())
            .tables(vec![table.clone()])
            .build(store.clone());
        Subject {
            n,
            table,
            partitions,
            store,
            sweeper,
            sweeps: Vec::new(),
            finds: Vec::new(),
            scans: Vec::new(),
            entries: 0,
        }
    }

    async fn expire_some(&self) {
        let soon = start() + Duration::minutes(1);
        write(
            &self.store,
            &self.table,
            (0..EXPIRED).map(|i| invite(i * 7919 % self.n, self.partitions, soon, "soon")),
        )
        .await;
    }

    /// The baseline: the whole table filtered on the expiry property.
    async fn scan(&mut self, now: DateTime<Utc>) {
        let started = Instant::now();
        let found = self
            .store
            .query_all(
                &self.table,
                Query::with_filter(
                    filter::property_named(EXPIRES_PROPERTY).le(Value::DateTime(now)),
                ),
            )
            .await
            .unwrap();
        self.scans.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            found.len(),
            EXPIRED,
            "the baseline finds the expired entities"
        );
    }

    /// The sweeper's own way to find them: the expiry index's entries up to now.
    async fn find(&mut self, now: DateTime<Utc>) {
        let started = Instant::now();
        let found = self
            .store
            .query_all(&expiry_table(&self.table), expired_query(now))
            .await
            .unwrap();
        self.finds.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            found.len(),
            EXPIRED,
            "the expiry index finds the expired entities"
        );
    }

    async fn sweep(&mut self) {
        let started = Instant::now();
        let report = self.sweeper.sweep().await.unwrap();
        self.sweeps.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            (report.deleted, report.entries),
            (EXPIRED, EXPIRED),
            "{report:?}"
        );
        self.entries = report.entries;
    }
}

fn main() {
    let passes = env_usize("BENCH_PASSES", 7).max(1);
    let mut sizes: Vec<usize> = std::env::var("BENCH_SIZES")
        .unwrap_or_else(|_| "10000,100000".to_owned())
        .split(',')
        .map(|s| s.trim().replace('_', "").parse().expect("BENCH_SIZES"))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let clock = ManualClock::new(start() + Duration::minutes(2));
        let mut subjects = Vec::new();
        for &n in &sizes {
            let path = dir.path().join(format!("expiry_{n}.db"));
            let store = AnyStore::create(&format!("sqlite:{}", path.display()))
                .await
                .unwrap();
            subjects.push(Subject::open(store, n, &clock).await);
        }
        let now = start() + Duration::minutes(2);
        for _ in 0..passes {
            for subject in &mut subjects {
                subject.expire_some().await;
                subject.scan(now).await;
                subject.find(now).await;
                subject.sweep().await;
            }
        }
        println!("expiry sweep of {EXPIRED} expired entities ({passes} passes, SQLite):");
        for s in &subjects {
            println!(
                "  {:>7} entities: sweeper pass (find + 1000 indexed deletes) median {:.1} ms; finding them through the expiry index median {:.2} ms ({} entries read) vs scanning the table median {:.2} ms ({} rows read): {:.1}x",
                s.n,
                median(s.sweeps.clone()),
                median(s.finds.clone()),
                s.entries,
                median(s.scans.clone()),
                s.n,
                median(s.scans.clone()) / median(s.finds.clone())
            );
        }
        let (first, last) = (&subjects[0], &subjects[subjects.len() - 1]);
        let growth = median(last.sweeps.clone()) / median(first.sweeps.clone());
        let find_growth = median(last.finds.clone()) / median(first.finds.clone());
        let scan_growth = median(last.scans.clone()) / median(first.scans.clone());
        println!(
            "growth {} -> {} entities: sweeper pass {growth:.2}x (target at most 1.2x), its find {find_growth:.2}x; baseline scan {scan_growth:.2}x",
            first.n, last.n
        );
    });
}
