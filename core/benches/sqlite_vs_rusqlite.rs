//! The SQLite backend (`SqliteStore`) against raw rusqlite running the same statements,
//! in one run: point get, insert-or-replace, a 100-operation batch, a 1,000-entity range
//! query and a filtered partition scan, plus point-get latency at 10^4 and 10^6 entities.
//!
//! Each comparison group has three functions:
//! - `tablekit`: the public `TableStore` API of a `SqliteStore`;
//! - `raw_rusqlite`: the async baseline, a careful async application using rusqlite
//!   directly: its own connection (same pragmas) behind `Arc<Mutex<Connection>>`,
//!   `prepare_cached`, the backend's SQL text, the same props codec, every call inside
//!   `tokio::task::spawn_blocking`;
//! - `raw_rusqlite_sync`: the synchronous baseline, the same code called directly on the
//!   bench thread, without `spawn_blocking`: the floor, what the engine itself costs.
//!
//! Targets: point get at most 1.5x the synchronous baseline, every other operation at
//! most 1.1x the async one.
//!
//! After the criterion groups, an interleaved A/B pass runs the same three functions in
//! alternating chunks and prints the ratios again, of wall time and of the process's CPU
//! time (set `TABLEKIT_BENCH_AB=0` to skip it, `TABLEKIT_BENCH_AB_ROUNDS` to change its
//! rounds): on a small shared machine that is the steadier estimate of a 10% margin.
//!
//! `TABLEKIT_BENCH_INSTRUCTIONS=1` runs the instruction pass instead: the bench reruns
//! itself under callgrind (valgrind on the PATH) and prints the instructions each
//! function executes per iteration, a figure the machine's load does not move.
//!
//! See `core/benches/README.md` for how to run it and read the ratios.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::OnceCell;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::DateTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, measurement::WallTime};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use tablekit_core::apply;
use tablekit_core::prelude::*;
use tablekit_core::sqlite::codec;
use tokio::runtime::Runtime;

/// The tablekit table; the backend stores it as the SQLite table `"t_bench"`.
const TABLE: &str = "Bench";

// The statements the backend runs for this table (`TableSql::new` in
// `core/src/sqlite/sql.rs`, `page_sql` in `core/src/sqlite/query.rs`), copied verbatim so
// the baseline executes exactly the same SQL.
const CREATE: &str = "CREATE TABLE \"t_bench\" (pk TEXT NOT NULL, rk TEXT NOT NULL, \
    ts INTEGER NOT NULL, etag TEXT NOT NULL, props BLOB NOT NULL, PRIMARY KEY (pk, rk)) \
    WITHOUT ROWID";
const SELECT_ONE: &str = "SELECT ts, etag, props FROM \"t_bench\" WHERE pk = ?1 AND rk = ?2";
const UPSERT: &str = "INSERT OR REPLACE INTO \"t_bench\" (pk, rk, ts, etag, props) \
    VALUES (?1, ?2, ?3, ?4, ?5)";
const SELECT_RANGE: &str = "SELECT pk, rk, ts, etag, props FROM \"t_bench\" \
    WHERE pk = ? AND rk >= ? AND rk < ? ORDER BY pk, rk";
const SELECT_PARTITION: &str =
    "SELECT pk, rk, ts, etag, props FROM \"t_bench\" WHERE pk = ? ORDER BY pk, rk";

/// Partition for point get and insert-or-replace (1,000 entities).
const POINT_PK: &str = "P";
/// Partition for the range query (3,000 entities; the middle 1,000 are read).
const RANGE_PK: &str = "R";
const RANGE_START: &str = "r001000";
const RANGE_END: &str = "r002000";
/// Partition for the filtered scan (1,000 entities, `Age ge 30` keeps about 3/4).
const SCAN_PK: &str = "S";
const SCAN_MIN_AGE: i32 = 30;
/// Partition the batch rewrites (100 entities).
const BATCH_PK: &str = "B";
const BATCH_OPS: usize = 100;

const SCALING_SIZES: [usize; 2] = [10_000, 1_000_000];
/// Rows per partition in the scaling databases.
const ROWS_PER_PARTITION: usize = 1_000;
/// Rows per transaction when seeding the scaling databases.
const SEED_TX_ROWS: usize = 50_000;

// ---------------------------------------------------------------------------------------
// Data

fn mix(mut x: u64) -> u64 {
    // SplitMix64 finaliser: a cheap, deterministic spread of small integers.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A small deterministic random source for picking keys inside the timed loops.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(1);
        (mix(self.0) % n as u64) as usize
    }
}

const FIRST: [&str; 8] = [
    "Jun", "Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis",
];
const LAST: [&str; 8] = [
    "Cao", "Lovelace", "Hopper", "Torvalds", "Liskov", "Thompson", "Hamilton", "Ritchie",
];

fn row_key(i: usize) -> String {
    format!("r{i:06}")
}

