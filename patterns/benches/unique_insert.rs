//! The cost of a unique value (`#[unique]`), side by side in one run: inserting an entity
//! through `IndexedTable` whose type declares a unique email (the reservation, then the
//! primary: two transactions) against the same insert of a type that declares none (the
//! primary alone), on the same store. The target is at most 2x.
//!
//! `cargo bench -p tablekit-patterns --bench unique_insert` (`BENCH_INSERTS` per path and
//! round, default 2000; `BENCH_ROUNDS`, default 5; `BENCH_STORE`, a store connection
//! string, default a fresh SQLite file — `azure:UseDevelopmentStorage=true` measures
//! Azurite, with the `azure` feature). Rounds alternate the two paths; the medians are
//! printed.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::time::Instant;

use tablekit_core::{AnyStore, SqliteStore};
use tablekit_derive::Entity;
use tablekit_patterns::index::{AuditOptions, IndexedTable};

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Plain",
    kind = "User",
    partition_key = "{team}",
    row_key = "u_{id:06}",
    crate = "tablekit_core"
)]
struct Plain {
    team: String,
    id: u32,
    name: String,
    email: String,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Users",
    kind = "User",
    partition_key = "{team}",
    row_key = "u_{id:06}",
    crate = "tablekit_core"
)]
#[unique(name = "email", key = "{email}")]
struct Unique {
    team: String,
    id: u32,
    name: String,
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
                println!("store: SQLite file");
                AnyStore::Sqlite(SqliteStore::create(dir.path().join("bench.db")).await.unwrap())
            }
        };
        let plain = IndexedTable::<Plain, _>::options()
            .build(store.clone())
            .unwrap();
        plain.create().await.unwrap();
        // Inserts only: no value is released, so no follow-up work is left to a relay.
        let unique = IndexedTable::<Unique, _>::options()
            .follow_up_elsewhere()
            .build(store.clone())
            .unwrap();
        unique.create().await.unwrap();
        let team = |id: u32| format!("T{:02}", id % 20);
        let (mut plain_us, mut unique_us) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let base = u32::try_from(round * inserts).unwrap();
            let started = Instant::now();
            for n in 0..u32::try_from(inserts).unwrap() {
                let id = base + n;
                plain
                    .insert(&Plain {
                        team: team(id),
                        id,
                        name: "Jun Cao".into(),
                        email: format!("u{id}@contoso.com"),
                    })
                    .await
                    .unwrap();
            }
            plain_us.push(started.elapsed().as_secs_f64() * 1e6 / inserts as f64);
            let started = Instant::now();
            for n in 0..u32::try_from(inserts).unwrap() {
                let id = base + n;
                unique
                    .insert(&Unique {
                        team: team(id),
                        id,
                        name: "Jun Cao".into(),
                        email: format!("u{id}@contoso.com"),
                    })
                    .await
                    .unwrap();
            }
            unique_us.push(started.elapsed().as_secs_f64() * 1e6 / inserts as f64);
            println!(
                "round {round}: plain {:.1} µs/insert, with a unique value {:.1} µs/insert",
                plain_us[round], unique_us[round]
            );
        }
        let (p, u) = (median(plain_us), median(unique_us));
        println!(
            "insert, median of {rounds} rounds of {inserts}: plain {p:.1} µs ({:.0}/s), with a unique value {u:.1} µs ({:.0}/s): {:.2}x (target at most 2x)",
            1e6 / p,
            1e6 / u,
            u / p
        );
        let report = unique.audit(&AuditOptions::default()).await.unwrap();
        assert!(report.is_clean(), "{report:?}");
        println!(
            "audit: {} entities ({} primaries, {} reservations checked) in {:.2} s",
            report.scanned, report.primaries, report.checked, report.seconds
        );
    });
}
