//! Streaming reads against collecting reads, and a streamed import against a collected
//! one, side by side in one run, on SQLite files:
//!
//! 1. Time of a fan-out over 256 hash buckets (`HashBuckets::new(2)`) of a table of
//!    typed orders (`partition_key = "{id:hash2}"`, `row_key = "{id:08}"`, about 200
//!    bytes of payload each), for each table size: the latency of the first page
//!    (`fan_out_page`, 100 items, no cursor); everything read through `fan_out_stream`
//!    (pages of 1000), the consumer counting the orders, checking that they come in key
//!    order, each once, and dropping them; and the collecting `fan_out` as the baseline,
//!    checked the same way. Rounds alternate which of the two goes first; medians.
//! 2. Peak resident memory of each read: the read runs again in a child process (this
//!    bench binary, re-invoked with `STREAM_READS_CHILD=stream|collect`), which opens the
//!    seeded file, notes its `VmRSS`, performs only the read (checked as above) and
//!    reports its `VmHWM` minus that. Beside it, the peaks of `RssAnon` (the heap) and
//!    `RssFile` (mapped file pages: SQLite reads the file through `mmap`), sampled every
//!    millisecond by a thread of the child. Target: the streaming read's peak grows at
//!    most 1.5x from the smallest table to the largest.
//! 3. `bulk_import` of a `Vec` of the orders against `import_stream` of the same orders
//!    generated lazily (`to_entity` as the import pulls them), into fresh tables of one
//!    SQLite file (dropped after each import), rounds alternating which goes first;
//!    medians and the ratio (target: within 10 %). The stream pays for generating the
//!    entities inside its time, so the Vec's building is timed apart and the ratio is
//!    printed against the import alone and against building plus importing.
//!
//! The child opens the file with `mmap_size = 0`: with memory-mapped reads (the default,
//! 1 GiB) every page of the file the read touches counts in the process's `RssFile` once
//! per pooled connection — page cache, not the read's memory, and growing with the file
//! whatever the read holds. The stream's heap stays flat; the collecting read's grows with
//! the result.
//!
//! `cargo bench -p tablekit-patterns --bench stream_reads` (`BENCH_SIZES`, a comma list
//! of table sizes, default `10000,100000`; `BENCH_ROUNDS`, timed rounds per case, default
//! 5; `BENCH_MEM_RUNS`, child processes per memory case, default 3, the median reported;
//! `BENCH_IMPORT`, the entities imported in part 3, default the largest size). The tables
//! are seeded once (by `import_records`, not measured) into
//! `target/bench-data/stream_reads_<n>.db` and reused while they hold the right count.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use futures::StreamExt;
use tablekit_core::typed::{Record, Table};
use tablekit_core::{AnyStore, Query, TableStore};
use tablekit_derive::Entity;
use tablekit_patterns::buckets::HashBuckets;
use tablekit_patterns::import::{ImportOptions, bulk_import, import_records, import_stream};

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "StreamReads",
    kind = "Order",
    partition_key = "{id:hash2}",
    row_key = "{id:08}",
    crate = "tablekit_core"
)]
struct Order {
    id: u32,
    payload: String,
}

/// Payload characters per order.
const PAYLOAD: usize = 200;
/// The first page's size.
const FIRST_PAGE: usize = 100;
/// The stream's page size.
const STREAM_PAGE: usize = 1000;
/// Concurrency argument of the collecting `fan_out`.
const COLLECT_CONCURRENCY: usize = 16;

/// The order `id`, with a payload of `PAYLOAD` characters.
fn order(id: usize) -> Order {
    let mut payload = format!("order {id:08} ");
    while payload.len() < PAYLOAD {
        payload.push(char::from(b'a' + u8::try_from(payload.len() % 26).unwrap()));
    }
    Order {
        id: u32::try_from(id).unwrap(),
        payload,
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

/// `target/bench-data`, next to the bench binary (`target/release/deps/…`).
fn bench_data_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe
        .ancestors()
        .nth(3)
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf);
    target.join("bench-data")
}

