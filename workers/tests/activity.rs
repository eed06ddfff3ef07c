//! The workers' activity history and heartbeats: counts landing per minute and summing
//! over processes, the roll-up into hours (idempotent, and exact after a crash at any of
//! its writes), retention, what a pass reads, heartbeats and silent workers, and a real
//! worker over the SQLite queue counting what it did.

#![cfg(feature = "sqlite")]
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tablekit_core::fault::FaultyStore;
use tablekit_core::{AnyStore, MemoryStore, Query, TableStore, Value};
use tablekit_workers::activity::{
    self, ACTIVITY_TABLE, Activity, Counts, Point, Resolution, RollUpReport,
};
use tablekit_workers::queue::Queue;
use tablekit_workers::queue::sqlite::SqliteQueue;
use tablekit_workers::{Envelope, Operation, OperationError, Registry, Worker, WorkerConfig};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

fn minutes(n: i64) -> chrono::Duration {
    chrono::Duration::minutes(n)
}

/// Every entity of the table: keys and properties, in key order.
async fn snapshot<S: TableStore>(store: &S) -> Vec<(String, String, Vec<(String, Value)>)> {
    let mut rows: Vec<_> = store
        .query_all(ACTIVITY_TABLE, Query::new())
        .await
        .unwrap()
        .into_iter()
        .map(|e| {
            let properties = e.properties.into_iter().collect();
            (e.partition_key, e.row_key, properties)
        })
        .collect();
    rows.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    rows
}

async fn row_keys<S: TableStore>(store: &S, partition: &str) -> Vec<String> {
    store
        .query_all(ACTIVITY_TABLE, Query::partition(partition))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.row_key)
        .collect()
}

fn processed(n: u64) -> Counts {
    Counts {
        processed: n,
        ..Counts::default()
    }
}

fn total(points: &[Point]) -> Counts {
    points
        .iter()
        .fold(Counts::default(), |sum, p| sum + p.counts)
}

#[tokio::test]
async fn counts_land_in_the_minute_they_were_counted_in() {
    let store = AnyStore::Memory(MemoryStore::new());
    let activity = Activity::options().process_id("p1").build(store.clone());
    let queue = activity.queue("archive");
    let t0 = tablekit_workers_minute(Utc::now() - minutes(10)) + chrono::Duration::seconds(5);

    queue.add(processed(3));
    activity.flush_at(t0).await.unwrap();
    // The minute closes: what was counted before is its count.
    activity.flush_at(t0 + minutes(1)).await.unwrap();
    queue.add(Counts {
        processed: 2,
        failed: 1,
        poisoned: 1,
        redelivered: 4,
    });
    activity
        .flush_at(t0 + minutes(1) + chrono::Duration::seconds(10))
        .await
        .unwrap();

    let first = tablekit_workers_minute(t0);
    let keys = row_keys(&store, "m,archive").await;
    assert_eq!(
        keys,
        [
            minute_row(first, "p1"),
            minute_row(first + minutes(1), "p1")
        ]
    );
    let points = activity::history(&store, "archive", first - minutes(5), Utc::now())
        .await
        .unwrap();
    assert_eq!(
        points,
        [
            Point {
                at: first,
                resolution: Resolution::Minute,
                counts: processed(3)
            },
            Point {
                at: first + minutes(1),
                resolution: Resolution::Minute,
                counts: Counts {
                    processed: 2,
                    failed: 1,
                    poisoned: 1,
                    redelivered: 4
                }
            },
        ]
    );
    assert_eq!(
        activity::queues_with_history(&store).await.unwrap(),
        ["archive"]
    );
    // A window that ends before the second minute leaves it out.
    let early = activity::history(&store, "archive", first, first + minutes(1))
        .await
        .unwrap();
    assert_eq!(early.len(), 1);
}

#[tokio::test]
async fn a_flush_without_new_counts_writes_nothing_and_an_idle_queue_has_no_rows() {
    let store = AnyStore::Memory(MemoryStore::new());
    let activity = Activity::options().process_id("p1").build(store.clone());
    let busy = activity.queue("busy");
    let _idle = activity.queue("idle");
    let t0 = tablekit_workers_minute(Utc::now() - minutes(3));
    busy.add(processed(1));
    activity.flush_at(t0).await.unwrap();
    let before = snapshot(&store).await;
    activity
        .flush_at(t0 + chrono::Duration::seconds(30))
        .await
        .unwrap();
    activity.flush_at(t0 + minutes(2)).await.unwrap();
    assert_eq!(snapshot(&store).await, before);
    assert!(row_keys(&store, "m,idle").await.is_empty());
    assert_eq!(
        activity::queues_with_history(&store).await.unwrap(),
        ["busy"]
    );
}

