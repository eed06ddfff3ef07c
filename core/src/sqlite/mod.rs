//! The embedded default backend: one SQLite file that several threads and OS processes
//! share safely.
//!
//! - WAL journal, a busy timeout, and `BEGIN IMMEDIATE` around every read-modify-write,
//!   so concurrent writers from any process serialise on the file lock and an ETag
//!   condition is checked and applied atomically (no lost update).
//! - Each tablekit table is a SQLite table `t_<lowercase name>` keyed by
//!   `(pk, rk)` `WITHOUT ROWID`: the clustered primary key answers point and range
//!   queries and gives key order for free. Properties live in one BLOB in the
//!   [`codec`] format; filters on them are evaluated in Rust over the key range.
//! - SQLite blocks, so no SQLite call runs on the executor's threads. Each connection
//!   lives on its own OS thread (a `Worker`) that runs the jobs sent over its channel
//!   one after the other and answers each through a oneshot channel (the shape of
//!   sqlx-sqlite's worker). A call costs a channel send and at most two wake-ups, less
//!   than a task on tokio's blocking pool, and each connection's prepared statements
//!   and pages stay warm on one thread.
//! - One worker holds the writing connection. Every write of the process goes through
//!   its queue, so the process's writers are serialised by construction and never meet
//!   SQLite's busy handler among themselves (it sleeps in steps of milliseconds); other
//!   processes still meet the file lock and the busy timeout.
//! - Reads take a reader worker from a pool of at most `pool_size`, most recently used
//!   first so that a steady caller keeps the same warm thread, and run beside the writer
//!   as WAL allows. Reader workers start as concurrent reads need them.
//! - Putting a thread to sleep and waking it is most of the cost of a short call (on a
//!   virtual machine, waking a thread whose CPU went idle takes 50 µs or more). So a
//!   worker that finished a job busy-waits on its queue before sleeping, for as long as
//!   that job took (at least `WORKER_SPIN`, at most `MAX_WORKER_SPIN`): a caller that
//!   sends batch after batch finds the worker awake, and the busy-wait never costs more
//!   than the work before it. And a point read or a single write busy-waits for its answer for
//!   `ANSWER_SPIN` before yielding to the executor: back-to-back calls then pass between
//!   running threads with no sleep and no wake-up. Both waits are bounded (tens of
//!   to a few hundred microseconds, what the call itself takes) and adaptive: a wait that ran out, as on
//!   a machine with more runnable threads than cores where the two threads would only
//!   steal each other's core, turns the following waits off (up to `SPIN_BACKOFF` of
//!   them), and a job or answer that then arrives within a busy-wait's length turns
//!   them back on at once, so one pause of the caller does not cost the next calls a
//!   wake-up each. Longer calls (queries, batches) yield at once.
//! - A job whose caller has gone (its future dropped) before the job starts is skipped;
//!   a job that started runs to its end. A worker rolls back any transaction a job left
//!   open, and catches a job's panic, which its caller receives as an error.
//! - Dropping the last clone of the store closes the channels: each worker finishes
//!   the jobs already queued, closes its connection and ends.

pub mod codec;

use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use chrono::DateTime;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::apply::{self, Change};
use crate::error::{Error, Result};
use crate::limits;
use crate::model::{ETag, Entity, Value};
use crate::query::{Page, PageCollector, Query, QueryClass};
use crate::store::{Batch, TableStore, WriteOp};
use tokio::sync::oneshot;

const CREATE_CATALOG: &str = "CREATE TABLE IF NOT EXISTS tablekit_tables (
    name_key TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL
) WITHOUT ROWID";
const INSERT_CATALOG: &str = "INSERT INTO tablekit_tables (name_key, name) VALUES (?1, ?2)";
const DELETE_CATALOG: &str = "DELETE FROM tablekit_tables WHERE name_key = ?1";
const LIST_CATALOG: &str = "SELECT name FROM tablekit_tables ORDER BY name";

/// The SQL statements over one entity table, named by what they do.
struct TableSql {
    create: String,
    drop: String,
    select_one: String,
    insert: String,
    upsert: String,
    delete: String,
    name: String,
}

impl TableSql {
    fn new(table: &str) -> Self {
        let t = format!("\"t_{}\"", table.to_ascii_lowercase());
        TableSql {
            create: format!(
                "CREATE TABLE {t} (pk TEXT NOT NULL, rk TEXT NOT NULL, ts INTEGER NOT NULL, \
                 etag TEXT NOT NULL, props BLOB NOT NULL, PRIMARY KEY (pk, rk)) WITHOUT ROWID"
            ),
            drop: format!("DROP TABLE {t}"),
            select_one: format!("SELECT ts, etag, props FROM {t} WHERE pk = ?1 AND rk = ?2"),
            insert: format!(
                "INSERT INTO {t} (pk, rk, ts, etag, props) VALUES (?1, ?2, ?3, ?4, ?5)"
            ),
            upsert: format!(
                "INSERT OR REPLACE INTO {t} (pk, rk, ts, etag, props) VALUES (?1, ?2, ?3, ?4, ?5)"
            ),
            delete: format!("DELETE FROM {t} WHERE pk = ?1 AND rk = ?2"),
            name: t,
        }
    }
}

