//! The archive worker on Azure Queue Storage, side by side in one run with the same worker
//! on RabbitMQ over the same Azurite tables, and with the loop an Azure user would write
//! with the Python SDK (`azure-storage-queue`: send N, receive 32 at a time, delete each;
//! no table work at all).
//!
//! `scripts/bench-azure.sh` installs the SDK and runs this (`PYTHON` names the
//! interpreter; `BENCH_MESSAGES` the count, default 1000; `BENCH_ROUNDS` the rounds,
//! default 3; `AMQP_URL` the broker). Each round runs every path once; medians are printed.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

mod support;

use std::process::Command;
use std::time::Duration;

use support::{env_usize, median, seed, through_worker};
use tablekit_core::AzureTableStore;
use tablekit_workers::WorkerConfig;
use tablekit_workers::queue::azure::AzureQueue;
use tablekit_workers::queue::rabbit::RabbitQueue;

/// Azurite's account, spelled out (the Python SDK reads this form).
const AZURITE: &str = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1";

fn unique() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_owned()
}

/// A fresh set of Azurite tables, seeded with the N entities to archive.
async fn seeded_tables(n: usize) -> AzureTableStore {
    let store = AzureTableStore::options()
        .table_prefix(format!("b{}", unique()))
        .connect("UseDevelopmentStorage=true")
        .unwrap();
    seed(&store, n).await;
    store
}

fn python(n: usize) -> f64 {
    let interpreter = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/azure_queue_python_baseline.py"
    );
    let output = Command::new(interpreter)
        .args([script, AZURITE, &format!("py-{}", unique()), &n.to_string()])
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "the Python baseline failed (is azure-storage-queue installed? scripts/bench-azure.sh installs it): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the baseline prints JSON");
    result["rate"].as_f64().expect("a rate")
}

#[tokio::main]
async fn main() {
    let n = env_usize("BENCH_MESSAGES", 1000);
    let rounds = env_usize("BENCH_ROUNDS", 3);
    let url = support::amqp_url();
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    let (mut azure, mut rabbit, mut empty, mut py) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        let queue = AzureQueue::connect(AZURITE).unwrap();
        let name = format!("bench-{}", unique());
        let azure_rate =
            rate(through_worker(queue.clone(), &name, Some(seeded_tables(n).await), n).await);
        queue.delete_queue(&name).await.unwrap();

        let name = format!("bench-{}", unique());
        let empty_rate =
            rate(through_worker(queue.clone(), &name, None::<AzureTableStore>, n).await);
        queue.delete_queue(&name).await.unwrap();

        let rabbit_queue = RabbitQueue::connect(&url).await.unwrap();
        let name = format!("bench-{}", unique());
        let rabbit_rate = rate(
            through_worker(rabbit_queue.clone(), &name, Some(seeded_tables(n).await), n).await,
        );
        rabbit_queue
            .delete_queue(&name, &WorkerConfig::new(&name).queue_options())
            .await
            .unwrap();

        let python_rate = python(n);
        println!(
            "round {round}: worker on Azure queues {azure_rate:.0} ops/s (empty handler {empty_rate:.0}) | worker on RabbitMQ {rabbit_rate:.0} ops/s | Python SDK loop {python_rate:.0} msg/s"
        );
        azure.push(azure_rate);
        rabbit.push(rabbit_rate);
        empty.push(empty_rate);
        py.push(python_rate);
    }
    let (azure, rabbit, empty, py) = (median(azure), median(rabbit), median(empty), median(py));
    println!("\n{n} messages, {rounds} rounds, medians (Azurite tables for both workers):");
    println!("  archive worker on Azure queues     {azure:>8.0} ops/s");
    println!("  worker on Azure queues, no tables  {empty:>8.0} msg/s");
    println!(
        "  archive worker on RabbitMQ         {rabbit:>8.0} ops/s  (Azure queues at {:.2}x)",
        azure / rabbit
    );
    println!(
        "  Python azure-storage-queue loop    {py:>8.0} msg/s  (the worker at {:.2}x)",
        azure / py
    );
}
