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
//!   point read or a single write busy-waits for its answer for `ANSWER_SPIN` before
//!   yielding to the executor, and the worker that answered it busy-waits on its queue
//!   before sleeping, for as long as the job took (at least `WORKER_SPIN`, at most
//!   `MAX_WORKER_SPIN`): back-to-back calls then pass between running threads with no
//!   sleep and no wake-up. Both waits are bounded (tens to a few hundred microseconds,
//!   what the call itself takes) and adaptive: a wait that ran out, as on a machine with
//!   more runnable threads than cores where the two threads would only steal each
//!   other's core, turns the following waits off (up to `SPIN_BACKOFF` of them), and a
//!   job or answer that then arrives within a busy-wait's length turns them back on at
//!   once, so one pause of the caller does not cost the next calls a wake-up each.
//!   Longer calls (queries, batches) yield at once, and their worker sleeps as soon as
//!   it answered: a busy-wait there would hold the core that the woken caller may be
//!   placed on (see `worker`).
//! - A job whose caller has gone (its future dropped) before the job starts is skipped;
//!   a job that started runs to its end. A worker rolls back any transaction a job left
//!   open, and catches a job's panic, which its caller receives as an error.
//! - Dropping the last clone of the store closes the channels: each worker finishes
//!   the jobs already queued, closes its connection and ends.

pub mod codec;
mod query;
mod sql;
mod worker;
mod write;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior, params};

use crate::error::{Error, Result};
use crate::limits;
use crate::model::{ETag, Entity};
use crate::observe;
use crate::query::{Page, Query};
use crate::store::{Batch, Observed, TableStore, WriteOp};
use query::{page_sql, query_page, read_stored};
use sql::{
    CREATE_CATALOG, DELETE_CATALOG, INSERT_CATALOG, LIST_CATALOG, TableSql, is_constraint,
    sqlite_error, table_error,
};
use worker::{ANSWER_SPIN, Worker, closed};
use write::apply_op;

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
    /// Whether opening creates the file when it does not exist. Default `false`: a store
    /// opened by a mistyped path is [`Error::StoreNotFound`], not a new, empty store
    /// ([`SqliteStore::create`] sets it).
    pub create_if_missing: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            synchronous: Synchronous::Normal,
            pool_size: 4,
            mmap_size: 1 << 30,
            create_if_missing: false,
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
/// let store = SqliteStore::create(&path).await?;
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

fn open_connection(path: &Path, options: &SqliteOptions) -> Result<Connection> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if options.create_if_missing {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags).map_err(|e| {
        if !options.create_if_missing && !path.exists() {
            Error::StoreNotFound {
                path: path.to_owned(),
                hint: "to make a new store: `SqliteStore::create`, or `sqlite:PATH?mode=rwc`",
            }
        } else {
            sqlite_error(e)
        }
    })?;
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

/// Starts a worker on a connection of its own to the file at `path`.
async fn start_worker(path: &Path, options: &SqliteOptions) -> Result<Worker> {
    let (path, options) = (path.to_owned(), options.clone());
    Worker::start(move || open_connection(&path, &options)).await
}

impl SqliteStore {
    /// Opens the store in the existing SQLite file at `path`, with default options.
    ///
    /// # Errors
    /// [`Error::StoreNotFound`] when there is no file at `path` (to make one, use
    /// [`create`](Self::create)); the file cannot be opened or is not a SQLite database.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// Opens the store in the SQLite file at `path`, creating the file when it does not
    /// exist (its folder must), with default options.
    ///
    /// # Errors
    /// The file cannot be created or opened, or is not a SQLite database.
    pub async fn create(path: impl AsRef<Path>) -> Result<Self> {
        let options = SqliteOptions {
            create_if_missing: true,
            ..SqliteOptions::default()
        };
        Self::open_with(path, options).await
    }

    /// Opens the store with explicit options.
    ///
    /// # Errors
    /// [`Error::StoreNotFound`] when there is no file at `path` and
    /// [`create_if_missing`](SqliteOptions::create_if_missing) is off; the file cannot be
    /// opened or is not a SQLite database.
    pub async fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self> {
        let path = path.as_ref().to_owned();

        let writer = start_worker(&path, &options).await?;
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
            None => start_worker(&self.inner.path, &self.inner.options).await?,
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

/// This store's calls, observed and checked.
const OBSERVED: Observed = Observed::new(observe::system::SQLITE);

impl TableStore for SqliteStore {
    async fn create_table(&self, table: &str) -> Result<()> {
        OBSERVED
            .create_table(table, || async move {
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
            })
            .await
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        OBSERVED
            .delete_table(table, || async move {
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
            })
            .await
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        OBSERVED
            .list_tables(prefix, || async move {
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
            })
            .await
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        OBSERVED
            .get(table, partition_key, row_key, select, || async move {
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
            })
            .await
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        OBSERVED
            .query(table, query, || async move {
                let (sql, table, query) = (self.table_sql(table), table.to_owned(), query.clone());
                self.run(move |conn| query_page(conn, &sql, &table, &query))
                    .await
            })
            .await
    }

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        OBSERVED
            .execute(table, op, |op| async move {
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
            })
            .await
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        OBSERVED
            .submit_batch(table, batch, |batch| async move {
                let (sql, table) = (self.table_sql(table), table.to_owned());
                // The written entities come back with the answer and are freed here, by the
                // thread that allocated them: freeing them on the writer would hold the write
                // lock longer, and the allocator's cross-thread frees are its slow path.
                let (etags, _written) = self
                    .run_write(move |conn| write::write_batch(conn, &sql, &table, batch))
                    .await?;
                Ok(etags)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::time::Instant;

    async fn open(dir: &tempfile::TempDir) -> SqliteStore {
        SqliteStore::create(dir.path().join("store.db"))
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
        let store = SqliteStore::create(&path).await.unwrap();
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