/// How hard SQLite syncs to disk on commit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// `synchronous=NORMAL`: with WAL, committed data survives a process crash; the last
    /// commits may be lost on power failure. The default.
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit is on disk before it returns.
    Full,
}

/// Options for [`SqliteStore::open_with`].
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// How long a writer waits for another process's lock before the call fails with a
    /// retryable `Transient` error. Default 5 s.
    pub busy_timeout: Duration,
    /// Durability of commits. Default [`Synchronous::Normal`].
    pub synchronous: Synchronous,
    /// Most reading connections, each on its own thread, opened as concurrent reads need
    /// them (writes use one more connection). Default 4.
    pub pool_size: usize,
    /// Bytes of the file SQLite reads through memory mapping (`PRAGMA mmap_size`):
    /// reads of a large file then skip a system call per page. It reserves address space,
    /// not memory. Default 1 GiB; 0 reads through system calls only.
    pub mmap_size: u64,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            synchronous: Synchronous::Normal,
            pool_size: 4,
            mmap_size: 1 << 30,
        }
    }
}

struct Inner {
    path: PathBuf,
    options: SqliteOptions,
    /// The writing connection: every write of this process waits its turn in this
    /// worker's queue.
    writer: Worker,
    /// Idle reader workers, the most recently used last.
    readers: Mutex<Vec<Worker>>,
    /// At most `pool_size` reads at once, so at most that many reader workers.
    permits: tokio::sync::Semaphore,
    /// The statements of each table used so far, by table name as spelled by callers.
    statements: Mutex<HashMap<String, Arc<TableSql>>>,
}

/// How long a worker that finished a job busy-waits on its queue before it sleeps, at
/// least: after a longer job it waits as long as that job took, up to `MAX_WORKER_SPIN`.
const WORKER_SPIN: Duration = Duration::from_micros(30);
/// The longest busy-wait for the next job (after a job of twice that or longer).
const MAX_WORKER_SPIN: Duration = Duration::from_micros(250);
/// How long a point read or a single write busy-waits for its answer before it yields
/// to the executor: on a warm connection a point read answers within about 10 µs and a
/// single write within about 30 µs.
const ANSWER_SPIN: Duration = Duration::from_micros(60);
/// Waits that sleep at once after a busy-wait that ran out.
const SPIN_BACKOFF: u32 = 64;
/// The name of every worker thread.
const WORKER_THREAD: &str = "tablekit-sqlite";

/// A job for a worker: runs on its connection, answers through a channel it owns.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// One SQLite connection on its own thread, running the jobs sent over `jobs` in order.
/// Dropping the last sender ends the thread once the queued jobs ran.
struct Worker {
    jobs: mpsc::Sender<Job>,
    /// Callers' answer waits left to skip since one ran out.
    answer_backoff: AtomicU32,
}

impl Worker {
    /// Starts a worker and waits until its connection is open.
    async fn start(path: &Path, options: &SqliteOptions) -> Result<Worker> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (opened, on_open) = oneshot::channel();
        let (path, options) = (path.to_owned(), options.clone());
        std::thread::Builder::new()
            .name(WORKER_THREAD.to_owned())
            .spawn(move || match open_connection(&path, &options) {
                Ok(conn) => {
                    let _ = opened.send(Ok(()));
                    serve(conn, &queue);
                }
                Err(e) => {
                    let _ = opened.send(Err(e));
                }
            })
            .map_err(|e| Error::Backend {
                message: format!("cannot start a SQLite connection thread: {e}"),
            })?;
        on_open.await.map_err(|_| job_lost())??;
        Ok(Worker {
            jobs,
            answer_backoff: AtomicU32::new(0),
        })
    }

    /// Runs `f` on this worker's connection. With `answer_spin` non-zero, the caller
    /// first watches for the answer that long (bounded) before it yields.
    async fn call<R, F>(&self, answer_spin: Duration, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        let (answer, mut on_answer) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            if !answer.is_closed() {
                let _ = answer.send(f(conn));
            }
        });
        self.jobs.send(job).map_err(|_| closed())?;
        if answer_spin.is_zero() {
            return on_answer.await.map_err(|_| job_lost())?;
        }
        let sent = Instant::now();
        if !backing_off(&self.answer_backoff) {
            let mut polls: u32 = 0;
            loop {
                match on_answer.try_recv() {
                    Ok(result) => return result,
                    Err(oneshot::error::TryRecvError::Closed) => return Err(job_lost()),
                    // The clock is read every 16th poll: reading it costs more than a poll.
                    Err(oneshot::error::TryRecvError::Empty)
                        if !polls.is_multiple_of(16) || sent.elapsed() < answer_spin =>
                    {
                        polls = polls.wrapping_add(1);
                        std::hint::spin_loop();
                    }
                    Err(oneshot::error::TryRecvError::Empty) => {
                        self.answer_backoff.store(SPIN_BACKOFF, Ordering::Relaxed);
                        break;
                    }
                }
            }
        }
        let result = on_answer.await.map_err(|_| job_lost())?;
        if sent.elapsed() < answer_spin {
            // A busy-wait would have caught this answer: turn busy-waits back on.
            self.answer_backoff.store(0, Ordering::Relaxed);
        }
        result
    }
}

