//! Parallel bulk import against sequential import, in one run: the same entities written
//! one at a time, and through `bulk_import` (per-partition entity group transactions of
//! up to 100, shuffled, 8 at a time), into fresh tables of the same store.
//!
//! `cargo bench -p tablekit-patterns --bench bulk_import` (`BENCH_ENTITIES`, default
//! 10000, over 100 partitions; `BENCH_STORE`, a store connection string, default a fresh
//! SQLite file — `azure:UseDevelopmentStorage=true` with `--features azure` measures
//! Azurite).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::time::Instant;

use tablekit_core::{AnyStore, Entity, TableStore};
use tablekit_patterns::import::{bulk_import, sequential_import};

fn main() {
    let n: usize = std::env::var("BENCH_ENTITIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let url = match std::env::var("BENCH_STORE") {
            Ok(url) if url.starts_with("azure:") => {
                format!("{url};TablePrefix=b{}", uuid::Uuid::new_v4().simple())
            }
            Ok(url) => url,
            Err(_) => format!("sqlite:{}", dir.path().join("import.db").display()),
        };
        let store = AnyStore::create(&url).await.unwrap();
        println!("store: {}", url.split(';').next().unwrap_or_default());
        let entities: Vec<Entity> = (0..n)
            .map(|i| {
                Entity::new(format!("p{:03}", i % 100), format!("{i:08}"))
                    .with("Name", format!("name {i}"))
                    .with("Amount", i64::try_from(i).unwrap())
            })
            .collect();
        store.create_table("Sequential").await.unwrap();
        store.create_table("Parallel").await.unwrap();
        let started = Instant::now();
        sequential_import(&store, "Sequential", entities.clone()).await.unwrap();
        let sequential = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let report = bulk_import(&store, "Parallel", entities, 8, |_, _| {}).await.unwrap();
        let parallel = started.elapsed().as_secs_f64();
        assert_eq!(report.written, n);
        assert!(report.failed.is_empty());
        println!(
            "{n} entities: sequential {:.2} s ({:.0}/s), parallel bulk import {:.2} s ({:.0}/s, {} batches): {:.1}x faster",
            sequential,
            n as f64 / sequential,
            parallel,
            n as f64 / parallel,
            report.batches,
            sequential / parallel
        );
    });
}
