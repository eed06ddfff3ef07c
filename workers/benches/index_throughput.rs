//! Deliveries per second of the index worker on a networked store: N writes' index work
//! (each the copy of one employee in another table) waits on RabbitMQ, then 1, 2 or 4
//! worker processes (this binary, started again as a child) consume it over one SQLite
//! file, every store call of theirs delayed by the round-trip model
//! (`tablekit_core::roundtrip`, `BENCH_LATENCY_MS`, default 5). The work is round-trip
//! bound, so processes add up even on two cores; the same work with no delay is the
//! baseline of the store itself.
//!
//! `cargo bench -p tablekit-workers --bench index_throughput` (`AMQP_URL` picks the
//! broker; `BENCH_MESSAGES`, default 2000; `BENCH_CONCURRENCY` deliveries per process,
//! default 16).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tablekit_core::roundtrip::{Latency, RoundTripStore};
use tablekit_core::{Query, SqliteStore, TableStore};
use tablekit_patterns::consistency::{BoxFuture, Envelope, OutboxSink};
use tablekit_patterns::index::IndexedTable;
use tablekit_workers::queue::Queue;
use tablekit_workers::queue::rabbit::RabbitQueue;
use tablekit_workers::{Registry, Worker, WorkerConfig};

mod support;
use support::{Employee, amqp_url, env_u64};

/// Keeps the index work the writes hand over (the bench sends it to the queue itself).
#[derive(Clone, Default)]
struct Kept(Arc<Mutex<Vec<Envelope>>>);

impl OutboxSink for Kept {
    fn publish<'a>(
        &'a self,
        envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        self.0.lock().unwrap().push(envelope.clone());
        Box::pin(async { Ok(()) })
    }
}

/// A worker process: consumes `BENCH_QUEUE` over the store `BENCH_STORE` with
/// `BENCH_CHILD_LATENCY_MS` per store call until killed.
async fn child() {
    let store = SqliteStore::create(std::env::var("BENCH_STORE").unwrap())
        .await
        .unwrap();
    let latency = env_u64("BENCH_CHILD_LATENCY_MS", 0);
    let store = RoundTripStore::new(store, Latency::millis(latency));
    let queue_name = std::env::var("BENCH_QUEUE").unwrap();
    let registry = tablekit_workers::index::register(Registry::new(), store, None);
    let config = WorkerConfig {
        concurrency: usize::try_from(env_u64("BENCH_CONCURRENCY", 16)).unwrap(),
        ..WorkerConfig::new(&queue_name)
    };
    let queue = RabbitQueue::connect(&amqp_url()).await.unwrap();
    Worker::new(queue, registry, config)
        .run(std::future::pending())
        .await
        .unwrap();
}

fn spawn(store: &std::path::Path, queue: &str, latency: u64) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .env("BENCH_CHILD", "1")
        .env("BENCH_STORE", store)
        .env("BENCH_QUEUE", queue)
        .env("BENCH_CHILD_LATENCY_MS", latency.to_string())
        .env("RUST_LOG", "off")
        .spawn()
        .unwrap()
}

async fn copies(store: &SqliteStore) -> usize {
    use futures::TryStreamExt;
    store
        .query_stream("EmployeesByEmail", Query::new().select(["PartitionKey"]))
        .try_fold(0usize, |n, _| async move { Ok(n + 1) })
        .await
        .unwrap_or(0)
}

/// Sends the work, lets `processes` workers apply it, and returns deliveries per second.
async fn run(
    store: &SqliteStore,
    path: &std::path::Path,
    work: &[Envelope],
    processes: usize,
    latency: u64,
) -> f64 {
    // Every run writes the copies anew.
    let _ = store.delete_table("EmployeesByEmail").await;
    store.create_table("EmployeesByEmail").await.unwrap();
    let queue = RabbitQueue::connect(&amqp_url()).await.unwrap();
    let name = format!("tk-bench-ixw-{}", uuid::Uuid::new_v4().simple());
    let options = WorkerConfig::new(&name).queue_options();
    queue.declare(&name, &options).await.unwrap();
    let mut children: Vec<Child> = (0..processes)
        .map(|_| spawn(path, &name, latency))
        .collect();
    // The workers connect before the work arrives.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let started = Instant::now();
    use futures::TryStreamExt;
    futures::stream::iter(work.iter().map(Ok::<_, tablekit_workers::Error>))
        .try_for_each_concurrent(64, |envelope| {
            let queue = queue.clone();
            let name = name.clone();
            async move {
                queue
                    .send(
                        &name,
                        &envelope.id.to_string(),
                        &envelope.to_bytes().unwrap(),
                    )
                    .await
            }
        })
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let stats = queue.stats(&name).await.unwrap();
        if stats.waiting == 0 && stats.leased == 0 && copies(store).await == work.len() {
            break;
        }
        assert!(Instant::now() < deadline, "the workers did not finish");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
    queue.delete_queue(&name, &options).await.unwrap();
    work.len() as f64 / elapsed.as_secs_f64()
}

#[tokio::main]
async fn main() {
    if std::env::var("BENCH_CHILD").is_ok() {
        child().await;
        return;
    }
    let n = env_u64("BENCH_MESSAGES", 2000);
    let latency = env_u64("BENCH_LATENCY_MS", 5);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::create(&path).await.unwrap();
    let kept = Kept::default();
    let employees = IndexedTable::<Employee, _>::options()
        .sink(Arc::new(kept.clone()))
        .build(store.clone())
        .unwrap();
    employees.create().await.unwrap();
    for id in 0..u32::try_from(n).unwrap() {
        employees.insert(&Employee::numbered(id)).await.unwrap();
    }
    employees.flush().await;
    let work: Vec<Envelope> = std::mem::take(&mut *kept.0.lock().unwrap());
    assert_eq!(work.len(), usize::try_from(n).unwrap());
    let concurrency = env_u64("BENCH_CONCURRENCY", 16);
    println!(
        "{n} deliveries (one copy each), {concurrency} at once per worker process, over one SQLite file"
    );
    let baseline = run(&store, &path, &work, 1, 0).await;
    println!("  1 process, no delay (the store's own rate)   {baseline:>7.0} deliveries/s");
    let mut one = 0.0;
    for processes in [1, 2, 4] {
        let rate = run(&store, &path, &work, processes, latency).await;
        if processes == 1 {
            one = rate;
        }
        println!(
            "  {processes} process(es), {latency} ms per store call     {rate:>7.0} deliveries/s  ({:.2}x one process)",
            rate / one
        );
    }
}