fn seeded_path(n: usize) -> PathBuf {
    bench_data_dir().join(format!("stream_reads_{n}.db"))
}

/// The rows of a table in a SQLite file (0 when it does not read), straight from the
/// SQLite backend's layout (`t_<lowercase name>`).
fn sqlite_count(path: &Path, table: &str) -> usize {
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    let sql = format!("SELECT count(*) FROM \"t_{}\"", table.to_ascii_lowercase());
    conn.query_row(&sql, [], |row| row.get::<_, i64>(0))
        .ok()
        .and_then(|count| usize::try_from(count).ok())
        .unwrap_or(0)
}

async fn open(path: &Path) -> AnyStore {
    AnyStore::create(&format!("sqlite:{}", path.display()))
        .await
        .unwrap()
}

/// The seeded file of `n` orders, written now unless a previous run left it.
async fn seeded(n: usize) -> PathBuf {
    let path = seeded_path(n);
    if path.exists() && sqlite_count(&path, Order::TABLE) == n {
        println!("reusing {} ({n} orders)", path.display());
        return path;
    }
    std::fs::create_dir_all(bench_data_dir()).unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let store = open(&path).await;
    let orders = Table::<Order, _>::new(store);
    orders.create().await.unwrap();
    let started = Instant::now();
    let report = import_records(
        &orders,
        futures::stream::iter((0..n).map(order)),
        &ImportOptions::default(),
        |_| {},
    )
    .await
    .unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failed.first());
    assert_eq!(report.written, n);
    drop(orders);
    assert_eq!(sqlite_count(&path, Order::TABLE), n);
    println!(
        "seeded {}: {n} orders in {:.1} s",
        path.display(),
        started.elapsed().as_secs_f64()
    );
    path
}

/// Every bucket's partition.
fn whole_bucket(bucket: &str) -> Query {
    Query::partition(bucket)
}

/// The first page: 100 orders, the smallest ids, and a cursor. Returns the milliseconds.
async fn first_page(buckets: &HashBuckets, orders: &Table<Order, AnyStore>, n: usize) -> f64 {
    let started = Instant::now();
    let page = buckets
        .fan_out_page(orders, whole_bucket, FIRST_PAGE, None)
        .await
        .unwrap();
    let took = started.elapsed().as_secs_f64() * 1e3;
    let want = FIRST_PAGE.min(n);
    assert_eq!(page.items.len(), want);
    for (i, item) in page.items.iter().enumerate() {
        assert_eq!(item.id as usize, i, "the first page in key order");
    }
    assert_eq!(page.cursor.is_some(), n > FIRST_PAGE);
    took
}

/// Everything through the stream, counted, checked in order and dropped. Returns the
/// count.
async fn read_stream(buckets: &HashBuckets, orders: &Table<Order, AnyStore>) -> usize {
    let mut stream = std::pin::pin!(buckets.fan_out_stream(orders, whole_bucket, STREAM_PAGE));
    let mut count = 0usize;
    while let Some(item) = stream.next().await {
        let item = item.unwrap();
        assert_eq!(
            item.id as usize, count,
            "the stream in key order, each once"
        );
        assert_eq!(item.payload.len(), PAYLOAD);
        count += 1;
    }
    count
}

/// Everything collected by `fan_out`, checked in order. Returns the count.
async fn read_collect(buckets: &HashBuckets, orders: &Table<Order, AnyStore>) -> usize {
    let all = buckets
        .fan_out(orders, whole_bucket, COLLECT_CONCURRENCY)
        .await
        .unwrap();
    for (i, item) in all.iter().enumerate() {
        assert_eq!(
            item.id as usize, i,
            "the collected read in key order, each once"
        );
        assert_eq!(item.payload.len(), PAYLOAD);
    }
    all.len()
}

