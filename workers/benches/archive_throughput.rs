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

mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use support::{
    CONCURRENCY, env_usize, envelope, median, seed, through_worker, through_worker_with,
};
use tablekit_core::SqliteStore;
use tablekit_workers::WorkerConfig;
use tablekit_workers::queue::rabbit::RabbitQueue;
use tablekit_workers::queue::sqlite::SqliteQueue;

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
    seed(&store, n).await;
    store
}

#[tokio::main]
async fn main() {
    let n = env_usize("BENCH_MESSAGES", 3000);
    let rounds = env_usize("BENCH_ROUNDS", 3);
    let url = support::amqp_url();
    let (mut raw, mut rabbit, mut sqlite, mut empty, mut per_delivery) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
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

        let dir = tempfile::tempdir().unwrap();
        let store = seeded_store(dir.path(), n).await;
        let name = format!("tk-bench-{}", uuid::Uuid::new_v4().simple());
        let per_delivery_rate =
            rate(through_worker_with(queue.clone(), &name, Some(store), n, true).await);
        queue
            .delete_queue(&name, &WorkerConfig::new(&name).queue_options())
            .await
            .unwrap();

        let name = format!("tk-bench-{}", uuid::Uuid::new_v4().simple());
        let empty_rate = rate(through_worker(queue.clone(), &name, None::<SqliteStore>, n).await);
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
            "round {round}: raw lapin {raw_rate:.0} msg/s | worker on RabbitMQ {rabbit_rate:.0} ops/s (an engine per delivery {per_delivery_rate:.0}, empty handler {empty_rate:.0}) | worker on SQLite queue {sqlite_rate:.0} ops/s"
        );
        per_delivery.push(per_delivery_rate);
        raw.push(raw_rate);
        rabbit.push(rabbit_rate);
        sqlite.push(sqlite_rate);
        empty.push(empty_rate);
    }
    let (raw, rabbit, sqlite, empty) = (median(raw), median(rabbit), median(sqlite), median(empty));
    let per_delivery = median(per_delivery);
    println!("\n{n} messages, {rounds} rounds, medians:");
    println!("  raw lapin publish→consume→ack   {raw:>8.0} msg/s");
    println!(
        "  archive worker on RabbitMQ      {rabbit:>8.0} ops/s  ({:.0}% of raw)",
        100.0 * rabbit / raw
    );
    println!(
        "  the same, an engine per delivery {per_delivery:>8.0} ops/s  ({:.0}% of raw; before the process kept one archiver)",
        100.0 * per_delivery / raw
    );
    println!(
        "  worker on RabbitMQ, empty handler {empty:>6.0} msg/s  ({:.0}% of raw)",
        100.0 * empty / raw
    );
    println!("  archive worker on SQLite queue  {sqlite:>8.0} ops/s");
}
