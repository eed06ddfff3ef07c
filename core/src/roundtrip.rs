//! The round-trip model: what a path of tablekit (or of an application) costs on a
//! networked store, where every call is a round trip of milliseconds rather than the
//! microseconds of the embedded default.
//!
//! [`RoundTripStore`] wraps any [`TableStore`]: it counts every call by kind and makes
//! each one wait a [`Latency`] before it reaches the store (none, fixed, uniform, or
//! sampled from measured round trips). [`RoundTrips`] holds the counters and the latency;
//! clones share them, so a store wrapper and the queue wrappers built on it
//! (`RoundTripSink` in the patterns crate, `RoundTripQueue` in the workers crate) count
//! into one place. It also keeps how many calls were in flight at once, which tells
//! whether a path joins its independent calls.
//!
//! Tests assert call counts (deterministic); benches time paths with a latency: with a
//! fixed latency `d`, a path that takes `t` made about `t / d` round trips in a row (its
//! critical path), whatever its call count.
//!
//! ```
//! use std::time::Duration;
//! use tablekit_core::prelude::*;
//! use tablekit_core::roundtrip::{Latency, RoundTripStore};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = RoundTripStore::new(MemoryStore::new(), Latency::Fixed(Duration::from_millis(1)));
//! store.create_table("Items").await?;
//! store.trips().reset();
//! let started = std::time::Instant::now();
//! // Two independent reads, joined: two calls, one round trip in a row.
//! let (a, b) = tokio::join!(
//!     store.get("Items", "p", "a", None),
//!     store.get("Items", "p", "b", None),
//! );
//! assert!(a?.is_none() && b?.is_none());
//! let counts = store.trips().counts();
//! assert_eq!((counts.gets, counts.store_calls()), (2, 2));
//! assert_eq!(store.trips().peak_in_flight(), 2);
//! assert!(started.elapsed() >= Duration::from_millis(1));
//! # Ok::<_, Error>(())
//! # }).unwrap();
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::Result;
use crate::model::{ETag, Entity};
use crate::query::{Page, Query};
use crate::store::{Batch, KeyOrder, TableStore, WriteOp};

/// How long each call waits before it reaches the store: the round trip it would cost
/// on a networked service.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Latency {
    /// No wait: the wrapper only counts.
    #[default]
    None,
    /// The same wait for every call.
    Fixed(Duration),
    /// A wait drawn uniformly between the two bounds (inclusive).
    Uniform(Duration, Duration),
    /// A wait drawn from measured round trips (for instance a region's figures); none
    /// when the list is empty.
    Sampled(Arc<[Duration]>),
}

impl Latency {
    /// A fixed latency of `millis` milliseconds.
    pub fn millis(millis: u64) -> Self {
        Latency::Fixed(Duration::from_millis(millis))
    }

    /// The wait of one call.
    pub fn sample(&self) -> Duration {
        match self {
            Latency::None => Duration::ZERO,
            Latency::Fixed(d) => *d,
            Latency::Uniform(low, high) if high > low => *low + crate::random::up_to(*high - *low),
            Latency::Uniform(low, _) => *low,
            Latency::Sampled(samples) if samples.is_empty() => Duration::ZERO,
            Latency::Sampled(samples) => {
                let i = (crate::random::u64() % samples.len() as u64) as usize;
                samples[i]
            }
        }
    }
}

/// What a call is, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallKind {
    /// A point read.
    Get,
    /// One page of a query.
    Query,
    /// One write of one entity.
    Write,
    /// One entity group transaction.
    Batch,
    /// Creating, deleting or listing tables.
    Table,
    /// Handing a message to a queue (a publish with its confirm).
    Publish,
    /// Taking a message from a queue.
    Receive,
    /// Settling a delivery: ack, retry or poison.
    Settle,
    /// Any other queue call (declare, statistics, poison listing).
    QueueAdmin,
}

