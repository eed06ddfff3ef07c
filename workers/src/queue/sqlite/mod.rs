//! The embedded queue: one SQLite file, shared safely by several processes, with the
//! table-service queue semantics — a receive makes the message invisible for a lease (the
//! visibility timeout) and counts the delivery; a pop receipt identifies the lease, so a
//! consumer whose lease ran out cannot ack or retry a message leased again since; a poison
//! queue keeps the messages that failed, each with its reason.
//!
//! All rows live in one table, `tablekit_queue`; a queue's poison queue is the queue name
//! with `-poison` appended. Every receive, ack, retry or poison is one SQL statement, so it
//! is atomic across processes. A paused queue has a row in `tablekit_queue_paused`, which
//! the receive itself reads: no consumer receives from a paused queue.
//!
//! A poison message's handle is its row number (`seq`): pages are read by it, oldest or
//! newest first along the index on (queue, seq) (each body cut to its preview in SQL,
//! filtered and grouped by reason in SQL), and [`Queue::poison_take`] takes an exact set of
//! rows in one transaction.
//!
//! Rows are created on send; the queues workers declared are kept in a registry
//! (`tablekit_queue_declared`), which [`Queue::stats`] and [`Queue::exists`] read: a queue
//! nobody declared is [`Error::NotDeclared`], as on the brokers.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, params};

use super::{
    ConsumeOptions, Consumer, Delivery, PeekQuery, PoisonAction, PoisonFilter, PoisonMessage,
    PoisonPage, PoisonQuery, Queue, QueueOptions, QueueStats, RawText, ReasonGroup, Received,
    WaitingAction, WaitingMessage, check_queue_name, is_poison_queue, poison_queue,
};
use crate::error::{Error, Result};

mod poison;
mod registry;
mod sql;

use sql::*;

/// The embedded queue in a SQLite file. Cheap to clone; clones share one connection.
#[derive(Clone)]
pub struct SqliteQueue {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    connection: Mutex<Connection>,
}

impl std::fmt::Debug for SqliteQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteQueue")
            .field("path", &self.inner.path)
            .finish()
    }
}

fn micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

fn now() -> i64 {
    micros(Utc::now())
}

fn duration_micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX / 2)
}

fn storage(e: rusqlite::Error) -> Error {
    match e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            Error::unavailable_because(format!("the queue file is busy: {e}"), e)
        }
        e => Error::storage_because(format!("the queue file failed: {e}"), e),
    }
}

impl SqliteQueue {
    /// Opens (creating if needed) the queue file at `path`.
    ///
    /// # Errors
    /// [`Error::Storage`] when the file cannot be opened or initialised.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_owned();
        let opened = path.clone();
        let connection = tokio::task::spawn_blocking(move || -> Result<Connection> {
            let mut connection = Connection::open(&opened).map_err(storage)?;
            connection
                .busy_timeout(Duration::from_secs(10))
                .map_err(storage)?;
            connection
                .pragma_update(None, "journal_mode", "WAL")
                .map_err(storage)?;
            connection
                .pragma_update(None, "synchronous", "NORMAL")
                .map_err(storage)?;
            connection.execute_batch(SCHEMA).map_err(storage)?;
            registry::ensure_registry(&mut connection).map_err(storage)?;
            registry::register_functions(&connection).map_err(storage)?;
            registry::ensure_operation_columns(&mut connection).map_err(storage)?;
            Ok(connection)
        })
        .await
        .map_err(Error::storage)??;
        Ok(SqliteQueue {
            inner: Arc::new(Inner {
                path,
                connection: Mutex::new(connection),
            }),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    async fn with<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let connection = inner
                .connection
                .lock()
                .map_err(|_| Error::storage("a queue thread panicked holding the connection"))?;
            f(&connection).map_err(storage)
        })
        .await
        .map_err(|e| Error::storage_because("a queue thread failed", e))?
    }

    fn receive_blocking(
        connection: &Connection,
        queue: &str,
        options: ConsumeOptions,
    ) -> rusqlite::Result<Vec<SqliteDelivery>> {
        let receipt = uuid::Uuid::new_v4().to_string();
        let lease_ends = tokio::time::Instant::now() + options.lease;
        let mut statement = connection.prepare_cached(RECEIVE)?;
        let rows = statement.query_map(
            params![
                queue,
                i64::from(options.prefetch.max(1)),
                now(),
                duration_micros(options.lease),
                receipt
            ],
            |row| {
                let sent_at: i64 = row.get(3)?;
                let count: i64 = row.get(4)?;
                // Another producer's id may not be UTF-8, its body may be text: read
                // whatever the row holds, so one such message cannot stop a consumer.
                let id = bytes(row.get_ref(1)?);
                Ok((
                    row.get::<_, i64>(0)?,
                    RawText::text_of(&id),
                    bytes(row.get_ref(2)?),
                    sent_at,
                    count,
                ))
            },
        )?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row?);
        }
        out.sort_by_key(|r| r.0);
        Ok(out
            .into_iter()
            .map(|(seq, (id, raw_id), body, sent_at, count)| SqliteDelivery {
                seq,
                raw_id,
                receipt: receipt.clone(),
                lease_ends,
                queue: queue.to_owned(),
                received: Received {
                    id,
                    body,
                    delivery_count: u32::try_from(count).unwrap_or(u32::MAX),
                    sent_at: DateTime::from_timestamp_micros(sent_at),
                },
                owner: None,
                slot: None,
            })
            .collect())
    }
}

