//! The relay: publishes the outbox entries writers did not (a crash between the commit
//! and the publish, a failed publish, a broker outage). A pass reads the pending markers
//! and, for each marked partition, its outbox with a RowKey range query: its cost follows
//! the partitions with recent or pending follow-up work, never the size of the tables.
//!
//! Several relays (one per worker process) divide the work: each partition belongs to a
//! share, and a relay drains only the partitions of the shares it leases ([`shares`]),
//! so a partition is drained by one relay at a time and adding processes adds drain rate.
//! A relay drains its partitions concurrently ([`RelayOptions::concurrency`]), publishes
//! each partition's entries in a pipeline ([`RelayOptions::publishes`]) and removes the
//! published entries in entity group transactions ([`RelayOptions::remove_batch`]): on a
//! networked store a page of a partition costs a few round trips, not two per entry.
//!
//! A pass's round trips, with `n` partitions pending and `c` the concurrency:
//!
//! | step | round trips |
//! |---|---|
//! | read the markers | 1 per 1,000 |
//! | read the leases, write the heartbeat (joined) | 1 |
//! | take, renew and release shares (one transaction per 100) | 1 |
//! | per partition: its page, claims of intents, publishes, removals | 3 + ⌈entries / publishes⌉ |
//! | remove the emptied markers (with the partitions) | 1 per partition |
//!
//! so a pass costs about `3 + ⌈n / c⌉ × (4 + ⌈entries / publishes⌉)` round trips in a
//! row. [`RelayOptions::alone`] skips the leases (a deployment with one relay).

mod backlog;
mod drain;
pub(crate) mod feed_log;
mod sequence;
pub mod shares;

use std::collections::BTreeMap;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tablekit_core::{Entity, ErrorKind, IfMatch, Query, TableStore, filter};
use tracing::Instrument;

pub use backlog::{Backlog, backlog, backlog_of};
use drain::{DrainSettings, Drained};
use shares::Leases;
pub use shares::{
    DEFAULT_SHARE_LEASE, DEFAULT_SHARES, RELAYS_TABLE, RelayStatus, relays, share_holder, share_of,
};
use tokio::time::Instant;

use super::outbox::{self, after, ago};
use super::pending::{self, PENDING_TABLE};
use super::sink::OutboxSink;
use crate::error::Result;

/// How long after a marker's lease the relay keeps it: the longest a commit that relied
/// on the lease may take to land, plus clock skew.
pub const DEFAULT_LATE: Duration = Duration::from_secs(60);
/// How many partitions a relay drains at once by default.
pub const DEFAULT_CONCURRENCY: usize = 8;
/// How many publishes a relay keeps in flight per partition by default.
pub const DEFAULT_PUBLISHES: usize = 32;
/// The most pending markers one pass takes up; the next pass goes on after the last.
pub const MAX_PASS_MARKERS: usize = 10_000;

/// What a relay pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RelayReport {
    /// The pending markers read (partitions inspected).
    pub partitions: usize,
    /// The outbox entries read.
    pub entries: usize,
    /// The entries published and removed.
    pub published: usize,
    /// The entries left for later (younger than the grace period, or a failed publish).
    pub deferred: usize,
    /// Entries that do not read (left in place, logged).
    pub malformed: usize,
    /// Markers removed: their partition's outbox was empty and their lease long over.
    pub cleared: usize,
    /// The shares this relay held for the pass (none for a relay [alone](RelayOptions::alone)).
    pub shares: usize,
    /// Marked partitions left to other relays (their shares are leased by them).
    pub others: usize,
    /// Changes of a feed moved into their share's log (`crate::feed`).
    pub sequenced: usize,
}

impl RelayReport {
    fn add(&mut self, partition: Drained) {
        self.entries += partition.entries;
        self.published += partition.published;
        self.deferred += partition.deferred;
        self.malformed += partition.malformed;
        self.sequenced += partition.sequenced;
    }
}

/// Publishes the outbox entries that writers did not, found through pending markers.
pub struct Relay<S> {
    store: S,
    sink: Arc<dyn OutboxSink>,
    grace: Duration,
    late: Duration,
    tables: Option<Vec<String>>,
    concurrency: usize,
    publishes: usize,
    batch: usize,
    leases: Option<Leases>,
    /// Where the next pass goes on when the last stopped at [`MAX_PASS_MARKERS`].
    resume: Mutex<Option<(String, String)>>,
    published: AtomicU64,
    rate: Mutex<f64>,
    /// This relay's locks of the feed's share logs (see [`sequence::ShareLocks`]).
    share_locks: sequence::ShareLocks,
}