/// A worker's loop: runs each job, then makes sure no transaction stays open. A job's
/// panic stops at this loop; its answer sender is dropped on the way out, which its
/// caller receives as an error.
fn serve(mut conn: Connection, queue: &mpsc::Receiver<Job>) {
    let mut waits = Waits::default();
    while let Some(job) = next_job(queue, &mut waits) {
        let started = Instant::now();
        let _ = panic::catch_unwind(AssertUnwindSafe(|| job(&mut conn)));
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        waits.spin = started.elapsed().clamp(WORKER_SPIN, MAX_WORKER_SPIN);
    }
}

/// A worker's record of its recent waits for jobs.
struct Waits {
    /// How long the next busy-wait lasts: the last job's time, within
    /// `WORKER_SPIN..=MAX_WORKER_SPIN`.
    spin: Duration,
    /// Waits left that sleep at once.
    skip: u32,
    /// Busy-waits in a row that ran out (capped).
    misses: u32,
}

impl Default for Waits {
    fn default() -> Self {
        Waits {
            spin: WORKER_SPIN,
            skip: 0,
            misses: 0,
        }
    }
}

/// The next job, busy-waiting on the queue for `waits.spin` before sleeping on it;
/// `None` once every sender is gone.
///
/// A busy-wait that ran out makes the next waits sleep at once, twice as many after
/// each miss in a row (up to `SPIN_BACKOFF`): a caller that went idle, or a machine
/// with more runnable threads than cores, stops the spinning. A job that reaches a
/// sleeping worker within `waits.spin` shows that a busy-wait would have caught it,
/// and turns busy-waits back on at once.
fn next_job(queue: &mpsc::Receiver<Job>, waits: &mut Waits) -> Option<Job> {
    if waits.skip > 0 {
        waits.skip -= 1;
    } else {
        let started = Instant::now();
        let mut polls: u32 = 0;
        loop {
            match queue.try_recv() {
                Ok(job) => {
                    waits.misses = 0;
                    return Some(job);
                }
                Err(mpsc::TryRecvError::Disconnected) => return None,
                // The clock is read every 16th poll: reading it costs more than a poll.
                Err(mpsc::TryRecvError::Empty)
                    if !polls.is_multiple_of(16) || started.elapsed() < waits.spin =>
                {
                    polls = polls.wrapping_add(1);
                    std::hint::spin_loop();
                }
                Err(mpsc::TryRecvError::Empty) => {
                    waits.misses = (waits.misses + 1).min(SPIN_BACKOFF.trailing_zeros());
                    waits.skip = 1 << waits.misses;
                    break;
                }
            }
        }
    }
    let asleep = Instant::now();
    let job = queue.recv().ok();
    if asleep.elapsed() < waits.spin {
        waits.skip = 0;
        waits.misses = 0;
    }
    job
}

/// Whether a wait should sleep at once because a recent busy-wait ran out; counts the
/// skipped wait.
fn backing_off(backoff: &AtomicU32) -> bool {
    backoff
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

fn closed() -> Error {
    Error::Backend {
        message: "the SQLite store is closed".to_owned(),
    }
}

/// The answer of a job never came: it panicked (or its thread ended).
fn job_lost() -> Error {
    Error::Backend {
        message: "a SQLite call panicked".to_owned(),
    }
}

/// A reader worker taken from the pool, put back when the call ends or is dropped; a
/// job still running on it only delays the worker's next job.
struct Borrowed<'a> {
    pool: &'a Mutex<Vec<Worker>>,
    worker: Option<Worker>,
}

impl Drop for Borrowed<'_> {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.take() {
            self.pool
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(worker);
        }
    }
}

/// The embedded SQLite store. Cloning it shares its connection pool.
///
/// ```
/// use tablekit_core::prelude::*;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("app.db");
/// let store = SqliteStore::open(&path).await?;
/// store.create_table_if_not_exists("Employees").await?;
/// # Ok::<_, Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

fn sqlite_error(e: rusqlite::Error) -> Error {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) =>
        {
            Error::Transient {
                message: e.to_string(),
            }
        }
        _ => Error::Backend {
            message: e.to_string(),
        },
    }
}

fn is_missing_table(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(_, Some(msg)) if msg.starts_with("no such table"))
}

fn is_constraint(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::ConstraintViolation)
}

/// Maps a SQLite error met while working on `table`.
fn table_error(table: &str) -> impl Fn(rusqlite::Error) -> Error + '_ {
    move |e| {
        if is_missing_table(&e) {
            Error::table_not_found(table)
        } else {
            sqlite_error(e)
        }
    }
}

