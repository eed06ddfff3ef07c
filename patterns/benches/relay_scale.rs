//! The outbox relay's cost against the size of the table it serves: one `Relay::run_once`
//! pass over tables of 10^4, 10^5 and 10^6 entities, with no pending work and with 100
//! pending outbox entries, next to what the previous relay did per pass — filter the whole
//! table on a non-key property (`consistency::outbox::scan`), timed on the same table in
//! the same run. The relay reads the pending markers and, per marker, one RowKey range of
//! one partition, so its median should not grow with the table (target: at most 1.2x
//! from the smallest table to the largest); the scan's grows with it.
//!
//! Each table holds plain entities over `min(1000, n / 100)` partitions (at least 1),
//! written by `bulk_import` in entity group transactions of up to 100 (not measured). The
//! pending work is real: before each pass 100 upserts through an `IndexedTable` whose
//! entity declares an index in another table, one in each of 100 distinct partitions of
//! the seeded table, with no sink, so every write leaves its outbox entry and its pending
//! marker as a crash after the commit would. The writers' marker lease and the relay's
//! grace and `late` allowances are zero, so a pass may publish them at once (in
//! production the relay waits them out; the reads are the same). The relay publishes to a
//! sink that only counts. Every pass's `RelayReport` is checked (100 published, or none),
//! so the bench cannot time an empty pass by mistake; "rows read" is the markers plus the
//! outbox entries the pass read, the baseline's is every row of the table. The tables
//! take turns pass by pass (the baseline's scans first, apart), so a disturbance of the
//! machine falls on every size alike.
//!
//! On Azurite the pass with pending work does grow with the table: Azurite (3.35, in
//! memory) answers every filtered query, a PartitionKey/RowKey range included, by running
//! the filter over the whole table (`LokiTableMetadataStore.queryTableEntities`:
//! `.chain().where(filter)`), so each marked partition's range query costs about one
//! table scan there. The Table service serves it from its key index.
//!
//! `cargo bench -p tablekit-patterns --bench relay_scale` (`BENCH_SIZES`, a comma list of
//! table sizes, default `10000,100000,1000000` on SQLite and `10000,100000` on Azure;
//! `BENCH_PASSES` per case, default 7; `BENCH_STORE`, a store connection string, default
//! SQLite files — `azure:UseDevelopmentStorage=true` with `--features azure` measures
//! Azurite, in fresh tables that are deleted at the end; `BENCH_VERBOSE=1` prints every
//! pass). The SQLite tables are seeded
//! once into `target/bench-data/relay_scale_<n>.db` and reused while they hold the right
//! count, so reruns skip the seeding.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tablekit_core::{AnyStore, Entity as Row, TableStore};
use tablekit_derive::Entity;
use tablekit_patterns::consistency::{
    BoxFuture, Engine, Envelope, OutboxSink, Relay, RelayReport, outbox,
};
use tablekit_patterns::import::bulk_import;
use tablekit_patterns::index::IndexedTable;

/// The pending writes: an entity with an index in another table, so each write leaves
/// follow-up work in the outbox of its partition.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "RelayScale",
    kind = "Customer",
    partition_key = "{part}",
    row_key = "w{id:03}",
    crate = "tablekit_core"
)]
#[index(
    name = "by_email",
    table = "RelayScaleByEmail",
    partition_key = "{part}",
    row_key = "{email}"
)]
struct Customer {
    part: String,
    id: u32,
    name: String,
    email: String,
}

/// Pending outbox entries per pending case.
const PENDING: usize = 100;
/// Entities per `bulk_import` call while seeding (bounds the memory of a large seed).
const SEED_CHUNK: usize = 100_000;

/// A sink that only counts what the relay hands it.
#[derive(Default)]
struct CountingSink(AtomicUsize);

