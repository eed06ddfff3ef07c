//! Our Table REST client against Microsoft's Python SDK (azure-data-tables), the same
//! operations on the same Azurite in one run: point get, upsert, 100-operation batch and a
//! 1,000-entity query. Rounds interleave the two; medians are printed.
//!
//! `scripts/bench-azure.sh` installs the Python SDK into a virtual environment, makes sure
//! Azurite runs, and runs this (`PYTHON` names the interpreter; `BENCH_ROUNDS`, default 3).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

use tablekit_core::{AzureTableStore, Batch, Entity, Query, TableStore};

const GETS: usize = 300;
const UPSERTS: usize = 300;
const BATCHES: usize = 20;
const QUERIES: usize = 20;

async fn ours(store: &AzureTableStore, table: &str) -> BTreeMap<&'static str, f64> {
    let mut rates = BTreeMap::new();
    let started = Instant::now();
    for _ in 0..GETS {
        store
            .get(table, "query", "r000500", None)
            .await
            .unwrap()
            .unwrap();
    }
    rates.insert("point get", GETS as f64 / started.elapsed().as_secs_f64());

    let started = Instant::now();
    for i in 0..UPSERTS {
        let e = Entity::new("upsert", format!("r{i:06}"))
            .with("N", i as i32)
            .with("Name", "rust");
        store.insert_or_replace(table, e).await.unwrap();
    }
    rates.insert("upsert", UPSERTS as f64 / started.elapsed().as_secs_f64());

    let started = Instant::now();
    for b in 0..BATCHES {
        let mut batch = Batch::new();
        for i in 0..100 {
            batch.insert_or_replace(
                Entity::new(format!("batch{b}"), format!("r{i:03}"))
                    .with("N", i)
                    .with("Name", "rust"),
            );
        }
        store.submit_batch(table, batch).await.unwrap();
    }
    rates.insert(
        "100-op batch",
        BATCHES as f64 / started.elapsed().as_secs_f64(),
    );

    let started = Instant::now();
    for _ in 0..QUERIES {
        let rows = store
            .query_all(table, Query::partition("query"))
            .await
            .unwrap();
        assert_eq!(rows.len(), 1000);
    }
    rates.insert(
        "1,000-entity query",
        QUERIES as f64 / started.elapsed().as_secs_f64(),
    );
    rates
}

fn python(table: &str) -> BTreeMap<String, f64> {
    let interpreter = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/azure_python_baseline.py"
    );
    let output = Command::new(interpreter)
        .args([script, table])
        .args([GETS, UPSERTS, BATCHES, QUERIES].map(|n| n.to_string()))
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "the Python baseline failed (is azure-data-tables installed? scripts/bench-azure.sh installs it): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the baseline prints JSON")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let store = AzureTableStore::connect("UseDevelopmentStorage=true").unwrap();
    let table = format!("bench{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    store.create_table(&table).await.unwrap();
    for chunk in 0..10 {
        let mut batch = Batch::new();
        for i in 0..100 {
            let n = chunk * 100 + i;
            batch.insert(
                Entity::new("query", format!("r{n:06}"))
                    .with("N", n)
                    .with("Name", "seed"),
            );
        }
        store.submit_batch(&table, batch).await.unwrap();
    }
    let mut mine: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut theirs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for round in 1..=rounds {
        for (op, rate) in ours(&store, &table).await {
            mine.entry(op).or_default().push(rate);
        }
        for (op, rate) in python(&table) {
            theirs.entry(op).or_default().push(rate);
        }
        println!("round {round} done");
    }
    println!("\n{rounds} rounds, medians (operations per second, higher is better):");
    println!(
        "{:<20} {:>12} {:>14} {:>8}",
        "operation", "tablekit", "azure-data-tables", "ratio"
    );
    for (op, rates) in mine {
        let ours = median(rates);
        let python = median(theirs.get(op).cloned().unwrap_or_default());
        println!(
            "{op:<20} {ours:>12.0} {python:>14.0} {:>7.2}x",
            ours / python
        );
    }
    store.delete_table(&table).await.unwrap();
}