/// Entity `i` of a partition: seven typed properties (three strings, an Int32 age, an
/// Int64, a DateTime and a Boolean), about 120 bytes encoded.
fn entity(pk: &str, i: usize) -> Entity {
    let h = mix(i as u64);
    let first = FIRST[(h % 8) as usize];
    let last = LAST[((h >> 8) % 8) as usize];
    Entity::new(pk, row_key(i))
        .with("FirstName", first)
        .with("LastName", last)
        .with(
            "Email",
            format!(
                "{}.{}{i}@example.com",
                first.to_lowercase(),
                last.to_lowercase()
            ),
        )
        .with("Age", 18 + ((h >> 16) % 48) as i32)
        .with("EmployeeId", 1_000_000_i64 + i as i64)
        .with(
            "HireDate",
            DateTime::from_timestamp(1_500_000_000 + (i as i64) * 86_400, 0).unwrap(),
        )
        .with("Active", !i.is_multiple_of(3))
}

fn partition(pk: &str, n: usize) -> Vec<Entity> {
    (0..n).map(|i| entity(pk, i)).collect()
}

// ---------------------------------------------------------------------------------------
// The raw rusqlite baseline

type Shared = Arc<Mutex<Connection>>;

/// Opens a connection exactly as the backend's `open_connection` does.
fn raw_open(path: &Path) -> Connection {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.query_row("PRAGMA mmap_size = 1073741824", [], |_| Ok(()))
        .unwrap();
    conn.set_prepared_statement_cache_capacity(128);
    conn
}

fn row_entity(row: &rusqlite::Row<'_>) -> rusqlite::Result<Entity> {
    Ok(Entity {
        partition_key: row.get(0)?,
        row_key: row.get(1)?,
        timestamp: DateTime::from_timestamp_micros(row.get(2)?),
        etag: Some(ETag::new(row.get::<_, String>(3)?)),
        properties: codec::decode(row.get_ref(4)?.as_blob()?).expect("valid row"),
    })
}

fn raw_get(conn: &Connection, pk: &str, rk: &str) -> Option<Entity> {
    let mut stmt = conn.prepare_cached(SELECT_ONE).unwrap();
    stmt.query_row(params![pk, rk], |row| {
        Ok(Entity {
            partition_key: pk.to_owned(),
            row_key: rk.to_owned(),
            timestamp: DateTime::from_timestamp_micros(row.get(0)?),
            etag: Some(ETag::new(row.get::<_, String>(1)?)),
            properties: codec::decode(row.get_ref(2)?.as_blob()?).expect("valid row"),
        })
    })
    .optional()
    .unwrap()
}

/// One insert-or-replace with a fresh version stamp (the same Timestamp/ETag scheme the
/// backend writes, from the public `apply::new_version`).
fn raw_upsert(conn: &Connection, entity: &Entity) -> ETag {
    let (ts, etag) = apply::new_version();
    let mut stmt = conn.prepare_cached(UPSERT).unwrap();
    stmt.execute(params![
        entity.partition_key,
        entity.row_key,
        ts.timestamp_micros(),
        etag.as_str(),
        codec::encode(&entity.properties),
    ])
    .unwrap();
    etag
}

/// `BEGIN IMMEDIATE`, the upserts, `COMMIT`: what the backend does for a batch.
fn raw_batch(conn: &mut Connection, entities: &[Entity]) -> Vec<ETag> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    let etags = entities.iter().map(|e| raw_upsert(&tx, e)).collect();
    tx.commit().unwrap();
    etags
}

fn raw_range(conn: &Connection, pk: &str, start: &str, end: &str) -> Vec<Entity> {
    let mut stmt = conn.prepare_cached(SELECT_RANGE).unwrap();
    let rows = stmt.query_map(params![pk, start, end], row_entity).unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

/// The partition SELECT, with `Age ge min_age` evaluated by hand on the decoded props.
fn raw_scan(conn: &Connection, pk: &str, min_age: i32) -> Vec<Entity> {
    let mut stmt = conn.prepare_cached(SELECT_PARTITION).unwrap();
    let mut rows = stmt.query(params![pk]).unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let e = row_entity(row).unwrap();
        if e.get("Age")
            .and_then(Value::as_i32)
            .is_some_and(|a| a >= min_age)
        {
            out.push(e);
        }
    }
    out
}

/// Runs `f` on the shared connection on tokio's blocking pool, as an async app must.
async fn blocking<R, F>(conn: &Shared, f: F) -> R
where
    R: Send + 'static,
    F: FnOnce(&mut Connection) -> R + Send + 'static,
{
    let conn = Arc::clone(conn);
    tokio::task::spawn_blocking(move || f(&mut conn.lock().unwrap()))
        .await
        .unwrap()
}

/// Inserts entities through the raw statement in transactions of `SEED_TX_ROWS`.
fn raw_seed(conn: &mut Connection, entities: impl Iterator<Item = Entity>) {
    let mut entities = entities.peekable();
    while entities.peek().is_some() {
        let chunk: Vec<Entity> = entities.by_ref().take(SEED_TX_ROWS).collect();
        raw_batch(conn, &chunk);
    }
}

// ---------------------------------------------------------------------------------------
// Fixture: two databases seeded with the same entities