fn open_connection(path: &Path, options: &SqliteOptions) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite_error)?;
    conn.busy_timeout(options.busy_timeout)
        .map_err(sqlite_error)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(sqlite_error)?;
    let sync = match options.synchronous {
        Synchronous::Normal => "NORMAL",
        Synchronous::Full => "FULL",
    };
    conn.pragma_update(None, "synchronous", sync)
        .map_err(sqlite_error)?;
    // `PRAGMA mmap_size` answers with the size it applied, so it is read, not updated.
    conn.query_row(
        &format!("PRAGMA mmap_size = {}", options.mmap_size),
        [],
        |_| Ok(()),
    )
    .map_err(sqlite_error)?;
    conn.set_prepared_statement_cache_capacity(128);
    Ok(conn)
}

/// The stored entity at (`pk`, `rk`), its keys moved in from the caller's and its
/// properties decoded straight from the row's BLOB.
fn read_stored(
    conn: &Connection,
    sql: &TableSql,
    table: &str,
    pk: String,
    rk: String,
) -> Result<Option<Entity>> {
    let mut stmt = conn
        .prepare_cached(&sql.select_one)
        .map_err(table_error(table))?;
    let found = stmt
        .query_row(params![pk, rk], |row| {
            let ts: i64 = row.get(0)?;
            let etag: String = row.get(1)?;
            let properties = codec::decode(row.get_ref(2)?.as_blob()?);
            Ok((ts, etag, properties))
        })
        .optional()
        .map_err(table_error(table))?;
    found
        .map(|(ts, etag, properties)| {
            Ok(Entity {
                partition_key: pk,
                row_key: rk,
                timestamp: DateTime::from_timestamp_micros(ts),
                etag: Some(ETag::new(etag)),
                properties: properties?,
            })
        })
        .transpose()
}

fn write_entity(conn: &Connection, statement: &str, table: &str, entity: Entity) -> Result<ETag> {
    let mut stmt = conn.prepare_cached(statement).map_err(table_error(table))?;
    let mut buffer = Vec::with_capacity(1 + entity.properties.len() * 24);
    write_with(&mut stmt, table, &entity, &mut buffer)
}

/// The statement `text`, prepared once into `slot` and reused from there: a batch
/// looks its statements up once, not once per operation.
fn prepared<'c, 's>(
    conn: &'c Connection,
    slot: &'s mut Option<rusqlite::CachedStatement<'c>>,
    text: &str,
    table: &str,
) -> Result<&'s mut rusqlite::CachedStatement<'c>> {
    let stmt = match slot.take() {
        Some(stmt) => stmt,
        None => conn.prepare_cached(text).map_err(table_error(table))?,
    };
    Ok(slot.insert(stmt))
}

/// Writes `entity` with a fresh version through `stmt`, the table's insert or upsert,
/// its properties encoded in `buffer`.
fn write_with(
    stmt: &mut rusqlite::Statement<'_>,
    table: &str,
    entity: &Entity,
    buffer: &mut Vec<u8>,
) -> Result<ETag> {
    // The version goes to SQL, not onto the entity.
    let (ts, etag) = apply::new_version();
    codec::encode_into(&entity.properties, buffer);
    stmt.execute(params![
        entity.partition_key,
        entity.row_key,
        ts.timestamp_micros(),
        etag.as_str(),
        buffer.as_slice(),
    ])
    .map_err(|e| {
        if is_constraint(&e) {
            Error::already_exists(table, &entity.partition_key, &entity.row_key)
        } else {
            table_error(table)(e)
        }
    })?;
    Ok(etag)
}

/// Applies one checked write on `conn`, which is inside a write transaction unless the
/// operation is a single statement (insert, insert-or-replace).
fn apply_op(conn: &Connection, sql: &TableSql, table: &str, op: WriteOp) -> Result<Option<ETag>> {
    match op {
        WriteOp::Insert(e) => write_entity(conn, &sql.insert, table, e).map(Some),
        WriteOp::InsertOrReplace(e) => write_entity(conn, &sql.upsert, table, e).map(Some),
        op => {
            let (pk, rk) = (op.key().0.to_owned(), op.key().1.to_owned());
            let current = read_stored(conn, sql, table, pk.clone(), rk.clone())?;
            match apply::plan(table, op, current.as_ref())? {
                Change::Put(e) => write_entity(conn, &sql.upsert, table, e).map(Some),
                Change::Remove => {
                    let mut stmt = conn
                        .prepare_cached(&sql.delete)
                        .map_err(table_error(table))?;
                    stmt.execute(params![pk, rk]).map_err(table_error(table))?;
                    Ok(None)
                }
            }
        }
    }
}

/// Adds `column op ?` for a bound, with `incl`/`excl` the SQL for each kind of bound.
fn push_bound(
    conds: &mut Vec<&'static str>,
    args: &mut Vec<String>,
    bound: &std::ops::Bound<String>,
    incl: &'static str,
    excl: &'static str,
) {
    use std::ops::Bound;
    match bound {
        Bound::Included(v) => {
            conds.push(incl);
            args.push(v.clone());
        }
        Bound::Excluded(v) => {
            conds.push(excl);
            args.push(v.clone());
        }
        Bound::Unbounded => {}
    }
}

