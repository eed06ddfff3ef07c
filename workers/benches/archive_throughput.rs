//! Archive operations per second through the worker, side by side with the broker's own
//! limit — a raw lapin publish → consume → ack loop over the same number of messages on the
//! same kind of queue (durable quorum queue, persistent messages, publisher confirms,
//! manual acks) — and with the loop a user writes by hand: lapin and rusqlite on one
//! SQLite file, each message's move as three statements. Also the rate on the embedded
//! SQLite queue, and (once, before the rounds) where one move's time goes: the store calls
//! the worker makes per move, timed, against the hand-written move's statements.
//!
//! `cargo bench -p tablekit-workers --bench archive_throughput` (`AMQP_URL` picks the
//! broker; `BENCH_MESSAGES` the count, default 3000; `BENCH_ROUNDS` the rounds, default 3;
//! `BENCH_PROFILE_MOVES` the moves the breakdown times one at a time, default 1000).
//! Each round runs every path once, interleaved; the medians are printed.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use rusqlite::{OptionalExtension, params};
use support::{
    CONCURRENCY, env_usize, envelope, median, seed, through_worker, through_worker_with,
};
use tablekit_core::{
    Batch, ETag, Entity, Page, Query, Result as StoreResult, SqliteStore, TableStore, WriteOp,
};
use tablekit_workers::archive::{ArchiveOperation, Archiver};
use tablekit_workers::queue::rabbit::RabbitQueue;
use tablekit_workers::queue::sqlite::SqliteQueue;
use tablekit_workers::{Envelope, WorkerConfig};

/// Declares a durable quorum queue of a fresh name on `channel`.
async fn quorum_queue(channel: &Channel, prefix: &str) -> String {
    let queue = format!("{prefix}-{}", uuid::Uuid::new_v4().simple());
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
    queue
}