/// One line of `/proc/self/status`, in KiB.
fn status_kib(status: &str, field: &str) -> usize {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"))
}

fn status() -> String {
    std::fs::read_to_string("/proc/self/status").unwrap()
}

/// The child: open the seeded file, perform one read, print what it cost in memory.
fn child(mode: &str) {
    let n = env_usize("STREAM_READS_N", 0);
    let path = PathBuf::from(std::env::var("STREAM_READS_DB").unwrap());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // Without memory-mapped reads: the file's pages then stay in the OS page cache
        // instead of counting in this process's RSS once per pooled connection, so the
        // peak is the read's own memory.
        let options = tablekit_core::SqliteOptions {
            mmap_size: 0,
            ..tablekit_core::SqliteOptions::default()
        };
        let store = tablekit_core::SqliteStore::open_with(&path, options)
            .await
            .unwrap();
        let orders = Table::<Order, _>::new(AnyStore::Sqlite(store));
        let buckets = HashBuckets::new(2).unwrap();
        let before = status();
        let (rss, anon, file) = (
            status_kib(&before, "VmRSS"),
            status_kib(&before, "RssAnon"),
            status_kib(&before, "RssFile"),
        );
        // Peaks of the heap and of the mapped file pages, sampled.
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let (mut anon, mut file) = (0, 0);
                while !stop.load(Ordering::Relaxed) {
                    let s = status();
                    anon = status_kib(&s, "RssAnon").max(anon);
                    file = status_kib(&s, "RssFile").max(file);
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                (anon, file)
            })
        };
        let started = Instant::now();
        let count = match mode {
            "stream" => read_stream(&buckets, &orders).await,
            "collect" => read_collect(&buckets, &orders).await,
            other => panic!("STREAM_READS_CHILD={other}: stream or collect"),
        };
        let seconds = started.elapsed().as_secs_f64();
        let hwm = status_kib(&status(), "VmHWM");
        stop.store(true, Ordering::Relaxed);
        let (peak_anon, peak_file) = sampler.join().unwrap();
        assert_eq!(count, n, "the child's read");
        println!(
            "child mode={mode} n={count} seconds={seconds:.3} rss_before={rss} hwm={hwm} anon_before={anon} peak_anon={peak_anon} file_before={file} peak_file={peak_file}"
        );
    });
}

/// What one child reported, KiB.
struct Memory {
    peak: usize,
    anon: usize,
    file: usize,
}