impl Queue for SqliteQueue {
    type Consumer = SqliteConsumer;
    type Delivery = SqliteDelivery;

    async fn declare(&self, queue: &str, _options: &QueueOptions) -> Result<()> {
        // Rows are created on send; a declaration registers the name.
        check_queue_name(queue)?;
        self.register(queue).await
    }

    async fn send(&self, queue: &str, id: &str, body: &[u8]) -> Result<()> {
        check_queue_name(queue)?;
        let (queue, id, body) = (queue.to_owned(), id.to_owned(), body.to_vec());
        // The operation's kind and version, stored beside the body: the poison page counts
        // kinds without reading bodies.
        let (kind, version) = match super::operation_of(&body) {
            Some((kind, version)) => (kind, Some(version)),
            None => (String::new(), None),
        };
        self.with(move |c| {
            c.prepare_cached(SEND)?
                .execute(params![queue, id, body, now(), kind, version])
                .map(|_| ())
        })
        .await
    }

    async fn consume(&self, queue: &str, options: ConsumeOptions) -> Result<SqliteConsumer> {
        check_queue_name(queue)?;
        Ok(SqliteConsumer {
            queue: self.clone(),
            name: queue.to_owned(),
            options,
            buffer: VecDeque::new(),
            idle: Duration::ZERO,
            pending: None,
            outstanding: Arc::new(AtomicUsize::new(0)),
        })
    }

    async fn poison_list(&self, queue: &str, limit: usize) -> Result<Vec<PoisonMessage>> {
        self.poison_rows(queue, limit).await
    }

    async fn poison_replay(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        let (queue, poison, id) = (queue.to_owned(), poison_queue(queue), id.map(str::to_owned));
        self.with(move |c| match id {
            None => c.execute(REPLAY_ALL, params![poison, queue, now()]),
            Some(id) => c.execute(REPLAY_ONE, params![poison, queue, now(), id]),
        })
        .await
    }

    async fn poison_discard(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        let (poison, id) = (poison_queue(queue), id.map(str::to_owned));
        self.with(move |c| match id {
            None => c.execute(DISCARD_ALL, params![poison]),
            Some(id) => c.execute(DISCARD_ONE, params![poison, id]),
        })
        .await
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        let (name, poison) = (queue.to_owned(), poison_queue(queue));
        let queue = name.clone();
        let stats = self
            .with(move |c| {
                if !c
                    .prepare_cached(IS_DECLARED)?
                    .query_row(params![queue], |row| row.get::<_, bool>(0))?
                {
                    return Ok(None);
                }
                let at = now();
                let count = |sql: &str, p: &[&dyn rusqlite::ToSql]| -> rusqlite::Result<u64> {
                    c.query_row(sql, p, |r| r.get::<_, i64>(0))
                        .map(|n| u64::try_from(n).unwrap_or(0))
                };
                let oldest: Option<i64> =
                    c.query_row(OLDEST_DELIVERABLE, params![queue, at], |r| r.get(0))?;
                Ok(Some(QueueStats {
                    // A lease that ran out is waiting again.
                    waiting: count(COUNT_WAITING, &[&queue])?
                        + count(COUNT_EXPIRED, &[&queue, &at])?,
                    leased: count(COUNT_LEASED, &[&queue, &at])?,
                    poisoned: count(COUNT_ALL, &[&poison])?,
                    consumers: None,
                    // A receive takes the deliverable messages in the order they became
                    // deliverable: none was received since the oldest of them did.
                    waiting_since: oldest.and_then(DateTime::from_timestamp_micros),
                }))
            })
            .await?;
        stats.ok_or(Error::NotDeclared { queue: name })
    }