impl<S> std::fmt::Debug for Relay<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("id", &self.leases.as_ref().map(|l| l.id.as_str()))
            .field("grace", &self.grace)
            .field("late", &self.late)
            .field("concurrency", &self.concurrency)
            .field("publishes", &self.publishes)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

/// The settings of a [`Relay`], given in any order, then built on a
/// store and a sink with [`build`](Self::build). Each setter given twice keeps the last value.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tablekit_core::MemoryStore;
/// use tablekit_patterns::index::{InlineSink, Relay, handlers};
///
/// let store = MemoryStore::new();
/// let relay = Relay::options()
///     .id("worker-1")
///     .grace(Duration::from_secs(5))
///     .concurrency(16)
///     .build(store.clone(), Arc::new(InlineSink::new(handlers(store, None))));
/// assert_eq!(relay.id(), Some("worker-1"));
/// ```
pub struct RelayOptions<S> {
    id: Option<String>,
    grace: Duration,
    late: Duration,
    tables: Option<Vec<String>>,
    concurrency: usize,
    publishes: usize,
    batch: usize,
    shares: u32,
    share_lease: Duration,
    alone: bool,
    store: PhantomData<fn() -> S>,
}

impl<S> std::fmt::Debug for RelayOptions<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayOptions")
            .field("id", &self.id)
            .field("grace", &self.grace)
            .field("late", &self.late)
            .field("tables", &self.tables)
            .field("concurrency", &self.concurrency)
            .field("publishes", &self.publishes)
            .field("batch", &self.batch)
            .field("shares", &self.shares)
            .field("share_lease", &self.share_lease)
            .field("alone", &self.alone)
            .finish()
    }
}

impl<S> Default for RelayOptions<S> {
    fn default() -> Self {
        RelayOptions {
            id: None,
            grace: Duration::from_secs(2),
            late: DEFAULT_LATE,
            tables: None,
            concurrency: DEFAULT_CONCURRENCY,
            publishes: DEFAULT_PUBLISHES,
            batch: tablekit_core::limits::MAX_BATCH_OPERATIONS,
            shares: DEFAULT_SHARES,
            share_lease: DEFAULT_SHARE_LEASE,
            alone: false,
            store: PhantomData,
        }
    }
}

impl<S: TableStore> RelayOptions<S> {
    /// The defaults: every table's pending markers, entries older than 2 seconds
    /// (younger ones are being published by their writers), the work divided with the
    /// other relays of the store under a random id, [`DEFAULT_CONCURRENCY`] partitions
    /// at once with [`DEFAULT_PUBLISHES`] publishes in flight each, and published entries
    /// removed 100 to a transaction.
    pub fn new() -> Self {
        Self::default()
    }

    /// Divides the work under this id (a process's name, say): the id shows in `status`
    /// and the console, and a relay that restarts under its id finds its shares again.
    /// A relay [alone](Self::alone) has no id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Entries younger than `grace` are left to their writers.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Markers are kept `late` past their lease (see [`DEFAULT_LATE`]); tests use zero.
    pub fn late(mut self, late: Duration) -> Self {
        self.late = late;
        self
    }

    /// Only these tables' markers.
    pub fn tables(mut self, tables: Vec<String>) -> Self {
        self.tables = Some(tables);
        self
    }

    /// Drains up to `partitions` partitions at once (at least 1; default
    /// [`DEFAULT_CONCURRENCY`]).
    pub fn concurrency(mut self, partitions: usize) -> Self {
        self.concurrency = partitions.max(1);
        self
    }

    /// Keeps up to `publishes` publishes in flight per partition (at least 1; default
    /// [`DEFAULT_PUBLISHES`]): with RabbitMQ, confirms pipelined on one channel; with
    /// Azure Queue Storage, concurrent puts.
    pub fn publishes(mut self, publishes: usize) -> Self {
        self.publishes = publishes.max(1);
        self
    }

    /// Removes published entries up to `entries` to a transaction (1 to 100; default
    /// 100; 1 removes each on its own).
    pub fn remove_batch(mut self, entries: usize) -> Self {
        self.batch = entries.clamp(1, tablekit_core::limits::MAX_BATCH_OPERATIONS);
        self
    }

    /// Hashes the partitions into `shares` shares (at least 1; default
    /// [`DEFAULT_SHARES`]; every relay of a deployment must use the same number). A relay
    /// [alone](Self::alone) has none.
    pub fn shares(mut self, shares: u32) -> Self {
        self.shares = shares.max(1);
        self
    }

