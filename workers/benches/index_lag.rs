//! Convergence lag of an inter-partition index under a sustained write rate, through the
//! deployed path: writers insert employees through `IndexedTable` (the primary and its
//! outbox entry in one transaction, then the work published to RabbitMQ), the index
//! worker consumes the queue and writes the copies into the other table. The lag of a
//! write runs from the start of its insert call to the end of the worker's write of its
//! copy (the copy is then visible); p50, p99 and the maximum are printed, with the write
//! rate achieved, and the audit's scan rate over the result.
//!
//! `cargo bench -p tablekit-workers --bench index_lag` (`AMQP_URL` picks the broker;
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
use tablekit_patterns::index::{AuditOptions, IndexApplier, IndexOperations, IndexedTable};
use tablekit_workers::index::QueueSink;
use tablekit_workers::queue::rabbit::RabbitQueue;
use tablekit_workers::{OperationError, Registry, Worker, WorkerConfig};

mod support;
use support::{Employee, amqp_url, env_u64};
use tablekit_patterns::index::operation::PutCopy;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn main() {
    let url = amqp_url();
    let rate = env_u64("BENCH_RATE", 500);
    let seconds = env_u64("BENCH_SECONDS", 10);
    let total = rate * seconds;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::create(dir.path().join("lag.db")).await.unwrap();
        let queue_name = format!("tk-bench-index-{}", uuid::Uuid::new_v4().simple());
        let sink = QueueSink::open(RabbitQueue::connect(&url).await.unwrap(), &queue_name)
            .await
            .unwrap();
        let employees =
            IndexedTable::<Employee, _>::options().sink(Arc::new(sink)).build(store.clone()).unwrap();
        employees.create().await.unwrap();

        let started: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let lags: Arc<Mutex<Vec<Duration>>> = Arc::default();
        let applier = IndexApplier::new(store.clone());
        let (s, l) = (Arc::clone(&started), Arc::clone(&lags));
        let registry = Registry::new().register(move |operations: IndexOperations| {
            let (applier, started, lags) = (applier.clone(), Arc::clone(&s), Arc::clone(&l));
            async move {
                applier
                    .apply_all(&operations)
                    .await
                    .map_err(OperationError::from)?;
                let done = Instant::now();
                for op in &operations.operations {
                    if let Some(PutCopy { source, .. }) = op.get::<PutCopy>()
                        && let Some(t0) = started.lock().unwrap().remove(&source.row_key) {
                            lags.lock().unwrap().push(done - t0);
                        }
                }
                Ok(())
            }
        });
        let consumer = RabbitQueue::connect(&url).await.unwrap();
        let config = WorkerConfig {
            concurrency: 16,
            ..WorkerConfig::new(&queue_name)
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let worker = tokio::spawn(Worker::new(consumer, registry, config).run(async move {
            let _ = stopped.await;
        }));

        // Writers: 8 tasks, each on its own schedule, together `rate` writes per second.
        let writers = 8u64;
        let period = Duration::from_secs_f64(writers as f64 / rate as f64);
        let run_started = Instant::now();
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let (employees, started) = (employees.clone(), Arc::clone(&started));
                tokio::spawn(async move {
                    let mut tick = tokio::time::interval(period);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                    let mut id = w;
                    while id < total {
                        tick.tick().await;
                        let n = u32::try_from(id).unwrap();
                        let value = Employee::numbered(n);
                        started
                            .lock()
                            .unwrap()
                            .insert(format!("empid_{n:06}"), Instant::now());
                        let outcome = employees.insert(&value).await.unwrap();
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
            assert!(Instant::now() < deadline, "the worker did not catch up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = stop.send(());
        let report = worker.await.unwrap().unwrap();
        let mut lags = std::mem::take(&mut *lags.lock().unwrap());
        lags.sort();
        println!(
            "{total} writes in {write_seconds:.1} s ({:.0} writes/s, target {rate}); worker processed {}",
            total as f64 / write_seconds,
            report.processed
        );
        println!(
            "convergence lag (insert start -> copy written): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target p99 at most 100 ms)",
            percentile(&lags, 0.50).as_secs_f64() * 1e3,
            percentile(&lags, 0.99).as_secs_f64() * 1e3,
            lags.last().unwrap().as_secs_f64() * 1e3,
        );
        let audit = employees.audit(&AuditOptions::default()).await.unwrap();
        assert!(audit.is_clean(), "{audit:?}");
        println!(
            "audit: {} entities ({} primaries, {} entries checked) in {:.2} s: {:.0} entities/s",
            audit.scanned,
            audit.primaries,
            audit.checked,
            audit.seconds,
            audit.rate()
        );
        let cleanup = RabbitQueue::connect(&url).await.unwrap();
        cleanup
            .delete_queue(&queue_name, &WorkerConfig::new(&queue_name).queue_options())
            .await
            .unwrap();
    });
}