struct Fixture {
    _dir: tempfile::TempDir,
    store: SqliteStore,
    raw: Shared,
    /// The entities of the point partition (read, and rewritten unchanged).
    point: Vec<Entity>,
    /// The entities the batch rewrites.
    batch: Vec<Entity>,
    range: Query,
    scan: Query,
}

fn seed_contents() -> Vec<Vec<Entity>> {
    vec![
        partition(POINT_PK, 1_000),
        partition(RANGE_PK, 3_000),
        partition(SCAN_PK, 1_000),
        partition(BATCH_PK, BATCH_OPS),
    ]
}

impl Fixture {
    fn new(rt: &Runtime) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = rt.block_on(async {
            let store = SqliteStore::create(dir.path().join("tablekit.db"))
                .await
                .unwrap();
            store.create_table(TABLE).await.unwrap();
            for part in seed_contents() {
                for chunk in part.chunks(BATCH_OPS) {
                    let batch: Batch = chunk
                        .iter()
                        .cloned()
                        .map(WriteOp::InsertOrReplace)
                        .collect();
                    store.submit_batch(TABLE, batch).await.unwrap();
                }
            }
            store
        });
        let mut conn = raw_open(&dir.path().join("raw.db"));
        conn.execute(CREATE, []).unwrap();
        raw_seed(&mut conn, seed_contents().into_iter().flatten());
        let fixture = Fixture {
            _dir: dir,
            store,
            raw: Arc::new(Mutex::new(conn)),
            point: partition(POINT_PK, 1_000),
            batch: partition(BATCH_PK, BATCH_OPS),
            range: range_query(),
            scan: scan_query(),
        };
        fixture.check_same_answers(rt);
        fixture
    }

    /// Both sides must return the same entities before their speed means anything.
    fn check_same_answers(&self, rt: &Runtime) {
        let conn = self.raw.lock().unwrap();
        let props = |es: &[Entity]| {
            es.iter()
                .map(|e| (e.row_key.clone(), e.properties.clone()))
                .collect::<Vec<_>>()
        };
        rt.block_on(async {
            let got = self
                .store
                .get(TABLE, POINT_PK, "r000042", None)
                .await
                .unwrap()
                .unwrap();
            let raw = raw_get(&conn, POINT_PK, "r000042").unwrap();
            assert_eq!(got.properties, raw.properties);
            assert_eq!(got.properties, self.point[42].properties);

            let page = self.store.query(TABLE, &self.range).await.unwrap();
            let raw = raw_range(&conn, RANGE_PK, RANGE_START, RANGE_END);
            assert_eq!(page.entities.len(), 1_000);
            assert!(page.continuation.is_none());
            assert_eq!(props(&page.entities), props(&raw));

            let page = self.store.query(TABLE, &self.scan).await.unwrap();
            let raw = raw_scan(&conn, SCAN_PK, SCAN_MIN_AGE);
            assert!(page.continuation.is_none());
            assert!((500..1_000).contains(&raw.len()), "{} matches", raw.len());
            assert_eq!(props(&page.entities), props(&raw));
        });
    }
}

fn range_query() -> Query {
    Query::parse(&format!(
        "PartitionKey eq '{RANGE_PK}' and RowKey ge '{RANGE_START}' and RowKey lt '{RANGE_END}'"
    ))
    .unwrap()
}

fn scan_query() -> Query {
    Query::parse(&format!(
        "PartitionKey eq '{SCAN_PK}' and Age ge {SCAN_MIN_AGE}"
    ))
    .unwrap()
}

// ---------------------------------------------------------------------------------------
// The compared operations, one iteration each

/// The five compared operations.
#[derive(Clone, Copy, Debug)]
enum Op {
    PointGet,
    InsertOrReplace,
    Batch,
    Range,
    Scan,
}

impl Op {
    const ALL: [Op; 5] = [
        Op::PointGet,
        Op::InsertOrReplace,
        Op::Batch,
        Op::Range,
        Op::Scan,
    ];

    /// The criterion group.
    fn group(self) -> &'static str {
        match self {
            Op::PointGet => "point_get",
            Op::InsertOrReplace => "insert_or_replace",
            Op::Batch => "batch_100_insert_or_replace",
            Op::Range => "range_query_1000",
            Op::Scan => "filtered_partition_scan",
        }
    }

    /// The baseline this operation is held to and the ratio it may reach: a point get is
    /// short enough that leaving the executor dominates it, so it is held to the
    /// synchronous floor; the others to the async baseline.
    fn target(self) -> (Baseline, f64) {
        match self {
            Op::PointGet => (Baseline::Sync, 1.5),
            _ => (Baseline::Async, 1.1),
        }
    }

    /// Iterations in one chunk of the interleaved pass (about 20 ms each).
    fn chunk(self) -> u64 {
        match self {
            Op::PointGet => 1_000,
            Op::InsertOrReplace => 500,
            Op::Batch => 25,
            Op::Range | Op::Scan => 6,
        }
    }
}