/// The SELECT of one query page and its parameters, bounded by the query's key range and
/// its continuation so SQLite seeks the primary key instead of scanning.
fn page_sql(sql: &TableSql, query: &Query) -> (String, Vec<String>) {
    use std::cmp::Ordering;
    let range = query.key_range();
    let mut conds: Vec<&'static str> = Vec::new();
    let mut args: Vec<String> = Vec::new();
    if let Some(pk) = range.partition() {
        conds.push("pk = ?");
        args.push(pk.to_owned());
        if let QueryClass::Point { row_key, .. } = range.class() {
            conds.push("rk = ?");
            args.push(row_key);
        } else {
            push_bound(&mut conds, &mut args, &range.rk_start, "rk >= ?", "rk > ?");
            push_bound(&mut conds, &mut args, &range.rk_end, "rk <= ?", "rk < ?");
        }
        if let Some(token) = &query.continuation {
            match token.next_partition_key().cmp(pk) {
                Ordering::Greater => conds.push("0"),
                Ordering::Equal => {
                    conds.push("rk >= ?");
                    args.push(token.next_row_key().to_owned());
                }
                Ordering::Less => {}
            }
        }
    } else {
        push_bound(&mut conds, &mut args, &range.pk_start, "pk >= ?", "pk > ?");
        push_bound(&mut conds, &mut args, &range.pk_end, "pk <= ?", "pk < ?");
        if let Some(token) = &query.continuation {
            conds.push("(pk, rk) >= (?, ?)");
            args.push(token.next_partition_key().to_owned());
            args.push(token.next_row_key().to_owned());
        }
    }
    let mut text = format!("SELECT pk, rk, ts, etag, props FROM {}", sql.name);
    if !conds.is_empty() {
        text.push_str(" WHERE ");
        text.push_str(&conds.join(" AND "));
    }
    text.push_str(" ORDER BY pk, rk");
    (text, args)
}

/// A stored row as SQLite hands it over, borrowed: the filter reads its keys and the
/// properties it names from here, and the entity is built only for a row the page takes.
struct StoredRow<'a> {
    pk: &'a str,
    rk: &'a str,
    ts: i64,
    etag: &'a str,
    props: &'a [u8],
    /// The first error met reading a property for the filter.
    error: std::cell::RefCell<Option<Error>>,
}

impl crate::filter::Fields for StoredRow<'_> {
    fn partition_key(&self) -> &str {
        self.pk
    }

    fn row_key(&self) -> &str {
        self.rk
    }

    fn timestamp(&self) -> Option<DateTime<chrono::Utc>> {
        DateTime::from_timestamp_micros(self.ts)
    }

    fn property_is(&self, name: &str, test: impl FnOnce(&Value) -> bool) -> bool {
        match codec::find(self.props, name) {
            Ok(value) => value.as_ref().is_some_and(test),
            Err(e) => {
                self.error.borrow_mut().get_or_insert(e);
                false
            }
        }
    }
}

impl StoredRow<'_> {
    fn entity(&self) -> Result<Entity> {
        Ok(Entity {
            partition_key: self.pk.to_owned(),
            row_key: self.rk.to_owned(),
            timestamp: DateTime::from_timestamp_micros(self.ts),
            etag: Some(ETag::new(self.etag)),
            properties: codec::decode(self.props)?,
        })
    }
}

fn query_page(conn: &Connection, sql: &TableSql, table: &str, query: &Query) -> Result<Page> {
    let (text, args) = page_sql(sql, query);
    let mut stmt = conn.prepare_cached(&text).map_err(table_error(table))?;
    let mut rows = stmt
        .query(rusqlite::params_from_iter(args.iter()))
        .map_err(table_error(table))?;
    let mut collector = PageCollector::new(query);
    while let Some(row) = rows.next().map_err(table_error(table))? {
        let text = |i| -> Result<&str> {
            row.get_ref(i)
                .and_then(|v| v.as_str().map_err(Into::into))
                .map_err(table_error(table))
        };
        let stored = StoredRow {
            pk: text(0)?,
            rk: text(1)?,
            ts: row.get(2).map_err(table_error(table))?,
            etag: text(3)?,
            props: row
                .get_ref(4)
                .and_then(|v| v.as_blob().map_err(Into::into))
                .map_err(table_error(table))?,
            error: std::cell::RefCell::new(None),
        };
        let offered = collector.offer_fields(&stored, || stored.entity())?;
        // A row the filter could not read is an error, not a row left out.
        if let Some(e) = stored.error.into_inner() {
            return Err(e);
        }
        if offered.is_break() {
            break;
        }
    }
    Ok(collector.finish())
}