    async fn poison_page(&self, queue: &str, query: &PoisonQuery) -> Result<PoisonPage> {
        self.read_poison_page(queue, query).await
    }

    async fn poison_reasons(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<(String, u64)>> {
        self.read_poison_reasons(queue, filter).await
    }

    async fn poison_reason_groups(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<ReasonGroup>> {
        self.read_poison_reason_groups(queue, filter).await
    }

    async fn poison_kinds(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<(Option<String>, u64)>> {
        self.read_poison_kinds(queue, filter).await
    }

    async fn poison_body(&self, queue: &str, handle: &str) -> Result<Option<PoisonMessage>> {
        self.poison_row_of(queue, handle).await
    }

    async fn poison_take(
        &self,
        queue: &str,
        handles: &[String],
        action: &PoisonAction,
    ) -> Result<Vec<String>> {
        let target = match action {
            PoisonAction::Replay => Some(queue.to_owned()),
            PoisonAction::ReplayTo(target) => {
                check_queue_name(target)?;
                Some(target.clone())
            }
            PoisonAction::Discard => None,
        };
        // Handles that are not this queue's row numbers name nothing here.
        let seqs: Vec<i64> = handles.iter().filter_map(|h| h.parse().ok()).collect();
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        let poison = poison_queue(queue);
        let taken = self
            .with(move |c| {
                let transaction = c.unchecked_transaction()?;
                let mut taken = std::collections::HashSet::new();
                {
                    let (mut statement, at) = match &target {
                        Some(_) => (transaction.prepare_cached(TAKE_REPLAY)?, now()),
                        None => (transaction.prepare_cached(TAKE_DISCARD)?, 0),
                    };
                    // A bounded statement per chunk: each reads its list as one JSON array.
                    for chunk in seqs.chunks(TAKE_CHUNK) {
                        let list = serde_json::to_string(chunk).unwrap_or_else(|_| "[]".into());
                        let mut rows = match &target {
                            Some(target) => statement.query(params![poison, list, target, at])?,
                            None => statement.query(params![poison, list])?,
                        };
                        while let Some(row) = rows.next()? {
                            taken.insert(row.get::<_, i64>(0)?);
                        }
                    }
                }
                transaction.commit()?;
                Ok(taken)
            })
            .await?;
        let mut out = Vec::with_capacity(taken.len());
        let mut listed = std::collections::HashSet::new();
        for handle in handles {
            if let Ok(seq) = handle.parse::<i64>()
                && taken.contains(&seq)
                && listed.insert(seq)
            {
                out.push(handle.clone());
            }
        }
        Ok(out)
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<()> {
        check_queue_name(queue)?;
        let queue = queue.to_owned();
        self.with(move |c| {
            c.prepare_cached(if paused { PAUSE } else { RESUME })?
                .execute(params![queue])
                .map(|_| ())
        })
        .await
    }

    async fn paused(&self, queue: &str) -> Result<bool> {
        let queue = queue.to_owned();
        self.with(move |c| {
            c.prepare_cached(PAUSED)?
                .query_row(params![queue], |row| row.get(0))
        })
        .await
    }

    /// One lookup in the registry.
    async fn exists(&self, queue: &str) -> Result<bool> {
        check_queue_name(queue)?;
        if is_poison_queue(queue) {
            return Ok(false);
        }
        self.registered(queue).await
    }

    /// The registry, by name.
    async fn declared_queues(&self) -> Result<Option<Vec<String>>> {
        self.registered_queues().await.map(Some)
    }

    fn names_waiting_messages(&self) -> bool {
        true
    }

    async fn act_on_waiting(&self, queue: &str, action: &WaitingAction) -> Result<Option<u64>> {
        check_queue_name(queue)?;
        self.act_on_rows(queue, action).await.map(Some)
    }

    /// The queue's rows in the order they were sent (or the reverse), leased and delayed
    /// ones included and marked, read along the index on (queue, seq).
    async fn peek(&self, queue: &str, query: &PeekQuery) -> Result<Vec<WaitingMessage>> {
        check_queue_name(queue)?;
        self.peek_rows(queue, query).await
    }
}

/// The most rows one transaction of a purge deletes.
const PURGE_CHUNK: usize = 5_000;

/// The most rows one statement of [`Queue::poison_take`] names.
const TAKE_CHUNK: usize = 500;

/// A column read as text whatever it holds: bytes that are not UTF-8 become U+FFFD, so one
/// row another program wrote cannot fail a listing.
fn lossy(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(r) => r.to_string(),
        ValueRef::Text(b) | ValueRef::Blob(b) => String::from_utf8_lossy(b).into_owned(),
    }
}

/// A column read as bytes whatever it holds.
fn bytes(value: ValueRef<'_>) -> Vec<u8> {
    match value {
        ValueRef::Text(b) | ValueRef::Blob(b) => b.to_vec(),
        ValueRef::Null => Vec::new(),
        other => lossy(other).into_bytes(),
    }
}

/// A consumer of the SQLite queue: receives up to `prefetch` messages at a time, polling
/// with a growing pause (up to 200 ms) while the queue is empty.
pub struct SqliteConsumer {
    queue: SqliteQueue,
    name: String,
    options: ConsumeOptions,
    buffer: VecDeque<SqliteDelivery>,
    idle: Duration,
    /// A receive under way on the blocking pool.
    pending: Option<tokio::task::JoinHandle<Result<Vec<SqliteDelivery>>>>,
    /// Deliveries handed out and not yet settled or dropped.
    outstanding: Arc<AtomicUsize>,
}

/// Counts a delivery as outstanding until it is settled or dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for SqliteConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteConsumer")
            .field("queue", &self.name)
            .finish()
    }
}

const MAX_IDLE: Duration = Duration::from_millis(200);

impl Consumer for SqliteConsumer {
    type Delivery = SqliteDelivery;