/// The two baselines an operation may be held to.
#[derive(Clone, Copy, Debug)]
enum Baseline {
    /// `raw_rusqlite`: rusqlite inside `spawn_blocking`.
    Async,
    /// `raw_rusqlite_sync`: rusqlite on the calling thread.
    Sync,
}

impl Baseline {
    /// The verdict on an operation, given its ratios to each baseline.
    fn verdict(op: Op, tk_async: f64, tk_sync: f64) -> String {
        let (baseline, target) = op.target();
        let (ratio, label) = match baseline {
            Baseline::Async => (tk_async, "raw async"),
            Baseline::Sync => (tk_sync, "raw sync"),
        };
        if ratio <= target {
            format!("ok (<= {target}x {label})")
        } else {
            format!("MISS (target {target}x {label})")
        }
    }
}

/// `op` through tablekit. `i` picks the entity of point operations. Every variant starts
/// from its own owned copy of the input, as the store's API takes entities by value.
async fn tablekit(fx: &Fixture, op: Op, i: usize) {
    let store = &fx.store;
    match op {
        Op::PointGet => {
            black_box(store.get(TABLE, POINT_PK, &row_key(i), None).await.unwrap());
        }
        Op::InsertOrReplace => {
            let entity = fx.point[i].clone();
            black_box(store.insert_or_replace(TABLE, entity).await.unwrap());
        }
        Op::Batch => {
            let batch: Batch = fx
                .batch
                .iter()
                .cloned()
                .map(WriteOp::InsertOrReplace)
                .collect();
            black_box(store.submit_batch(TABLE, batch).await.unwrap());
        }
        Op::Range => {
            black_box(store.query(TABLE, &fx.range).await.unwrap());
        }
        Op::Scan => {
            black_box(store.query(TABLE, &fx.scan).await.unwrap());
        }
    }
}

/// `op` with rusqlite inside `spawn_blocking`: the like-for-like baseline.
async fn raw_async(fx: &Fixture, op: Op, i: usize) {
    let raw = &fx.raw;
    match op {
        Op::PointGet => {
            let rk = row_key(i);
            black_box(blocking(raw, move |c| raw_get(c, POINT_PK, &rk)).await);
        }
        Op::InsertOrReplace => {
            let entity = fx.point[i].clone();
            black_box(blocking(raw, move |c| raw_upsert(c, &entity)).await);
        }
        Op::Batch => {
            let entities = fx.batch.clone();
            black_box(blocking(raw, move |c| raw_batch(c, &entities)).await);
        }
        Op::Range => {
            black_box(blocking(raw, |c| raw_range(c, RANGE_PK, RANGE_START, RANGE_END)).await);
        }
        Op::Scan => {
            black_box(blocking(raw, |c| raw_scan(c, SCAN_PK, SCAN_MIN_AGE)).await);
        }
    }
}

/// `op` with rusqlite on the calling thread (no `spawn_blocking`): the floor.
fn raw_sync(fx: &Fixture, conn: &mut Connection, op: Op, i: usize) {
    match op {
        Op::PointGet => {
            black_box(raw_get(conn, POINT_PK, &row_key(i)));
        }
        Op::InsertOrReplace => {
            let entity = fx.point[i].clone();
            black_box(raw_upsert(conn, &entity));
        }
        Op::Batch => {
            let entities = fx.batch.clone();
            black_box(raw_batch(conn, &entities));
        }
        Op::Range => {
            black_box(raw_range(conn, RANGE_PK, RANGE_START, RANGE_END));
        }
        Op::Scan => {
            black_box(raw_scan(conn, SCAN_PK, SCAN_MIN_AGE));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Criterion groups

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5));
}

fn bench_ops(c: &mut Criterion, rt: &Runtime, fx: &Fixture) {
    let n = fx.point.len();
    for op in Op::ALL {
        let mut group = c.benchmark_group(op.group());
        configure(&mut group);
        let mut rng = Rng(1);
        group.bench_function("tablekit", |b| {
            b.to_async(rt).iter(|| tablekit(fx, op, rng.below(n)));
        });
        let mut rng = Rng(1);
        group.bench_function("raw_rusqlite", |b| {
            b.to_async(rt).iter(|| raw_async(fx, op, rng.below(n)));
        });
        let mut rng = Rng(1);
        group.bench_function("raw_rusqlite_sync", |b| {
            let mut conn = fx.raw.lock().unwrap();
            b.iter(|| raw_sync(fx, &mut conn, op, rng.below(n)));
        });
        group.finish();
    }
}

// ---------------------------------------------------------------------------------------
// Point-get scaling

/// Where the scaling databases are kept between runs: `$TABLEKIT_BENCH_DIR`, else
/// `<target>/tablekit-bench`.
fn scaling_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TABLEKIT_BENCH_DIR") {
        return PathBuf::from(dir);
    }
    target_dir().join("tablekit-bench")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

fn scaling_key(i: usize) -> (String, String) {
    (
        format!("p{:05}", i / ROWS_PER_PARTITION),
        row_key(i % ROWS_PER_PARTITION),
    )
}

