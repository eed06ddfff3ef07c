//! The relay at its round-trip floor: relays that divide the pending partitions between
//! them by leased shares, drain partitions concurrently, publish in pipelines and remove
//! published entries in transactions. Counted with the round-trip model
//! (`tablekit_core::roundtrip`), timed on tokio's paused clock where a test says how many
//! round trips ran in a row.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use tablekit_core::roundtrip::{Latency, RoundTripStore, RoundTrips};
use tablekit_core::{MemoryStore, Query, TableStore};
use tablekit_patterns::consistency::pending::PENDING_TABLE;
use tablekit_patterns::consistency::relay::RELAYS_TABLE;
use tablekit_patterns::consistency::{
    BoxFuture, Envelope, OutboxSink, Relay, RoundTripSink, outbox, relays,
};

#[path = "support/backlog.rs"]
mod support;

use support::Tally;

const TABLE: &str = "Orders";

impl Tally {
    fn publishes(&self) -> usize {
        self.counts().0
    }
    fn distinct(&self) -> usize {
        self.counts().1
    }
}

async fn backlog<S: TableStore>(store: &S, partitions: usize, entries: usize) {
    support::backlog(store, TABLE, partitions, entries).await;
}

async fn left<S: TableStore>(store: &S) -> (usize, usize) {
    let entries = outbox::scan(store, TABLE).await.unwrap().len();
    let markers = store
        .query_all(PENDING_TABLE, Query::new())
        .await
        .unwrap()
        .len();
    (entries, markers)
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

#[test]
fn a_relay_alone_drains_a_page_of_a_partition_in_three_store_calls() {
    paused().block_on(async {
        let store = RoundTripStore::new(MemoryStore::new(), Latency::None);
        backlog(&store, 40, 100).await;
        store.trips().reset();
        let tally = Tally::default();
        let relay = Relay::options()
            .alone()
            .grace(Duration::ZERO)
            .late(Duration::ZERO)
            .build(store.clone(), Arc::new(tally.clone()));
        let report = relay.run_once().await.unwrap();
        assert_eq!(
            (report.partitions, report.published, report.cleared),
            (40, 4_000, 40)
        );
        let counts = store.trips().counts();
        // One marker query; per partition its page, one transaction removing its 100
        // published entries, its marker's delete.
        assert_eq!(
            (counts.queries, counts.batches, counts.writes),
            (1 + 40, 40, 40)
        );
        assert_eq!(counts.store_calls(), 121);
        assert_eq!((tally.publishes(), tally.distinct()), (4_000, 4_000));
        assert_eq!(left(&store).await, (0, 0));
    });
}

#[test]
fn the_relay_drains_concurrently_so_its_round_trips_in_a_row_follow_partitions_over_concurrency() {
    paused().block_on(async {
        // 5 ms per store call and per publish, on tokio's paused clock: the time a pass
        // takes is its round trips in a row times 5 ms.
        let trips = RoundTrips::new(Latency::None);
        let store = RoundTripStore::with_trips(MemoryStore::new(), trips.clone());
        backlog(&store, 40, 100).await;
        trips.set_latency(Latency::millis(5));
        let tally = Tally::default();
        let sink = Arc::new(RoundTripSink::new(Arc::new(tally.clone()), trips.clone()));
        let in_a_row = |started: tokio::time::Instant| started.elapsed().as_millis() / 5;

        // The relay of before: one partition at a time, one publish and one delete per
        // entry: 1 + 40 × (1 + 100 × 2 + 1) round trips in a row.
        let serial = Relay::options()
            .alone()
            .concurrency(1)
            .publishes(1)
            .remove_batch(1)
            .grace(Duration::ZERO)
            .late(Duration::ZERO)
            .build(store.clone(), sink.clone());
        let started = tokio::time::Instant::now();
        let report = serial.run_once().await.unwrap();
        assert_eq!(report.published, 4_000);
        assert_eq!(in_a_row(started), 1 + 40 * 202);

        backlog(&store, 40, 100).await;
        let relay = Relay::options()
            .grace(Duration::ZERO)
            .late(Duration::ZERO)
            .build(store.clone(), sink.clone());
        let started = tokio::time::Instant::now();
        let report = relay.run_once().await.unwrap();
        assert_eq!(report.published, 4_000);
        // Markers; leases read (and their table created, the first time); shares taken;
        // then 5 waves of 8 partitions, each its page, 4 rounds of 32 publishes, one
        // removal, its marker; the release.
        let rounds = in_a_row(started);
        assert_eq!(
            rounds,
            4 + 5 * (1 + 4 + 1 + 1) + 1,
            "{rounds} round trips in a row"
        );
        assert_eq!(
            tally.publishes(),
            8_000,
            "each entry published once per backlog"
        );
        assert_eq!(left(&store).await, (0, 0));
    });
}

#[test]
fn two_relays_divide_the_partitions_and_publish_each_entry_once() {
    paused().block_on(async {
        let store = MemoryStore::new();
        backlog(&store, 40, 10).await;
        let tally = Tally::default();
        let announce = |id: &str| {
            Relay::options()
                .id(id)
                .build(store.clone(), Arc::new(tally.clone()))
        };
        let (a, b) = (announce("a"), announce("b"));
        a.announce().await.unwrap();
        b.announce().await.unwrap();
        let live = relays(&store).await.unwrap();
        assert_eq!(live.iter().filter(|r| r.live).count(), 2);

        // Passes of the two side by side (1 ms a call, so they interleave) until the
        // backlog is gone: each takes its fair part and leaves the other's to it.
        let store = RoundTripStore::new(store.clone(), Latency::millis(1));
        let relay = |id: &str| {
            Relay::options()
                .id(id)
                .concurrency(1)
                .grace(Duration::ZERO)
                .late(Duration::ZERO)
                .build(store.clone(), Arc::new(tally.clone()))
        };
        let (a, b) = (relay("a"), relay("b"));
        let (ra, rb) = tokio::join!(a.run_once(), b.run_once());
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        assert!(ra.others > 0 && rb.others > 0, "{ra:?} {rb:?}");
        assert!(ra.published >= 100 && rb.published >= 100, "{ra:?} {rb:?}");
        for _ in 0..3 {
            let (ra, rb) = tokio::join!(a.run_once(), b.run_once());
            ra.unwrap();
            rb.unwrap();
        }
        assert_eq!((tally.publishes(), tally.distinct()), (400, 400));
        assert_eq!(left(&store).await, (0, 0));
        // A one-off pass releases what it took.
        let shares = store
            .query_all(
                RELAYS_TABLE,
                Query::with_filter(tablekit_core::filter::partition_key().eq("share")),
            )
            .await
            .unwrap();
        assert!(shares.is_empty(), "{shares:?}");
    });
}

/// Blocks every publish until released: a relay stalled mid-pass.
#[derive(Clone, Default)]
struct Stalled(Arc<tokio::sync::Notify>);

impl OutboxSink for Stalled {
    fn publish<'a>(&'a self, _: &'a Envelope) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        Box::pin(async move {
            self.0.notified().await;
            Ok(())
        })
    }
}