#[tokio::test]
async fn two_processes_write_their_own_rows_and_the_history_sums_them() {
    let store = AnyStore::Memory(MemoryStore::new());
    let one = Activity::options().process_id("one").build(store.clone());
    let two = Activity::options().process_id("two").build(store.clone());
    let t0 = tablekit_workers_minute(Utc::now() - minutes(30));
    one.queue("index").add(processed(5));
    two.queue("index").add(Counts {
        processed: 7,
        failed: 2,
        ..Counts::default()
    });
    one.flush_at(t0).await.unwrap();
    two.flush_at(t0 + chrono::Duration::seconds(20))
        .await
        .unwrap();
    // Writing the same minute again is harmless.
    one.flush_at(t0 + chrono::Duration::seconds(40))
        .await
        .unwrap();

    assert_eq!(
        row_keys(&store, "m,index").await,
        [minute_row(t0, "one"), minute_row(t0, "two")]
    );
    let points = activity::history(&store, "index", t0 - minutes(1), Utc::now())
        .await
        .unwrap();
    assert_eq!(points.len(), 1);
    assert_eq!(
        points[0].counts,
        Counts {
            processed: 12,
            failed: 2,
            ..Counts::default()
        }
    );
}

#[tokio::test]
async fn queue_names_a_key_cannot_hold_are_kept_and_listed() {
    let store = AnyStore::Memory(MemoryStore::new());
    let activity = Activity::options().process_id("p").build(store.clone());
    activity.queue("orders/eu#1?x").add(processed(1));
    activity.flush_at(Utc::now()).await.unwrap();
    assert_eq!(
        activity::queues_with_history(&store).await.unwrap(),
        ["orders/eu#1?x"]
    );
    let points = activity::history(
        &store,
        "orders/eu#1?x",
        Utc::now() - minutes(5),
        Utc::now() + minutes(1),
    )
    .await
    .unwrap();
    assert_eq!(total(&points), processed(1));
}

// ---- roll-up ------------------------------------------------------------------------

/// The pass's "now" in the roll-up tests: minute rows before 2024-05-09T12:00 are old.
fn pass_time() -> DateTime<Utc> {
    at("2024-05-10T12:30:00Z")
}

/// Five hours of minutes (08:00 to 12:59 on 2024-05-09) of two processes.
async fn five_hours_of_two_processes<S: TableStore>(store: &S) {
    let until = at("2024-05-09T13:00:00Z");
    for process in ["p1", "p2"] {
        let written = activity::write_sample_minutes(store, "q", process, until, 300, |minute| {
            let m = u64::try_from(minute.timestamp() / 60).unwrap();
            Counts {
                processed: 1,
                failed: m % 2,
                poisoned: u64::from(process == "p2"),
                redelivered: m % 3,
            }
        })
        .await
        .unwrap();
        assert_eq!(written, 300);
    }
}

async fn clean_roll_up() -> Vec<(String, String, Vec<(String, Value)>)> {
    let store = MemoryStore::new();
    five_hours_of_two_processes(&store).await;
    activity::roll_up(&store, pass_time()).await.unwrap();
    snapshot(&store).await
}

