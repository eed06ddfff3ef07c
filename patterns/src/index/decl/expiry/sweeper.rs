//! The sweeper: deletes expired primaries found through the expiry index (see
//! [`super`]).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use tablekit_core::blob::BlobStore;
use tablekit_core::clock::SharedClock;
use tablekit_core::typed::is_expired;
use tablekit_core::{Entity, ErrorKind, IfMatch, TableStore};

use super::entry::{expired_query, expiry_table};
use crate::consistency::{Engine, OutboxSink};
use crate::error::{Error, Result};
use crate::index::record::{Layout, copy_source};
use crate::index::registry::schema::SchemaRecord;
use crate::index::write::Writer;

/// The entries a pass deletes at once, by default.
const DEFAULT_CONCURRENCY: usize = 8;

/// What a sweeper pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// The tables whose expiry index was read.
    pub tables: usize,
    /// The expiry entries read.
    pub entries: usize,
    /// Primaries deleted because they expired.
    pub deleted: usize,
    /// Entries whose primary was renewed (a later expiry, or a write between the read and
    /// the delete): the primary stays; the renewing write's follow-up work removes the
    /// entry.
    pub renewed: usize,
    /// Entries whose primary is gone: the delete's follow-up work (or the audit) removes
    /// them.
    pub gone: usize,
    /// Entries (or registered types) that failed on their own — a malformed entry, a
    /// schema that no longer reads, a delete refused: logged and left for the next pass,
    /// while the others are swept.
    pub failed: usize,
}

/// Deletes expired entities, found through the expiry index of every registered type
/// that expires (or of the tables given).
pub struct Sweeper<S> {
    store: S,
    engine: Engine<S>,
    clock: SharedClock,
    blobs: Option<BlobStore>,
    tables: Option<Vec<String>>,
    concurrency: usize,
}

/// The settings of a [`Sweeper`], given in any order, then built on a
/// store with [`build`](Self::build). Each setter given twice keeps the last value.
///
/// ```
/// use std::sync::Arc;
/// use tablekit_core::MemoryStore;
/// use tablekit_patterns::index::{InlineSink, Sweeper, handlers};
///
/// let store = MemoryStore::new();
/// let sweeper = Sweeper::options()
///     .sink(Arc::new(InlineSink::new(handlers(store.clone(), None))))
///     .concurrency(4)
///     .build(store);
/// ```
pub struct SweeperOptions<S> {
    engine: Option<Engine<S>>,
    sink: Option<Arc<dyn OutboxSink>>,
    clock: Option<SharedClock>,
    blobs: Option<BlobStore>,
    tables: Option<Vec<String>>,
    concurrency: usize,
}

impl<S> std::fmt::Debug for SweeperOptions<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SweeperOptions")
            .field("engine", &self.engine.is_some())
            .field("sink", &self.sink.is_some())
            .field("clock", &self.clock.is_some())
            .field("blobs", &self.blobs.is_some())
            .field("tables", &self.tables)
            .field("concurrency", &self.concurrency)
            .finish()
    }
}

impl<S> Default for SweeperOptions<S> {
    fn default() -> Self {
        SweeperOptions {
            engine: None,
            sink: None,
            clock: None,
            blobs: None,
            tables: None,
            concurrency: DEFAULT_CONCURRENCY,
        }
    }
}

