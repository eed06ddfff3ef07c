//! The change feed's throughput and lag, in one run. Orders (a type declaring
//! `#[feed(shares = 16)]`) are written through `IndexedTable`, each write recording its
//! change in its own transaction; the relay sequences the changes into the shares' logs;
//! members of consumer groups read them with `Group::poll` and `Group::checkpoint`.
//!
//! 1. **One consumer on SQLite**: `BENCH_CHANGES` changes (default 50,000) over 64
//!    partitions are written and sequenced untimed; then one member of a new group
//!    drains them with poll, a trivial handler and checkpoint, timed: changes per second
//!    (target at least 20,000/s), with the polls it took and the time in poll and in
//!    checkpoint. Then the typed `Feed::<Order>` worker over the same log (a second
//!    group), which also reads each change as an `Order`.
//! 2. **The same at 5 ms a call**: another group drains the same log through a
//!    `RoundTripStore` over the same SQLite file, every store call waiting 5 ms
//!    (`BENCH_LATENCY_MS`) before it reaches SQLite: changes per second (target at least
//!    5,000/s), with the store calls per poll and per checkpoint.
//! 3. **Four members against one**: `BENCH_SCALE_CHANGES` changes (default 2,000) over
//!    64 partitions on their own SQLite file (16 shares); handling a change costs one
//!    5 ms wait and each member handles one change at a time. One group of one member,
//!    then one group of four members (balanced before the clock starts): changes per
//!    second of each, the ratio (target at least 2.5x) and the changes each member
//!    handled.
//! 4. **Lag at a sustained write rate**: 8 writers insert `BENCH_RATE` orders per second
//!    (default 1,000) for `BENCH_SECONDS` (default 10) on their own SQLite file, while the
//!    relay runs continuously (`Relay::step` in the loop `Relay::run` makes: a pass every
//!    5 ms when idle, at once after a busy one; each pass timed) and one group member
//!    polls continuously (5 ms apart when a poll was empty). The lag of
//!    a change runs from the start of its insert call to the poll that delivered it;
//!    p50, p99 and the maximum (target p99 under 1 s), the write rate achieved, and the
//!    lag split at the time the relay sequenced the change (wall clocks of one machine),
//!    and the relay's pass times.
//!
//! `cargo bench -p tablekit-workers --bench feed_throughput`. `BENCH_PARTS` picks the
//! figures (default `1234`; `24` runs figures 2 and 4 only; figure 2 reads figure 1's
//! log, which it writes when figure 1 is not run).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tablekit_core::roundtrip::{Latency, RoundTripStore, RoundTrips};
use tablekit_core::typed::TypedWrite;
use tablekit_core::{SqliteStore, TableStore};
use tablekit_derive::Entity;
use tablekit_patterns::feed::Group;
use tablekit_patterns::index::{IndexedTable, InlineSink, Relay, handlers};
use tablekit_workers::changes::Change;
use tablekit_workers::feed::Feed;

const TABLE: &str = "Orders";
const SHARES: u32 = 16;
const PARTITIONS: u32 = 64;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Orders",
    kind = "Order",
    partition_key = "{region}",
    row_key = "o_{id:07}",
    crate = "tablekit_core"
)]
#[feed(shares = 16)]
struct Order {
    region: String,
    id: u32,
    customer: String,
    amount: i64,
}