    async fn next(&mut self) -> Result<Option<SqliteDelivery>> {
        let prefetch = usize::from(self.options.prefetch.max(1));
        loop {
            if self.outstanding.load(Ordering::Acquire) >= prefetch {
                // As many deliveries unsettled as the prefetch allows: wait for one.
                tokio::time::sleep(Duration::from_millis(2)).await;
                continue;
            }
            if let Some(mut delivery) = self.buffer.pop_front() {
                delivery.owner = Some(self.queue.clone());
                self.outstanding.fetch_add(1, Ordering::AcqRel);
                delivery.slot = Some(Slot(self.outstanding.clone()));
                return Ok(Some(delivery));
            }
            let mut options = self.options;
            let room = prefetch - self.outstanding.load(Ordering::Acquire).min(prefetch);
            options.prefetch = u16::try_from(room.max(1)).unwrap_or(1);
            // The receive runs to completion on the blocking pool even if this call is
            // cancelled (a shutdown): its handle is kept, and its rows are collected by
            // the next call or released when the consumer closes.
            let handle = match self.pending.as_mut() {
                Some(handle) => handle,
                None => {
                    let (queue, name) = (self.queue.clone(), self.name.clone());
                    self.pending.insert(tokio::task::spawn_blocking(move || {
                        let connection = queue.inner.connection.lock().map_err(|_| {
                            Error::storage("a queue thread panicked holding the connection")
                        })?;
                        SqliteQueue::receive_blocking(&connection, &name, options).map_err(storage)
                    }))
                }
            };
            let joined = handle.await;
            self.pending = None;
            let received =
                joined.map_err(|e| Error::storage_because("a queue thread failed", e))??;
            if received.is_empty() {
                self.idle = (self.idle * 2).clamp(Duration::from_millis(2), MAX_IDLE);
                tokio::time::sleep(self.idle).await;
            } else {
                self.idle = Duration::ZERO;
                self.buffer.extend(received);
            }
        }
    }

    async fn close(mut self) {
        self.release_buffer();
    }
}

impl SqliteConsumer {
    fn release_buffer(&mut self) {
        if let Some(pending) = self.pending.take() {
            // Rows a cancelled receive leased go back once it finishes.
            let queue = self.queue.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    if let Ok(Ok(rows)) = pending.await {
                        let _ = tokio::task::spawn_blocking(move || release(&queue, rows)).await;
                    }
                });
            }
        }
        if self.buffer.is_empty() {
            return;
        }
        let (queue, rows) = (
            self.queue.clone(),
            self.buffer.drain(..).collect::<Vec<_>>(),
        );
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn_blocking(move || release(&queue, rows));
            }
            Err(_) => release(&queue, rows),
        }
    }
}

