//! The cost of an intra-partition secondary index, side by side in one run: inserting an
//! entity through `IndexedTable` with one same-partition index (the primary and its copy
//! in one entity group transaction, plus the index record) against a plain typed insert
//! of the same entity on the same SQLite file. Then the audit's scan rate over what was
//! written (entities per second, primaries and copies).
//!
//! `cargo bench -p tablekit-patterns --bench index_overhead` (`BENCH_INSERTS` per path
//! and round, default 2000; `BENCH_ROUNDS`, default 5; `BENCH_STORE`, a store connection
//! string, default a fresh SQLite file — `azure:UseDevelopmentStorage=true` measures
//! Azurite, with the `azure` feature; `BENCH_SYNC=full` opens the SQLite file with
//! `synchronous=FULL`). Rounds alternate the two paths; the medians are printed.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::time::Instant;

use tablekit_core::sqlite::Synchronous;
use tablekit_core::typed::Table;
use tablekit_core::{AnyStore, SqliteOptions, SqliteStore};
use tablekit_derive::Entity;
use tablekit_patterns::index::{AuditOptions, IndexedTable};

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Plain",
    kind = "Employee",
    partition_key = "{department}",
    row_key = "empid_{id:06}",
    crate = "tablekit_core"
)]
struct Plain {
    department: String,
    id: u32,
    first_name: String,
    last_name: String,
    age: i32,
    email: String,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Indexed",
    kind = "Employee",
    partition_key = "{department}",
    row_key = "empid_{id:06}",
    crate = "tablekit_core"
)]
#[index(
    name = "email",
    partition_key = "{department}",
    row_key = "email_{email}"
)]
struct Indexed {
    department: String,
    id: u32,
    first_name: String,
    last_name: String,
    age: i32,
    email: String,
}

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

/// The same comparison one layer down, for reference: raw rusqlite on a file with the
/// SQLite backend's table layout and pragmas, one row per transaction against two rows
/// (the primary and its copy, on different pages) in one transaction. Returns the median
/// µs of each.
fn raw_sqlite(dir: &std::path::Path, inserts: usize, rounds: usize, full: bool) -> (f64, f64) {
    use rusqlite::{Connection, params};
    let conn = Connection::open(dir.join("raw.db")).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", if full { "FULL" } else { "NORMAL" })
        .unwrap();
    for t in ["one", "two"] {
        conn.execute(
            &format!(
                "CREATE TABLE {t} (pk TEXT NOT NULL, rk TEXT NOT NULL, ts INTEGER NOT NULL, \
                 etag TEXT NOT NULL, props BLOB NOT NULL, PRIMARY KEY (pk, rk)) WITHOUT ROWID"
            ),
            [],
        )
        .unwrap();
    }
    let props = vec![7u8; 350];
    let (mut one_us, mut two_us) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let started = Instant::now();
        for i in 0..inserts {
            let id = round * inserts + i;
            let mut insert = conn
                .prepare_cached("INSERT INTO one VALUES (?1, ?2, 1, 'e', ?3)")
                .unwrap();
            insert
                .execute(params![
                    format!("D{:02}", id % 20),
                    format!("empid_{id:06}"),
                    props
                ])
                .unwrap();
        }
        one_us.push(started.elapsed().as_secs_f64() * 1e6 / inserts as f64);
        let started = Instant::now();
        for i in 0..inserts {
            let id = round * inserts + i;
            let tx = conn.unchecked_transaction().unwrap();
            {
                let mut insert = tx
                    .prepare_cached("INSERT INTO two VALUES (?1, ?2, 1, 'e', ?3)")
                    .unwrap();
                let pk = format!("D{:02}", id % 20);
                insert
                    .execute(params![pk, format!("empid_{id:06}"), props])
                    .unwrap();
                insert
                    .execute(params![pk, format!("email_e{id}@contoso.com"), props])
                    .unwrap();
            }
            tx.commit().unwrap();
        }
        two_us.push(started.elapsed().as_secs_f64() * 1e6 / inserts as f64);
    }
    (median(one_us), median(two_us))
}