/// The calls counted so far, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallCounts {
    /// Point reads.
    pub gets: u64,
    /// Query pages.
    pub queries: u64,
    /// Single-entity writes.
    pub writes: u64,
    /// Entity group transactions.
    pub batches: u64,
    /// Table administration.
    pub tables: u64,
    /// Messages handed to a queue.
    pub publishes: u64,
    /// Messages taken from a queue.
    pub receives: u64,
    /// Deliveries settled.
    pub settles: u64,
    /// Other queue calls.
    pub queue_admin: u64,
    /// Entities the store calls read or wrote: one per point read and single write,
    /// each entity of a query page and of a transaction — what the table service's
    /// scalability targets count (2,000 per second per partition, 20,000 per account).
    pub entities: u64,
}

impl CallCounts {
    /// Calls to the table store (reads, queries, writes, batches, table administration).
    pub fn store_calls(&self) -> u64 {
        self.gets + self.queries + self.writes + self.batches + self.tables
    }

    /// Calls to a queue.
    pub fn queue_calls(&self) -> u64 {
        self.publishes + self.receives + self.settles + self.queue_admin
    }

    /// Every call.
    pub fn total(&self) -> u64 {
        self.store_calls() + self.queue_calls()
    }

    /// Writes to the table store, single or in a transaction.
    pub fn store_writes(&self) -> u64 {
        self.writes + self.batches
    }
}

impl std::ops::Sub for CallCounts {
    type Output = CallCounts;

    /// The calls made between two readings.
    fn sub(self, before: CallCounts) -> CallCounts {
        CallCounts {
            gets: self.gets.saturating_sub(before.gets),
            queries: self.queries.saturating_sub(before.queries),
            writes: self.writes.saturating_sub(before.writes),
            batches: self.batches.saturating_sub(before.batches),
            tables: self.tables.saturating_sub(before.tables),
            publishes: self.publishes.saturating_sub(before.publishes),
            receives: self.receives.saturating_sub(before.receives),
            settles: self.settles.saturating_sub(before.settles),
            queue_admin: self.queue_admin.saturating_sub(before.queue_admin),
            entities: self.entities.saturating_sub(before.entities),
        }
    }
}

impl std::fmt::Display for CallCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} store calls ({} gets, {} queries, {} writes, {} batches), {} publishes",
            self.store_calls(),
            self.gets,
            self.queries,
            self.writes,
            self.batches,
            self.publishes
        )
    }
}

#[derive(Debug, Default)]
struct Counters {
    latency: Mutex<Latency>,
    calls: [AtomicU64; 9],
    entities: AtomicU64,
    in_flight: AtomicU64,
    peak: AtomicU64,
    /// The calls' log, while recording.
    log: Mutex<Option<Vec<Call>>>,
}

/// One call in the log of [`RoundTrips::record`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// What the call was.
    pub kind: CallKind,
    /// The table or queue it went to.
    pub target: String,
    /// How many calls were in flight when it started (itself included): a call with 2 or
    /// more ran beside another.
    pub in_flight: u64,
}

impl CallKind {
    fn slot(self) -> usize {
        match self {
            CallKind::Get => 0,
            CallKind::Query => 1,
            CallKind::Write => 2,
            CallKind::Batch => 3,
            CallKind::Table => 4,
            CallKind::Publish => 5,
            CallKind::Receive => 6,
            CallKind::Settle => 7,
            CallKind::QueueAdmin => 8,
        }
    }
}

/// The shared counters and latency of the round-trip wrappers. Clones share them.
#[derive(Clone, Debug, Default)]
pub struct RoundTrips {
    counters: Arc<Counters>,
}