/// The path of a tablekit database holding `n` entities (partitions of 1,000), created
/// on first use and reused afterwards. Seeded with raw rusqlite, through the backend's
/// own upsert statement and codec, in transactions of 50,000 rows: going through the
/// store's 100-operation batches would be slower and the rows would be the same.
fn scaling_db(rt: &Runtime, n: usize) -> PathBuf {
    let dir = scaling_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("points-{n}.db"));
    if path.exists() {
        return path;
    }
    let tmp = dir.join(format!("points-{n}.db.seeding"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", tmp.display()));
    }
    let started = Instant::now();
    rt.block_on(async {
        let store = SqliteStore::create(&tmp).await.unwrap();
        store.create_table(TABLE).await.unwrap();
    });
    let mut conn = raw_open(&tmp);
    raw_seed(
        &mut conn,
        (0..n).map(|i| entity(&scaling_key(i).0, i % ROWS_PER_PARTITION)),
    );
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    drop(conn);
    std::fs::rename(&tmp, &path).unwrap();
    eprintln!(
        "seeded {} ({n} entities) in {:.1} s",
        path.display(),
        started.elapsed().as_secs_f64()
    );
    path
}

/// A scaling database opened by both sides.
struct ScalingDb {
    n: usize,
    store: SqliteStore,
    raw: Shared,
}

impl ScalingDb {
    fn open(rt: &Runtime, n: usize) -> Self {
        let path = scaling_db(rt, n);
        ScalingDb {
            n,
            store: rt.block_on(SqliteStore::create(&path)).unwrap(),
            raw: Arc::new(Mutex::new(raw_open(&path))),
        }
    }

    async fn tablekit_get(&self, i: usize) {
        let (pk, rk) = scaling_key(i);
        black_box(
            self.store
                .get(TABLE, &pk, &rk, None)
                .await
                .unwrap()
                .unwrap(),
        );
    }

    async fn raw_get(&self, i: usize) {
        let (pk, rk) = scaling_key(i);
        black_box(
            blocking(&self.raw, move |c| raw_get(c, &pk, &rk))
                .await
                .unwrap(),
        );
    }
}

/// The scaling databases, opened (and seeded if needed) on first use, so a filtered run
/// that skips them seeds nothing.
struct Scaling<'rt> {
    rt: &'rt Runtime,
    dbs: [OnceCell<ScalingDb>; 2],
}

impl Scaling<'_> {
    fn db(&self, index: usize) -> &ScalingDb {
        self.dbs[index].get_or_init(|| ScalingDb::open(self.rt, SCALING_SIZES[index]))
    }
}

fn bench_point_get_scaling(c: &mut Criterion, rt: &Runtime, scaling: &Scaling<'_>) {
    let mut group = c.benchmark_group("point_get_scaling");
    configure(&mut group);
    for (index, n) in SCALING_SIZES.into_iter().enumerate() {
        let mut rng = Rng(3);
        group.bench_function(BenchmarkId::new("tablekit", n), |b| {
            let db = scaling.db(index);
            b.to_async(rt).iter(|| db.tablekit_get(rng.below(db.n)));
        });
        let mut rng = Rng(3);
        group.bench_function(BenchmarkId::new("raw_rusqlite", n), |b| {
            let db = scaling.db(index);
            b.to_async(rt).iter(|| db.raw_get(rng.below(db.n)));
        });
    }
    group.finish();
}

// ---------------------------------------------------------------------------------------
// Interleaved A/B pass

/// Rounds of the interleaved pass, unless `TABLEKIT_BENCH_AB_ROUNDS` says otherwise.
const AB_ROUNDS: usize = 30;

fn ab_rounds() -> usize {
    std::env::var("TABLEKIT_BENCH_AB_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(AB_ROUNDS)
}

/// Per-iteration costs of each variant in each round of the interleaved pass.
struct Samples {
    /// Wall-clock nanoseconds.
    wall: Vec<Vec<f64>>,
    /// Nanoseconds of CPU time of the whole process (every thread, user and system),
    /// where the platform tells it. Unlike wall time it leaves out the time the caller
    /// and the worker spend waiting for a core: on a machine whose cores are all busy,
    /// that wait is most of the difference between two runs.
    cpu: Option<Vec<Vec<f64>>>,
}

/// The CPU time this process has used so far, in nanoseconds.
#[cfg(unix)]
fn process_cpu_ns() -> Option<f64> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Some(t.tv_sec as f64 * 1e9 + t.tv_nsec as f64)
}

#[cfg(not(unix))]
fn process_cpu_ns() -> Option<f64> {
    None
}

