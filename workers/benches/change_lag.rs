//! Change-event lag under a sustained write rate, through the deployed path: writers
//! insert accounts through `IndexedTable` whose type declares `changes = "…"` (the
//! primary and its change event in one transaction, then the event published to
//! RabbitMQ), and a typed `Changes::<Account>` consumer receives them. The lag of a write
//! runs from the start of its insert call to the consumer's handler; p50, p99 and the
//! maximum are printed, with the write rate achieved.
//!
//! `cargo bench -p tablekit-workers --bench change_lag` (`AMQP_URL` picks the broker;
//! `BENCH_RATE` writes per second, default 500; `BENCH_SECONDS`, default 10).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tablekit_core::SqliteStore;
use tablekit_derive::Entity;
use tablekit_patterns::index::IndexedTable;
use tablekit_workers::WorkerConfig;
use tablekit_workers::changes::{Change, Changes};
use tablekit_workers::index::QueueSink;
use tablekit_workers::queue::rabbit::RabbitQueue;

const QUEUE: &str = "tk-bench-account-changes";

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Accounts",
    kind = "Account",
    partition_key = "{team}",
    row_key = "a_{id:06}",
    changes = "tk-bench-account-changes",
    crate = "tablekit_core"
)]
struct Account {
    team: String,
    id: u32,
    owner: String,
    balance: i64,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn main() {
    let url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let rate = env_u64("BENCH_RATE", 500);
    let seconds = env_u64("BENCH_SECONDS", 10);
    let total = rate * seconds;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::create(dir.path().join("lag.db")).await.unwrap();
        let options = WorkerConfig::new(QUEUE).queue_options();
        let broker = RabbitQueue::connect(&url).await.unwrap();
        // The change queue is deleted at the end of a run. (Deleting it here, right
        // before a consumer declares it again, can leave that consumer on the deleted
        // queue; an interrupted run's events are consumed and not counted.)
        let index_queue = format!("tk-bench-index-{}", uuid::Uuid::new_v4().simple());
        let sink = QueueSink::open(broker.clone(), &index_queue).await.unwrap();
        let accounts = IndexedTable::<Account, _>::options().sink(Arc::new(sink)).build(store.clone()).unwrap();
        accounts.create().await.unwrap();

        let started: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let lags: Arc<Mutex<Vec<Duration>>> = Arc::default();
        let (s, l) = (Arc::clone(&started), Arc::clone(&lags));
        let consumer = Changes::<Account>::consume_with(
            RabbitQueue::connect(&url).await.unwrap(),
            WorkerConfig {
                concurrency: 16,
                ..WorkerConfig::new(QUEUE)
            },
            move |change: Change<Account>| {
                let (started, lags) = (Arc::clone(&s), Arc::clone(&l));
                async move {
                    let done = Instant::now();
                    if let Some(t0) = started.lock().unwrap().remove(&change.row_key) {
                        lags.lock().unwrap().push(done - t0);
                    }
                    Ok(())
                }
            },
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let worker = tokio::spawn(consumer.run(async move {
            let _ = stopped.await;
        }));

        // Writers: 8 tasks, each on its own schedule, together `rate` writes per second.
        let writers = 8u64;
        let period = Duration::from_secs_f64(writers as f64 / rate as f64);
        let run_started = Instant::now();
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let (accounts, started) = (accounts.clone(), Arc::clone(&started));
                tokio::spawn(async move {
                    let mut tick = tokio::time::interval(period);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                    let mut id = w;
                    while id < total {
                        tick.tick().await;
                        let n = u32::try_from(id).unwrap();
                        let value = Account {
                            team: format!("T{:02}", n % 20),
                            id: n,
                            owner: "Jun Cao".into(),
                            balance: i64::from(n),
                        };
                        started
                            .lock()
                            .unwrap()
                            .insert(format!("a_{n:06}"), Instant::now());
                        let outcome = accounts.insert(&value).await.unwrap();
                        assert!(outcome.published);
                        id += writers;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let write_seconds = run_started.elapsed().as_secs_f64();
        let deadline = Instant::now() + Duration::from_secs(60);
        while lags.lock().unwrap().len() < usize::try_from(total).unwrap() {
            assert!(
                Instant::now() < deadline,
                "the consumer did not catch up: {} of {total} events",
                lags.lock().unwrap().len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = stop.send(());
        let report = worker.await.unwrap().unwrap();
        let mut lags = std::mem::take(&mut *lags.lock().unwrap());
        lags.sort();
        println!(
            "{total} writes in {write_seconds:.1} s ({:.0} writes/s, target {rate}); consumer processed {}, poisoned {}",
            total as f64 / write_seconds,
            report.processed,
            report.poisoned
        );
        println!(
            "change-event lag (insert start -> typed handler): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target p99 at most 100 ms)",
            percentile(&lags, 0.50).as_secs_f64() * 1e3,
            percentile(&lags, 0.99).as_secs_f64() * 1e3,
            lags.last().unwrap().as_secs_f64() * 1e3,
        );
        broker.delete_queue(QUEUE, &options).await.unwrap();
        broker
            .delete_queue(&index_queue, &WorkerConfig::new(&index_queue).queue_options())
            .await
            .unwrap();
    });
}