impl<S: TableStore + Clone + 'static> SweeperOptions<S> {
    /// The defaults: the wall clock, every registered type that expires, no blob store,
    /// and no sink: the follow-up work of its deletes waits in the primaries' partitions
    /// for the relay.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hands the follow-up work of each delete to `sink` (the index worker's queue). An
    /// [`engine`](Self::engine) given too takes it, whatever the order.
    pub fn sink(mut self, sink: Arc<dyn OutboxSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Deletes through `engine` (its pending-marker lease, retry policy and sink).
    pub fn engine(mut self, engine: Engine<S>) -> Self {
        self.engine = Some(engine);
        self
    }

    /// Decides what expired with `clock` (the wall clock by default).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The blob store of the primaries' blob fields.
    pub fn blobs(mut self, blobs: BlobStore) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// Only these primaries' tables.
    pub fn tables(mut self, tables: Vec<String>) -> Self {
        self.tables = Some(tables);
        self
    }

    /// How many expired entities a pass deletes at once (default 8).
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// The sweeper over `store`, without I/O.
    pub fn build(self, store: S) -> Sweeper<S> {
        let mut engine = self.engine.unwrap_or_else(|| Engine::new(store.clone()));
        if let Some(sink) = self.sink {
            engine = engine.with_sink(sink);
        }
        Sweeper {
            store,
            engine,
            clock: self.clock.unwrap_or_else(tablekit_core::clock::system),
            blobs: self.blobs,
            tables: self.tables,
            concurrency: self.concurrency,
        }
    }
}