/// Runs the read `mode` over `n` orders in a child process.
fn measure_memory(mode: &str, n: usize, path: &Path) -> Memory {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .env("STREAM_READS_CHILD", mode)
        .env("STREAM_READS_N", n.to_string())
        .env("STREAM_READS_DB", path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child {mode} {n}: {}\n{stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("child "))
        .expect("the child's report");
    let fields: HashMap<&str, &str> = line
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let kib = |k: &str| -> usize { fields[k].parse().unwrap() };
    assert_eq!(kib("n"), n);
    Memory {
        peak: kib("hwm") - kib("rss_before"),
        anon: kib("peak_anon") - kib("anon_before"),
        file: kib("peak_file") - kib("file_before"),
    }
}

fn median_memory(runs: &[Memory]) -> Memory {
    let of = |f: fn(&Memory) -> usize| {
        let mut v: Vec<usize> = runs.iter().map(f).collect();
        v.sort_unstable();
        v[v.len() / 2]
    };
    Memory {
        peak: of(|m| m.peak),
        anon: of(|m| m.anon),
        file: of(|m| m.file),
    }
}

fn mib(kib: usize) -> f64 {
    kib as f64 / 1024.0
}

/// One table size's figures (milliseconds).
struct Reads {
    n: usize,
    first_page: Vec<f64>,
    stream: Vec<f64>,
    collect: Vec<f64>,
}

async fn time_reads(n: usize, path: &Path, rounds: usize) -> Reads {
    let orders = Table::<Order, _>::new(open(path).await);
    let buckets = HashBuckets::new(2).unwrap();
    // Warm-up, not measured: the file in the page cache, the connections open.
    first_page(&buckets, &orders, n).await;
    assert_eq!(read_stream(&buckets, &orders).await, n);
    let mut reads = Reads {
        n,
        first_page: Vec::new(),
        stream: Vec::new(),
        collect: Vec::new(),
    };
    for round in 0..rounds {
        reads
            .first_page
            .push(first_page(&buckets, &orders, n).await);
        for stream_turn in [round % 2 == 0, round % 2 == 1] {
            let started = Instant::now();
            if stream_turn {
                assert_eq!(read_stream(&buckets, &orders).await, n);
                reads.stream.push(started.elapsed().as_secs_f64() * 1e3);
            } else {
                assert_eq!(read_collect(&buckets, &orders).await, n);
                reads.collect.push(started.elapsed().as_secs_f64() * 1e3);
            }
        }
        println!(
            "  {n} orders, round {round}: first page {:.2} ms, stream {:.0} ms, collect {:.0} ms",
            reads.first_page[round], reads.stream[round], reads.collect[round]
        );
    }
    reads
}

/// Part 3: `bulk_import` of a Vec against `import_stream` of a lazy stream. Returns the
/// seconds of each, per round, and the seconds to build the Vec.
async fn time_imports(n: usize, rounds: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("import.db");
    let store = open(&path).await;
    let options = ImportOptions::default();
    let (mut collected, mut streamed, mut built) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        for stream_turn in [round % 2 == 1, round % 2 == 0] {
            let table = format!(
                "Import{}{round}",
                if stream_turn { "Stream" } else { "Vec" }
            );
            store.create_table(&table).await.unwrap();
            let report = if stream_turn {
                let started = Instant::now();
                let entities = futures::stream::iter(0..n).map(|i| order(i).to_entity().unwrap());
                let report = import_stream(&store, &table, entities, &options, |_| {})
                    .await
                    .unwrap();
                streamed.push(started.elapsed().as_secs_f64());
                report
            } else {
                let started = Instant::now();
                let entities: Vec<_> = (0..n).map(|i| order(i).to_entity().unwrap()).collect();
                built.push(started.elapsed().as_secs_f64());
                let started = Instant::now();
                let report = bulk_import(&store, &table, entities, options.concurrency, |_, _| {})
                    .await
                    .unwrap();
                collected.push(started.elapsed().as_secs_f64());
                report
            };
            assert!(report.failed.is_empty(), "{:?}", report.failed.first());
            assert_eq!(report.written, n);
            assert_eq!(sqlite_count(&path, &table), n, "{table}");
            store.delete_table(&table).await.unwrap();
        }
        println!(
            "  import {n}, round {round}: bulk_import (Vec) {:.2} s, import_stream {:.2} s",
            collected[round], streamed[round]
        );
    }
    drop(store);
    (collected, streamed, built)
}