#[test]
fn a_relay_that_stops_renewing_loses_its_shares_to_another_after_the_lease() {
    paused().block_on(async {
        let clock = tablekit_core::clock::ManualClock::new(chrono::Utc::now());
        let _clock = tablekit_core::clock::simulate(clock.shared());
        let store = MemoryStore::new();
        backlog(&store, 8, 5).await;
        let lease = Duration::from_secs(10);
        let stalled = Relay::options()
            .id("stalled")
            .share_lease(lease)
            .grace(Duration::ZERO)
            .late(Duration::ZERO)
            .build(store.clone(), Arc::new(Stalled::default()));
        // It takes every share (it is alone) and hangs in its first publish; then its
        // process dies (the task is dropped: no release, no goodbye).
        let task = tokio::spawn(async move {
            stalled
                .run(Duration::from_secs(1), std::future::pending())
                .await
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        task.abort();
        let _ = task.await;

        let tally = Tally::default();
        let other = Relay::options()
            .id("other")
            .share_lease(lease)
            .grace(Duration::ZERO)
            .late(Duration::ZERO)
            .build(store.clone(), Arc::new(tally.clone()));
        let report = other.run_once().await.unwrap();
        assert_eq!((report.published, report.others), (0, 8), "{report:?}");

        // The lease ends (by the store's clock too): the other relay takes over.
        tokio::time::sleep(lease).await;
        clock.advance(chrono::Duration::seconds(10));
        let report = other.run_once().await.unwrap();
        assert_eq!((report.published, report.others), (40, 0), "{report:?}");
        assert_eq!(tally.distinct(), 40);
        assert_eq!(left(&store).await, (0, 0));
    });
}

#[test]
fn a_relay_that_joins_gets_its_part_from_a_running_one() {
    paused().block_on(async {
        let store = MemoryStore::new();
        backlog(&store, 40, 1).await;
        // A running relay whose publishes all fail keeps its loaded shares from pass to
        // pass (an empty registry handles no operation).
        let failing = Arc::new(tablekit_patterns::consistency::InlineSink::new(
            tablekit_patterns::consistency::Registry::new(),
        ));
        let first = Relay::options()
            .id("first")
            .grace(Duration::ZERO)
            .late(Duration::ZERO)
            .build(store.clone(), failing);
        let first = tokio::spawn(async move {
            first
                .run(Duration::from_secs(1), std::future::pending())
                .await
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let held = |owner: &'static str| {
            let store = store.clone();
            async move {
                store
                    .query_all(
                        RELAYS_TABLE,
                        Query::with_filter(
                            tablekit_core::filter::partition_key().eq("share")
                                & tablekit_core::filter::property_named("Owner").eq(owner),
                        ),
                    )
                    .await
                    .unwrap()
                    .len()
            }
        };
        let alone = held("first").await;
        assert!(alone > 30, "it holds every loaded share: {alone}");

        // A second relay joins: at each of its passes the first gives up what is over its
        // fair part, and the second takes it.
        let tally = Tally::default();
        let second = Relay::options()
            .id("second")
            .grace(Duration::ZERO)
            .late(Duration::ZERO)
            .build(store.clone(), Arc::new(tally.clone()));
        let second = tokio::spawn(async move {
            second
                .run(Duration::from_secs(1), std::future::pending())
                .await
        });
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        let status = relays(&store).await.unwrap();
        assert_eq!(status.iter().filter(|r| r.live).count(), 2, "{status:?}");
        assert!(
            tally.distinct() >= 20,
            "the second drained its part: {}",
            tally.distinct()
        );
        assert!(held("first").await < alone);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(
            tally.distinct() >= 35,
            "and more at each pass: {}",
            tally.distinct()
        );
        assert_eq!(
            tally.publishes(),
            tally.distinct(),
            "no entry published twice"
        );
        first.abort();
        second.abort();
    });
}