#[tokio::test]
async fn old_hours_roll_up_per_process_and_their_minutes_go() {
    let store = MemoryStore::new();
    five_hours_of_two_processes(&store).await;
    let report = activity::roll_up(&store, pass_time()).await.unwrap();
    assert_eq!(
        report,
        RollUpReport {
            hours_written: 8,
            minutes_deleted: 480,
            ..RollUpReport::default()
        }
    );
    let hours = row_keys(&store, "h,q").await;
    let expected: Vec<String> = ["08", "09", "10", "11"]
        .iter()
        .flat_map(|h| [format!("20240509T{h},p1"), format!("20240509T{h},p2")])
        .collect();
    assert_eq!(hours, expected);
    let minutes_left = row_keys(&store, "m,q").await;
    assert_eq!(minutes_left.len(), 120);
    assert!(minutes_left.iter().all(|k| k.starts_with("20240509T12")));

    let hour = store
        .get(ACTIVITY_TABLE, "h,q", "20240509T08,p2", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(hour.get("Processed"), Some(&Value::Int64(60)));
    assert_eq!(hour.get("Failed"), Some(&Value::Int64(30)));
    assert_eq!(hour.get("Poisoned"), Some(&Value::Int64(60)));
    assert_eq!(hour.get("Redelivered"), Some(&Value::Int64(60)));

    // The history reads the same totals, per hour.
    let points = activity::history(&store, "q", at("2024-05-09T00:00:00Z"), pass_time())
        .await
        .unwrap();
    assert_eq!(points.len(), 5);
    assert!(points.iter().all(|p| p.resolution == Resolution::Hour));
    assert_eq!(total(&points).processed, 600);
    assert_eq!(points[0].counts.processed, 120);
}

#[tokio::test]
async fn a_second_pass_changes_nothing() {
    let store = MemoryStore::new();
    five_hours_of_two_processes(&store).await;
    activity::roll_up(&store, pass_time()).await.unwrap();
    let once = snapshot(&store).await;
    let again = activity::roll_up(&store, pass_time()).await.unwrap();
    assert_eq!(again, RollUpReport::default());
    assert_eq!(snapshot(&store).await, once);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_of_several_processes_at_once_end_as_one_pass() {
    let clean = clean_roll_up().await;
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::create(&format!("sqlite:{}", dir.path().join("s.db").display()))
        .await
        .unwrap();
    five_hours_of_two_processes(&store).await;
    let passes: Vec<_> = (0..3)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { activity::roll_up(&store, pass_time()).await })
        })
        .collect();
    let mut written = 0;
    for pass in passes {
        let report = pass.await.unwrap().unwrap();
        written += report.hours_written;
    }
    assert_eq!(written, 8, "each hour row written once");
    assert_eq!(snapshot(&store).await, clean);
}

#[tokio::test]
async fn a_pass_killed_at_any_write_is_finished_exactly_by_the_next() {
    let clean = clean_roll_up().await;
    let expected_history = {
        let store = MemoryStore::new();
        five_hours_of_two_processes(&store).await;
        activity::history(&store, "q", at("2024-05-09T00:00:00Z"), pass_time())
            .await
            .unwrap()
    };
    // 8 hour rows and 480 minute rows in batches of up to 60: 16 writes.
    let mut crashed_somewhere = 0;
    for crash_at in 0..20 {
        let store = FaultyStore::new(MemoryStore::new());
        five_hours_of_two_processes(&store).await;
        store.crash_after_writes(crash_at);
        let killed = activity::roll_up(&store, pass_time()).await;
        store.recover();
        if killed.is_err() {
            crashed_somewhere += 1;
        }
        // Between the two passes (hour rows in, some minute rows still there), the
        // history counts every delivery once.
        let between = activity::history(&store, "q", at("2024-05-09T00:00:00Z"), pass_time())
            .await
            .unwrap();
        assert_eq!(between, expected_history, "killed at write {crash_at}");
        let next = activity::roll_up(&store, pass_time()).await.unwrap();
        assert_eq!(snapshot(&store).await, clean, "killed at write {crash_at}");
        if crash_at < 16 {
            assert!(killed.is_err(), "killed at write {crash_at}");
            assert!(
                next.hours_written + next.hours_found + next.minutes_deleted > 0,
                "killed at write {crash_at}: {next:?}"
            );
        }
    }
    assert!(crashed_somewhere >= 16, "{crashed_somewhere}");
}

#[tokio::test]
async fn a_pass_dropped_after_its_hour_inserts_leaves_minutes_the_next_pass_deletes() {
    let clean = clean_roll_up().await;
    let store = FaultyStore::new(MemoryStore::new());
    five_hours_of_two_processes(&store).await;
    // The first hour row lands; the process dies before deleting its minute rows.
    store.crash_after_writes(1);
    assert!(activity::roll_up(&store, pass_time()).await.is_err());
    store.recover();
    assert_eq!(row_keys(&store, "h,q").await, ["20240509T08,p1"]);
    assert_eq!(row_keys(&store, "m,q").await.len(), 600);
    let next = activity::roll_up(&store, pass_time()).await.unwrap();
    assert_eq!(next.hours_found, 1);
    assert_eq!(next.hours_written, 7);
    assert_eq!(next.minutes_deleted, 480);
    assert_eq!(snapshot(&store).await, clean);
}