fn order(id: u32) -> Order {
    Order {
        region: format!("r{:02}", id % PARTITIONS),
        id,
        customer: "Ines Okafor".into(),
        amount: i64::from(id),
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn orders(store: &SqliteStore) -> IndexedTable<Order, SqliteStore> {
    let orders = IndexedTable::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .unwrap();
    orders.create().await.unwrap();
    orders
}

/// Writes orders `0..count` in transactions per partition (`write_all`), then sequences
/// every change with a relay pass after pass; returns the time of each step.
async fn write_and_sequence(store: &SqliteStore, count: u32) -> (Duration, Duration) {
    let orders = orders(store).await;
    let started = Instant::now();
    for from in (0..count).step_by(5_000) {
        let to = (from + 5_000).min(count);
        let report = orders
            .write_all((from..to).map(|id| TypedWrite::Insert(order(id))))
            .await
            .unwrap();
        assert!(
            report.refused.is_empty() && report.failed.is_empty(),
            "writes refused or failed: {:?} {:?}",
            report.refused.first(),
            report.failed.first()
        );
        assert_eq!(report.written.len(), (to - from) as usize);
    }
    let written = started.elapsed();
    let started = Instant::now();
    let relay = Relay::options().alone().build(
        store.clone(),
        Arc::new(InlineSink::new(handlers(store.clone(), None))),
    );
    let mut sequenced = 0;
    loop {
        let report = relay.run_once().await.unwrap();
        if report.sequenced == 0 {
            break;
        }
        sequenced += report.sequenced;
    }
    assert_eq!(sequenced, count as usize, "changes sequenced");
    (written, started.elapsed())
}

/// What draining a log with one member took.
struct Drained {
    elapsed: Duration,
    polls: usize,
    in_poll: Duration,
    in_checkpoint: Duration,
}

/// Drains `total` changes with `group` (balanced already): poll, a trivial handler,
/// checkpoint, until all are delivered.
async fn drain<S: TableStore>(group: &Group<S>, total: usize) -> Drained {
    let started = Instant::now();
    let (mut delivered, mut polls, mut empty) = (0, 0, 0);
    let (mut in_poll, mut in_checkpoint) = (Duration::ZERO, Duration::ZERO);
    let mut keys = 0usize;
    while delivered < total {
        let t = Instant::now();
        let changes = group.poll().await.unwrap();
        in_poll += t.elapsed();
        polls += 1;
        if changes.is_empty() {
            empty += 1;
            assert!(empty < 100, "the log ran dry at {delivered} of {total}");
            continue;
        }
        // The handler: looks at each change.
        for change in &changes {
            keys += change.event.row_key.len();
        }
        let t = Instant::now();
        let done = group.checkpoint(&changes).await.unwrap();
        in_checkpoint += t.elapsed();
        assert!(done.lost.is_empty(), "shares lost: {:?}", done.lost);
        delivered += changes.len();
    }
    std::hint::black_box(keys);
    assert_eq!(delivered, total, "changes delivered");
    Drained {
        elapsed: started.elapsed(),
        polls,
        in_poll,
        in_checkpoint,
    }
}

fn rate(changes: usize, elapsed: Duration) -> f64 {
    changes as f64 / elapsed.as_secs_f64()
}

/// Figures 1 and 2 over one log of `total` changes.
async fn throughput(dir: &std::path::Path, parts: &str, total: u32, latency_ms: u64) {
    let store = SqliteStore::create(dir.join("throughput.db"))
        .await
        .unwrap();
    let (written, sequenced) = write_and_sequence(&store, total).await;
    println!(
        "setup: {total} changes over {PARTITIONS} partitions written with write_all in {:.1} s, sequenced into {SHARES} shares by the relay in {:.1} s (untimed below)",
        written.as_secs_f64(),
        sequenced.as_secs_f64()
    );
    let total = total as usize;

    if parts.contains('1') {
        let group = Group::new(store.clone(), TABLE, "plain", SHARES)
            .unwrap()
            .member("m1")
            .unwrap()
            .read_size(1000);
        group.balance().await.unwrap();
        assert_eq!(group.held().len(), SHARES as usize);
        let d = drain(&group, total).await;
        println!(
            "1. one member, SQLite: {total} changes in {:.2} s = {:.0} changes/s (target >= 20000/s); {} polls, {:.1} ms per poll, {:.1} ms per checkpoint",
            d.elapsed.as_secs_f64(),
            rate(total, d.elapsed),
            d.polls,
            ms(d.in_poll) / d.polls as f64,
            ms(d.in_checkpoint) / d.polls as f64,
        );
        group.leave().await.unwrap();

        // The typed worker over the same log: reads each change as an `Order`.
        let handled = Arc::new(AtomicUsize::new(0));
        let worker = Feed::<Order>::group(store.clone(), "typed")
            .unwrap()
            .member("t1")
            .unwrap()
            .idle(Duration::from_millis(1))
            .consume(|change: Change<Order>| {
                let handled = Arc::clone(&handled);
                async move {
                    std::hint::black_box(change.value.amount);
                    handled.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                }
            });
        let seen = Arc::clone(&handled);
        let started = Instant::now();
        let report = worker
            .run(async move {
                while seen.load(Ordering::Relaxed) < total {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
            .await
            .unwrap();
        let elapsed = started.elapsed();
        assert_eq!(report.handled as usize, total);
        println!(
            "1b. typed Feed::<Order> worker, SQLite: {total} changes in {:.2} s = {:.0} changes/s (its first balance included)",
            elapsed.as_secs_f64(),
            rate(total, elapsed),
        );
    }

    if parts.contains('2') {
        let trips = RoundTrips::new(Latency::millis(latency_ms));
        let slow = RoundTripStore::with_trips(store.clone(), trips.clone());
        let group = Group::new(slow, TABLE, "roundtrips", SHARES)
            .unwrap()
            .member("m1")
            .unwrap()
            .read_size(1000);
        group.balance().await.unwrap();
        trips.reset();
        let d = drain(&group, total).await;
        let counts = trips.counts();
        println!(
            "2. one member, RoundTripStore over SQLite at {latency_ms} ms per store call: {total} changes in {:.2} s = {:.0} changes/s (target >= 5000/s); {} polls, {:.1} ms per poll, {:.1} ms per checkpoint; store calls: {} queries, {} gets, {} writes, {} batches ({:.1} calls per poll + checkpoint), peak {} in flight",
            d.elapsed.as_secs_f64(),
            rate(total, d.elapsed),
            d.polls,
            ms(d.in_poll) / d.polls as f64,
            ms(d.in_checkpoint) / d.polls as f64,
            counts.queries,
            counts.gets,
            counts.writes,
            counts.batches,
            counts.store_calls() as f64 / d.polls as f64,
            trips.peak_in_flight(),
        );
        group.leave().await.unwrap();
    }
}

/// Runs `members` (balanced already) until `total` changes are handled, each change
/// costing `cost`, one at a time per member; returns the time and each one's count.
async fn handle_all(
    members: &[Group<SqliteStore>],
    total: usize,
    cost: Duration,
) -> (Duration, Vec<usize>) {
    let done = AtomicUsize::new(0);
    let started = Instant::now();
    let runs = members.iter().map(|group| {
        let done = &done;
        async move {
            let mut handled = 0;
            while done.load(Ordering::Relaxed) < total {
                let changes = group.poll().await.unwrap();
                if changes.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                for _ in &changes {
                    // The handling: one 5 ms call.
                    tokio::time::sleep(cost).await;
                    handled += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                let checkpointed = group.checkpoint(&changes).await.unwrap();
                assert!(checkpointed.lost.is_empty());
            }
            handled
        }
    });
    let handled = futures::future::join_all(runs).await;
    (started.elapsed(), handled)
}

/// Figure 3: four members of one group against one.
async fn scale(dir: &std::path::Path, total: u32) {
    let store = SqliteStore::create(dir.join("scale.db")).await.unwrap();
    write_and_sequence(&store, total).await;
    let mut per_share: BTreeMap<u32, usize> = BTreeMap::new();
    for id in 0..total {
        let share = tablekit_patterns::feed::share_of(TABLE, &order(id).region, SHARES);
        *per_share.entry(share).or_default() += 1;
    }
    let total = total as usize;
    let cost = Duration::from_millis(5);
    let group = |name: &str, members: usize| -> Vec<Group<SqliteStore>> {
        (0..members)
            .map(|m| {
                Group::new(store.clone(), TABLE, name, SHARES)
                    .unwrap()
                    .member(&format!("m{m}"))
                    .unwrap()
            })
            .collect()
    };
    let one = group("one", 1);
    one[0].balance().await.unwrap();
    let (alone, _) = handle_all(&one, total, cost).await;
    let four = group("four", 4);
    for _ in 0..3 {
        for member in &four {
            member.balance().await.unwrap();
        }
    }
    let held: Vec<Vec<u32>> = four.iter().map(Group::held).collect();
    let (together, handled) = handle_all(&four, total, cost).await;
    let (a, b) = (rate(total, alone), rate(total, together));
    println!(
        "3. handling costs a 5 ms wait, one change at a time per member, SQLite: 1 member {a:.0} changes/s ({:.2} s), 4 members {b:.0} changes/s ({:.2} s): {:.2}x (target >= 2.5x)",
        alone.as_secs_f64(),
        together.as_secs_f64(),
        b / a
    );
    let loads: Vec<String> = held
        .iter()
        .zip(&handled)
        .map(|(shares, n)| format!("{} shares/{n} changes", shares.len()))
        .collect();
    let busiest = handled.iter().copied().max().unwrap_or(total).max(1);
    println!(
        "   the four members: {} (at most {:.2}x with the busiest member's part); changes per share {:?}",
        loads.join(", "),
        total as f64 / busiest as f64,
        per_share.values().collect::<Vec<_>>()
    );
    for member in one.iter().chain(&four) {
        member.leave().await.unwrap();
    }
}

/// Figure 4: the lag under a sustained write rate.
async fn lag(dir: &std::path::Path, rate_per_s: u64, seconds: u64) {
    let store = SqliteStore::create(dir.join("lag.db")).await.unwrap();
    let orders = orders(&store).await;
    let total = rate_per_s * seconds;
    let relay = Relay::options().alone().build(
        store.clone(),
        Arc::new(InlineSink::new(handlers(store.clone(), None))),
    );
    // The relay's loop as `Relay::run` makes it (a pass at once after a busy one, else
    // every 5 ms), timing each pass.
    let relay_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let relay = {
        let stop = Arc::clone(&relay_stop);
        tokio::spawn(async move {
            let mut passes: Vec<(Duration, usize, usize)> = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let report = relay.step().await.unwrap();
                passes.push((t.elapsed(), report.partitions, report.sequenced));
                if report.sequenced == 0 && report.published == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            relay.leave().await;
            passes
        })
    };

    let started: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    // Per change: (insert start -> delivered, committed -> sequenced, sequenced -> delivered).
    type Lags = Vec<(Duration, Duration, Duration)>;
    let lags: Arc<Mutex<Lags>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let group = Group::new(store.clone(), TABLE, "lag", SHARES)
        .unwrap()
        .member("m1")
        .unwrap();
    group.balance().await.unwrap();
    let consumer = {
        let (started, lags, stop) = (Arc::clone(&started), Arc::clone(&lags), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut polls = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let changes = group.poll().await.unwrap();
                polls += 1;
                let (now, wall) = (Instant::now(), chrono::Utc::now());
                if changes.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                {
                    let mut started = started.lock().unwrap();
                    let mut lags = lags.lock().unwrap();
                    for change in &changes {
                        let t0 = started.remove(&change.event.row_key).unwrap();
                        let relay = (change.at - change.committed())
                            .to_std()
                            .unwrap_or_default();
                        let read = (wall - change.at).to_std().unwrap_or_default();
                        lags.push((now - t0, relay, read));
                    }
                }
                group.checkpoint(&changes).await.unwrap();
            }
            group.leave().await.unwrap();
            polls
        })
    };

    let writers = 8u64;
    let period = Duration::from_secs_f64(writers as f64 / rate_per_s as f64);
    let run_started = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (orders, started) = (orders.clone(), Arc::clone(&started));
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                let mut id = w;
                while id < total {
                    tick.tick().await;
                    let value = order(u32::try_from(id).unwrap());
                    started
                        .lock()
                        .unwrap()
                        .insert(format!("o_{id:07}"), Instant::now());
                    orders.insert(&value).await.unwrap();
                    id += writers;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let write_seconds = run_started.elapsed().as_secs_f64();
    let deadline = Instant::now() + Duration::from_secs(60);
    while lags.lock().unwrap().len() < usize::try_from(total).unwrap() {
        assert!(
            Instant::now() < deadline,
            "the consumer did not catch up: {} of {total} changes",
            lags.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let caught_up = run_started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let polls = consumer.await.unwrap();
    relay_stop.store(true, Ordering::Relaxed);
    let passes = relay.await.unwrap();

    let lags = std::mem::take(&mut *lags.lock().unwrap());
    let sorted = |pick: fn(&(Duration, Duration, Duration)) -> Duration| {
        let mut v: Vec<Duration> = lags.iter().map(pick).collect();
        v.sort();
        v
    };
    let (whole, relay, read) = (sorted(|l| l.0), sorted(|l| l.1), sorted(|l| l.2));
    println!(
        "4. lag, SQLite: {total} inserts in {write_seconds:.1} s ({:.0} writes/s, asked {rate_per_s}); all delivered {:.1} s after the start, in {polls} polls",
        total as f64 / write_seconds,
        caught_up,
    );
    println!(
        "   lag (insert start -> delivered by poll): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target p99 < 1000 ms)",
        ms(percentile(&whole, 0.50)),
        ms(percentile(&whole, 0.99)),
        ms(*whole.last().unwrap()),
    );
    println!(
        "   of which committed -> sequenced p50 {:.1} / p99 {:.1} ms, sequenced -> delivered p50 {:.1} / p99 {:.1} ms",
        ms(percentile(&relay, 0.50)),
        ms(percentile(&relay, 0.99)),
        ms(percentile(&read, 0.50)),
        ms(percentile(&read, 0.99)),
    );
    let busy: Vec<&(Duration, usize, usize)> = passes.iter().filter(|p| p.2 > 0).collect();
    let mut times: Vec<Duration> = busy.iter().map(|p| p.0).collect();
    times.sort();
    if !times.is_empty() {
        println!(
            "   relay: {} passes, {} of them sequencing (about {:.0} changes and {:.0} partitions each): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms a pass",
            passes.len(),
            busy.len(),
            busy.iter().map(|p| p.2).sum::<usize>() as f64 / busy.len() as f64,
            busy.iter().map(|p| p.1).sum::<usize>() as f64 / busy.len() as f64,
            ms(percentile(&times, 0.50)),
            ms(percentile(&times, 0.99)),
            ms(*times.last().unwrap()),
        );
    }
}

fn main() {
    let parts = std::env::var("BENCH_PARTS").unwrap_or_else(|_| "1234".to_owned());
    let changes = u32::try_from(env_u64("BENCH_CHANGES", 50_000)).unwrap();
    let scale_changes = u32::try_from(env_u64("BENCH_SCALE_CHANGES", 2_000)).unwrap();
    let latency_ms = env_u64("BENCH_LATENCY_MS", 5);
    let rate_per_s = env_u64("BENCH_RATE", 1_000);
    let seconds = env_u64("BENCH_SECONDS", 10);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        if parts.contains('1') || parts.contains('2') {
            throughput(dir.path(), &parts, changes, latency_ms).await;
        }
        if parts.contains('3') {
            scale(dir.path(), scale_changes).await;
        }
        if parts.contains('4') {
            lag(dir.path(), rate_per_s, seconds).await;
        }
    });
}