impl OutboxSink for CountingSink {
    fn publish<'a>(
        &'a self,
        _envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Box::pin(async { Ok(()) })
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn table_name(n: usize) -> String {
    format!("RelayScale{n}")
}

fn partitions(n: usize) -> usize {
    (n / 100).clamp(1, 1000)
}

fn partition_key(p: usize) -> String {
    format!("p{p:04}")
}

/// The partition of the `k`th pending write: 100 distinct partitions spread over the
/// seeded ones (new ones only when the table has fewer than 100).
fn pending_partition(k: usize, partitions: usize) -> String {
    partition_key(k * (partitions / PENDING).max(1))
}

/// The seeded entity `i`: a plain row, no kind marker, about 100 bytes of properties.
fn seed_row(i: usize, partitions: usize) -> Row {
    Row::new(partition_key(i % partitions), format!("s{i:08}"))
        .with("Name", format!("customer {i}"))
        .with("Email", format!("c{i}@contoso.com"))
        .with("Amount", i64::try_from(i).unwrap())
        .with("Active", i.is_multiple_of(3))
}

/// `target/bench-data`, next to the bench binary (`target/release/deps/…`).
fn bench_data_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe
        .ancestors()
        .nth(3)
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf);
    target.join("bench-data")
}

/// The seeded rows in a SQLite file's table (0 when it does not read), straight from the
/// SQLite backend's layout (`t_<lowercase name>`, keyed by `(pk, rk)`).
fn sqlite_seeded(path: &Path, table: &str) -> usize {
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    let sql = format!(
        "SELECT count(*) FROM \"t_{}\" WHERE rk >= 's' AND rk < 't'",
        table.to_ascii_lowercase()
    );
    conn.query_row(&sql, [], |row| row.get::<_, i64>(0))
        .ok()
        .and_then(|count| usize::try_from(count).ok())
        .unwrap_or(0)
}