    /// Leases shares for `lease` (default [`DEFAULT_SHARE_LEASE`]), renewed every pass:
    /// a relay that stops renewing loses its shares to the others after it. A relay
    /// [alone](Self::alone) leases none.
    pub fn share_lease(mut self, lease: Duration) -> Self {
        self.share_lease = lease;
        self
    }

    /// The only relay of its store: it drains every marked partition without leasing
    /// shares (one process, or a test). It takes precedence over [`id`](Self::id),
    /// [`shares`](Self::shares) and [`share_lease`](Self::share_lease), whatever the
    /// order.
    pub fn alone(mut self) -> Self {
        self.alone = true;
        self
    }

    /// The relay over `store`, publishing to `sink`, without I/O.
    pub fn build(self, store: S, sink: Arc<dyn OutboxSink>) -> Relay<S> {
        let leases = (!self.alone).then(|| {
            let id = self.id.unwrap_or_else(|| {
                format!(
                    "relay-{}",
                    &tablekit_core::random::uuid().simple().to_string()[..12]
                )
            });
            Leases::new(id, self.shares, self.share_lease)
        });
        Relay {
            store,
            sink,
            grace: self.grace,
            late: self.late,
            tables: self.tables,
            concurrency: self.concurrency,
            publishes: self.publishes,
            batch: self.batch,
            leases,
            resume: Mutex::default(),
            published: AtomicU64::new(0),
            rate: Mutex::new(0.0),
            share_locks: sequence::ShareLocks::default(),
        }
    }
}

impl<S: TableStore> Relay<S> {
    /// The settings of a relay, given in any order, then
    /// [`build`](RelayOptions::build) on a store and a sink.
    pub fn options() -> RelayOptions<S> {
        RelayOptions::new()
    }

    /// A relay over `store`, publishing to `sink`, with the default settings (see
    /// [`RelayOptions::new`]): the shortcut for `Relay::options().build(store, sink)`.
    pub fn new(store: S, sink: Arc<dyn OutboxSink>) -> Self {
        Self::options().build(store, sink)
    }

    /// The relay's id (`None` for a relay alone).
    pub fn id(&self) -> Option<&str> {
        self.leases.as_ref().map(|l| l.id.as_str())
    }

    /// The entries this relay published since it was made.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }

    /// Writes this relay's heartbeat, so the other relays count it in before its first
    /// pass ([`run`](Self::run) does it on its own every half lease).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn announce(&self) -> Result<()> {
        match &self.leases {
            Some(leases) => {
                let rate = self.rate.lock().map(|r| *r).unwrap_or(0.0);
                leases.heartbeat(&self.store, self.published(), rate).await
            }
            None => Ok(()),
        }
    }

    fn markers_query(&self) -> Query {
        let tables = self.tables.as_ref().map(|tables| {
            tables
                .iter()
                .map(|t| filter::partition_key().eq(t.as_str()))
                .reduce(|a, b| a | b)
                .unwrap_or_else(|| filter::partition_key().eq(""))
        });
        let resume = self.resume.lock().ok().and_then(|r| r.clone());
        let after = resume.map(|(table, partition_key)| {
            filter::partition_key().gt(table.as_str())
                | (filter::partition_key().eq(table.as_str())
                    & filter::row_key().gt(partition_key.as_str()))
        });
        match (tables, after) {
            (Some(t), Some(a)) => Query::with_filter(t & a),
            (Some(t), None) => Query::with_filter(t),
            (None, Some(a)) => Query::with_filter(a),
            (None, None) => Query::new(),
        }
    }

    /// The markers of this pass: up to [`MAX_PASS_MARKERS`], going on where the last
    /// pass stopped.
    async fn markers(&self) -> Result<Vec<Entity>> {
        let mut markers = Vec::new();
        let mut stream =
            std::pin::pin!(self.store.query_stream(PENDING_TABLE, self.markers_query()));
        let mut full = false;
        while let Some(marker) = stream.next().await {
            match marker {
                Ok(marker) => markers.push(marker),
                Err(e) if e.kind() == ErrorKind::TableNotFound => break,
                Err(e) => return Err(e),
            }
            if markers.len() >= MAX_PASS_MARKERS {
                full = true;
                break;
            }
        }
        if let Ok(mut resume) = self.resume.lock() {
            *resume = if full {
                markers
                    .last()
                    .map(|m| (m.partition_key.clone(), m.row_key.clone()))
            } else {
                None
            };
        }
        Ok(markers)
    }

    /// One pass: the marked partitions of this relay's shares (every one for a relay
    /// alone), their old entries published and removed; the shares it took are released
    /// at the end, for the next relay to come.
    ///
    /// # Errors
    /// The store's errors while reading; a failed publish defers the entry instead.
    pub async fn run_once(&self) -> Result<RelayReport> {
        self.pass_with_span(false).await
    }

    /// One pass as [`run`](Self::run) makes them, for a caller's own loop: the relay
    /// keeps its shares for its next pass and writes its heartbeat every half lease.
    /// Call [`leave`](Self::leave) when the loop ends.
    ///
    /// # Errors
    /// As [`run_once`](Self::run_once).
    pub async fn step(&self) -> Result<RelayReport> {
        self.pass_with_span(true).await
    }

    /// Releases this relay's shares and removes its heartbeat (the end of a loop of
    /// [`step`](Self::step)s; [`run`](Self::run) does it at shutdown).
    pub async fn leave(&self) {
        if let Some(leases) = &self.leases {
            leases.leave(&self.store).await;
        }
    }

    async fn pass_with_span(&self, hold: bool) -> Result<RelayReport> {
        let span = tracing::debug_span!(
            "tablekit.relay_pass",
            tablekit.relay.id = self.id().unwrap_or("alone"),
            tablekit.partitions = tracing::field::Empty,
            tablekit.published = tracing::field::Empty,
        );
        let started = tokio::time::Instant::now();
        let report = self.pass(hold).instrument(span.clone()).await;
        if !hold && let Some(leases) = &self.leases {
            leases.release_all(&self.store).await;
        }
        let report = report?;
        span.record("tablekit.partitions", report.partitions);
        span.record("tablekit.published", report.published);
        self.published
            .fetch_add(report.published as u64, Ordering::Relaxed);
        if report.published > 0
            && let Ok(mut rate) = self.rate.lock()
        {
            *rate = report.published as f64 / started.elapsed().as_secs_f64().max(1e-6);
        }
        // Entries the relay publishes are work their writers did not hand over: a crash,
        // a failed publish. A growing count is a sign to look at the writers.
        metrics::counter!("tablekit_relay_published_total").increment(report.published as u64);
        metrics::counter!("tablekit_relay_passes_total").increment(1);
        metrics::gauge!("tablekit_relay_shares").set(report.shares as f64);
        Ok(report)
    }

    async fn pass(&self, hold: bool) -> Result<RelayReport> {
        let mut report = RelayReport::default();
        let markers = self.markers().await?;
        let Some(leases) = &self.leases else {
            report.partitions = markers.len();
            let all = markers.iter().map(|marker| (marker, None)).collect();
            self.drain_all(all, &mut report).await?;
            return Ok(report);
        };
        // The heartbeat every half lease, and after a pass that published (so `status`
        // shows the drain as it goes).
        let published = self.published();
        let beat = async {
            if hold && (leases.beat_due() || leases.reported() != published) {
                let rate = self.rate.lock().map(|r| *r).unwrap_or(0.0);
                if let Err(e) = leases.heartbeat(&self.store, published, rate).await {
                    tracing::warn!(error = %e, "writing the relay's heartbeat failed");
                }
            }
        };
        if markers.is_empty() {
            beat.await;
            return Ok(report);
        }
        report.partitions = markers.len();
        let keyed: Vec<(u32, &Entity)> = markers
            .iter()
            .map(|m| (share_of(&m.partition_key, &m.row_key, leases.shares), m))
            .collect();
        let mut load: BTreeMap<u32, usize> = BTreeMap::new();
        for (share, _) in &keyed {
            *load.entry(*share).or_default() += 1;
        }
        let ((), held) = tokio::join!(beat, leases.settle(&self.store, &load));
        let held = held?;
        report.shares = held.len();
        // Each partition of a held share, with its fence.
        let mine: Vec<(&Entity, Option<Instant>)> = keyed
            .into_iter()
            .filter_map(|(share, marker)| Some((marker, Some(leases.fence(*held.get(&share)?)))))
            .collect();
        report.others = markers.len() - mine.len();
        self.drain_all(mine, &mut report).await?;
        Ok(report)
    }

    /// Drains the partitions (each with the instant it must stop at, if any), up to the
    /// concurrency at once.
    async fn drain_all(
        &self,
        markers: Vec<(&Entity, Option<Instant>)>,
        report: &mut RelayReport,
    ) -> Result<()> {
        // Up to `concurrency` partitions in flight (a loop rather than a stream adapter,
        // so the future stays `Send` for any lifetime of what it borrows).
        let mut in_flight = futures::stream::FuturesUnordered::new();
        let mut next = 0;
        let mut first_error = None;
        loop {
            while in_flight.len() < self.concurrency && next < markers.len() {
                let (marker, fence) = markers[next];
                in_flight.push(self.relay_partition(marker, fence));
                next += 1;
            }
            let Some(done) = in_flight.next().await else {
                break;
            };
            match done {
                Ok((drained, cleared)) => {
                    report.add(drained);
                    report.cleared += usize::from(cleared);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Publishes one marked partition's old entries, page by page until its `fence` (the
    /// share's lease nearing its end); removes the marker when nothing is left and its
    /// lease is long over.
    async fn relay_partition(
        &self,
        marker: &Entity,
        fence: Option<Instant>,
    ) -> Result<(Drained, bool)> {
        let (table, partition_key) = (&marker.partition_key, &marker.row_key);
        let cutoff = ago(self.grace);
        let settings = DrainSettings {
            publishes: self.publishes,
            batch: self.batch,
        };
        let partition = drain::Partition {
            store: &self.store,
            sink: self.sink.as_ref(),
            table,
            partition_key,
            cutoff,
            settings,
            fence,
        };
        let mut drained = Drained::default();
        let mut query = Some(outbox::relay_query(partition_key));
        let mut waiting = Vec::new();
        let mut complete = true;
        // When the first page was read: an entry written after it is not in the pages,
        // so the marker may go only if its lease ended long before this instant (not
        // before the end of the pass, which a stalled process reaches much later).
        let first_read = tablekit_core::clock::now();
        while let Some(current) = query.take() {
            if !partition.held() {
                // The share's lease runs out: the rest waits for the next pass (of this
                // relay or of the one that takes the share).
                complete = false;
                break;
            }
            let page = match self.store.query(table, &current).await {
                Ok(page) => page,
                Err(e) if e.kind() == ErrorKind::TableNotFound => break,
                Err(e) => return Err(e),
            };
            if page.continuation.is_some() {
                query = Some(current.continue_from(page.continuation));
            }
            let (changes, entries): (Vec<Entity>, Vec<Entity>) =
                page.entities.into_iter().partition(outbox::is_waiting);
            waiting.extend(changes);
            drain::drain_page(&partition, entries, &mut drained).await?;
        }
        // The feed's changes, in version order, into their share's log.
        if !waiting.is_empty() {
            let count = waiting.len();
            let held = || partition.held();
            match sequence::sequence(
                &self.store,
                table,
                partition_key,
                waiting,
                &self.share_locks,
                &held,
            )
            .await
            {
                Ok(sequenced) => {
                    drained.sequenced += sequenced.appended;
                    drained.left += sequenced.left;
                }
                Err(e) => {
                    tracing::warn!(table, partition_key, error = %e, "sequencing the feed's changes failed; the next pass goes on");
                    drained.left += count;
                }
            }
        }
        let mut cleared = false;
        if complete && drained.left == 0 && after(pending::until(marker), self.late) < first_read {
            let if_match = marker.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            match self
                .store
                .delete(PENDING_TABLE, table, partition_key, if_match)
                .await
            {
                Ok(()) => cleared = true,
                // Renewed meanwhile (its ETag moved): a writer relies on it again. Or
                // another relay removed it.
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed | ErrorKind::NotFound
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        Ok((drained, cleared))
    }

    /// Passes until `shutdown` completes: at once after a pass that published (a
    /// backlog drains without pauses), else every `interval`. The relay keeps its shares
    /// from pass to pass and writes its heartbeat every half lease; at shutdown it
    /// releases its shares and removes its heartbeat. A failed pass is logged and the
    /// next one runs.
    pub async fn run(&self, interval: Duration, shutdown: impl Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let busy = match self.pass_with_span(true).await {
                Ok(report) if report.published > 0 || report.sequenced > 0 => {
                    tracing::info!(
                        published = report.published,
                        sequenced = report.sequenced,
                        partitions = report.partitions,
                        shares = report.shares,
                        "relayed outbox entries"
                    );
                    true
                }
                Ok(_) => false,
                Err(e) => {
                    tracing::warn!(error = %e, "outbox relay pass failed");
                    false
                }
            };
            let pause = if busy { Duration::ZERO } else { interval };
            tokio::select! {
                () = &mut shutdown => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
        self.leave().await;
    }
}