impl SqliteStore {
    /// Opens (creating if needed) the store in the SQLite file at `path`, with default
    /// options.
    ///
    /// # Errors
    /// The file cannot be opened or is not a SQLite database.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// Opens the store with explicit options.
    ///
    /// # Errors
    /// The file cannot be opened or is not a SQLite database.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self> {
        let path = path.as_ref().to_owned();
        let writer = Worker::start(&path, &options).await?;
        let store = SqliteStore {
            inner: Arc::new(Inner {
                path,
                permits: tokio::sync::Semaphore::new(options.pool_size.max(1)),
                options,
                writer,
                readers: Mutex::new(Vec::new()),
                statements: Mutex::new(HashMap::new()),
            }),
        };
        store
            .run_write(|conn| {
                conn.execute(CREATE_CATALOG, []).map_err(sqlite_error)?;
                Ok(())
            })
            .await?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// SQLite's plan for the statement a query page runs (`EXPLAIN QUERY PLAN`), one line
    /// per step: shows whether the primary key is searched or the table scanned.
    ///
    /// # Errors
    /// `TableNotFound`, an invalid query.
    pub async fn explain_sql(&self, table: &str, query: &Query) -> Result<Vec<String>> {
        limits::check_table_name(table)?;
        query.check()?;
        let (sql, table, query) = (self.table_sql(table), table.to_owned(), query.clone());
        self.run(move |conn| {
            let (text, args) = page_sql(&sql, &query);
            let mut stmt = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {text}"))
                .map_err(table_error(&table))?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args.iter()), |r| {
                    r.get::<_, String>(3)
                })
                .map_err(sqlite_error)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(sqlite_error)
        })
        .await
    }

    /// The statements over `table` (a checked name), built once per store.
    fn table_sql(&self, table: &str) -> Arc<TableSql> {
        let mut cache = self
            .inner
            .statements
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Looked up by the name as spelled, so a call allocates nothing; each spelling of
        // a name gets its own copy of the same statements.
        if let Some(sql) = cache.get(table) {
            return Arc::clone(sql);
        }
        Arc::clone(
            cache
                .entry(table.to_owned())
                .or_insert_with_key(|key| Arc::new(TableSql::new(key))),
        )
    }

    /// Runs the read `f` on a reader worker.
    async fn run<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        self.read(Duration::ZERO, f).await
    }

    /// Runs the write `f` on the writer worker, in turn with this process's other writes.
    async fn run_write<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        self.write(Duration::ZERO, f).await
    }

    /// As [`run_write`](Self::run_write), watching for the answer for `answer_spin`
    /// before yielding.
    async fn write<R, F>(&self, answer_spin: Duration, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        self.inner.writer.call(answer_spin, f).await
    }

    /// Runs the read `f` on an idle reader worker (started if none is idle), watching for
    /// the answer for `answer_spin` before yielding.
    async fn read<R, F>(&self, answer_spin: Duration, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        let _permit = self.inner.permits.acquire().await.map_err(|_| closed())?;
        let idle = self
            .inner
            .readers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        let worker = match idle {
            Some(worker) => worker,
            None => Worker::start(&self.inner.path, &self.inner.options).await?,
        };
        let reader = Borrowed {
            pool: &self.inner.readers,
            worker: Some(worker),
        };
        match &reader.worker {
            Some(worker) => worker.call(answer_spin, f).await,
            None => Err(closed()),
        }
    }
}

