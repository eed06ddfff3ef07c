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
//! - Every SQLite call runs on tokio's blocking pool (`spawn_blocking`), never on the
//!   executor's threads, with a connection taken from a small pool.

pub mod codec;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::DateTime;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::apply::{self, Change};
use crate::error::{Error, Result};
use crate::limits;
use crate::model::{ETag, Entity};
use crate::query::{Page, PageCollector, Query, QueryClass};
use crate::store::{Batch, TableStore, WriteOp};

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
    /// Idle connections kept open. Default 4.
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
    pool: Mutex<Vec<Connection>>,
    /// At most `pool_size` SQLite calls at once, so connections are reused rather than
    /// opened per call.
    permits: tokio::sync::Semaphore,
    /// Writers of this process take turns here: a writer waiting for the file's write
    /// lock inside SQLite sleeps in steps of milliseconds (its busy handler), while this
    /// lock hands over at once. Other processes still meet the busy timeout.
    write_lock: Mutex<()>,
    /// The statements of each table used so far, by lowercase table name.
    statements: Mutex<HashMap<String, Arc<TableSql>>>,
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

fn micros(entity: &Entity) -> i64 {
    entity.timestamp.map_or(0, |t| t.timestamp_micros())
}

fn read_stored(
    conn: &Connection,
    sql: &TableSql,
    table: &str,
    pk: &str,
    rk: &str,
) -> Result<Option<Entity>> {
    let mut stmt = conn
        .prepare_cached(&sql.select_one)
        .map_err(table_error(table))?;
    stmt.query_row(params![pk, rk], |row| {
        let ts: i64 = row.get(0)?;
        let etag: String = row.get(1)?;
        let props = row.get_ref(2)?.as_blob()?.to_vec();
        Ok((ts, etag, props))
    })
    .optional()
    .map_err(table_error(table))?
    .map(|(ts, etag, props)| {
        Ok(Entity {
            partition_key: pk.to_owned(),
            row_key: rk.to_owned(),
            timestamp: DateTime::from_timestamp_micros(ts),
            etag: Some(ETag::new(etag)),
            properties: codec::decode(&props)?,
        })
    })
    .transpose()
}

fn write_entity(
    conn: &Connection,
    statement: &str,
    table: &str,
    mut entity: Entity,
) -> Result<ETag> {
    let etag = apply::stamp(&mut entity);
    let mut stmt = conn.prepare_cached(statement).map_err(table_error(table))?;
    stmt.execute(params![
        entity.partition_key,
        entity.row_key,
        micros(&entity),
        etag.as_str(),
        codec::encode(&entity.properties),
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
            let current = read_stored(conn, sql, table, &pk, &rk)?;
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

fn query_page(conn: &Connection, sql: &TableSql, table: &str, query: &Query) -> Result<Page> {
    let (text, args) = page_sql(sql, query);
    let mut stmt = conn.prepare_cached(&text).map_err(table_error(table))?;
    let mut rows = stmt
        .query(rusqlite::params_from_iter(args.iter()))
        .map_err(table_error(table))?;
    let mut collector = PageCollector::new(query);
    while let Some(row) = rows.next().map_err(table_error(table))? {
        let entity = Entity {
            partition_key: row.get(0).map_err(table_error(table))?,
            row_key: row.get(1).map_err(table_error(table))?,
            timestamp: DateTime::from_timestamp_micros(row.get(2).map_err(table_error(table))?),
            etag: Some(ETag::new(
                row.get::<_, String>(3).map_err(table_error(table))?,
            )),
            properties: codec::decode(
                row.get_ref(4)
                    .and_then(|v| v.as_blob().map_err(Into::into))
                    .map_err(table_error(table))?,
            )?,
        };
        if collector.offer(entity).is_break() {
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
        let store = SqliteStore {
            inner: Arc::new(Inner {
                path: path.as_ref().to_owned(),
                options: options.clone(),
                pool: Mutex::new(Vec::new()),
                permits: tokio::sync::Semaphore::new(options.pool_size.max(1)),
                write_lock: Mutex::new(()),
                statements: Mutex::new(HashMap::new()),
            }),
        };
        store
            .run(|conn| {
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
        let key = table.to_ascii_lowercase();
        let mut cache = self
            .inner
            .statements
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Arc::clone(
            cache
                .entry(key)
                .or_insert_with_key(|key| Arc::new(TableSql::new(key))),
        )
    }

    /// Runs `f` with a pooled connection on the blocking pool.
    async fn run<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        self.run_on_pool(false, f).await
    }

    /// As [`run`](Self::run), for a write: in turn with this process's other writers.
    async fn run_write<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        self.run_on_pool(true, f).await
    }

    async fn run_on_pool<R, F>(&self, write: bool, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        let _permit = self
            .inner
            .permits
            .acquire()
            .await
            .map_err(|_| Error::Backend {
                message: "the SQLite store is closed".to_owned(),
            })?;
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let pooled = inner.pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let mut conn = match pooled {
                Some(conn) => conn,
                None => open_connection(&inner.path, &inner.options)?,
            };
            let result = if write {
                let _turn = inner.write_lock.lock().unwrap_or_else(|e| e.into_inner());
                f(&mut conn)
            } else {
                f(&mut conn)
            };
            let mut pool = inner.pool.lock().unwrap_or_else(|e| e.into_inner());
            if pool.len() < inner.options.pool_size {
                pool.push(conn);
            }
            result
        })
        .await
        .map_err(|e| Error::Backend {
            message: format!("SQLite task failed: {e}"),
        })?
    }
}

impl TableStore for SqliteStore {
    async fn create_table(&self, table: &str) -> Result<()> {
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
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
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
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
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
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        limits::check_point_read(table, partition_key, row_key, select)?;
        let sql = self.table_sql(table);
        let (table, pk, rk) = (
            table.to_owned(),
            partition_key.to_owned(),
            row_key.to_owned(),
        );
        let select: Option<Vec<String>> = select.map(|s| s.iter().map(|&n| n.to_owned()).collect());
        self.run(move |conn| {
            let mut entity = read_stored(conn, &sql, &table, &pk, &rk)?;
            if let (Some(e), Some(select)) = (&mut entity, &select) {
                e.project(select);
            }
            Ok(entity)
        })
        .await
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        limits::check_table_name(table)?;
        query.check()?;
        let (sql, table, query) = (self.table_sql(table), table.to_owned(), query.clone());
        self.run(move |conn| query_page(conn, &sql, &table, &query))
            .await
    }

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        limits::check_table_name(table)?;
        op.check()?;
        let (sql, table) = (self.table_sql(table), table.to_owned());
        self.run_write(move |conn| {
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
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        limits::check_table_name(table)?;
        batch.check()?;
        let (sql, table) = (self.table_sql(table), table.to_owned());
        self.run_write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sqlite_error)?;
            let mut etags = Vec::with_capacity(batch.len());
            for (index, op) in batch.into_operations().into_iter().enumerate() {
                match apply_op(&tx, &sql, &table, op) {
                    Ok(etag) => etags.push(etag),
                    // Dropping the transaction rolls back every earlier operation.
                    Err(e) if e.kind() == crate::ErrorKind::TableNotFound => return Err(e),
                    Err(e) => return Err(e.in_batch(index)),
                }
            }
            tx.commit().map_err(sqlite_error)?;
            Ok(etags)
        })
        .await
    }
}