impl<S: TableStore + Clone + 'static> Sweeper<S> {
    /// The settings of a sweeper, given in any order, then
    /// built on a store with [`build`](SweeperOptions::build).
    pub fn options() -> SweeperOptions<S> {
        SweeperOptions::new()
    }

    /// A sweeper over `store` with the default settings: the shortcut for
    /// `Sweeper::options().build(store)`.
    pub fn new(store: S) -> Self {
        Self::options().build(store)
    }

    /// One pass: every expired entry of every expiring type's table, page by page.
    ///
    /// A registered type whose layout does not read (a newer schema met during a rolling
    /// upgrade, say) is logged and counted in [`SweepReport::failed`]; its expired
    /// entities stay, counted as failed, until a sweeper that reads it runs.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn sweep(&self) -> Result<SweepReport> {
        let mut report = SweepReport::default();
        // Every registered expiring type, by its primaries' table.
        let mut kinds: Vec<(String, Kind<S>)> = Vec::new();
        for schema in SchemaRecord::list(&self.store, None).await? {
            if !schema.expires()
                || self
                    .tables
                    .as_ref()
                    .is_some_and(|t| !t.contains(&schema.table))
            {
                continue;
            }
            let primaries = match schema.layout() {
                Ok(layout) => Some(self.primaries(layout)),
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(
                        table = %schema.table,
                        kind = %schema.kind,
                        error = %e,
                        "expiry sweep skips a registered type whose layout does not read"
                    );
                    None
                }
            };
            kinds.push((
                schema.table,
                Kind {
                    property: schema.kind_property,
                    name: schema.kind,
                    primaries,
                },
            ));
        }
        let mut tables: Vec<&str> = kinds
            .iter()
            .filter(|(_, kind)| kind.primaries.is_some())
            .map(|(table, _)| table.as_str())
            .collect();
        tables.sort_unstable();
        tables.dedup();
        let now = self.clock.now();
        for table in tables {
            report.tables += 1;
            let table_kinds: Vec<&Kind<S>> = kinds
                .iter()
                .filter(|(t, _)| t == table)
                .map(|(_, kind)| kind)
                .collect();
            let index = expiry_table(table);
            let entries = self.store.query_stream(&index, expired_query(now));
            let outcomes = entries
                .map(|entry| {
                    let kinds = &table_kinds;
                    let index = &index;
                    async move {
                        let entry = match entry {
                            Ok(entry) => entry,
                            Err(e) if e.kind() == ErrorKind::TableNotFound => return Ok(None),
                            Err(e) => return Err(e),
                        };
                        Ok(Some(match self.expire(&entry, kinds, now).await {
                            Ok(outcome) => outcome,
                            Err(e) => {
                                tracing::warn!(
                                    entry = %format_args!("{}/{}", entry.partition_key, entry.row_key),
                                    table = %index,
                                    error = %e,
                                    "expiry sweep failed on an entry; the next pass tries it again"
                                );
                                Outcome::Failed
                            }
                        }))
                    }
                })
                .buffer_unordered(self.concurrency);
            let mut outcomes = std::pin::pin!(outcomes);
            while let Some(outcome) = outcomes.try_next().await? {
                let Some(outcome) = outcome else { break };
                report.entries += 1;
                match outcome {
                    Outcome::Deleted => report.deleted += 1,
                    Outcome::Renewed => report.renewed += 1,
                    Outcome::Gone => report.gone += 1,
                    Outcome::Failed => report.failed += 1,
                }
            }
        }
        // A pass ends with its deletes' outbox entries removed (they are off each
        // delete's critical path, not off the pass's).
        self.engine.flush().await;
        Ok(report)
    }

    /// The write path of a layout's primaries, without their type.
    fn primaries(&self, layout: Layout) -> Writer<S> {
        let mut writer = Writer::for_layout(self.engine.clone(), layout);
        writer.clock = self.clock.clone();
        writer.blobs = self.blobs.clone();
        writer
    }

    /// Deletes the primary of one expiry entry, if it expired, through the layout of its
    /// kind among the table's `kinds`.
    async fn expire(
        &self,
        entry: &Entity,
        kinds: &[&Kind<S>],
        now: DateTime<Utc>,
    ) -> Result<Outcome> {
        let Some((source, _)) = copy_source(entry) else {
            return Err(Error::malformed(
                format!("expiry entry {}/{}", entry.partition_key, entry.row_key),
                "it names no primary",
            ));
        };
        let Some(primary) = self
            .store
            .get_if_table_exists(&source.table, &source.partition_key, &source.row_key)
            .await?
            .filter(|p| !crate::index::record::is_tombstone(p))
        else {
            return Ok(Outcome::Gone);
        };
        if !is_expired(&primary, now) {
            return Ok(Outcome::Renewed);
        }
        let kind_in = |property: &str| match primary.properties.get(property) {
            Some(tablekit_core::Value::String(kind)) => Some(kind.as_str()),
            _ => None,
        };
        let table = match kinds.iter().find(|k| kind_in(&k.property) == Some(&k.name)) {
            Some(Kind {
                primaries: Some(table),
                ..
            }) => table,
            Some(Kind { name, .. }) => {
                return Err(Error::malformed(
                    format!("{source}"),
                    format!("its type {name:?} has a registered layout this sweeper does not read"),
                ));
            }
            // Deleting through another type's layout would leave this one's copies
            // behind: only an entity that names no kind takes the table's first type.
            None => match kinds.iter().find_map(|k| kind_in(&k.property)) {
                Some(name) => {
                    return Err(Error::malformed(
                        format!("{source}"),
                        format!("its type {name:?} is not registered as expiring"),
                    ));
                }
                None => match kinds.iter().find_map(|k| k.primaries.as_ref()) {
                    Some(table) => table,
                    None => return Ok(Outcome::Gone),
                },
            },
        };
        let if_match = primary.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        match table.delete(source.clone(), if_match).await {
            Ok(_) => Ok(Outcome::Deleted),
            Err(e) if e.kind() == ErrorKind::PreconditionFailed => Ok(Outcome::Renewed),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(Outcome::Gone),
            Err(e) => Err(e),
        }
    }

    /// Runs a pass every `interval` until `shutdown` completes; a failed pass is logged
    /// and the next one runs on time.
    pub async fn run(&self, interval: Duration, shutdown: impl std::future::Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let report = self.sweep().await;
            match &report {
                Ok(report) if report.deleted > 0 => {
                    tracing::info!(
                        deleted = report.deleted,
                        entries = report.entries,
                        renewed = report.renewed,
                        "expiry sweep deleted expired entities"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "expiry sweep failed; trying again"),
            }
            if let Ok(SweepReport { failed, .. }) = &report
                && *failed > 0
            {
                tracing::warn!(failed, "expiry sweep left entries it could not sweep");
            }
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(interval) => {}
            }
        }
    }
}

/// A registered expiring type of one table: the property its entities name it in, its
/// name, and the write path that deletes them (`None`: its registered layout does not
/// read, so none of its entities is deleted).
struct Kind<S> {
    property: String,
    name: String,
    primaries: Option<Writer<S>>,
}

enum Outcome {
    Deleted,
    Renewed,
    Gone,
    Failed,
}
