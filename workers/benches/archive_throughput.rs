//! Archive operations per second through the worker, side by side with the broker's own
//! limit: a raw lapin publish → consume → ack loop over the same number of messages on the
//! same kind of queue (durable quorum queue, persistent messages, publisher confirms,
//! manual acks). Also the rate on the embedded SQLite queue.
//!
//! `cargo bench -p tablekit-workers --bench archive_throughput` (`AMQP_URL` picks the
//! broker; `BENCH_MESSAGES` the count, default 3000; `BENCH_ROUNDS` the rounds, default 3).
//! Each round runs every path once, interleaved; the medians are printed.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use tablekit_core::{Entity, SqliteStore, TableStore};
use tablekit_workers::archive::{ArchiveOperation, archive};
use tablekit_workers::queue::Queue;
use tablekit_workers::queue::rabbit::RabbitQueue;
use tablekit_workers::queue::sqlite::SqliteQueue;
use tablekit_workers::{Envelope, Registry, Worker, WorkerConfig};
use tokio::sync::Notify;

const CONCURRENCY: usize = 16;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn envelope(i: usize) -> Envelope {
    Envelope::new(&ArchiveOperation {
        source_table: "Current".into(),
        target_table: "Archive".into(),
        partition_key: format!("p{}", i % 16),
        row_key: format!("{i:06}"),
    })
    .unwrap()
}

/// The broker's own rate: publish N with confirms (pipelined), consume and ack N.
async fn raw_lapin(url: &str, n: usize) -> Duration {
    let connection = Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    let queue = format!("tk-bench-raw-{}", uuid::Uuid::new_v4().simple());
    let mut arguments = FieldTable::default();
    arguments.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(LongString::from("quorum")),
    );
    channel
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            arguments,
        )
        .await
        .unwrap();
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let bodies: Vec<Vec<u8>> = (0..n).map(|i| envelope(i).to_bytes().unwrap()).collect();
    let started = Instant::now();
    let mut confirms = Vec::with_capacity(n);
    for body in &bodies {
        confirms.push(
            channel
                .basic_publish(
                    "".into(),
                    queue.as_str().into(),
                    BasicPublishOptions::default(),
                    body,
                    BasicProperties::default().with_delivery_mode(2),
                )
                .await
                .unwrap(),
        );
    }
    for confirm in confirms {
        assert!(confirm.await.unwrap().is_ack());
    }
    let consumer_channel = connection.create_channel().await.unwrap();
    consumer_channel
        .basic_qos(
            u16::try_from(CONCURRENCY).unwrap(),
            BasicQosOptions { global: false },
        )
        .await
        .unwrap();
    let mut consumer = consumer_channel
        .basic_consume(
            queue.as_str().into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    for _ in 0..n {
        let delivery = consumer.next().await.unwrap().unwrap();
        delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .unwrap();
    }
    let elapsed = started.elapsed();
    channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    let _ = connection.close(200, "done".into()).await;
    elapsed
}

async fn seeded_store(dir: &std::path::Path, n: usize) -> SqliteStore {
    let store = SqliteStore::open(dir.join("store.db")).await.unwrap();
    store.create_table("Current").await.unwrap();
    store.create_table("Archive").await.unwrap();
    for i in 0..n {
        store
            .insert(
                "Current",
                Entity::new(format!("p{}", i % 16), format!("{i:06}")).with("N", i as i64),
            )
            .await
            .unwrap();
    }
    store
}

/// Enqueue N archive operations and run the worker until all are done (with `store`
/// `None`, the handler does nothing: the queue and runtime overhead alone).
async fn through_worker<Q: Queue + Clone>(
    queue: Q,
    name: &str,
    store: Option<SqliteStore>,
    n: usize,
) -> Duration {
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
        async move {
            if let Some(store) = &store {
                archive(store, &operation).await?;
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

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() {
    let n = env_usize("BENCH_MESSAGES", 3000);
    let rounds = env_usize("BENCH_ROUNDS", 3);
    let url = std::env::var("AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    let (mut raw, mut rabbit, mut sqlite, mut empty) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        let rate = |d: Duration| n as f64 / d.as_secs_f64();

        let raw_rate = rate(raw_lapin(&url, n).await);

        let dir = tempfile::tempdir().unwrap();
        let store = seeded_store(dir.path(), n).await;
        let queue = RabbitQueue::connect(&url).await.unwrap();
        let name = format!("tk-bench-{}", uuid::Uuid::new_v4().simple());
        let rabbit_rate = rate(through_worker(queue.clone(), &name, Some(store), n).await);
        queue
            .delete_queue(&name, &WorkerConfig::new(&name).queue_options())
            .await
            .unwrap();

        let name = format!("tk-bench-{}", uuid::Uuid::new_v4().simple());
        let empty_rate = rate(through_worker(queue.clone(), &name, None, n).await);
        queue
            .delete_queue(&name, &WorkerConfig::new(&name).queue_options())
            .await
            .unwrap();

        let dir = tempfile::tempdir().unwrap();
        let store = seeded_store(dir.path(), n).await;
        let queue = SqliteQueue::open(dir.path().join("queue.db"))
            .await
            .unwrap();
        let sqlite_rate = rate(through_worker(queue, "archive", Some(store), n).await);

        println!(
            "round {round}: raw lapin {raw_rate:.0} msg/s | worker on RabbitMQ {rabbit_rate:.0} ops/s (empty handler {empty_rate:.0}) | worker on SQLite queue {sqlite_rate:.0} ops/s"
        );
        raw.push(raw_rate);
        rabbit.push(rabbit_rate);
        sqlite.push(sqlite_rate);
        empty.push(empty_rate);
    }
    let (raw, rabbit, sqlite, empty) = (median(raw), median(rabbit), median(sqlite), median(empty));
    println!("\n{n} messages, {rounds} rounds, medians:");
    println!("  raw lapin publish→consume→ack   {raw:>8.0} msg/s");
    println!(
        "  archive worker on RabbitMQ      {rabbit:>8.0} ops/s  ({:.0}% of raw)",
        100.0 * rabbit / raw
    );
    println!(
        "  worker on RabbitMQ, empty handler {empty:>6.0} msg/s  ({:.0}% of raw)",
        100.0 * empty / raw
    );
    println!("  archive worker on SQLite queue  {sqlite:>8.0} ops/s");
}