impl TableStore for SqliteStore {
    async fn create_table(&self, table: &str) -> Result<()> {
        crate::observe::call(
            crate::observe::system::SQLITE,
            "create_table",
            table,
            None,
            async {
                limits::check_table_name(table)?;
                let (sql, table) = (self.table_sql(table), table.to_owned());
                self.run_write(move |conn| {
                    let tx = conn
                        .transaction_with_behavior(TransactionBehavior::Immediate)
                        .map_err(sqlite_error)?;
                    tx.execute(INSERT_CATALOG, params![table.to_ascii_lowercase(), table])
                        .map_err(|e| {
                            if is_constraint(&e) {
                                Error::TableAlreadyExists {
                                    table: table.clone(),
                                }
                            } else {
                                sqlite_error(e)
                            }
                        })?;
                    tx.execute(&sql.create, []).map_err(sqlite_error)?;
                    tx.commit().map_err(sqlite_error)
                })
                .await
            },
        )
        .await
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        crate::observe::call(
            crate::observe::system::SQLITE,
            "delete_table",
            table,
            None,
            async {
                limits::check_table_name(table)?;
                let (sql, table) = (self.table_sql(table), table.to_owned());
                self.run_write(move |conn| {
                    let tx = conn
                        .transaction_with_behavior(TransactionBehavior::Immediate)
                        .map_err(sqlite_error)?;
                    let removed = tx
                        .execute(DELETE_CATALOG, params![table.to_ascii_lowercase()])
                        .map_err(sqlite_error)?;
                    if removed == 0 {
                        return Err(Error::table_not_found(&table));
                    }
                    tx.execute(&sql.drop, []).map_err(sqlite_error)?;
                    tx.commit().map_err(sqlite_error)
                })
                .await
            },
        )
        .await
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        crate::observe::call(
            crate::observe::system::SQLITE,
            "list_tables",
            prefix,
            None,
            async {
                let prefix = prefix.to_owned();
                self.run(move |conn| {
                    let mut stmt = conn.prepare_cached(LIST_CATALOG).map_err(sqlite_error)?;
                    let names = stmt
                        .query_map([], |r| r.get::<_, String>(0))
                        .map_err(sqlite_error)?
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(sqlite_error)?;
                    Ok(names
                        .into_iter()
                        .filter(|n| n.starts_with(&prefix))
                        .collect())
                })
                .await
            },
        )
        .await
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        crate::observe::call(
            crate::observe::system::SQLITE,
            "get",
            table,
            Some(partition_key),
            async {
                limits::check_point_read(table, partition_key, row_key, select)?;
                let sql = self.table_sql(table);
                let (table, pk, rk) = (
                    table.to_owned(),
                    partition_key.to_owned(),
                    row_key.to_owned(),
                );
                let select: Option<Vec<String>> =
                    select.map(|s| s.iter().map(|&n| n.to_owned()).collect());
                self.read(ANSWER_SPIN, move |conn| {
                    let mut entity = read_stored(conn, &sql, &table, pk, rk)?;
                    if let (Some(e), Some(select)) = (&mut entity, &select) {
                        e.project(select);
                    }
                    Ok(entity)
                })
                .await
            },
        )
        .await
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        crate::observe::call(
            crate::observe::system::SQLITE,
            "query",
            table,
            None,
            async {
                limits::check_table_name(table)?;
                query.check()?;
                let (sql, table, query) = (self.table_sql(table), table.to_owned(), query.clone());
                self.run(move |conn| query_page(conn, &sql, &table, &query))
                    .await
            },
        )
        .await
    }

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        let partition_key = op.key().0.to_owned();
        crate::observe::written(table, Some(&partition_key), 1);
        crate::observe::call(
            crate::observe::system::SQLITE,
            "execute",
            table,
            Some(partition_key.as_str()),
            async {
                limits::check_table_name(table)?;
                op.check()?;
                let (sql, table) = (self.table_sql(table), table.to_owned());
                self.write(ANSWER_SPIN, move |conn| {
                    if matches!(op, WriteOp::Insert(_) | WriteOp::InsertOrReplace(_)) {
                        return apply_op(conn, &sql, &table, op);
                    }
                    let tx = conn
                        .transaction_with_behavior(TransactionBehavior::Immediate)
                        .map_err(sqlite_error)?;
                    let etag = apply_op(&tx, &sql, &table, op)?;
                    tx.commit().map_err(sqlite_error)?;
                    Ok(etag)
                })
                .await
            },
        )
        .await
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        let partition_key = batch.partition_key().map(str::to_owned);
        crate::observe::written(table, partition_key.as_deref(), batch.len());
        crate::observe::call(
            crate::observe::system::SQLITE,
            "submit_batch",
            table,
            partition_key.as_deref(),
            async {
                limits::check_table_name(table)?;
                batch.check()?;
                let (sql, table) = (self.table_sql(table), table.to_owned());
                // The written entities come back with the answer and are freed here, by the
                // thread that allocated them: freeing them on the writer would hold the write
                // lock longer, and the allocator's cross-thread frees are its slow path.
                let (etags, _written) = self
                    .run_write(move |conn| {
                        let tx = conn
                            .transaction_with_behavior(TransactionBehavior::Immediate)
                            .map_err(sqlite_error)?;
                        let mut etags = Vec::with_capacity(batch.len());
                        let mut written = Vec::with_capacity(batch.len());
                        {
                            let (mut insert, mut upsert) = (None, None);
                            let mut buffer = Vec::new();
                            for (index, op) in batch.into_operations().into_iter().enumerate() {
                                let applied = match op {
                                    WriteOp::Insert(e) => {
                                        let etag = prepared(&tx, &mut insert, &sql.insert, &table)
                                            .and_then(|stmt| {
                                                write_with(stmt, &table, &e, &mut buffer)
                                            });
                                        written.push(e);
                                        etag.map(Some)
                                    }
                                    WriteOp::InsertOrReplace(e) => {
                                        let etag = prepared(&tx, &mut upsert, &sql.upsert, &table)
                                            .and_then(|stmt| {
                                                write_with(stmt, &table, &e, &mut buffer)
                                            });
                                        written.push(e);
                                        etag.map(Some)
                                    }
                                    op => apply_op(&tx, &sql, &table, op),
                                };
                                match applied {
                                    Ok(etag) => etags.push(etag),
                                    // Dropping the transaction rolls back every earlier operation.
                                    Err(e) if e.kind() == crate::ErrorKind::TableNotFound => {
                                        return Err(e);
                                    }
                                    Err(e) => return Err(e.in_batch(index)),
                                }
                            }
                        }
                        tx.commit().map_err(sqlite_error)?;
                        Ok((etags, written))
                    })
                    .await?;
                Ok(etags)
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    async fn open(dir: &tempfile::TempDir) -> SqliteStore {
        SqliteStore::open(dir.path().join("store.db"))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_panicking_read_is_an_error_and_the_store_keeps_serving() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        let failed = store
            .read(ANSWER_SPIN, |_| -> Result<()> { panic!("a job panics") })
            .await;
        assert_eq!(failed.unwrap_err().kind(), crate::ErrorKind::Backend);
        store.create_table("Kept").await.unwrap();
        assert_eq!(store.list_tables("").await.unwrap(), ["Kept"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_that_panics_inside_a_transaction_leaves_none_open() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        let failed = store
            .run_write(|conn| -> Result<()> {
                conn.execute_batch("BEGIN IMMEDIATE")
                    .map_err(sqlite_error)?;
                panic!("a job panics inside its transaction")
            })
            .await;
        assert_eq!(failed.unwrap_err().kind(), crate::ErrorKind::Backend);
        let open_tx = store.run_write(|conn| Ok(!conn.is_autocommit())).await;
        assert!(!open_tx.unwrap());
        store.create_table("After").await.unwrap();
    }

    #[tokio::test]
    async fn a_dropped_call_still_leaves_the_writer_usable() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        store.create_table("Items").await.unwrap();
        let slow = store.run_write(|conn| {
            conn.execute_batch("BEGIN IMMEDIATE")
                .map_err(sqlite_error)?;
            std::thread::sleep(Duration::from_millis(50));
            Ok(())
        });
        let timed_out = tokio::time::timeout(Duration::from_millis(1), slow).await;
        assert!(timed_out.is_err(), "the call was cancelled");
        // Had the cancelled job's transaction stayed open, this insert would run inside
        // it and never commit, and the reader would not see it.
        store.insert("Items", Entity::new("p", "r")).await.unwrap();
        assert!(store.get("Items", "p", "r", None).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_filter_reads_stored_rows_as_it_reads_entities() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        store.create_table("People").await.unwrap();
        for (rk, age) in [("a", 20), ("b", 30), ("c", 40), ("d", 50)] {
            let e = Entity::new("p", rk).with("Age", age).with("Name", rk);
            store.insert("People", e).await.unwrap();
        }
        let filters = [
            "Age ge 30",
            "Age ge 30 and not (Name eq 'c')",
            "Age gt 25.0 or RowKey eq 'a'",
            "Missing eq 1",
            "not (Missing eq 1)",
            "Timestamp ge datetime'2000-01-01T00:00:00Z'",
        ];
        let all = store.query("People", &Query::new()).await.unwrap().entities;
        for text in filters {
            let mut query = Query::parse(text).unwrap();
            let expected: Vec<&Entity> = all
                .iter()
                .filter(|e| query.filter.as_ref().unwrap().matches(e))
                .collect();
            let found = store.query("People", &query).await.unwrap().entities;
            assert_eq!(found.iter().collect::<Vec<_>>(), expected, "{text}");
            // One row a page: the token names the next row the filter takes.
            query = query.top(1);
            let page = store.query("People", &query).await.unwrap();
            assert_eq!(page.entities.first(), expected.first().copied(), "{text}");
            let next = page.continuation.map(|t| t.next_row_key().to_owned());
            assert_eq!(next.as_deref(), expected.get(1).map(|e| e.row_key.as_str()));
        }
    }

    #[tokio::test]
    async fn a_corrupt_row_is_an_error_even_where_the_filter_rejects_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        store.create_table("People").await.unwrap();
        store
            .insert("People", Entity::new("p", "a").with("Age", 20))
            .await
            .unwrap();
        let table = store.table_sql("People").name.clone();
        store
            .run_write(move |conn| {
                // The Age value cut short: the row ends inside the property the filter reads.
                let sql = format!("UPDATE {table} SET props = substr(props, 1, length(props) - 1)");
                conn.execute(&sql, []).map_err(sqlite_error)
            })
            .await
            .unwrap();
        for text in ["Age ge 30", "Age lt 30", "not (Age ge 30)"] {
            let failed = store.query("People", &Query::parse(text).unwrap()).await;
            let err = failed.expect_err(text);
            assert!(
                err.to_string().contains("corrupt entity row"),
                "{text}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn dropping_the_store_closes_its_connections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let wal = dir.path().join("store.db-wal");
        let store = SqliteStore::open(&path).await.unwrap();
        store.create_table("Items").await.unwrap();
        store.insert("Items", Entity::new("p", "r")).await.unwrap();
        let reads = (0..4).map(|_| store.get("Items", "p", "r", None));
        for read in futures::future::join_all(reads).await {
            assert!(read.unwrap().is_some());
        }
        assert!(wal.exists(), "a WAL file while connections are open");
        // Leaving WAL mode needs the only connection to the file; with the store's
        // connections open, SQLite refuses ("database is locked") or stays in WAL.
        let leave_wal = || {
            let conn = Connection::open(&path).unwrap();
            conn.busy_timeout(Duration::ZERO).unwrap();
            conn.query_row("PRAGMA journal_mode = DELETE", [], |row| {
                row.get::<_, String>(0)
            })
            .unwrap_or_else(|e| e.to_string())
        };
        let refused = leave_wal();
        assert_ne!(refused, "delete", "the store's connections are open");
        drop(store);
        // The workers end once their queues close. (Whether the WAL file goes with them
        // depends on which closing connection wins the checkpoint, so it is not checked.)
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut mode = leave_wal();
        while mode != "delete" && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
            mode = leave_wal();
        }
        assert_eq!(mode, "delete", "every worker closed its connection");
    }
}