fn main() {
    if let Ok(mode) = std::env::var("STREAM_READS_CHILD") {
        child(&mode);
        return;
    }
    let rounds = env_usize("BENCH_ROUNDS", 5).max(1);
    let mem_runs = env_usize("BENCH_MEM_RUNS", 3).max(1);
    let mut sizes: Vec<usize> = std::env::var("BENCH_SIZES")
        .unwrap_or_else(|_| "10000,100000".to_owned())
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
    let largest = *sizes.last().expect("BENCH_SIZES: at least one size");
    let import_n = env_usize("BENCH_IMPORT", largest);
    let runtime = tokio::runtime::Runtime::new().unwrap();

    // 1. Time.
    let mut paths = Vec::new();
    let mut reads = Vec::new();
    for &n in &sizes {
        let path = runtime.block_on(seeded(n));
        reads.push(runtime.block_on(time_reads(n, &path, rounds)));
        paths.push(path);
    }

    // 2. Memory, in child processes.
    let mut memory = Vec::new();
    for (&n, path) in sizes.iter().zip(&paths) {
        let mut of_mode = Vec::new();
        for mode in ["stream", "collect"] {
            let runs: Vec<Memory> = (0..mem_runs)
                .map(|_| measure_memory(mode, n, path))
                .collect();
            println!(
                "  {n} orders, {mode}: peak RSS growth {:?} KiB",
                runs.iter().map(|m| m.peak).collect::<Vec<_>>()
            );
            of_mode.push(median_memory(&runs));
        }
        memory.push(of_mode);
    }

    // 3. Import.
    let (collected, streamed, built) = runtime.block_on(time_imports(import_n, rounds));

    println!();
    println!(
        "fan-out read over 256 buckets, median of {rounds} rounds (ms); first page: {FIRST_PAGE} orders; stream: pages of {STREAM_PAGE}"
    );
    println!(
        "{:>8} {:>11} {:>11} {:>9} {:>12} {:>11}",
        "orders", "first page", "stream", "orders/s", "collect", "orders/s"
    );
    for r in &reads {
        let (s, c) = (median(r.stream.clone()), median(r.collect.clone()));
        println!(
            "{:>8} {:>11.2} {:>11.0} {:>9.0} {:>12.0} {:>11.0}",
            r.n,
            median(r.first_page.clone()),
            s,
            r.n as f64 * 1e3 / s,
            c,
            r.n as f64 * 1e3 / c,
        );
    }
    println!();
    println!(
        "peak resident memory of the read, child processes, median of {mem_runs} (MiB above the RSS before the read; heap = RssAnon, file = RssFile, sampled)"
    );
    println!(
        "{:>8} {:>12} {:>12} {:>12} {:>13} {:>13} {:>13}",
        "orders",
        "stream peak",
        "stream heap",
        "stream file",
        "collect peak",
        "collect heap",
        "collect file"
    );
    for (&n, m) in sizes.iter().zip(&memory) {
        let (s, c) = (&m[0], &m[1]);
        println!(
            "{:>8} {:>12.1} {:>12.1} {:>12.1} {:>13.1} {:>13.1} {:>13.1}",
            n,
            mib(s.peak),
            mib(s.anon),
            mib(s.file),
            mib(c.peak),
            mib(c.anon),
            mib(c.file)
        );
    }
    if sizes.len() > 1 {
        let (a, b) = (&memory[0], &memory[memory.len() - 1]);
        let ratio = |x: usize, y: usize| y as f64 / x.max(1) as f64;
        println!(
            "growth {} -> {largest} orders: stream peak {:.2}x (target at most 1.5x; heap {:.2}x, file {:.2}x), collect peak {:.2}x",
            sizes[0],
            ratio(a[0].peak, b[0].peak),
            ratio(a[0].anon, b[0].anon),
            ratio(a[0].file, b[0].file),
            ratio(a[1].peak, b[1].peak),
        );
    }
    println!();
    let end_to_end: Vec<f64> = collected.iter().zip(&built).map(|(c, b)| c + b).collect();
    let (c, s, e) = (median(collected), median(streamed), median(end_to_end));
    println!("import of {import_n} orders into fresh tables, median of {rounds} rounds (s)");
    println!("{:>26} {:>9} {:>9}", "", "seconds", "orders/s");
    for (label, seconds) in [
        ("bulk_import (Vec ready)", c),
        ("build Vec + bulk_import", e),
        ("import_stream (lazy)", s),
    ] {
        println!(
            "{label:>26} {seconds:>9.3} {:>9.0}",
            import_n as f64 / seconds
        );
    }
    println!(
        "import_stream / bulk_import: {:.3} against the import alone, {:.3} against building the Vec and importing it (target within 10 %)",
        s / c,
        s / e
    );
}
