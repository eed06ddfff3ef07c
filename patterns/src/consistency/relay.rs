//! The relay: publishes the outbox entries writers did not (a crash between the commit
//! and the publish, a failed publish). A pass reads the pending markers and, for each,
//! the one partition's outbox with a RowKey range query: its cost follows the partitions
//! with recent or pending follow-up work, never the size of the tables.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::TryStreamExt;
use tablekit_core::{Entity, ErrorKind, IfMatch, Query, TableStore, filter};
use tracing::Instrument;

use super::outbox::{self, after, ago};
use super::pending::{self, PENDING_TABLE};
use super::sink::OutboxSink;
use crate::error::Result;

/// How long after a marker's lease the relay keeps it: the longest a commit that relied
/// on the lease may take to land, plus clock skew.
pub const DEFAULT_LATE: Duration = Duration::from_secs(60);

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
}

/// Publishes the outbox entries that writers did not, found through pending markers.
pub struct Relay<S> {
    store: S,
    sink: Arc<dyn OutboxSink>,
    grace: Duration,
    late: Duration,
    tables: Option<Vec<String>>,
}

impl<S: TableStore> Relay<S> {
    /// A relay over every table's pending markers, publishing to `sink`, for entries
    /// older than 2 seconds (younger ones are being published by their writers).
    pub fn new(store: S, sink: Arc<dyn OutboxSink>) -> Self {
        Relay {
            store,
            sink,
            grace: Duration::from_secs(2),
            late: DEFAULT_LATE,
            tables: None,
        }
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

    fn markers_query(&self) -> Query {
        match &self.tables {
            Some(tables) => {
                let any = tables
                    .iter()
                    .map(|t| filter::partition_key().eq(t.as_str()))
                    .reduce(|a, b| a | b);
                match any {
                    Some(any) => Query::with_filter(any),
                    None => Query::with_filter(filter::partition_key().eq("")),
                }
            }
            None => Query::new(),
        }
    }

    /// One pass: every marker, page by page, and each marked partition's outbox.
    ///
    /// # Errors
    /// The store's errors while reading; a failed publish defers the entry instead.
    pub async fn run_once(&self) -> Result<RelayReport> {
        let span = tracing::debug_span!(
            "tablekit.relay_pass",
            tablekit.partitions = tracing::field::Empty,
            tablekit.published = tracing::field::Empty,
        );
        let report = self.pass().instrument(span.clone()).await?;
        span.record("tablekit.partitions", report.partitions);
        span.record("tablekit.published", report.published);
        // Entries the relay publishes are work their writers did not hand over: a crash,
        // a failed publish. A growing count is a sign to look at the writers.
        metrics::counter!("tablekit_relay_published_total").increment(report.published as u64);
        metrics::counter!("tablekit_relay_passes_total").increment(1);
        Ok(report)
    }

    async fn pass(&self) -> Result<RelayReport> {
        let mut report = RelayReport::default();
        let mut markers =
            std::pin::pin!(self.store.query_stream(PENDING_TABLE, self.markers_query()));
        loop {
            let marker = match markers.try_next().await {
                Ok(Some(marker)) => marker,
                Ok(None) => break,
                Err(e) if e.kind() == ErrorKind::TableNotFound => break,
                Err(e) => return Err(e.into()),
            };
            report.partitions += 1;
            self.relay_partition(&marker, &mut report).await?;
        }
        Ok(report)
    }

    /// Publishes one marked partition's old entries; removes the marker when nothing is
    /// left and its lease is long over.
    async fn relay_partition(&self, marker: &Entity, report: &mut RelayReport) -> Result<()> {
        let (table, partition_key) = (&marker.partition_key, &marker.row_key);
        let cutoff = ago(self.grace);
        let mut left = 0;
        let mut entries = std::pin::pin!(
            self.store
                .query_stream(table, outbox::partition_query(partition_key))
        );
        loop {
            let entry = match entries.try_next().await {
                Ok(Some(entry)) => entry,
                Ok(None) => break,
                Err(e) if e.kind() == ErrorKind::TableNotFound => break,
                Err(e) => return Err(e.into()),
            };
            report.entries += 1;
            if outbox::created_at(&entry).is_some_and(|created| created > cutoff)
                || outbox::waiting(&entry)
            {
                report.deferred += 1;
                left += 1;
                continue;
            }
            // An intent its write left past the grace period: claimed first, so the
            // write can no longer commit, then published as its undoing.
            let mut etag = entry.etag.clone();
            if outbox::is_intent(&entry) {
                let claimed = match &etag {
                    Some(current) => {
                        outbox::claim_intent(&self.store, table, &entry, current.clone()).await?
                    }
                    None => None,
                };
                match claimed {
                    Some(claimed) => etag = Some(claimed),
                    None => {
                        // Committed or claimed meanwhile: the next pass sees.
                        left += 1;
                        continue;
                    }
                }
            }
            let envelope = match outbox::read_entry(&entry) {
                Ok(envelope) => envelope,
                Err(e) => {
                    tracing::error!(table, partition_key, error = %e, "outbox entry does not read; left in place");
                    report.malformed += 1;
                    left += 1;
                    continue;
                }
            };
            if outbox::publish(
                &self.store,
                table,
                partition_key,
                self.sink.as_ref(),
                &envelope,
                etag,
            )
            .await
            {
                report.published += 1;
            } else {
                report.deferred += 1;
                left += 1;
            }
        }
        if left == 0 && after(pending::until(marker), self.late) < tablekit_core::clock::now() {
            let if_match = marker.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            match self
                .store
                .delete(PENDING_TABLE, table, partition_key, if_match)
                .await
            {
                Ok(()) => report.cleared += 1,
                // Renewed meanwhile (its ETag moved): a writer relies on it again. Or
                // another relay removed it.
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed | ErrorKind::NotFound
                    ) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Passes every `interval` until `shutdown` completes; a failed pass is logged and
    /// the next one runs.
    pub async fn run(&self, interval: Duration, shutdown: impl Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            match self.run_once().await {
                Ok(report) if report.published > 0 => {
                    tracing::info!(
                        published = report.published,
                        partitions = report.partitions,
                        "relayed outbox entries"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "outbox relay pass failed"),
            }
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(interval) => {}
            }
        }
    }
}

/// What the relay has left to publish: read-only, through the pending markers (its cost
/// follows the partitions with pending work, like a relay pass).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Backlog {
    /// Pending markers read (a marker stays a while after its partition's outbox empties).
    pub markers: u64,
    /// Partitions whose outbox holds entries.
    pub partitions: u64,
    /// Outbox entries in them, delayed work whose time has not come left out.
    pub entries: u64,
    /// When the oldest of those entries was written.
    pub oldest: Option<chrono::DateTime<Utc>>,
    /// Delayed work whose time has not come (the burial of a delete's tombstone).
    #[serde(default)]
    pub delayed: u64,
    /// Each table with entries waiting, and how many (by table name).
    #[serde(default)]
    pub tables: std::collections::BTreeMap<String, u64>,
}

/// The relay's backlog over every table's pending markers.
///
/// # Errors
/// The store's errors.
pub async fn backlog<S: TableStore>(store: &S) -> Result<Backlog> {
    let mut backlog = Backlog::default();
    let mut markers = std::pin::pin!(store.query_stream(PENDING_TABLE, Query::new()));
    loop {
        let marker = match markers.try_next().await {
            Ok(Some(marker)) => marker,
            Ok(None) => break,
            Err(e) if e.kind() == ErrorKind::TableNotFound => break,
            Err(e) => return Err(e.into()),
        };
        backlog.markers += 1;
        let (table, partition_key) = (&marker.partition_key, &marker.row_key);
        let before = backlog.entries;
        let mut entries =
            std::pin::pin!(store.query_stream(table, outbox::partition_query(partition_key)));
        loop {
            let entry = match entries.try_next().await {
                Ok(Some(entry)) => entry,
                Ok(None) => break,
                Err(e) if e.kind() == ErrorKind::TableNotFound => break,
                Err(e) => return Err(e.into()),
            };
            if outbox::waiting(&entry) {
                backlog.delayed += 1;
                continue;
            }
            backlog.entries += 1;
            if let Some(created) = outbox::created_at(&entry) {
                backlog.oldest = Some(backlog.oldest.map_or(created, |o| o.min(created)));
            }
        }
        if backlog.entries > before {
            backlog.partitions += 1;
            *backlog.tables.entry(table.clone()).or_default() += backlog.entries - before;
        }
    }
    Ok(backlog)
}
