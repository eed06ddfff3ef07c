//! How fast the relay drains what a broker outage leaves, on a networked store: 4,000
//! outbox entries in 40 partitions (markers' leases long over) in a SQLite file, every
//! store call and every publish delayed by 5 ms through the round-trip model
//! (`tablekit_core::roundtrip`). Side by side in one run:
//!
//! - *before*: one relay alone, one partition at a time, one publish at a time, one
//!   delete per entry — what the relay did before it divided and pipelined its work;
//! - one relay with its default settings (target: at least 5,000 entries/s);
//! - one relay limited to one partition at a time, and four such relays side by side
//!   (target: four at least 3x one, so the division of the partitions is what is
//!   measured, not the concurrency within a relay);
//! - four relays with their default settings.
//!
//! Each case drains a fresh backlog; the relays of a case run as `Relay::run` does in
//! worker processes (announced, then passing until stopped). Every publish is tallied by
//! operation id: a duplicate is a publish of an id published before (target: at most 1 %
//! with no crash). A case ends when every entry is published and its outbox and markers
//! are gone (checked).
//!
//! `cargo bench -p tablekit-patterns --bench relay_drain` (`BENCH_LATENCY_MS`, default 5;
//! `BENCH_PARTITIONS`, default 40; `BENCH_ENTRIES`, per partition, default 100;
//! `BENCH_SKIP_BEFORE=1` skips the slow baseline).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use tablekit_core::roundtrip::{Latency, RoundTripStore, RoundTrips};
use tablekit_core::{Query, SqliteStore, TableStore};
use tablekit_patterns::consistency::pending::PENDING_TABLE;
use tablekit_patterns::consistency::relay::RELAYS_TABLE;
use tablekit_patterns::consistency::{OutboxSink, Relay, RelayOptions, RoundTripSink, outbox};

#[path = "../tests/support/backlog.rs"]
mod support;

use support::Tally;

const TABLE: &str = "RelayDrain";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Case {
    name: &'static str,
    relays: usize,
    configure:
        fn(RelayOptions<RoundTripStore<SqliteStore>>) -> RelayOptions<RoundTripStore<SqliteStore>>,
}

struct Outcome {
    seconds: f64,
    publishes: usize,
    distinct: usize,
    calls: u64,
}

async fn run_case(
    store: &SqliteStore,
    latency: Duration,
    case: &Case,
    partitions: usize,
    entries: usize,
) -> Outcome {
    let total = partitions * entries;
    support::backlog(store, TABLE, partitions, entries).await;
    // Leases of an earlier case are gone: every case starts with no relay.
    let _ = store.delete_table(RELAYS_TABLE).await;
    let trips = RoundTrips::new(Latency::Fixed(latency));
    let timed = RoundTripStore::with_trips(store.clone(), trips.clone());
    let tally = Tally::default();
    let sink: Arc<dyn OutboxSink> =
        Arc::new(RoundTripSink::new(Arc::new(tally.clone()), trips.clone()));
    let relays: Vec<Arc<Relay<_>>> = (0..case.relays)
        .map(|i| {
            let options = Relay::options()
                .id(format!("bench-{i}"))
                .grace(Duration::ZERO)
                .late(Duration::ZERO);
            Arc::new((case.configure)(options).build(timed.clone(), sink.clone()))
        })
        .collect();
    // The relays of a deployment are running before the outage ends: announced.
    for relay in &relays {
        relay.announce().await.unwrap();
    }
    trips.reset();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    let tasks: Vec<_> = relays
        .iter()
        .map(|relay| {
            let relay = relay.clone();
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                relay
                    .run(Duration::from_millis(20), async move {
                        let _ = stopped.wait_for(|s| *s).await;
                    })
                    .await;
            })
        })
        .collect();
    // Drained: every entry published, the outbox and the markers gone.
    loop {
        tokio::time::sleep(Duration::from_millis(2)).await;
        if tally.counts().1 < total {
            continue;
        }
        let left = outbox::scan(store, TABLE).await.unwrap().len();
        let markers = store
            .query_all(PENDING_TABLE, Query::new())
            .await
            .unwrap()
            .len();
        if left == 0 && markers == 0 {
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let calls = trips.counts().store_calls();
    stop.send(true).unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    let (publishes, distinct) = tally.counts();
    assert_eq!(distinct, total, "every entry published");
    Outcome {
        seconds,
        publishes,
        distinct,
        calls,
    }
}

fn main() {
    let latency = Duration::from_millis(env_usize("BENCH_LATENCY_MS", 5) as u64);
    let partitions = env_usize("BENCH_PARTITIONS", 40);
    let entries = env_usize("BENCH_ENTRIES", 100);
    let skip_before = std::env::var("BENCH_SKIP_BEFORE").is_ok_and(|v| v == "1");
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::create(dir.path().join("relay_drain.db"))
            .await
            .unwrap();
        store.create_table(TABLE).await.unwrap();
        store.create_table(PENDING_TABLE).await.unwrap();
        let cases = [
            Case {
                name: "before: alone, one at a time",
                relays: 1,
                configure: |r| r.alone().concurrency(1).publishes(1).remove_batch(1),
            },
            Case {
                name: "one relay, defaults",
                relays: 1,
                configure: |r| r,
            },
            Case {
                name: "one relay, 1 partition at a time",
                relays: 1,
                configure: |r| r.concurrency(1),
            },
            Case {
                name: "four relays, 1 partition at a time",
                relays: 4,
                configure: |r| r.concurrency(1),
            },
            Case {
                name: "four relays, defaults",
                relays: 4,
                configure: |r| r,
            },
        ];
        println!(
            "relay drain: {} entries in {partitions} partitions, {} ms per store call and per publish",
            partitions * entries,
            latency.as_millis()
        );
        println!(
            "{:<36} {:>10} {:>9} {:>10} {:>11} {:>12}",
            "case", "entries/s", "seconds", "publishes", "duplicates", "store calls"
        );
        let mut rates = Vec::new();
        for case in &cases {
            if skip_before && case.name.starts_with("before") {
                rates.push(f64::NAN);
                continue;
            }
            let outcome = run_case(&store, latency, case, partitions, entries).await;
            let rate = outcome.distinct as f64 / outcome.seconds;
            rates.push(rate);
            println!(
                "{:<36} {:>10.0} {:>9.3} {:>10} {:>10.2}% {:>12}",
                case.name,
                rate,
                outcome.seconds,
                outcome.publishes,
                100.0 * (outcome.publishes - outcome.distinct) as f64 / outcome.distinct as f64,
                outcome.calls,
            );
        }
        println!(
            "one relay with defaults vs before: {:.1}x; four relays vs one, 1 partition at a time each: {:.2}x",
            rates[1] / rates[0],
            rates[3] / rates[2]
        );
    });
}