/// Ends the leases of deliveries never handed out, so they are received again at once. A
/// failure leaves the lease to expire: the message is not lost.
fn release(queue: &SqliteQueue, rows: Vec<SqliteDelivery>) {
    if let Ok(connection) = queue.inner.connection.lock() {
        for row in rows {
            let _ = connection.execute(RELEASE, params![row.seq, row.receipt, now()]);
        }
    }
}

impl Drop for SqliteConsumer {
    /// Deliveries received but never handed out are released at once rather than waiting
    /// out their lease.
    fn drop(&mut self) {
        self.release_buffer();
    }
}

/// A delivery of the SQLite queue, identified by its pop receipt.
pub struct SqliteDelivery {
    seq: i64,
    /// The id's bytes, when they are not UTF-8 (another producer's row).
    raw_id: Option<Vec<u8>>,
    receipt: String,
    /// When its lease ends, by this process's clock (taken before the receive).
    lease_ends: tokio::time::Instant,
    queue: String,
    received: Received,
    owner: Option<SqliteQueue>,
    slot: Option<Slot>,
}

impl std::fmt::Debug for SqliteDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteDelivery")
            .field("queue", &self.queue)
            .field("id", &self.received.id)
            .field("delivery_count", &self.received.delivery_count)
            .finish()
    }
}

impl SqliteDelivery {
    async fn settle(self, sql: &'static str, extra: Vec<rusqlite::types::Value>) -> Result<()> {
        if self.settle_rows(sql, extra).await? == 0 {
            return Err(Error::unavailable(
                "the lease ran out and the message was received again; it will be processed again",
            ));
        }
        Ok(())
    }

    /// Runs a settlement's statement under this delivery's receipt: the rows it changed
    /// (none when the lease ran out).
    async fn settle_rows(
        &self,
        sql: &'static str,
        extra: Vec<rusqlite::types::Value>,
    ) -> Result<usize> {
        let Some(queue) = &self.owner else {
            return Err(Error::storage("a delivery settled outside its consumer"));
        };
        let (seq, receipt) = (self.seq, self.receipt.clone());
        queue
            .with(move |c| {
                let mut values: Vec<rusqlite::types::Value> = vec![seq.into(), receipt.into()];
                values.extend(extra);
                c.prepare_cached(sql)?
                    .execute(rusqlite::params_from_iter(values))
            })
            .await
    }
}

impl Delivery for SqliteDelivery {
    fn received(&self) -> &Received {
        &self.received
    }

    fn raw(&self) -> RawText {
        RawText {
            id: self.raw_id.clone(),
            ..RawText::default()
        }
    }

    fn lease_ends(&self) -> Option<tokio::time::Instant> {
        Some(self.lease_ends)
    }

    async fn ack(self) -> Result<()> {
        self.settle(ACK, Vec::new()).await
    }

    /// Delivers the message again after `delay`. When this delivery's lease ran out,
    /// another delivery may have settled the message meanwhile, and the work this one
    /// failed half way would never be applied again: the message is sent again instead
    /// (with its id, body and deliveries so far), so it is.
    async fn retry(self, delay: Duration) -> Result<()> {
        let at = now().saturating_add(duration_micros(delay));
        if self.settle_rows(RETRY, vec![at.into()]).await? > 0 {
            return Ok(());
        }
        let Some(owner) = &self.owner else {
            return Err(Error::storage("a delivery settled outside its consumer"));
        };
        let (kind, version) = match super::operation_of(&self.received.body) {
            Some((kind, version)) => (kind, Some(version)),
            None => (String::new(), None),
        };
        let (queue, id, body) = (
            self.queue.clone(),
            self.received.id.clone(),
            self.received.body.clone(),
        );
        let sent_at = self
            .received
            .sent_at
            .map_or_else(now, |t| t.timestamp_micros());
        let count = self.received.delivery_count;
        owner
            .with(move |c| {
                c.prepare_cached(SEND_AGAIN)?
                    .execute(params![queue, id, body, sent_at, at, kind, version, count])
                    .map(|_| ())
            })
            .await
    }

    async fn poison(self, reason: &str) -> Result<()> {
        let poison = poison_queue(&self.queue);
        self.settle(
            POISON,
            vec![poison.into(), reason.to_owned().into(), now().into()],
        )
        .await
    }
}
