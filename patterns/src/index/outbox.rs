//! The transactional outbox: an indexed write whose follow-up work lies outside its
//! partition records that work ([`IndexOperations`]) in an outbox entry in its own
//! partition, in the same entity group transaction. After the commit the writer hands the
//! entry to its [`OutboxSink`] (a queue, or [`InlineSink`] applying it in process) and
//! deletes it. A crash or a failed publish between the two leaves the entry; the
//! [`Relay`] finds entries older than its grace period, publishes them and deletes them.
//! Publishing twice is harmless: the operations are idempotent.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::TryStreamExt;
use tablekit_core::{Entity, ErrorKind, IfMatch, Query, TableStore, Value, filter};

use super::operation::{IndexApplier, IndexOperations};
use super::record::{MARKER_PROPERTY, OUTBOX_KIND};
use super::registry::SchemaRecord;
use crate::error::{Error, Result};

/// The RowKey prefix of outbox entries.
pub const OUTBOX_PREFIX: &str = "~outbox~";
const OPERATIONS_PROPERTY: &str = "Operations";
const CREATED_PROPERTY: &str = "CreatedAt";

/// A boxed future, for the object-safe sink.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where an indexed table hands its follow-up work: a queue (the worker crate's
/// `QueueSink`), or [`InlineSink`].
pub trait OutboxSink: Send + Sync {
    /// Publishes one write's operations durably; `Ok` only once they cannot be lost.
    fn publish<'a>(&'a self, operations: &'a IndexOperations) -> BoxFuture<'a, Result<()>>;
}

/// A sink that applies the operations at once, in the writing process: no queue, and the
/// copies are up to date when the write returns (unless the process stops first; the
/// relay then finishes the work).
#[derive(Clone, Debug)]
pub struct InlineSink<S> {
    applier: IndexApplier<S>,
}

impl<S> InlineSink<S> {
    /// A sink applying through `applier`.
    pub fn new(applier: IndexApplier<S>) -> Self {
        InlineSink { applier }
    }
}

impl<S: TableStore> OutboxSink for InlineSink<S> {
    fn publish<'a>(&'a self, operations: &'a IndexOperations) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move { self.applier.apply_all(operations).await })
    }
}

/// The outbox entry of a write, in the primary's partition.
pub fn outbox_entity(partition_key: &str, operations: &IndexOperations) -> Entity {
    let mut entity = Entity::new(partition_key, format!("{OUTBOX_PREFIX}{}", operations.id));
    entity.properties.insert(
        MARKER_PROPERTY.to_owned(),
        Value::String(OUTBOX_KIND.to_owned()),
    );
    entity.properties.insert(
        OPERATIONS_PROPERTY.to_owned(),
        Value::String(serde_json::to_string(operations).unwrap_or_default()),
    );
    entity
        .properties
        .insert(CREATED_PROPERTY.to_owned(), Value::DateTime(Utc::now()));
    entity
}

/// Reads an outbox entry.
///
/// # Errors
/// [`Error::Malformed`] when the entry does not read.
pub fn read_outbox(entity: &Entity) -> Result<IndexOperations> {
    let what = || format!("outbox entry {}/{}", entity.partition_key, entity.row_key);
    match entity.properties.get(OPERATIONS_PROPERTY) {
        Some(Value::String(json)) => {
            serde_json::from_str(json).map_err(|e| Error::malformed(what(), e))
        }
        _ => Err(Error::malformed(what(), "no Operations property")),
    }
}