/// Runs the variants in turn, `chunk` iterations each, [`ab_rounds`] times, rotating which
/// goes first; returns each variant's cost per iteration in each round. Interleaving
/// makes every variant see the same machine: on a small shared VM, load and clock drift
/// over the seconds between two criterion functions can exceed the margins under test.
fn interleave(chunk: u64, variants: &mut [&mut dyn FnMut(u64)]) -> Samples {
    for run in variants.iter_mut() {
        run(chunk); // warm up
    }
    let rounds = ab_rounds();
    let mut wall = vec![Vec::with_capacity(rounds); variants.len()];
    let mut cpu = vec![Vec::with_capacity(rounds); variants.len()];
    for round in 0..rounds {
        for k in 0..variants.len() {
            let v = (round + k) % variants.len();
            let (started, cpu_started) = (Instant::now(), process_cpu_ns());
            (variants[v])(chunk);
            wall[v].push(started.elapsed().as_nanos() as f64 / chunk as f64);
            if let (Some(a), Some(b)) = (cpu_started, process_cpu_ns()) {
                cpu[v].push((b - a) / chunk as f64);
            }
        }
    }
    let cpu = cpu.iter().all(|c| c.len() == rounds).then_some(cpu);
    Samples { wall, cpu }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The median over rounds of `a / b`.
fn ratio(a: &[f64], b: &[f64]) -> f64 {
    median(a.iter().zip(b).map(|(x, y)| x / y).collect())
}

/// The three compared functions of `op`, each running `k` iterations a call: `tablekit`,
/// `raw_rusqlite`, `raw_rusqlite_sync`. Each picks its keys from its own source seeded
/// alike, so all three see the same keys in the same order.
fn variants<'a>(rt: &'a Runtime, fx: &'a Fixture, op: Op) -> [Box<dyn FnMut(u64) + 'a>; 3] {
    let n = fx.point.len();
    let (mut r1, mut r2, mut r3) = (Rng(9), Rng(9), Rng(9));
    [
        Box::new(move |k| {
            rt.block_on(async {
                for _ in 0..k {
                    tablekit(fx, op, r1.below(n)).await;
                }
            });
        }),
        Box::new(move |k| {
            rt.block_on(async {
                for _ in 0..k {
                    raw_async(fx, op, r2.below(n)).await;
                }
            });
        }),
        Box::new(move |k| {
            let mut conn = fx.raw.lock().unwrap();
            for _ in 0..k {
                raw_sync(fx, &mut conn, op, r3.below(n));
            }
        }),
    ]
}

fn ab_ops(rt: &Runtime, fx: &Fixture, wanted: &dyn Fn(&str) -> bool) {
    eprintln!(
        "\ninterleaved A/B ({} rounds; time = median per-iteration time, ratio = median of per-round ratios; cpu = the same ratios of the process's CPU time)",
        ab_rounds()
    );
    eprintln!(
        "{:<30} {:>12} {:>12} {:>12} {:>9} {:>9} {:>9} {:>9}",
        "group",
        "tablekit",
        "raw (async)",
        "raw (sync)",
        "tk/async",
        "tk/sync",
        "cpu async",
        "cpu sync"
    );
    for op in Op::ALL.into_iter().filter(|op| wanted(op.group())) {
        let [mut tk, mut raw, mut sync] = variants(rt, fx, op);
        let s = interleave(op.chunk(), &mut [&mut *tk, &mut *raw, &mut *sync]);
        let t = &s.wall;
        let (tk_raw, tk_sync) = (ratio(&t[0], &t[1]), ratio(&t[0], &t[2]));
        let cpu = |b: usize| {
            s.cpu
                .as_ref()
                .map_or("-".to_owned(), |c| format!("{:.2}x", ratio(&c[0], &c[b])))
        };
        eprintln!(
            "{:<30} {:>12} {:>12} {:>12} {:>8.2}x {:>8.2}x {:>9} {:>9}  {}",
            op.group(),
            fmt_ns(median(t[0].clone())),
            fmt_ns(median(t[1].clone())),
            fmt_ns(median(t[2].clone())),
            tk_raw,
            tk_sync,
            cpu(1),
            cpu(2),
            Baseline::verdict(op, tk_raw, tk_sync)
        );
    }
}

fn ab_scaling(rt: &Runtime, scaling: &Scaling<'_>) {
    let (small, large) = (scaling.db(0), scaling.db(1));
    let (mut r1, mut r2, mut r3, mut r4) = (Rng(11), Rng(11), Rng(11), Rng(11));
    let mut tk_small = |k: u64| {
        rt.block_on(async {
            for _ in 0..k {
                small.tablekit_get(r1.below(small.n)).await;
            }
        });
    };
    let mut tk_large = |k: u64| {
        rt.block_on(async {
            for _ in 0..k {
                large.tablekit_get(r2.below(large.n)).await;
            }
        });
    };
    let mut raw_small = |k: u64| {
        rt.block_on(async {
            for _ in 0..k {
                small.raw_get(r3.below(small.n)).await;
            }
        });
    };
    let mut raw_large = |k: u64| {
        rt.block_on(async {
            for _ in 0..k {
                large.raw_get(r4.below(large.n)).await;
            }
        });
    };
    let t = interleave(
        1_000,
        &mut [&mut tk_small, &mut tk_large, &mut raw_small, &mut raw_large],
    )
    .wall;
    for (label, a, b) in [("tablekit", 0, 1), ("raw_rusqlite", 2, 3)] {
        let growth = ratio(&t[b], &t[a]);
        eprintln!(
            "point_get_scaling {label:<12} {}: {}  {}: {}  growth {growth:.2}x  {}",
            small.n,
            fmt_ns(median(t[a].clone())),
            large.n,
            fmt_ns(median(t[b].clone())),
            verdict(growth, 1.5)
        );
    }
}