async fn seed(store: &AnyStore, table: &str, n: usize) {
    store.create_table_if_not_exists(table).await.unwrap();
    let partitions = partitions(n);
    let started = Instant::now();
    let mut batches = 0;
    for start in (0..n).step_by(SEED_CHUNK) {
        let end = (start + SEED_CHUNK).min(n);
        let rows: Vec<Row> = (start..end).map(|i| seed_row(i, partitions)).collect();
        let report = bulk_import(store, table, rows, 8, |_, _| {}).await.unwrap();
        assert!(
            report.failed.is_empty(),
            "seeding failed: {:?}",
            report.failed.first()
        );
        assert_eq!(report.written, end - start);
        batches += report.batches;
        if n > SEED_CHUNK {
            println!(
                "  seeding {table}: {end}/{n} in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "seeded {table}: {n} entities over {partitions} partitions, {batches} batches, in {seconds:.1} s ({:.0}/s)",
        n as f64 / seconds
    );
}

/// 100 upserts through the indexed table, one per distinct partition, each leaving one
/// outbox entry and its partition's pending marker.
async fn make_pending(customers: &IndexedTable<Customer, AnyStore>, partitions: usize) {
    let round = uuid::Uuid::new_v4().simple().to_string();
    for k in 0..PENDING {
        let customer = Customer {
            part: pending_partition(k, partitions),
            id: u32::try_from(k).unwrap(),
            name: format!("pending {k}"),
            email: format!("c{k}.{round}@contoso.com"),
        };
        let outcome = customers.upsert(&customer).await.unwrap();
        assert!(
            outcome.operations > 0 && !outcome.published,
            "the write left no pending work: {outcome:?}"
        );
    }
}

fn check(report: &RelayReport, pending: usize) {
    assert_eq!(
        (
            report.partitions,
            report.entries,
            report.published,
            report.cleared
        ),
        (pending, pending, pending, pending),
        "{report:?}"
    );
    assert_eq!((report.deferred, report.malformed), (0, 0), "{report:?}");
}

/// One case's figures (milliseconds).
struct Case {
    n: usize,
    pending: usize,
    relay: Vec<f64>,
    rows_read: usize,
    scan: Vec<f64>,
    scanned: usize,
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// One seeded table, its indexed writer and its relay.
struct Subject {
    n: usize,
    table: String,
    partitions: usize,
    store: AnyStore,
    sink: Arc<CountingSink>,
    relay: Relay<AnyStore>,
    customers: IndexedTable<Customer, AnyStore>,
}

impl Subject {
    async fn open(store: AnyStore, n: usize) -> Self {
        let sink = Arc::new(CountingSink::default());
        let relay = Relay::options()
            .grace(Duration::ZERO)
            .late(Duration::ZERO)
            .build(store.clone(), Arc::clone(&sink) as Arc<dyn OutboxSink>);
        let table = table_name(n);
        let customers = IndexedTable::<Customer, _>::options()
            .name(&table)
            .engine(
                Engine::options()
                    .marker_lease(Duration::ZERO)
                    .build(store.clone()),
            )
            .follow_up_elsewhere()
            .build(store.clone())
            .unwrap();
        customers.create().await.unwrap();
        let subject = Subject {
            n,
            table,
            partitions: partitions(n),
            store,
            sink,
            relay,
            customers,
        };
        // Warm-up, not measured: whatever an interrupted run left goes, and the 100
        // indexed primaries exist from here on, so both cases see the same table.
        subject.make_pending().await;
        let warm = subject.relay.run_once().await.unwrap();
        assert!(warm.published >= PENDING, "{warm:?}");
        check(&subject.relay.run_once().await.unwrap(), 0);
        subject
    }

    async fn make_pending(&self) {
        make_pending(&self.customers, self.partitions).await;
    }

    /// The baseline: the whole table filtered on the outbox marker, as the old relay did
    /// per pass. Returns the milliseconds.
    async fn scan(&self, pending: usize) -> f64 {
        let started = Instant::now();
        let found = outbox::scan(&self.store, &self.table).await.unwrap();
        let took = ms(started);
        assert_eq!(found.len(), pending, "the baseline scan's outbox entries");
        took
    }

    /// One measured relay pass over `pending` entries (written before). Returns the
    /// milliseconds and the store rows it read.
    async fn pass(&self, pending: usize) -> (f64, usize) {
        let published = self.sink.0.load(Ordering::Relaxed);
        let started = Instant::now();
        let report = self.relay.run_once().await.unwrap();
        let took = ms(started);
        check(&report, pending);
        assert_eq!(self.sink.0.load(Ordering::Relaxed) - published, pending);
        (took, report.partitions + report.entries)
    }
}

/// Every case, the tables taking turns pass by pass, so a disturbance of the machine
/// (another process, a file-system flush) falls on every size alike.
async fn measure(subjects: &[Subject], passes: usize) -> Vec<Case> {
    let verbose = std::env::var("BENCH_VERBOSE").is_ok_and(|v| v == "1");
    let mut cases = Vec::new();
    for pending in [0, PENDING] {
        let mut of_pending: Vec<Case> = subjects
            .iter()
            .map(|s| Case {
                n: s.n,
                pending,
                relay: Vec::new(),
                rows_read: 0,
                scan: Vec::new(),
                scanned: s.n + PENDING + pending,
            })
            .collect();
        // The baseline first, on its own: its scans must not disturb the relay's passes.
        for subject in subjects {
            if pending > 0 {
                subject.make_pending().await;
            }
        }
        for _ in 0..passes {
            for (subject, case) in subjects.iter().zip(&mut of_pending) {
                case.scan.push(subject.scan(pending).await);
            }
        }
        if pending > 0 {
            // The tables may share a store (and its markers), or not: a pass each clears
            // them all.
            let mut published = 0;
            for subject in subjects {
                published += subject.relay.run_once().await.unwrap().published;
            }
            assert_eq!(published, pending * subjects.len());
            for subject in subjects {
                check(&subject.relay.run_once().await.unwrap(), 0);
            }
        }
        for _ in 0..passes {
            for (subject, case) in subjects.iter().zip(&mut of_pending) {
                if pending > 0 {
                    subject.make_pending().await;
                }
                let (took, rows) = subject.pass(pending).await;
                case.relay.push(took);
                case.rows_read = rows;
            }
        }
        for case in &of_pending {
            println!(
                "  {} entities, {pending} pending: relay min {:.3} ms, median {:.3} ms; baseline scan median {:.1} ms",
                case.n,
                min(&case.relay),
                median(case.relay.clone()),
                median(case.scan.clone())
            );
            if verbose {
                println!("    relay passes {:.3?}", case.relay);
                println!("    baseline scans {:.1?}", case.scan);
            }
        }
        cases.extend(of_pending);
    }
    cases
}

fn main() {
    let passes = env_usize("BENCH_PASSES", 7).max(1);
    let store_url = std::env::var("BENCH_STORE").ok();
    let azure = store_url
        .as_deref()
        .is_some_and(|u| u.starts_with("azure:"));
    let default_sizes = if azure {
        "10000,100000"
    } else {
        "10000,100000,1000000"
    };
    let mut sizes: Vec<usize> = std::env::var("BENCH_SIZES")
        .unwrap_or_else(|_| default_sizes.to_owned())
        .split(',')
        .map(|s| {
            s.trim()
                .replace('_', "")
                .parse()
                .expect("BENCH_SIZES: numbers")
        })
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let cases = runtime.block_on(async {
        let cases;
        match store_url {
            Some(url) => {
                let url = if azure {
                    format!("{url};TablePrefix=b{}", uuid::Uuid::new_v4().simple())
                } else {
                    url
                };
                println!("store: {}", url.split(';').next().unwrap_or_default());
                let store = AnyStore::create(&url).await.unwrap();
                let mut subjects = Vec::new();
                for &n in &sizes {
                    seed(&store, &table_name(n), n).await;
                    subjects.push(Subject::open(store.clone(), n).await);
                }
                cases = measure(&subjects, passes).await;
                if azure {
                    for table in store.list_tables("").await.unwrap() {
                        store.delete_table(&table).await.unwrap();
                    }
                }
            }
            None => {
                let dir = bench_data_dir();
                std::fs::create_dir_all(&dir).unwrap();
                println!("store: SQLite files in {}", dir.display());
                let mut subjects = Vec::new();
                for &n in &sizes {
                    let path = dir.join(format!("relay_scale_{n}.db"));
                    let table = table_name(n);
                    let reuse = path.exists() && sqlite_seeded(&path, &table) == n;
                    if !reuse {
                        for suffix in ["", "-wal", "-shm"] {
                            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                        }
                    }
                    let store = AnyStore::create(&format!("sqlite:{}", path.display()))
                        .await
                        .unwrap();
                    if reuse {
                        println!("reusing {} ({n} entities)", path.display());
                    } else {
                        seed(&store, &table, n).await;
                    }
                    subjects.push(Subject::open(store, n).await);
                }
                cases = measure(&subjects, passes).await;
            }
        }
        cases
    });
    let mut cases = cases;
    cases.sort_by_key(|c| (c.n, c.pending));
    println!();
    println!(
        "one relay pass, {passes} passes per case (ms); baseline: outbox::scan of the whole table"
    );
    println!(
        "{:>9} {:>8} {:>10} {:>11} {:>10} {:>14} {:>13}",
        "entities",
        "pending",
        "relay min",
        "relay med",
        "rows read",
        "baseline med",
        "baseline rows"
    );
    for case in &cases {
        println!(
            "{:>9} {:>8} {:>10.3} {:>11.3} {:>10} {:>14.1} {:>13}",
            case.n,
            case.pending,
            min(&case.relay),
            median(case.relay.clone()),
            case.rows_read,
            median(case.scan.clone()),
            case.scanned
        );
    }
    let (Some(&smallest), Some(&largest)) = (sizes.first(), sizes.last()) else {
        return;
    };
    if smallest == largest {
        return;
    }
    println!();
    for pending in [0, PENDING] {
        let of = |n: usize| {
            cases
                .iter()
                .find(|c| c.n == n && c.pending == pending)
                .expect("measured")
        };
        let (a, b) = (of(smallest), of(largest));
        println!(
            "growth {smallest} -> {largest} entities, {pending} pending: relay median {:.2}x (target at most 1.2x), baseline scan median {:.1}x",
            median(b.relay.clone()) / median(a.relay.clone()),
            median(b.scan.clone()) / median(a.scan.clone())
        );
    }
}