/// Leaves the in-flight count when a call ends (or its future is dropped).
struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl RoundTrips {
    /// Counters whose calls wait `latency`.
    pub fn new(latency: Latency) -> Self {
        let trips = RoundTrips::default();
        trips.set_latency(latency);
        trips
    }

    /// Changes the latency of the calls that start from now on.
    pub fn set_latency(&self, latency: Latency) {
        if let Ok(mut current) = self.counters.latency.lock() {
            *current = latency;
        }
    }

    /// The latency calls wait.
    pub fn latency(&self) -> Latency {
        self.counters
            .latency
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default()
    }

    /// The calls counted since the start or the last [`reset`](Self::reset).
    pub fn counts(&self) -> CallCounts {
        let c = |kind: CallKind| self.counters.calls[kind.slot()].load(Ordering::SeqCst);
        CallCounts {
            gets: c(CallKind::Get),
            queries: c(CallKind::Query),
            writes: c(CallKind::Write),
            batches: c(CallKind::Batch),
            tables: c(CallKind::Table),
            publishes: c(CallKind::Publish),
            receives: c(CallKind::Receive),
            settles: c(CallKind::Settle),
            queue_admin: c(CallKind::QueueAdmin),
            entities: self.counters.entities.load(Ordering::SeqCst),
        }
    }

    /// Counts `n` entities read or written by a store call.
    pub fn add_entities(&self, n: usize) {
        self.counters
            .entities
            .fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// The most calls that were in flight at once since the start or the last reset.
    pub fn peak_in_flight(&self) -> u64 {
        self.counters.peak.load(Ordering::SeqCst)
    }

    /// Sets every counter to zero (the latency stays).
    pub fn reset(&self) {
        for calls in &self.counters.calls {
            calls.store(0, Ordering::SeqCst);
        }
        self.counters.entities.store(0, Ordering::SeqCst);
        self.counters.peak.store(
            self.counters.in_flight.load(Ordering::SeqCst),
            Ordering::SeqCst,
        );
    }

    /// Starts (or stops) keeping a log of every call, in the order they start: which
    /// calls a path makes and which run beside each other.
    pub fn record(&self, on: bool) {
        if let Ok(mut log) = self.counters.log.lock() {
            *log = on.then(Vec::new);
        }
    }

    /// The calls logged since the last take (empty when not recording).
    pub fn take_log(&self) -> Vec<Call> {
        self.counters
            .log
            .lock()
            .ok()
            .and_then(|mut log| log.as_mut().map(std::mem::take))
            .unwrap_or_default()
    }

    /// Runs one call of `kind`: counts it, waits the latency, then awaits `call`.
    pub async fn call<T>(&self, kind: CallKind, call: impl Future<Output = T>) -> T {
        self.call_on(kind, "", call).await
    }

    /// Runs one call of `kind` to `target` (a table or queue, for the log).
    pub async fn call_on<T>(
        &self,
        kind: CallKind,
        target: &str,
        call: impl Future<Output = T>,
    ) -> T {
        self.counters.calls[kind.slot()].fetch_add(1, Ordering::SeqCst);
        let now = self.counters.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.counters.peak.fetch_max(now, Ordering::SeqCst);
        if let Ok(mut log) = self.counters.log.lock()
            && let Some(log) = log.as_mut()
        {
            log.push(Call {
                kind,
                target: target.to_owned(),
                in_flight: now,
            });
        }
        let _leave = InFlight(&self.counters.in_flight);
        let wait = self.latency().sample();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        call.await
    }
}

/// A [`TableStore`] whose every call is counted and waits a [`Latency`] (see the module
/// docs). Clones share the counters.
#[derive(Clone, Debug)]
pub struct RoundTripStore<S> {
    inner: S,
    trips: RoundTrips,
}

impl<S: TableStore> RoundTripStore<S> {
    /// Wraps `inner`; every call waits `latency`.
    pub fn new(inner: S, latency: Latency) -> Self {
        RoundTripStore {
            inner,
            trips: RoundTrips::new(latency),
        }
    }

    /// Wraps `inner`, counting into `trips` (shared with other wrappers).
    pub fn with_trips(inner: S, trips: RoundTrips) -> Self {
        RoundTripStore { inner, trips }
    }

    /// The counters and the latency.
    pub fn trips(&self) -> &RoundTrips {
        &self.trips
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: TableStore> TableStore for RoundTripStore<S> {
    async fn create_table(&self, table: &str) -> Result<()> {
        self.trips
            .call_on(CallKind::Table, table, self.inner.create_table(table))
            .await
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        self.trips
            .call_on(CallKind::Table, table, self.inner.delete_table(table))
            .await
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        self.trips
            .call(CallKind::Table, self.inner.list_tables(prefix))
            .await
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        self.trips
            .call_on(
                CallKind::Get,
                table,
                self.inner.get(table, partition_key, row_key, select),
            )
            .await
            .inspect(|_| self.trips.add_entities(1))
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        self.trips
            .call_on(CallKind::Query, table, self.inner.query(table, query))
            .await
            .inspect(|page| self.trips.add_entities(page.entities.len()))
    }

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        self.trips
            .call_on(CallKind::Write, table, self.inner.execute(table, op))
            .await
            .inspect(|_| self.trips.add_entities(1))
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        self.trips
            .call_on(
                CallKind::Batch,
                table,
                self.inner.submit_batch(table, batch),
            )
            .await
            .inspect(|etags| self.trips.add_entities(etags.len()))
    }

    fn key_order(&self) -> KeyOrder {
        self.inner.key_order()
    }

    fn preserves_negative_zero(&self) -> bool {
        self.inner.preserves_negative_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryStore;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime")
    }

    #[test]
    fn every_call_is_counted_by_kind_and_waits_its_latency() {
        rt().block_on(async {
            let store = RoundTripStore::new(MemoryStore::new(), Latency::millis(20));
            let started = tokio::time::Instant::now();
            store.create_table("Items").await.expect("create");
            store
                .insert("Items", Entity::new("p", "a"))
                .await
                .expect("insert");
            let mut batch = Batch::new();
            batch.insert(Entity::new("p", "b"));
            batch.insert(Entity::new("p", "c"));
            store.submit_batch("Items", batch).await.expect("batch");
            store.get("Items", "p", "a", None).await.expect("get");
            store.query_all("Items", Query::new()).await.expect("query");
            let counts = store.trips().counts();
            assert_eq!(
                counts,
                CallCounts {
                    gets: 1,
                    queries: 1,
                    writes: 1,
                    batches: 1,
                    tables: 1,
                    // The insert's, the transaction's two, the read's, the query's three.
                    entities: 7,
                    ..CallCounts::default()
                }
            );
            assert_eq!(counts.store_calls(), 5);
            // Five calls in a row: five round trips.
            assert_eq!(started.elapsed(), Duration::from_millis(100));
            assert_eq!(store.trips().peak_in_flight(), 1);
        });
    }

    #[test]
    fn joined_calls_overlap_and_the_peak_says_so() {
        rt().block_on(async {
            let store = RoundTripStore::new(MemoryStore::new(), Latency::millis(5));
            store.create_table("Items").await.expect("create");
            store.trips().reset();
            let started = tokio::time::Instant::now();
            let (a, b, c) = tokio::join!(
                store.insert("Items", Entity::new("p", "a")),
                store.insert("Items", Entity::new("p", "b")),
                store.get("Items", "p", "z", None),
            );
            assert!(a.is_ok() && b.is_ok() && c.is_ok());
            assert_eq!(started.elapsed(), Duration::from_millis(5));
            assert_eq!(store.trips().peak_in_flight(), 3);
            let before = store.trips().counts();
            store.get("Items", "p", "a", None).await.expect("get");
            assert_eq!((store.trips().counts() - before).gets, 1);
        });
    }

    #[test]
    fn sampled_and_uniform_latencies_stay_in_their_bounds() {
        let _seeded = crate::random::seed(3);
        let uniform = Latency::Uniform(Duration::from_millis(5), Duration::from_millis(10));
        let sampled = Latency::Sampled(Arc::from(vec![
            Duration::from_millis(7),
            Duration::from_millis(9),
        ]));
        for _ in 0..100 {
            let u = uniform.sample();
            assert!(u >= Duration::from_millis(5) && u <= Duration::from_millis(10));
            let s = sampled.sample();
            assert!(s == Duration::from_millis(7) || s == Duration::from_millis(9));
        }
        assert_eq!(Latency::Sampled(Arc::from(vec![])).sample(), Duration::ZERO);
        assert_eq!(Latency::None.sample(), Duration::ZERO);
    }
}
