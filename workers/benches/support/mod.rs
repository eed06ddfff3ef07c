//! What the workers' benchmarks share: the archive operations, a store seeded with their
//! sources, and the worker run that times them; the employee the index benches write;
//! the broker and the settings they read from the environment.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use tablekit_core::{Entity, TableStore};
use tablekit_workers::archive::{ArchiveOperation, Archiver, archive};
use tablekit_workers::queue::Queue;
use tablekit_workers::{Envelope, Registry, Worker, WorkerConfig};
use tokio::sync::Notify;

/// Deliveries the worker handles at once.
pub(crate) const CONCURRENCY: usize = 16;

pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub(crate) fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The broker: `AMQP_URL`, else the local RabbitMQ.
pub(crate) fn amqp_url() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

/// The employee the index benches write: one index in another table.
#[derive(tablekit_derive::Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    kind = "Employee",
    partition_key = "{department}",
    row_key = "empid_{id:06}",
    crate = "tablekit_core"
)]
#[index(
    name = "by_email",
    table = "EmployeesByEmail",
    partition_key = "email_{department}",
    row_key = "{email}"
)]
pub(crate) struct Employee {
    department: String,
    id: u32,
    first_name: String,
    last_name: String,
    email: String,
}

impl Employee {
    /// Employee `n`, in one of 20 departments.
    pub(crate) fn numbered(n: u32) -> Self {
        Employee {
            department: format!("D{:02}", n % 20),
            id: n,
            first_name: "Jun".into(),
            last_name: "Cao".into(),
            email: format!("e{n}@contoso.com"),
        }
    }
}

pub(crate) fn envelope(i: usize) -> Envelope {
    Envelope::new(&ArchiveOperation {
        source_table: "Current".into(),
        target_table: "Archive".into(),
        partition_key: format!("p{}", i % 16),
        row_key: format!("{i:06}"),
    })
    .unwrap()
}

/// The N entities the archive operations move, written 32 at a time.
pub(crate) async fn seed<S: TableStore>(store: &S, n: usize) {
    store.create_table("Current").await.unwrap();
    store.create_table("Archive").await.unwrap();
    futures::stream::iter(0..n)
        .map(|i| async move {
            store
                .insert(
                    "Current",
                    Entity::new(format!("p{}", i % 16), format!("{i:06}")).with("N", i as i64),
                )
                .await
                .map(|_| ())
        })
        .buffer_unordered(32)
        .try_collect::<()>()
        .await
        .unwrap();
}

/// Enqueues N archive operations (64 sends at a time) and runs the worker until all are
/// done, with one archiver for the worker (as `tablekit-worker run` does); with `store`
/// `None` the handler does nothing (the queue and runtime alone).
pub(crate) async fn through_worker<Q: Queue + Clone, S: TableStore + Clone + 'static>(
    queue: Q,
    name: &str,
    store: Option<S>,
    n: usize,
) -> Duration {
    through_worker_with(queue, name, store, n, false).await
}

/// As [`through_worker`]; with `per_delivery` each delivery runs [`archive`] with an
/// engine of its own (the worker's way before the process kept one archiver).
pub(crate) async fn through_worker_with<Q: Queue + Clone, S: TableStore + Clone + 'static>(
    queue: Q,
    name: &str,
    store: Option<S>,
    n: usize,
    per_delivery: bool,
) -> Duration {
    let archiver = store
        .clone()
        .map(|store| Arc::new(Archiver::for_worker(store, None, None)));
    let config = WorkerConfig {
        concurrency: CONCURRENCY,
        ..WorkerConfig::new(name)
    };
    queue.declare(name, &config.queue_options()).await.unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let all_done = Arc::new(Notify::new());
    let (counter, notify) = (done.clone(), all_done.clone());
    let registry = Registry::new().register(move |operation: ArchiveOperation| {
        let (store, counter, notify) = (store.clone(), counter.clone(), notify.clone());
        let archiver = archiver.clone();
        async move {
            match (&store, &archiver) {
                (Some(store), _) if per_delivery => {
                    archive(store, &operation).await?;
                }
                (_, Some(archiver)) => {
                    archiver.archive(&operation).await?;
                }
                _ => {}
            }
            if counter.fetch_add(1, Ordering::SeqCst) + 1 == n {
                notify.notify_one();
            }
            Ok(())
        }
    });
    let envelopes: Vec<(String, Vec<u8>)> = (0..n)
        .map(|i| {
            let e = envelope(i);
            (e.id.to_string(), e.to_bytes().unwrap())
        })
        .collect();
    let started = Instant::now();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(
        Worker::new(queue.clone(), registry, config).run(async move {
            let _ = stopped.await;
        }),
    );
    futures::stream::iter(envelopes.iter().map(Ok::<_, tablekit_workers::Error>))
        .try_for_each_concurrent(64, |(id, body)| {
            let queue = queue.clone();
            async move { queue.send(name, id, body).await }
        })
        .await
        .unwrap();
    all_done.notified().await;
    let elapsed = started.elapsed();
    let _ = stop.send(());
    worker.await.unwrap().unwrap();
    assert_eq!(done.load(Ordering::SeqCst), n);
    elapsed
}

pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