// ---------------------------------------------------------------------------------------
// Instruction counts (callgrind)

/// The environment variable that asks for the instruction pass instead of the timed ones.
const INSTRUCTIONS_VAR: &str = "TABLEKIT_BENCH_INSTRUCTIONS";
/// Set on the child that runs under callgrind.
const COUNTED_CHILD_VAR: &str = "TABLEKIT_BENCH_COUNTED_CHILD";

impl Op {
    /// Iterations of each function counted in the instruction pass, enough that the WAL
    /// checkpoints (one every ~1,000 written pages) and the other periodic work of each
    /// side fall into its count in proportion; `None` for the operations whose caller
    /// busy-waits for its answer (a point get, a single write), where the count would
    /// measure how long valgrind, which runs one thread at a time, left the caller
    /// spinning.
    fn counted(self) -> Option<u64> {
        match self {
            Op::PointGet | Op::InsertOrReplace => None,
            Op::Batch => Some(300),
            Op::Range | Op::Scan => Some(30),
        }
    }

    /// The operations the instruction pass counts, of those `wanted`.
    fn counted_ops(wanted: &dyn Fn(&str) -> bool) -> Vec<(Op, u64)> {
        Op::ALL
            .into_iter()
            .filter(|op| wanted(op.group()))
            .filter_map(|op| Some((op, op.counted()?)))
            .collect()
    }
}

/// Runs one counted function. Callgrind dumps its counters as this function starts
/// (`--dump-before`), and a dump holds what ran since the previous one, every thread's
/// included (the store's worker, tokio's blocking pool): so the dump taken as the next
/// call starts holds this call's instructions.
#[inline(never)]
fn counted_phase(run: &mut dyn FnMut(u64), iterations: u64) {
    run(black_box(iterations));
}

/// The child's part: the fixture, then for each wanted group its three functions, warmed
/// up, then counted one after the other, and a last empty call that ends the third
/// count. Each group thus makes four dumps: the warm-up (and, for the first, the
/// fixture), then its three counts.
fn counted_child(rt: &Runtime, fx: &Fixture, wanted: &dyn Fn(&str) -> bool) {
    for (op, iterations) in Op::counted_ops(wanted) {
        let mut runs = variants(rt, fx, op);
        for run in &mut runs {
            run(op.chunk());
        }
        for run in &mut runs {
            counted_phase(&mut **run, iterations);
        }
        counted_phase(&mut |_| {}, 0);
    }
}

/// The instructions of each dump of a callgrind run whose files start with `prefix`, in
/// dump order (`<prefix>.1`, `<prefix>.2`, …).
fn callgrind_dumps(prefix: &Path) -> Vec<u64> {
    let mut counts = Vec::new();
    for part in 1.. {
        let Ok(text) = std::fs::read_to_string(format!("{}.{part}", prefix.display())) else {
            break;
        };
        let total = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("totals:")
                    .or_else(|| l.strip_prefix("summary:"))
            })
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("a callgrind dump with its totals");
        counts.push(total);
    }
    counts
}

/// The instruction pass: reruns this bench under `valgrind --tool=callgrind`, which
/// counts the instructions each function executes (user space, all threads), and prints
/// the counts per iteration and their ratios. Unlike time, the count does not depend on
/// the machine's load, so two runs agree to within a fraction of a percent; it leaves
/// out what happens in the kernel (system calls, I/O, sleeping and waking threads).
fn instruction_pass(filter: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("callgrind.out");
    let started = Instant::now();
    let status = std::process::Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--quiet",
            &format!("--callgrind-out-file={}", prefix.display()),
            "--dump-before=*counted_phase*",
        ])
        .arg(std::env::current_exe().unwrap())
        .args(filter)
        .env(COUNTED_CHILD_VAR, "1")
        .status()
        .expect("valgrind on the PATH (the instruction pass runs the bench under callgrind)");
    assert!(status.success(), "the counted run failed: {status}");
    let counts = callgrind_dumps(&prefix);
    let wanted = |group: &str| filter.is_none_or(|f| group.contains(f));
    let ops = Op::counted_ops(&wanted);
    assert!(
        counts.len() >= 4 * ops.len(),
        "four dumps per group: {counts:?}"
    );
    eprintln!(
        "\ninstructions per iteration (callgrind, user space, all threads; {:.0} s)",
        started.elapsed().as_secs_f64()
    );
    eprintln!(
        "{:<30} {:>12} {:>12} {:>12} {:>9} {:>9}",
        "group", "tablekit", "raw (async)", "raw (sync)", "tk/async", "tk/sync"
    );
    for ((op, iterations), counts) in ops.iter().zip(counts.chunks(4)) {
        let per = |i: usize| counts[i + 1] as f64 / *iterations as f64;
        let (tk, raw, sync) = (per(0), per(1), per(2));
        eprintln!(
            "{:<30} {:>12.0} {:>12.0} {:>12.0} {:>8.3}x {:>8.3}x  {}",
            op.group(),
            tk,
            raw,
            sync,
            tk / raw,
            tk / sync,
            Baseline::verdict(*op, tk / raw, tk / sync)
        );
    }
    eprintln!("(point_get and insert_or_replace are not counted: their callers busy-wait)");
}