fn main() {
    let inserts = env_usize("BENCH_INSERTS", 2000);
    let rounds = env_usize("BENCH_ROUNDS", 5);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = match std::env::var("BENCH_STORE") {
            Ok(url) => {
                let url = if url.starts_with("azure:") {
                    format!("{url};TablePrefix=b{}", uuid::Uuid::new_v4().simple())
                } else {
                    url
                };
                println!("store: {}", url.split(';').next().unwrap_or_default());
                AnyStore::create(&url).await.unwrap()
            }
            Err(_) => {
                // `BENCH_SYNC=full`: every commit on disk before it returns.
                let full = std::env::var("BENCH_SYNC").is_ok_and(|s| s == "full");
                let options = SqliteOptions {
                    synchronous: if full { Synchronous::Full } else { Synchronous::Normal },
                    ..SqliteOptions::default()
                };
                println!("store: SQLite file, synchronous={}", if full { "FULL" } else { "NORMAL" });
                AnyStore::Sqlite(
                    SqliteStore::open_with(dir.path().join("bench.db"), options)
                        .await
                        .unwrap(),
                )
            }
        };
        let plain = Table::<Plain, _>::new(store.clone());
        plain.create().await.unwrap();
        let indexed = IndexedTable::<Indexed, _>::options()
            .build(store.clone())
            .unwrap();
        indexed.create().await.unwrap();
        let department = |id: u32| format!("D{:02}", id % 20);
        let (mut plain_us, mut indexed_us) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let base = u32::try_from(round * inserts).unwrap();
            let started = Instant::now();
            for n in 0..u32::try_from(inserts).unwrap() {
                let id = base + n;
                plain
                    .insert(&Plain {
                        department: department(id),
                        id,
                        first_name: "Jun".into(),
                        last_name: "Cao".into(),
                        age: 30,
                        email: format!("e{id}@contoso.com"),
                    })
                    .await
                    .unwrap();
            }
            plain_us.push(started.elapsed().as_secs_f64() * 1e6 / inserts as f64);
            let started = Instant::now();
            for n in 0..u32::try_from(inserts).unwrap() {
                let id = base + n;
                indexed
                    .insert(&Indexed {
                        department: department(id),
                        id,
                        first_name: "Jun".into(),
                        last_name: "Cao".into(),
                        age: 30,
                        email: format!("e{id}@contoso.com"),
                    })
                    .await
                    .unwrap();
            }
            indexed_us.push(started.elapsed().as_secs_f64() * 1e6 / inserts as f64);
            println!(
                "round {round}: plain {:.1} µs/insert, indexed {:.1} µs/insert",
                plain_us[round], indexed_us[round]
            );
        }
        let (p, i) = (median(plain_us), median(indexed_us));
        println!(
            "insert, median of {rounds} rounds of {inserts}: plain {p:.1} µs ({:.0}/s), with one intra-partition index {i:.1} µs ({:.0}/s): {:.2}x (target at most 1.3x)",
            1e6 / p,
            1e6 / i,
            i / p
        );
        if std::env::var("BENCH_STORE").is_err() {
            let full = std::env::var("BENCH_SYNC").is_ok_and(|s| s == "full");
            let (one, two) = raw_sqlite(dir.path(), inserts, rounds, full);
            println!(
                "reference, raw rusqlite on the same layout: one row per transaction {one:.1} µs, two rows in one transaction {two:.1} µs: {:.2}x",
                two / one
            );
        }
        let report = indexed.audit(&AuditOptions::default()).await.unwrap();
        assert!(report.is_clean(), "{report:?}");
        println!(
            "audit: {} entities ({} primaries, {} copies checked) in {:.2} s: {:.0} entities/s",
            report.scanned,
            report.primaries,
            report.checked,
            report.seconds,
            report.rate()
        );
    });
}