/// The pending outbox entries of a table.
///
/// # Errors
/// The store's errors.
pub async fn pending<S: TableStore>(store: &S, table: &str) -> Result<Vec<Entity>> {
    let query = Query::with_filter(filter::prop(MARKER_PROPERTY).eq(OUTBOX_KIND));
    match store.query_stream(table, query).try_collect().await {
        Ok(rows) => Ok(rows),
        Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes a published outbox entry (under its ETag when known; gone already is fine).
///
/// # Errors
/// The store's errors.
pub async fn remove_entry<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    row_key: &str,
    if_match: IfMatch,
) -> Result<()> {
    match store.delete(table, partition_key, row_key, if_match).await {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::NotFound | ErrorKind::PreconditionFailed | ErrorKind::TableNotFound
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// After a write committed its outbox entry: hands the work to the sink, then deletes
/// the entry (under its ETag when known). `true` when both happened; otherwise the entry
/// stays for the relay (the failure is logged, the write stands).
pub async fn publish_entry<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    sink: &dyn OutboxSink,
    entry: &IndexOperations,
    etag: Option<tablekit_core::ETag>,
) -> bool {
    if let Err(e) = sink.publish(entry).await {
        tracing::warn!(table, error = %e, "publishing outbox work failed; the relay will retry it");
        return false;
    }
    let row_key = format!("{OUTBOX_PREFIX}{}", entry.id);
    let if_match = etag.map_or(IfMatch::Any, IfMatch::ETag);
    match remove_entry(store, table, partition_key, &row_key, if_match).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(table, error = %e, "removing a published outbox entry failed; the relay will publish it again");
            false
        }
    }
}

/// The instant `grace` before now (the earliest instant when that is out of range).
pub(crate) fn ago(grace: Duration) -> chrono::DateTime<Utc> {
    chrono::Duration::from_std(grace)
        .ok()
        .and_then(|grace| Utc::now().checked_sub_signed(grace))
        .unwrap_or(chrono::DateTime::<Utc>::MIN_UTC)
}

/// What a relay pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RelayReport {
    /// The tables scanned.
    pub tables: usize,
    /// The entries published and removed.
    pub published: usize,
    /// The entries left for later (younger than the grace period, or a failed publish).
    pub deferred: usize,
    /// Entries that do not read (left in place, logged).
    pub malformed: usize,
}

/// Publishes the outbox entries that writers did not (a crash, a failed publish).
pub struct Relay<S> {
    store: S,
    sink: Arc<dyn OutboxSink>,
    grace: Duration,
    tables: Option<Vec<String>>,
}

impl<S: TableStore> Relay<S> {
    /// A relay over the tables of the schema registry, publishing to `sink`, for entries
    /// older than 2 seconds (younger ones are being published by their writers).
    pub fn new(store: S, sink: Arc<dyn OutboxSink>) -> Self {
        Relay {
            store,
            sink,
            grace: Duration::from_secs(2),
            tables: None,
        }
    }

    /// Entries younger than `grace` are left to their writers.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Scans these tables instead of the registry's.
    pub fn tables(mut self, tables: Vec<String>) -> Self {
        self.tables = Some(tables);
        self
    }

    /// One pass over every table's outbox.
    ///
    /// # Errors
    /// The store's errors while scanning; a failed publish defers the entry instead.
    pub async fn run_once(&self) -> Result<RelayReport> {
        let tables = match &self.tables {
            Some(tables) => tables.clone(),
            None => {
                let mut tables: Vec<String> = SchemaRecord::list(&self.store, None)
                    .await?
                    .into_iter()
                    .map(|s| s.table)
                    .collect();
                tables.dedup();
                tables
            }
        };
        let mut report = RelayReport {
            tables: tables.len(),
            ..RelayReport::default()
        };
        let cutoff = ago(self.grace);
        for table in &tables {
            for entry in pending(&self.store, table).await? {
                let young = matches!(
                    entry.properties.get(CREATED_PROPERTY),
                    Some(Value::DateTime(created)) if *created > cutoff
                );
                if young {
                    report.deferred += 1;
                    continue;
                }
                let operations = match read_outbox(&entry) {
                    Ok(operations) => operations,
                    Err(e) => {
                        tracing::error!(table, error = %e, "outbox entry does not read; left in place");
                        report.malformed += 1;
                        continue;
                    }
                };
                if let Err(e) = self.sink.publish(&operations).await {
                    tracing::warn!(table, error = %e, "publishing an outbox entry failed; retried next pass");
                    report.deferred += 1;
                    continue;
                }
                let if_match = entry.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                remove_entry(
                    &self.store,
                    table,
                    &entry.partition_key,
                    &entry.row_key,
                    if_match,
                )
                .await?;
                report.published += 1;
            }
        }
        Ok(report)
    }

    /// Passes every `interval` until `shutdown` completes; a failed pass is logged and
    /// the next one runs.
    pub async fn run(&self, interval: Duration, shutdown: impl Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            match self.run_once().await {
                Ok(report) if report.published > 0 => {
                    tracing::info!(published = report.published, "relayed outbox entries");
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