// ---------------------------------------------------------------------------------------
// Summary of the criterion run

/// Criterion's output directory, found the way criterion finds it.
fn criterion_dir() -> PathBuf {
    std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("criterion"))
}

/// The median of the latest run of `group/function`, in nanoseconds.
fn median_ns(group: &str, function: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(function)
        .join("new/estimates.json");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    json["median"]["point_estimate"].as_f64()
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.2} µs", ns / 1e3)
    }
}

fn verdict(ratio: f64, target: f64) -> String {
    if ratio <= target {
        "ok".to_owned()
    } else {
        format!("MISS (target {target}x)")
    }
}

/// Prints the criterion medians and the ratios the targets are about (to stderr, like
/// criterion's progress output). Reads criterion's `estimates.json`, so a filtered run
/// shows the latest stored result of the groups it skipped.
fn print_criterion_summary() {
    eprintln!("\ncriterion medians (latest run of each benchmark) and ratios");
    eprintln!(
        "{:<30} {:>12} {:>12} {:>12} {:>9} {:>9}",
        "group", "tablekit", "raw (async)", "raw (sync)", "tk/async", "tk/sync"
    );
    for op in Op::ALL {
        let group = op.group();
        let (Some(tk), Some(raw), Some(sync)) = (
            median_ns(group, "tablekit"),
            median_ns(group, "raw_rusqlite"),
            median_ns(group, "raw_rusqlite_sync"),
        ) else {
            continue;
        };
        eprintln!(
            "{group:<30} {:>12} {:>12} {:>12} {:>8.2}x {:>8.2}x  {}",
            fmt_ns(tk),
            fmt_ns(raw),
            fmt_ns(sync),
            tk / raw,
            tk / sync,
            Baseline::verdict(op, tk / raw, tk / sync)
        );
    }
    let [small, large] = SCALING_SIZES;
    for function in ["tablekit", "raw_rusqlite"] {
        let at = |n: usize| median_ns("point_get_scaling", &format!("{function}/{n}"));
        if let (Some(a), Some(b)) = (at(small), at(large)) {
            eprintln!(
                "point_get_scaling {function:<12} {small}: {}  {large}: {}  growth {:.2}x  {}",
                fmt_ns(a),
                fmt_ns(b),
                b / a,
                verdict(b / a, 1.5)
            );
        }
    }
}

// ---------------------------------------------------------------------------------------

/// What the command line asks of the interleaved pass: `None` to skip it (criterion's
/// `--test`, `--list`, `--profile-time` modes, or `TABLEKIT_BENCH_AB=0`), else the
/// criterion filter, if any, to choose its groups.
fn ab_filter() -> Option<Option<String>> {
    if std::env::var("TABLEKIT_BENCH_AB").is_ok_and(|v| v == "0") {
        return None;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args
        .iter()
        .any(|a| matches!(a.as_str(), "--test" | "--list" | "--profile-time"))
    {
        return None;
    }
    Some(criterion_filter(&args))
}

/// The criterion filter given on the command line, if any: the first argument that is
/// neither an option nor an option's value.
fn criterion_filter(args: &[String]) -> Option<String> {
    const TAKES_VALUE: [&str; 14] = [
        "--save-baseline",
        "--baseline",
        "--baseline-lenient",
        "--load-baseline",
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--plotting-backend",
        "--output-format",
        "--color",
    ];
    args.iter()
        .enumerate()
        .find(|(i, a)| {
            !a.starts_with('-') && (*i == 0 || !TAKES_VALUE.contains(&args[i - 1].as_str()))
        })
        .map(|(_, a)| a.clone())
}

fn main() {
    let is_child = std::env::var_os(COUNTED_CHILD_VAR).is_some();
    if is_child || std::env::var(INSTRUCTIONS_VAR).is_ok_and(|v| v == "1") {
        let filter = criterion_filter(&std::env::args().skip(1).collect::<Vec<_>>());
        let wanted = |group: &str| filter.as_deref().is_none_or(|f| group.contains(f));
        if !is_child {
            instruction_pass(filter.as_deref());
            return;
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let fx = Fixture::new(&rt);
        counted_child(&rt, &fx, &wanted);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let fx = Fixture::new(&rt);
    let scaling = Scaling {
        rt: &rt,
        dbs: [OnceCell::new(), OnceCell::new()],
    };
    bench_ops(&mut c, &rt, &fx);
    bench_point_get_scaling(&mut c, &rt, &scaling);
    c.final_summary();
    if let Some(filter) = ab_filter() {
        let wanted = |group: &str| filter.as_deref().is_none_or(|f| group.contains(f));
        print_criterion_summary();
        ab_ops(&rt, &fx, &wanted);
        if wanted("point_get_scaling") {
            ab_scaling(&rt, &scaling);
        }
    }
}