#[tokio::test]
async fn a_pass_reads_only_what_it_trims() {
    let store = FaultyStore::new(MemoryStore::new());
    let now = pass_time();
    // A day of minutes within the kept window, and two old hours to roll up.
    activity::write_sample_minutes(&store, "q", "p1", now, 1380, |_| processed(1))
        .await
        .unwrap();
    activity::write_sample_minutes(&store, "q", "p1", at("2024-05-09T10:00:00Z"), 120, |_| {
        processed(2)
    })
    .await
    .unwrap();
    store.reset_counters();
    let report = activity::roll_up(&store, now).await.unwrap();
    assert_eq!(report.hours_written, 2);
    assert_eq!(report.minutes_deleted, 120);
    // The queue's marker and the 120 rows trimmed; no table scan.
    assert_eq!(store.rows_read(), 1 + 120);
    assert!(store.table_scans().is_empty(), "{:?}", store.table_scans());
    store.reset_counters();
    activity::roll_up(&store, now).await.unwrap();
    assert_eq!(store.rows_read(), 1, "an idle pass reads the marker only");
}

#[tokio::test]
async fn retention_deletes_hours_after_thirty_days_and_then_the_queue() {
    let store = MemoryStore::new();
    let now = pass_time();
    let old = at("2024-03-31T12:00:00Z");
    activity::write_sample_minutes(&store, "q", "p1", old, 120, |_| processed(1))
        .await
        .unwrap();
    // Rolled up by a pass of 38 days ago...
    let then = activity::roll_up(&store, now - chrono::Duration::days(38))
        .await
        .unwrap();
    assert_eq!((then.hours_written, then.minutes_deleted), (2, 120));
    // ... minute rows older than 30 days are deleted without an hour row...
    activity::write_sample_minutes(
        &store,
        "q",
        "p2",
        now - chrono::Duration::days(31),
        60,
        |_| processed(1),
    )
    .await
    .unwrap();
    let report = activity::roll_up(&store, now).await.unwrap();
    assert_eq!(report.hours_written, 0);
    assert_eq!(report.hours_deleted, 2);
    assert_eq!(report.minutes_deleted, 60);
    // ... and a queue whose rows are all gone, and last marked long ago, is forgotten.
    assert_eq!(report.queues_forgotten, 1);
    assert!(snapshot(&store).await.is_empty());
    assert!(
        activity::queues_with_history(&store)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_queue_marked_recently_is_kept_while_its_rows_age() {
    let store = MemoryStore::new();
    let now = pass_time();
    activity::write_sample_minutes(&store, "q", "p1", at("2024-04-11T12:00:00Z"), 60, |_| {
        processed(1)
    })
    .await
    .unwrap();
    let report = activity::roll_up(&store, now).await.unwrap();
    assert_eq!((report.hours_written, report.queues_forgotten), (1, 0));
    assert_eq!(activity::queues_with_history(&store).await.unwrap(), ["q"]);
}

// ---- worker processes ---------------------------------------------------------------

#[tokio::test]
async fn a_process_declares_how_long_its_record_is_kept_and_is_not_listed_after() {
    let store = AnyStore::Memory(MemoryStore::new());
    let brief = Activity::options()
        .process_id("brief")
        .forget_after(Duration::from_secs(600))
        .build(store.clone());
    let kept = Activity::options().process_id("kept").build(store.clone());
    let now = Utc::now();
    brief
        .stop_at(now - chrono::Duration::seconds(601))
        .await
        .unwrap();
    kept.stop_at(now - chrono::Duration::seconds(601))
        .await
        .unwrap();
    let listed: Vec<String> = activity::workers(&store)
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.id)
        .collect();
    assert_eq!(listed, ["kept"], "past its declared time, not listed");
    assert_eq!(activity::forget_workers(&store, now).await.unwrap(), 1);
    let forgotten = activity::forget_workers(&store, now + chrono::Duration::hours(24))
        .await
        .unwrap();
    assert_eq!(forgotten, 1, "the other after the default day");
    assert!(activity::workers(&store).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_heartbeat_older_than_three_intervals_reads_as_silent_and_is_forgotten_after_a_day() {
    let store = AnyStore::Memory(MemoryStore::new());
    let live = Activity::options().process_id("live").build(store.clone());
    let gone = Activity::options().process_id("gone").build(store.clone());
    let stopped = Activity::options()
        .process_id("stopped")
        .build(store.clone());
    let now = Utc::now();
    live.heartbeat_at(now).await.unwrap();
    gone.heartbeat_at(now - chrono::Duration::seconds(31))
        .await
        .unwrap();
    stopped
        .stop_at(now - chrono::Duration::seconds(40))
        .await
        .unwrap();
    let workers = activity::workers(&store).await.unwrap();
    let by_id: HashMap<&str, _> = workers.iter().map(|w| (w.id.as_str(), w)).collect();
    assert_eq!(by_id.len(), 3);
    assert!(!by_id["live"].silent);
    assert!(by_id["gone"].silent);
    assert!(!by_id["stopped"].silent, "a stopped worker is not silent");
    assert!(by_id["stopped"].stopped_at.is_some());
    assert_eq!(by_id["live"].version, env!("CARGO_PKG_VERSION"));
    assert_eq!(by_id["live"].pid, std::process::id());
    assert_eq!(by_id["live"].interval, activity::HEARTBEAT_INTERVAL);

    assert_eq!(activity::forget_workers(&store, now).await.unwrap(), 0);
    let forgotten = activity::forget_workers(&store, now + chrono::Duration::hours(24))
        .await
        .unwrap();
    assert_eq!(forgotten, 2, "the silent and the stopped one");
    let left: Vec<String> = activity::workers(&store)
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.id)
        .collect();
    assert_eq!(left, ["live"]);
}

#[derive(Serialize, Deserialize)]
struct Job {
    name: String,
    /// How many first attempts fail (retryably) before it succeeds; `u32::MAX`: never.
    failures: u32,
    permanent: bool,
    /// Wait for the test's permit before finishing.
    hold: bool,
}

impl Operation for Job {
    const KIND: &'static str = "activity-job";
    const VERSION: u32 = 1;
}

async fn send(queue: &SqliteQueue, name: &str, job: Job) {
    let envelope = Envelope::new(&job).unwrap();
    queue
        .send(
            name,
            &envelope.id.to_string(),
            &envelope.to_bytes().unwrap(),
        )
        .await
        .unwrap();
}

fn registry(gate: Arc<tokio::sync::Semaphore>) -> Registry {
    let attempts: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    Registry::new().register(move |job: Job| {
        let (attempts, gate) = (attempts.clone(), gate.clone());
        async move {
            if job.hold {
                let _ = gate.acquire().await.unwrap();
            }
            if job.permanent {
                return Err(OperationError::Permanent("never".into()));
            }
            let attempt = {
                let mut attempts = attempts.lock().unwrap();
                let n = attempts.entry(job.name.clone()).or_default();
                *n += 1;
                *n
            };
            if attempt <= job.failures {
                return Err(OperationError::Retryable("not yet".into()));
            }
            Ok(())
        }
    })
}

fn job(name: &str, failures: u32, permanent: bool, hold: bool) -> Job {
    Job {
        name: name.to_owned(),
        failures,
        permanent,
        hold,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_counts_what_it_settled_and_reports_itself_while_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::create(&format!("sqlite:{}", dir.path().join("store.db").display()))
        .await
        .unwrap();
    let queue = SqliteQueue::open(dir.path().join("queue.db"))
        .await
        .unwrap();
    let name = "acts";
    let config = WorkerConfig {
        concurrency: 2,
        max_deliveries: 3,
        base_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
        lease: Duration::from_secs(5),
        unconsumed_after: None,
        ..WorkerConfig::new(name)
    };
    queue.declare(name, &config.queue_options()).await.unwrap();
    let activity = Activity::options()
        .process_id("worker-under-test")
        .flush_interval(Duration::from_millis(50))
        .heartbeat_interval(Duration::from_millis(50))
        .roll_up_interval(Duration::from_secs(3600))
        .build(store.clone());
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    // Held in flight until the test has seen it in the heartbeat.
    send(&queue, name, job("held", 0, false, true)).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(
        Worker::options()
            .activity(activity.clone())
            .build(queue.clone(), registry(gate.clone()), config)
            .run(async move {
                let _ = stopped.await;
            }),
    );

    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let running = loop {
        let workers = activity::workers(&store).await.unwrap();
        if let Some(w) = workers.into_iter().find(|w| w.in_flight == 1) {
            break w;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no heartbeat showing the held job"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(running.id, "worker-under-test");
    assert_eq!(running.queues, [name]);
    assert_eq!(running.concurrency, 2);
    assert!(running.stopped_at.is_none() && !running.silent);
    gate.add_permits(1);

    // processed 4 (held, ok1, ok2, flaky on its 2nd delivery); failed 3 (flaky once,
    // doomed twice); poisoned 2 (doomed on its 3rd delivery, broken at once);
    // redelivered 3 (flaky's 2nd, doomed's 2nd and 3rd).
    send(&queue, name, job("ok1", 0, false, false)).await;
    send(&queue, name, job("ok2", 0, false, false)).await;
    send(&queue, name, job("flaky", 1, false, false)).await;
    send(&queue, name, job("doomed", u32::MAX, false, false)).await;
    send(&queue, name, job("broken", 0, true, false)).await;
    loop {
        let stats = queue.stats(name).await.unwrap();
        if stats.waiting == 0 && stats.leased == 0 && stats.poisoned == 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker did not finish: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop.send(());
    let report = worker.await.unwrap().unwrap();
    assert_eq!(
        (report.processed, report.retried, report.poisoned),
        (4, 3, 2)
    );

    // The last counts are written before `run` returns.
    let points = activity::history(
        &store,
        name,
        Utc::now() - minutes(10),
        Utc::now() + minutes(1),
    )
    .await
    .unwrap();
    assert_eq!(
        total(&points),
        Counts {
            processed: 4,
            failed: 3,
            poisoned: 2,
            redelivered: 3
        }
    );
    assert!(points.iter().all(|p| p.resolution == Resolution::Minute));
    let workers = activity::workers(&store).await.unwrap();
    assert_eq!(workers.len(), 1);
    assert!(workers[0].stopped_at.is_some(), "{:?}", workers[0]);
    assert_eq!(workers[0].in_flight, 0);
    assert_eq!(
        workers[0].queues,
        [name],
        "a gracefully stopped worker keeps its queues"
    );
    assert_eq!(activity::queues_with_history(&store).await.unwrap(), [name]);
    // Its queue is in the store's registry of declared queues, from its start.
    assert_eq!(activity::declared_queues(&store).await.unwrap(), [name]);
}

#[tokio::test]
async fn store_errors_while_sampling_never_stop_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::Memory(MemoryStore::new());
    let queue = SqliteQueue::open(dir.path().join("queue.db"))
        .await
        .unwrap();
    let name = "steady";
    let config = WorkerConfig {
        unconsumed_after: None,
        ..WorkerConfig::new(name)
    };
    queue.declare(name, &config.queue_options()).await.unwrap();
    let activity = Activity::options()
        .flush_interval(Duration::from_millis(20))
        .heartbeat_interval(Duration::from_millis(20))
        .roll_up_interval(Duration::from_millis(20))
        .build(store.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(
        Worker::options()
            .activity(activity)
            .build(
                queue.clone(),
                registry(Arc::new(tokio::sync::Semaphore::new(0))),
                config,
            )
            .run(async move {
                let _ = stopped.await;
            }),
    );
    for i in 0..5 {
        send(&queue, name, job(&format!("j{i}"), 0, false, false)).await;
        // The table goes away under the sampler again and again: its writes fail.
        let _ = store.delete_table(ACTIVITY_TABLE).await;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let stats = queue.stats(name).await.unwrap();
        if stats.waiting == 0 && stats.leased == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{stats:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop.send(());
    let report = worker.await.unwrap().unwrap();
    assert_eq!(report.processed, 5);
}

/// The start of the minute of `at` (as the activity keys it).
fn tablekit_workers_minute(at: DateTime<Utc>) -> DateTime<Utc> {
    let seconds = at.timestamp() - at.timestamp().rem_euclid(60);
    DateTime::from_timestamp(seconds, 0).unwrap()
}

fn minute_row(minute: DateTime<Utc>, process: &str) -> String {
    format!("{},{process}", minute.format("%Y%m%dT%H%M"))
}

#[cfg(feature = "cli")]
#[test]
fn run_keeps_activity_unless_told_not_to() {
    use clap::Parser as _;
    use tablekit_workers::cli::{Cli, Command};
    let parse = |extra: &[&str]| {
        let args = [
            "tablekit-worker",
            "run",
            "--broker",
            "sqlite:q.db",
            "--store",
            "memory:",
        ];
        match Cli::parse_from(args.iter().chain(extra)).command {
            Command::Run(run) => run.no_activity,
            other => panic!("{other:?}"),
        }
    };
    assert!(!parse(&[]));
    assert!(parse(&["--no-activity"]));
}