/// Publishes `bodies` to `queue` as persistent messages, pipelined, and waits for every
/// publisher confirm.
async fn publish_confirmed(channel: &Channel, queue: &str, bodies: &[Vec<u8>]) {
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let mut confirms = Vec::with_capacity(bodies.len());
    for body in bodies {
        confirms.push(
            channel
                .basic_publish(
                    "".into(),
                    queue.into(),
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
}

/// A consumer on a channel of its own with `CONCURRENCY` deliveries in flight.
async fn consumer(connection: &Connection, queue: &str) -> lapin::Consumer {
    let channel = connection.create_channel().await.unwrap();
    channel
        .basic_qos(
            u16::try_from(CONCURRENCY).unwrap(),
            BasicQosOptions { global: false },
        )
        .await
        .unwrap();
    channel
        .basic_consume(
            queue.into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap()
}

/// The broker's own rate: publish N with confirms (pipelined), consume and ack N.
async fn raw_lapin(url: &str, n: usize) -> Duration {
    let connection = Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    let queue = quorum_queue(&channel, "tk-bench-raw").await;
    let bodies: Vec<Vec<u8>> = (0..n).map(|i| envelope(i).to_bytes().unwrap()).collect();
    let started = Instant::now();
    publish_confirmed(&channel, &queue, &bodies).await;
    let mut consumer = consumer(&connection, &queue).await;
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

/// The hand-written loop's tables: PartitionKey, RowKey and the properties as JSON.
const CREATE_HAND_TABLES: &str = "
    CREATE TABLE current (pk TEXT NOT NULL, rk TEXT NOT NULL, props TEXT NOT NULL, PRIMARY KEY (pk, rk));
    CREATE TABLE archive (pk TEXT NOT NULL, rk TEXT NOT NULL, props TEXT NOT NULL, PRIMARY KEY (pk, rk));";
const SEED_HAND_ROW: &str = "INSERT INTO current (pk, rk, props) VALUES (?1, ?2, ?3)";
const SELECT_SOURCE: &str = "SELECT props FROM current WHERE pk = ?1 AND rk = ?2";
const INSERT_COPY: &str = "INSERT OR REPLACE INTO archive (pk, rk, props) VALUES (?1, ?2, ?3)";
const DELETE_SOURCE: &str = "DELETE FROM current WHERE pk = ?1 AND rk = ?2";
const COUNT_ARCHIVED: &str = "SELECT count(*) FROM archive";

/// The hand-written loop's SQLite file, journaled as the store's (WAL,
/// `synchronous=NORMAL`), holding the N rows the archive operations name (one property,
/// `N`, as [`seed`] writes).
fn hand_written_db(dir: &Path, n: usize) -> rusqlite::Connection {
    let mut conn = rusqlite::Connection::open(dir.join("hand.db")).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.execute_batch(CREATE_HAND_TABLES).unwrap();
    let tx = conn.transaction().unwrap();
    {
        let mut insert = tx.prepare(SEED_HAND_ROW).unwrap();
        for i in 0..n {
            let props = serde_json::json!({ "N": i }).to_string();
            insert
                .execute(params![format!("p{}", i % 16), format!("{i:06}"), props])
                .unwrap();
        }
    }
    tx.commit().unwrap();
    conn
}

/// One hand-written move: read the source row, write the archived copy, delete the
/// source, each statement its own transaction (nothing makes a crash between them safe).
/// Returns the time of each statement.
fn hand_written_move(conn: &rusqlite::Connection, pk: &str, rk: &str) -> [Duration; 3] {
    let started = Instant::now();
    let props: Option<String> = conn
        .prepare_cached(SELECT_SOURCE)
        .unwrap()
        .query_row(params![pk, rk], |row| row.get(0))
        .optional()
        .unwrap();
    let read = started.elapsed();
    let Some(props) = props else {
        return [read, Duration::ZERO, Duration::ZERO];
    };
    conn.prepare_cached(INSERT_COPY)
        .unwrap()
        .execute(params![pk, rk, props])
        .unwrap();
    let written = started.elapsed();
    conn.prepare_cached(DELETE_SOURCE)
        .unwrap()
        .execute(params![pk, rk])
        .unwrap();
    [read, written - read, started.elapsed() - written]
}

/// The comparison a user makes: the loop written by hand with lapin and rusqlite. The
/// same N archive messages on the same kind of queue, published (with confirms) while
/// one consumer with `CONCURRENCY` deliveries in flight moves each one on a single
/// connection, in the consuming task, and acks it.
async fn hand_written(url: &str, n: usize) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let conn = hand_written_db(dir.path(), n);
    let connection = Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    let queue = quorum_queue(&channel, "tk-bench-hand").await;
    let bodies: Vec<Vec<u8>> = (0..n).map(|i| envelope(i).to_bytes().unwrap()).collect();
    let mut consumer = consumer(&connection, &queue).await;
    let started = Instant::now();
    let publisher = {
        let (channel, queue) = (channel.clone(), queue.clone());
        tokio::spawn(async move { publish_confirmed(&channel, &queue, &bodies).await })
    };
    for _ in 0..n {
        let delivery = consumer.next().await.unwrap().unwrap();
        let message = Envelope::from_bytes(&delivery.data).unwrap();
        let operation: ArchiveOperation = serde_json::from_value(message.payload).unwrap();
        hand_written_move(&conn, &operation.partition_key, &operation.row_key);
        delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .unwrap();
    }
    let elapsed = started.elapsed();
    publisher.await.unwrap();
    let archived: i64 = conn
        .query_row(COUNT_ARCHIVED, [], |row| row.get(0))
        .unwrap();
    assert_eq!(usize::try_from(archived).unwrap(), n);
    channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    let _ = connection.close(200, "done".into()).await;
    elapsed
}

/// A store that counts and times its calls by what they are (`get Current`,
/// `batch [Delete] Current`). Clones share the counts.
#[derive(Clone)]
struct TimedStore<S> {
    inner: S,
    calls: Arc<Mutex<BTreeMap<String, (usize, Duration)>>>,
}

impl<S> TimedStore<S> {
    fn new(inner: S) -> Self {
        TimedStore {
            inner,
            calls: Arc::default(),
        }
    }

    fn take(&self) -> BTreeMap<String, (usize, Duration)> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    async fn timed<T>(&self, what: String, call: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let answer = call.await;
        let took = started.elapsed();
        let mut calls = self.calls.lock().unwrap();
        let (count, total) = calls.entry(what).or_default();
        *count += 1;
        *total += took;
        answer
    }
}

fn write_name(op: &WriteOp) -> &'static str {
    match op {
        WriteOp::Insert(_) => "Insert",
        WriteOp::Replace(..) => "Replace",
        WriteOp::Merge(..) => "Merge",
        WriteOp::InsertOrReplace(_) => "InsertOrReplace",
        WriteOp::InsertOrMerge(_) => "InsertOrMerge",
        WriteOp::Delete { .. } => "Delete",
    }
}

impl<S: TableStore> TableStore for TimedStore<S> {
    async fn create_table(&self, table: &str) -> StoreResult<()> {
        let what = format!("create_table {table}");
        self.timed(what, self.inner.create_table(table)).await
    }

    async fn delete_table(&self, table: &str) -> StoreResult<()> {
        let what = format!("delete_table {table}");
        self.timed(what, self.inner.delete_table(table)).await
    }

    async fn list_tables(&self, prefix: &str) -> StoreResult<Vec<String>> {
        let what = "list_tables".to_owned();
        self.timed(what, self.inner.list_tables(prefix)).await
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> StoreResult<Option<Entity>> {
        let what = format!("get {table}");
        let call = self.inner.get(table, partition_key, row_key, select);
        self.timed(what, call).await
    }

    async fn query(&self, table: &str, query: &Query) -> StoreResult<Page> {
        let what = format!("query {table}");
        self.timed(what, self.inner.query(table, query)).await
    }

    async fn execute(&self, table: &str, op: WriteOp) -> StoreResult<Option<ETag>> {
        let what = format!("execute {} {table}", write_name(&op));
        self.timed(what, self.inner.execute(table, op)).await
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> StoreResult<Vec<Option<ETag>>> {
        let names: Vec<&str> = batch.operations().iter().map(write_name).collect();
        let what = format!("batch [{}] {table}", names.join(", "));
        self.timed(what, self.inner.submit_batch(table, batch))
            .await
    }

    fn key_order(&self) -> tablekit_core::KeyOrder {
        self.inner.key_order()
    }

    fn preserves_negative_zero(&self) -> bool {
        self.inner.preserves_negative_zero()
    }
}

/// Where one move's time goes, with no queue and no concurrency: `m` moves one after the
/// other through the worker's archiver over a store that times each call, then `m`
/// hand-written moves (its three statements timed). Prints both per move.
async fn breakdown(m: usize) {
    let operations: Vec<ArchiveOperation> = (0..m)
        .map(|i| serde_json::from_value(envelope(i).payload).unwrap())
        .collect();
    let per_move = |d: Duration| d.as_secs_f64() * 1e6 / m as f64;

    let dir = tempfile::tempdir().unwrap();
    let store = TimedStore::new(seeded_store(dir.path(), m).await);
    let archiver = Archiver::for_worker(store.clone(), None, None);
    store.take();
    let started = Instant::now();
    for operation in &operations {
        archiver.archive(operation).await.unwrap();
    }
    archiver.engine().flush().await;
    let worker = started.elapsed();
    let calls = store.take();
    let in_calls: Duration = calls.values().map(|(_, d)| *d).sum();
    println!("\none move at a time, {m} moves, no queue (µs per move):");
    println!(
        "  worker's move        {:>6.1}  (in store calls {:.1}, outside them {:.1})",
        per_move(worker),
        per_move(in_calls),
        per_move(worker.saturating_sub(in_calls)),
    );
    for (what, (count, took)) in &calls {
        println!(
            "    {what:<34} {:>5.2} calls  {:>6.1}",
            *count as f64 / m as f64,
            per_move(*took)
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let conn = hand_written_db(dir.path(), m);
    let mut steps = [Duration::ZERO; 3];
    let started = Instant::now();
    for operation in &operations {
        let took = hand_written_move(&conn, &operation.partition_key, &operation.row_key);
        for (total, step) in steps.iter_mut().zip(took) {
            *total += step;
        }
    }
    let hand = started.elapsed();
    println!(
        "  hand-written move    {:>6.1}  (SELECT {:.1}, INSERT OR REPLACE {:.1}, DELETE {:.1})",
        per_move(hand),
        per_move(steps[0]),
        per_move(steps[1]),
        per_move(steps[2]),
    );
}

async fn seeded_store(dir: &Path, n: usize) -> SqliteStore {
    let store = SqliteStore::create(dir.join("store.db")).await.unwrap();
    seed(&store, n).await;
    store
}

#[tokio::main]
async fn main() {
    let n = env_usize("BENCH_MESSAGES", 3000);
    let rounds = env_usize("BENCH_ROUNDS", 3);
    let url = support::amqp_url();
    breakdown(env_usize("BENCH_PROFILE_MOVES", 1000)).await;
    let (mut raw, mut hand, mut rabbit, mut sqlite, mut empty, mut per_delivery) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    println!();
    for round in 1..=rounds {
        let rate = |d: Duration| n as f64 / d.as_secs_f64();

        let raw_rate = rate(raw_lapin(&url, n).await);
        let hand_rate = rate(hand_written(&url, n).await);

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
            "round {round}: raw lapin {raw_rate:.0} msg/s | lapin + rusqlite by hand {hand_rate:.0} ops/s | worker on RabbitMQ {rabbit_rate:.0} ops/s ({:.0}% of by hand; an engine per delivery {per_delivery_rate:.0}, empty handler {empty_rate:.0}) | worker on SQLite queue {sqlite_rate:.0} ops/s",
            100.0 * rabbit_rate / hand_rate
        );
        per_delivery.push(per_delivery_rate);
        raw.push(raw_rate);
        hand.push(hand_rate);
        rabbit.push(rabbit_rate);
        sqlite.push(sqlite_rate);
        empty.push(empty_rate);
    }
    let (raw, rabbit, sqlite, empty) = (median(raw), median(rabbit), median(sqlite), median(empty));
    let (hand, per_delivery) = (median(hand), median(per_delivery));
    println!("\n{n} messages, {rounds} rounds, medians:");
    println!("  raw lapin publish→consume→ack   {raw:>8.0} msg/s");
    println!(
        "  lapin + rusqlite by hand        {hand:>8.0} ops/s  ({:.0}% of raw)",
        100.0 * hand / raw
    );
    println!(
        "  archive worker on RabbitMQ      {rabbit:>8.0} ops/s  ({:.0}% of raw, {:.0}% of by hand)",
        100.0 * rabbit / raw,
        100.0 * rabbit / hand
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
