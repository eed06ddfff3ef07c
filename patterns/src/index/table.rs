//! [`IndexedTable`]: a typed table whose declared indexes and index entities are kept by
//! the framework. The application declares them on the entity type and writes through
//! this table; nothing else.
//!
//! Every write is a [`Planner`] run by the consistency engine's commit
//! ([`Engine::commit`]), the design guide's read–modify–write under ETags:
//! 1. read the stored primary (not for an insert) and its index record;
//! 2. compute the new targets from the new value; diff them with the old ones;
//! 3. plan one entity group transaction with the primary (under the ETag read), the
//!    same-partition copies (an insert for a new copy, so a value another entity holds is
//!    refused; a delete for a dropped one) and the changed partition id-list pages (each
//!    under its ETag); what lies outside the partition is follow-up work, which the engine
//!    records in the same transaction and hands to the sink after the commit;
//! 4. on a conflict (a concurrent writer changed the primary or a page), plan again.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use tablekit_core::blob::BlobStore;
use tablekit_core::clock::SharedClock;
use tablekit_core::limits::KeyKind;
use tablekit_core::typed::{
    EXPIRES_PROPERTY, EntityType, KeyBounds, KeyPart, KeyTemplate, Stored, Table, TypedWrite,
    is_expired, render_key,
};
use tablekit_core::{ETag, Entity, ErrorKind, IfMatch, Query, TableStore, Value, WriteOp, filter};
use tracing::Instrument;

use super::links::links_of;

use super::audit::{AuditOptions, AuditReport};
use super::members::{
    plan_partition_change, read_blob_members, read_partition_pages, read_table_members,
};
use super::operation::{IndexApplier, IndexOperation, IndexOperations};
use super::record::{
    EntityRef, IndexLayout, IndexRecord, Layout, MemberStorage, Target, as_primary, copy_of,
    copy_source, is_tombstone, next_version, tombstone,
};
use super::registry::SchemaRecord;
use crate::consistency::{Engine, Envelope, InlineSink, OutboxSink, Plan, Planner, lost_race};
use crate::cursor::{Cursor, CursorPage, Position};
use crate::error::{Error, Result};

/// What [`IndexedTable::write_all`] did.
#[derive(Debug)]
pub struct IndexedWriteReport {
    /// The writes applied: (input position, version recorded), in input order.
    pub written: Vec<(usize, i64)>,
    /// Writes refused on their own (a taken key or index value, a stale ETag, a missing
    /// entity), in input order: nothing of them was written.
    pub refused: Vec<(usize, Error)>,
    /// Transactions that failed as a whole: their input positions and why.
    pub failed: Vec<(Vec<usize>, Error)>,
    /// Whether all follow-up work went to the sink at once (otherwise the relay takes
    /// the rest).
    pub published: bool,
}

impl Default for IndexedWriteReport {
    fn default() -> Self {
        IndexedWriteReport {
            written: Vec::new(),
            refused: Vec::new(),
            failed: Vec::new(),
            published: true,
        }
    }
}

impl IndexedWriteReport {
    /// Whether every write was applied.
    pub fn is_complete(&self) -> bool {
        self.refused.is_empty() && self.failed.is_empty()
    }

    /// The first failure, if any.
    ///
    /// # Errors
    /// The first refused write's or failed transaction's error.
    pub fn into_result(mut self) -> Result<Self> {
        if !self.refused.is_empty() {
            return Err(self.refused.remove(0).1);
        }
        if !self.failed.is_empty() {
            return Err(self.failed.remove(0).1);
        }
        Ok(self)
    }
}

/// What an indexed write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The primary's new ETag (`None` for a delete).
    pub etag: Option<ETag>,
    /// The version recorded on the primary.
    pub version: i64,
    /// The operations recorded as follow-up work for the worker (0: everything was
    /// atomic).
    pub operations: usize,
    /// Whether the follow-up work was handed to the sink and its entries removed (otherwise the relay
    /// publishes it later).
    pub published: bool,
}

enum Intent<'a, E> {
    Insert(&'a E),
    Upsert(&'a E),
    Replace(&'a E, IfMatch),
    Delete(String, String, IfMatch),
}

impl<E> Intent<'_, E> {
    fn name(&self) -> &'static str {
        match self {
            Intent::Insert(_) => "insert",
            Intent::Upsert(_) => "upsert",
            Intent::Replace(..) => "replace",
            Intent::Delete(..) => "delete",
        }
    }
}

/// The role of each operation of a write's batch, to read a failure back.
enum Role {
    Primary,
    NewCopy(String, EntityRef),
    KeptCopy,
    DroppedCopy(EntityRef),
    Page,
    /// An unchanged source of a denormalised field, under the ETag its value was read at.
    Guard,
    /// A dependent's denormalised field, or a stale link.
    Dependent,
    /// The deletion of the write's intent (its steps outside the transaction).
    Intent,
}

/// What a write does to the entities that copy one of its properties.
struct DependentWork {
    /// Writes in this transaction, each with the worker operation that does the same
    /// when the transaction has no room left.
    ops: Vec<(WriteOp, IndexOperation)>,
    operations: Vec<IndexOperation>,
}

/// The most characters of index operations one `consistency::outbox` entry holds (a
/// string property holds 32 Ki UTF-16 units); more work is spread over several entries.
const WORK_CHARS: usize = 30_000;

/// A typed table that keeps the indexes and index entities its entity type declares.
///
/// ```
/// use tablekit_core::MemoryStore;
/// use tablekit_derive::Entity;
/// use tablekit_patterns::index::IndexedTable;
///
/// #[derive(Entity, Clone, Debug, PartialEq)]
/// #[entity(table = "Employees", kind = "Employee", partition_key = "{department}",
///          row_key = "empid_{id:06}", crate = "tablekit_core")]
/// #[index(name = "email", partition_key = "{department}", row_key = "email_{email}")]
/// struct Employee {
///     department: String,
///     id: u32,
///     email: String,
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let employees = IndexedTable::<Employee, _>::new(MemoryStore::new());
/// employees.open().await?;
/// employees
///     .insert(&Employee { department: "Sales".into(), id: 1, email: "a@x.com".into() })
///     .await?;
/// let hit = employees.find("email", &[&"Sales"], &[&"a@x.com"]).await?;
/// assert_eq!(hit.map(|e| e.id), Some(1));
/// # Ok::<_, tablekit_patterns::Error>(())
/// # }).unwrap();
/// ```
pub struct IndexedTable<E, S> {
    table: Table<E, S>,
    layout: Arc<Layout>,
    engine: Engine<S>,
    blobs: Option<BlobStore>,
    verify: bool,
    lookup_concurrency: usize,
    track_dependents: Arc<AtomicBool>,
    /// When the registry was last asked whether another type copies from this one.
    dependents_checked: Arc<std::sync::Mutex<Option<tokio::time::Instant>>>,
    /// How long a reservation of a unique value protects a write in flight.
    unique_lease: Duration,
    /// The clock of expiry: when a time to live starts, whether a read entity expired.
    clock: SharedClock,
}

/// How often a table that no registered type copies from asks the registry again.
const DEPENDENTS_RECHECK: Duration = Duration::from_secs(30);

impl<E, S: Clone> Clone for IndexedTable<E, S> {
    fn clone(&self) -> Self {
        IndexedTable {
            table: self.table.clone(),
            layout: Arc::clone(&self.layout),
            engine: self.engine.clone(),
            blobs: self.blobs.clone(),
            verify: self.verify,
            lookup_concurrency: self.lookup_concurrency,
            track_dependents: Arc::clone(&self.track_dependents),
            dependents_checked: Arc::clone(&self.dependents_checked),
            unique_lease: self.unique_lease,
            clock: self.clock.clone(),
        }
    }
}

impl<E, S> std::fmt::Debug for IndexedTable<E, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexedTable")
            .field("table", &self.layout.table)
            .field("indexes", &self.layout.indexes.len())
            .field("index_entities", &self.layout.members.len())
            .finish()
    }
}

impl<E: EntityType, S: TableStore + Clone + 'static> IndexedTable<E, S> {
    /// The table `E` declares, on `store`. Without a sink, follow-up work outside the
    /// partition waits in its partition for the relay; see [`with_sink`](Self::with_sink)
    /// and [`with_inline_apply`](Self::with_inline_apply).
    pub fn new(store: S) -> Self {
        IndexedTable {
            engine: Engine::new(store.clone()),
            table: Table::new(store),
            layout: Arc::new(Layout::of(E::schema())),
            blobs: None,
            verify: false,
            lookup_concurrency: 16,
            track_dependents: Arc::new(AtomicBool::new(false)),
            dependents_checked: Arc::default(),
            unique_lease: super::unique::DEFAULT_LEASE,
            clock: tablekit_core::clock::system(),
        }
    }

    /// Decides expiry with `clock` (the wall clock by default): a time to live starts at
    /// the clock's time of the write, and reads leave out what expired by its time.
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.table = self.table.with_clock(clock.clone());
        self.clock = clock;
        self
    }

    /// The clock of expiry.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// How long a reservation of a unique value (`#[unique]`) protects the write that
    /// made it (default 30 s): another entity meeting the reservation within its lease
    /// is refused even if the write never lands, and after it may take a reservation
    /// whose write never landed over. It must exceed the time from a write's reservation
    /// to its commit.
    pub fn unique_lease(mut self, lease: Duration) -> Self {
        self.unique_lease = lease;
        self
    }

    /// Writes look for entities that copy one of this type's properties
    /// (`#[entity(denormalized(from = "<this kind>", …))]` on another type) and update
    /// them. [`open`](Self::open) turns it on when the registry holds such a type.
    pub fn track_dependents(self, on: bool) -> Self {
        self.track_dependents.store(on, Ordering::Relaxed);
        self
    }

    /// The same table under another name (copies in the primaries' table follow it).
    pub fn with_name(mut self, name: &str) -> Self {
        self.table = self.table.with_name(name);
        self.layout = Arc::new(Layout::of(E::schema()).on_table(name));
        self
    }

    /// Hands each write's follow-up work to `sink` after the commit (a queue).
    pub fn with_sink(mut self, sink: Arc<dyn OutboxSink>) -> Self {
        self.engine = self.engine.with_sink(sink);
        self
    }

    /// Commits through `engine` (its sink, pending-marker lease and retry policy).
    pub fn with_engine(mut self, engine: Engine<S>) -> Self {
        self.engine = engine;
        self
    }

    /// The engine writes commit through.
    pub fn engine(&self) -> &Engine<S> {
        &self.engine
    }

    /// Applies each write's follow-up work in this process, right after the commit.
    pub fn with_inline_apply(mut self) -> Self {
        let registry = super::handlers(self.table.store().clone(), self.blobs.clone());
        self.engine = self.engine.with_sink(Arc::new(InlineSink::new(registry)));
        self
    }

    /// The blob store of blob-stored index entities (set it before
    /// [`with_inline_apply`](Self::with_inline_apply)).
    pub fn with_blobs(mut self, blobs: BlobStore) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// Index lookups check each hit against its primary and return the primary (read
    /// your own write: a copy the worker has not updated yet is never returned stale).
    pub fn verified_lookups(mut self, verify: bool) -> Self {
        self.verify = verify;
        self
    }

    /// How many concurrent writes may conflict before a write gives up (default 64).
    pub fn max_attempts(mut self, attempts: usize) -> Self {
        let policy = self.engine.retry().attempts(attempts);
        self.engine = self.engine.with_retry(policy);
        self
    }

    /// The typed table of the primaries (reads, queries).
    pub fn table(&self) -> &Table<E, S> {
        &self.table
    }

    /// The store.
    pub fn store(&self) -> &S {
        self.table.store()
    }

    /// The declared indexes and index entities.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Creates the primaries' table and the index tables, and records the schema in the
    /// registry (for the worker's relay, the audit and the backfill).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn open(&self) -> Result<()> {
        let store = self.table.store();
        store.create_table_if_not_exists(self.table.name()).await?;
        for table in self.layout.other_tables() {
            store.create_table_if_not_exists(&table).await?;
        }
        self.engine.open().await?;
        SchemaRecord::of(E::schema(), self.table.name())
            .register(store)
            .await?;
        self.check_dependents().await
    }

    /// Asks the registry whether a type copies a property from this one (then writes
    /// track the copies). Writes ask again every 30 seconds until one does, so a type
    /// registered after this table opened is picked up.
    async fn check_dependents(&self) -> Result<()> {
        let copied = SchemaRecord::list(self.table.store(), None)
            .await?
            .iter()
            .any(|s| {
                s.denormalized
                    .iter()
                    .any(|d| d.from_kind == self.layout.kind)
            });
        if copied {
            self.track_dependents.store(true, Ordering::Relaxed);
        }
        if let Ok(mut checked) = self.dependents_checked.lock() {
            *checked = Some(tokio::time::Instant::now());
        }
        Ok(())
    }

    async fn recheck_dependents(&self) -> Result<()> {
        if self.track_dependents.load(Ordering::Relaxed) {
            return Ok(());
        }
        let due = self
            .dependents_checked
            .lock()
            .map(|c| c.is_none_or(|at| at.elapsed() >= DEPENDENTS_RECHECK))
            .unwrap_or(true);
        if due {
            self.check_dependents().await?;
        }
        Ok(())
    }

    /// Inserts a value and its index entries; `AlreadyExists` when its keys are taken,
    /// [`Error::IndexValueTaken`] when a same-partition index value is.
    ///
    /// # Errors
    /// As described; the store's errors; limit violations before any I/O.
    pub async fn insert(&self, value: &E) -> Result<WriteOutcome> {
        self.write(Intent::Insert(value)).await
    }

    /// Inserts or replaces a value, and moves its index entries.
    ///
    /// # Errors
    /// As [`insert`](Self::insert).
    pub async fn upsert(&self, value: &E) -> Result<WriteOutcome> {
        self.write(Intent::Upsert(value)).await
    }

    /// Replaces a stored value if `if_match` holds, and moves its index entries.
    ///
    /// # Errors
    /// As [`insert`](Self::insert); `NotFound`, `PreconditionFailed`.
    pub async fn replace(&self, value: &E, if_match: IfMatch) -> Result<WriteOutcome> {
        self.write(Intent::Replace(value, if_match)).await
    }

    /// Deletes an entity and every index entry of it.
    ///
    /// # Errors
    /// `NotFound`, `PreconditionFailed`; the store's errors.
    pub async fn delete(
        &self,
        partition_key: &str,
        row_key: &str,
        if_match: IfMatch,
    ) -> Result<WriteOutcome> {
        self.write(Intent::Delete(
            partition_key.to_owned(),
            row_key.to_owned(),
            if_match,
        ))
        .await
    }

    /// Updates only the named fields (Rust field names) of the stored entity with the
    /// keys of `value` to the values in `value` — a typed merge — if `if_match` holds.
    /// The merged value is written as a full write would be: its index copies, id-list
    /// entries and denormalised dependents follow. With `IfMatch::Any` a concurrent
    /// change is merged into again.
    ///
    /// # Errors
    /// [`tablekit_core::Error::Undeclared`] for a field the type does not have (before any
    /// I/O); `NotFound`, `PreconditionFailed`; as [`insert`](Self::insert).
    pub async fn update(
        &self,
        value: &E,
        fields: &[&str],
        if_match: IfMatch,
    ) -> Result<WriteOutcome> {
        let schema = E::schema();
        let mut properties = Vec::with_capacity(fields.len());
        for name in fields {
            let field = schema
                .field(name)
                .filter(|f| f.storage != tablekit_core::typed::FieldStorage::Skipped)
                .ok_or_else(|| tablekit_core::Error::Undeclared {
                    type_name: schema.type_name,
                    what: "field",
                    name: (*name).to_owned(),
                })?;
            properties.push(field.property);
        }
        let patch = value.to_entity()?;
        let source = self.source(&patch.partition_key, &patch.row_key);
        let mut retry = self.engine.retry().start();
        loop {
            retry.next(|| format!("partial update of {source}")).await?;
            let Some(current) = self
                .table
                .store()
                .get_if_table_exists(&source.table, &source.partition_key, &source.row_key)
                .await?
            else {
                return Err(source.not_found());
            };
            if is_expired(&current, self.clock.now()) {
                return Err(source.not_found());
            }
            if let IfMatch::ETag(expected) = &if_match
                && current.etag.as_ref() != Some(expected)
            {
                return Err(source.precondition_failed());
            }
            let read = current.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            let mut merged = match &self.blobs {
                Some(blobs) => crate::large::restore(blobs, self.table.name(), current).await?,
                None => current,
            };
            for property in &properties {
                match patch.properties.get(*property) {
                    Some(v) => {
                        merged.properties.insert((*property).to_owned(), v.clone());
                    }
                    None => {
                        merged.properties.shift_remove(*property);
                    }
                }
            }
            let merged = E::from_entity(merged)?.value;
            match self.write(Intent::Replace(&merged, read)).await {
                Err(e) if e.kind() == ErrorKind::PreconditionFailed && if_match == IfMatch::Any => {
                }
                outcome => return outcome,
            }
        }
    }

    /// Many writes, planned per partition into entity group transactions that hold
    /// several writes with their index copies, id-list pages and follow-up work (each
    /// transaction within 100 operations and 4 MiB; writes whose entries collide go to
    /// the next one). A write is refused before any I/O when its own work cannot fit one
    /// transaction; a write refused by the store (a taken key or index value, a stale
    /// ETag) is reported and the others of its transaction are written.
    ///
    /// # Errors
    /// A write that cannot fit one transaction, or whose value does not convert (nothing
    /// is written then); the store's errors, with what was written before in the report.
    pub async fn write_all(
        &self,
        writes: impl IntoIterator<Item = TypedWrite<E>>,
    ) -> Result<IndexedWriteReport> {
        let writes: Vec<TypedWrite<E>> = writes.into_iter().collect();
        let mut by_partition: Vec<(String, Vec<Numbered<'_, E, S>>)> = Vec::new();
        let mut merges = Vec::new();
        let mut report = IndexedWriteReport::default();
        for (at, write) in writes.iter().enumerate() {
            let prepared = match write {
                TypedWrite::Insert(v) => self.prepare(Intent::Insert(v)).await,
                TypedWrite::Upsert(v) => self.prepare(Intent::Upsert(v)).await,
                TypedWrite::Replace(v, if_match) => {
                    self.prepare(Intent::Replace(v, if_match.clone())).await
                }
                TypedWrite::Delete {
                    partition_key,
                    row_key,
                    if_match,
                } => {
                    self.prepare(Intent::Delete(
                        partition_key.clone(),
                        row_key.clone(),
                        if_match.clone(),
                    ))
                    .await
                }
                TypedWrite::Merge(..) => {
                    merges.push(at);
                    continue;
                }
            };
            let prepared = match prepared {
                Ok(prepared) => prepared,
                // The store failed while the write was prepared (its intent, blobs or
                // links): it failed alone, what it did is undone.
                Err(e) if e.is_retryable() => {
                    report.failed.push((vec![at], e));
                    continue;
                }
                // A value that does not convert or fit: nothing is written.
                Err(e) => {
                    for (_, list) in &by_partition {
                        for (_, write) in list {
                            write.abandon().await;
                        }
                    }
                    return Err(e);
                }
            };
            let partition = prepared.source.partition_key.clone();
            match by_partition.iter_mut().find(|(pk, _)| *pk == partition) {
                Some((_, list)) => list.push((at, prepared)),
                None => by_partition.push((partition, vec![(at, prepared)])),
            }
        }
        for (partition, list) in by_partition {
            let mut pending: std::collections::VecDeque<Numbered<'_, E, S>> = list.into();
            while !pending.is_empty() {
                let mut batch = BatchWrite {
                    writes: pending.drain(..).collect(),
                    taken: 0,
                    refused: Vec::new(),
                    dropped: Vec::new(),
                };
                let committed = self
                    .engine
                    .commit(self.table.name(), &partition, &mut batch)
                    .await;
                // A failed attempt fails at least one write, so the loop ends.
                let taken = if committed.is_err() {
                    batch.taken.max(1)
                } else {
                    batch.taken
                }
                .min(batch.writes.len());
                let rest: Vec<_> = batch.writes.drain(taken..).collect();
                report.refused.append(&mut batch.refused);
                for write in &batch.dropped {
                    write.abandon().await;
                }
                match committed {
                    Ok(Some(committed)) => {
                        report.published &= committed.published || committed.work == 0;
                        for (at, write) in &batch.writes {
                            report.written.push((*at, write.version));
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        for (_, write) in &batch.writes {
                            write.abandon().await;
                        }
                        report
                            .failed
                            .push((batch.writes.iter().map(|(at, _)| *at).collect(), e));
                    }
                }
                pending.extend(rest);
            }
        }
        for at in merges {
            if let TypedWrite::Merge(value, if_match) = &writes[at] {
                // A typed merge of every field: the stored entity's other properties stay.
                let fields: Vec<&str> = E::schema().fields.iter().map(|f| f.name).collect();
                match self.update(value, &fields, if_match.clone()).await {
                    Ok(outcome) => report.written.push((at, outcome.version)),
                    Err(e) => report.refused.push((at, e)),
                }
            }
        }
        report.written.sort_unstable();
        report.refused.sort_by_key(|(at, _)| *at);
        report.failed.sort_by_key(|(at, _)| at.first().copied());
        Ok(report)
    }

    /// Reads one primary.
    ///
    /// # Errors
    /// As [`Table::get`].
    pub async fn get(&self, partition_key: &str, row_key: &str) -> Result<Option<Stored<E>>> {
        let Some(blobs) = &self.blobs else {
            return Ok(self.table.get(partition_key, row_key).await?);
        };
        let found = self
            .table
            .store()
            .get_if_table_exists(self.table.name(), partition_key, row_key)
            .await?;
        match found {
            Some(entity) if !is_expired(&entity, self.clock.now()) => {
                let entity = crate::large::restore(blobs, self.table.name(), entity).await?;
                Ok(Some(E::from_entity(entity)?))
            }
            _ => Ok(None),
        }
    }

    fn source(&self, partition_key: &str, row_key: &str) -> EntityRef {
        EntityRef::new(self.table.name(), partition_key, row_key)
    }

    async fn write(&self, intent: Intent<'_, E>) -> Result<WriteOutcome> {
        let span = tracing::debug_span!(
            "tablekit.indexed_write",
            tablekit.kind = %self.layout.kind,
            tablekit.intent = intent.name(),
            db.collection.name = self.table.name(),
        );
        self.write_traced(intent).instrument(span).await
    }

    async fn write_traced(&self, intent: Intent<'_, E>) -> Result<WriteOutcome> {
        let mut write = self.prepare(intent).await?;
        let partition_key = write.source.partition_key.clone();
        let committed = match self
            .engine
            .commit(self.table.name(), &partition_key, &mut write)
            .await
        {
            Ok(committed) => committed,
            Err(e) => {
                write.abandon().await;
                return Err(e);
            }
        }
        .ok_or_else(|| Error::Unsupported("an indexed write planned nothing".to_owned()))?;
        Ok(WriteOutcome {
            etag: committed.etags.first().cloned().flatten(),
            version: write.version,
            operations: write.operations,
            published: committed.published,
        })
    }

    /// Everything a write needs before its first read: its keys and targets (refused
    /// before any I/O when its own transaction cannot fit), its large values in the blob
    /// store, the links beside denormalised sources in other partitions.
    async fn prepare(&self, intent: Intent<'_, E>) -> Result<IndexWrite<'_, E, S>> {
        let value = match &intent {
            Intent::Insert(v) | Intent::Upsert(v) | Intent::Replace(v, _) => Some(*v),
            Intent::Delete(..) => None,
        };
        let (pk, rk) = match (&intent, value) {
            (Intent::Delete(pk, rk, _), _) => (pk.clone(), rk.clone()),
            (_, Some(v)) => (v.partition_key()?, v.row_key()?),
            (_, None) => unreachable!("every intent but delete has a value"),
        };
        let source = self.source(&pk, &rk);
        let (mut new_entity, new_targets) = match value {
            Some(v) => {
                let render = |t: &KeyTemplate, kind: KeyKind| -> Result<String> {
                    Ok(render_key(v, t, kind)?)
                };
                let in_index = |index: &str| v.in_index(index);
                let mut entity = v.to_entity()?;
                let mut targets = self.layout.targets(&source, &render, &in_index, None)?;
                if let Some(super::record::ExpiryLayout::Ttl(seconds)) = self.layout.expiry {
                    let at = super::expiry::entry::ttl_end(self.clock.now(), seconds);
                    entity
                        .properties
                        .insert(EXPIRES_PROPERTY.to_owned(), Value::DateTime(at));
                }
                targets.extend(self.layout.expiry_target(&source, &entity));
                (Some(entity), targets)
            }
            None => (None, BTreeSet::new()),
        };
        self.precheck(&source, &new_targets)?;
        self.recheck_dependents().await?;
        // What the write does outside its transaction is recorded first, to be undone
        // if it never commits (see `super::reclaim`).
        let declared: Vec<&str> = E::schema().blob_fields().map(|f| f.property).collect();
        let mut reclaim = super::reclaim::Reclaim::of(&source, &new_targets);
        if self.blobs.is_some()
            && let Some(entity) = &new_entity
            && crate::large::would_offload(&declared, entity)
        {
            let nonce = tablekit_core::random::uuid().simple().to_string();
            reclaim.blob_nonce = Some(nonce[..12].to_owned());
        }
        let pending = if reclaim.is_empty() {
            None
        } else {
            Some(
                self.engine
                    .record_intent(self.table.name(), &pk, reclaim.envelope()?)
                    .await?,
            )
        };
        if let Err(e) = self
            .act_outside(
                &source,
                &new_targets,
                new_entity.as_mut(),
                &declared,
                &reclaim,
            )
            .await
        {
            if let Some(pending) = &pending {
                self.engine.abandon(pending).await;
            }
            return Err(e);
        }
        let user_etag = match &intent {
            Intent::Replace(_, IfMatch::ETag(e)) | Intent::Delete(_, _, IfMatch::ETag(e)) => {
                Some(e.clone())
            }
            _ => None,
        };
        Ok(IndexWrite {
            table: self,
            insert: matches!(intent, Intent::Insert(_)),
            must_exist: matches!(intent, Intent::Replace(..) | Intent::Delete(..)),
            source,
            new_entity,
            new_targets,
            user_etag,
            missing: HashSet::new(),
            version: 0,
            operations: 0,
            read_taken: false,
            intent: pending,
        })
    }

    /// A write's steps outside its transaction before the commit, after its intent: large
    /// values go to the blob store (the entity and its copies hold their addresses), and
    /// links are put beside sources in other partitions (a source written after this
    /// point finds the link, one written before is read by the plan).
    async fn act_outside(
        &self,
        source: &EntityRef,
        new_targets: &BTreeSet<Target>,
        new_entity: Option<&mut Entity>,
        declared: &[&str],
        reclaim: &super::reclaim::Reclaim,
    ) -> Result<()> {
        let Some(entity) = new_entity else {
            return Ok(());
        };
        if let (Some(blobs), Some(nonce)) = (&self.blobs, &reclaim.blob_nonce) {
            crate::large::offload_with_nonce(blobs, self.table.name(), declared, entity, nonce)
                .await?;
        }
        let applier = IndexApplier::new(self.table.store().clone());
        for target in new_targets {
            if let Target::Denormalized {
                property,
                source: from,
                source_property,
            } = target
                && !target.is_atomic(source)
            {
                applier
                    .put_link_for(source, property, from, source_property, Some(&reclaim.id))
                    .await?;
            }
        }
        Ok(())
    }

    /// Refuses, before any I/O, a write whose entity group transaction cannot fit.
    fn precheck(&self, source: &EntityRef, targets: &BTreeSet<Target>) -> Result<()> {
        let atomic = targets.iter().filter(|t| t.is_atomic(source)).count();
        let entries = usize::from(targets.iter().any(|t| !t.is_atomic(source)));
        let needed = 1 + atomic + entries;
        if needed > tablekit_core::limits::MAX_BATCH_OPERATIONS {
            return Err(tablekit_core::Error::from(
                tablekit_core::Violation::BatchTooManyOperations {
                    count: needed,
                    max: tablekit_core::limits::MAX_BATCH_OPERATIONS,
                },
            )
            .into());
        }
        Ok(())
    }

    /// The primary's write, with its index record.
    fn plan_primary(
        plan: &mut Plan<Role>,
        source: &EntityRef,
        primary: Option<&Entity>,
        old: Option<&Entity>,
    ) {
        let old_if_match = old
            .and_then(|o| o.etag.clone())
            .map_or(IfMatch::Any, IfMatch::ETag);
        let op = match (primary, old) {
            (Some(e), None) => WriteOp::Insert(e.clone()),
            (Some(e), Some(_)) => WriteOp::Replace(e.clone(), old_if_match),
            (None, _) => WriteOp::Delete {
                partition_key: source.partition_key.clone(),
                row_key: source.row_key.clone(),
                if_match: old_if_match,
            },
        };
        plan.push(op, Role::Primary);
    }

    /// The new value's targets: same-partition copies and links in the transaction (an
    /// insert for a new copy, so a value another entity holds is refused), the rest as
    /// follow-up work.
    fn plan_targets(
        &self,
        plan: &mut Plan<Role>,
        operations: &mut Vec<IndexOperation>,
        change: Change<'_>,
        primary: Option<&Entity>,
    ) -> Result<()> {
        let Change {
            source,
            version,
            new_targets,
            old_targets,
        } = change;
        let kind_property = &self.layout.kind_property;
        let follow_up = |target: &Target| {
            IndexOperation::for_target(source, version, target, true, kind_property)
        };
        for target in new_targets {
            let kept = old_targets.iter().any(|o| o.same_slot(target));
            let atomic = target.is_atomic(source);
            match target {
                Target::Copy {
                    index,
                    at,
                    properties,
                } if atomic => {
                    let Some(primary) = primary else { continue };
                    let copy = copy_of(
                        primary,
                        source,
                        version,
                        index,
                        at,
                        properties.as_deref(),
                        kind_property,
                    )?;
                    if kept {
                        plan.push(WriteOp::InsertOrReplace(copy), Role::KeptCopy);
                    } else {
                        plan.push(
                            WriteOp::Insert(copy),
                            Role::NewCopy(index.clone(), at.clone()),
                        );
                    }
                }
                Target::Copy { .. } => operations.push(follow_up(target)),
                Target::Member { .. } if kept => {}
                Target::Member {
                    storage: MemberStorage::Partition,
                    ..
                } => {}
                Target::Member { .. } => operations.push(follow_up(target)),
                Target::Denormalized {
                    property,
                    source: from,
                    source_property,
                } if !kept && atomic && from != source => {
                    let link = super::links::link_entity(source, property, from, source_property)?;
                    plan.push(WriteOp::InsertOrReplace(link), Role::KeptCopy);
                }
                // A source in another partition may have changed between the read and
                // this commit: the worker copies its value again afterwards.
                Target::Denormalized { .. } if !atomic => operations.push(follow_up(target)),
                Target::Denormalized { .. } => {}
                // Reserved before the plan (`reserve_uniques`).
                Target::Unique { .. } => {}
            }
        }
        Ok(())
    }

    /// Unchanged sources of denormalised fields under the ETags their values were read
    /// at, and the dependents of this write in the partition while the transaction has
    /// room (keeping room for the dropped copies and pages); past that the worker
    /// updates them.
    fn plan_dependents(
        plan: &mut Plan<Role>,
        operations: &mut Vec<IndexOperation>,
        guards: Vec<(EntityRef, ETag)>,
        dependents: DependentWork,
        old_targets: usize,
    ) {
        for (from, etag) in guards {
            // A source that is also a dependent of this write is merged below, under the
            // ETag read: that is its guard.
            let also_dependent = dependents
                .ops
                .iter()
                .any(|(op, _)| op.key() == (from.partition_key.as_str(), from.row_key.as_str()));
            if !also_dependent {
                let guard = Entity::new(from.partition_key, from.row_key);
                plan.push(WriteOp::Merge(guard, IfMatch::ETag(etag)), Role::Guard);
            }
        }
        let room = tablekit_core::limits::MAX_BATCH_OPERATIONS
            .saturating_sub(plan.len() + 2 * old_targets + 4);
        let in_batch = dependents.ops.len() <= room;
        for (op, fallback) in dependents.ops {
            if in_batch {
                plan.push(op, Role::Dependent);
            } else {
                operations.push(fallback);
            }
        }
        operations.extend(dependents.operations);
    }

    /// The old value's targets the new one drops: same-partition copies and links
    /// deleted in the transaction, the rest as follow-up work.
    fn plan_dropped(
        &self,
        plan: &mut Plan<Role>,
        operations: &mut Vec<IndexOperation>,
        change: Change<'_>,
        missing: &HashSet<EntityRef>,
    ) {
        let Change {
            source,
            version,
            new_targets,
            old_targets,
        } = change;
        let dropped = old_targets
            .iter()
            .filter(|o| !new_targets.iter().any(|n| n.same_slot(o)));
        for target in dropped {
            let delete = |at: &EntityRef| WriteOp::Delete {
                partition_key: at.partition_key.clone(),
                row_key: at.row_key.clone(),
                if_match: IfMatch::Any,
            };
            match target {
                Target::Copy { at, .. } if target.is_atomic(source) => {
                    if !missing.contains(at) {
                        plan.push(delete(at), Role::DroppedCopy(at.clone()));
                    }
                }
                Target::Member {
                    storage: MemberStorage::Partition,
                    ..
                } => {}
                Target::Denormalized {
                    property,
                    source: from,
                    ..
                } if target.is_atomic(source) => {
                    let link = super::links::link_ref(source, property, from);
                    if from != source && !missing.contains(&link) {
                        plan.push(delete(&link), Role::DroppedCopy(link));
                    }
                }
                _ => operations.push(IndexOperation::for_target(
                    source,
                    version,
                    target,
                    false,
                    &self.layout.kind_property,
                )),
            }
        }
    }

    /// Partition id lists: one page write per changed membership, under its ETag.
    async fn plan_pages(&self, plan: &mut Plan<Role>, change: Change<'_>) -> Result<()> {
        let Change {
            source,
            new_targets,
            old_targets,
            ..
        } = change;
        let changes = new_targets
            .difference(old_targets)
            .map(|t| (t, true))
            .chain(old_targets.difference(new_targets).map(|t| (t, false)));
        for (target, add) in changes {
            if let Target::Member {
                index,
                storage: MemberStorage::Partition,
                value,
                ..
            } = target
            {
                let pages = read_partition_pages(
                    self.table.store(),
                    self.table.name(),
                    &source.partition_key,
                    index,
                    value,
                )
                .await?;
                let mut ops = plan_partition_change(
                    &pages,
                    &source.partition_key,
                    index,
                    value,
                    &source.row_key,
                    add,
                )?;
                if add && ops.is_empty() {
                    ops.extend(super::members::pin_partition_page(
                        &pages,
                        &source.partition_key,
                        index,
                        value,
                        &source.row_key,
                    )?);
                }
                for op in ops {
                    plan.push(op, Role::Page);
                }
            }
        }
        Ok(())
    }

    /// Sets each denormalised field of `entity` from its source's current value and
    /// returns the ETags of the sources in this partition, which the write's transaction
    /// requires unchanged.
    async fn read_sources(
        &self,
        source: &EntityRef,
        entity: Option<&mut Entity>,
        targets: &BTreeSet<Target>,
    ) -> Result<Vec<(EntityRef, ETag)>> {
        let Some(entity) = entity else {
            return Ok(Vec::new());
        };
        let mut guards: Vec<(EntityRef, ETag)> = Vec::new();
        for target in targets {
            let Target::Denormalized {
                property,
                source: from,
                source_property,
            } = target
            else {
                continue;
            };
            if from == source {
                continue;
            }
            let Some(found) = self
                .table
                .store()
                .get_if_table_exists(&from.table, &from.partition_key, &from.row_key)
                .await?
            else {
                continue;
            };
            if let Some(value) = found.properties.get(source_property) {
                entity.properties.insert(property.clone(), value.clone());
            }
            if target.is_atomic(source)
                && !guards.iter().any(|(r, _)| r == from)
                && let Some(etag) = found.etag
            {
                guards.push((from.clone(), etag));
            }
        }
        Ok(guards)
    }

    /// The updates of the entities that copy a changed property of this one: merges in
    /// this transaction for those in the partition, worker operations for the others.
    async fn dependents(
        &self,
        source: &EntityRef,
        entity: Option<&Entity>,
        old: Option<&Entity>,
    ) -> Result<DependentWork> {
        let mut work = DependentWork {
            ops: Vec::new(),
            operations: Vec::new(),
        };
        let (Some(entity), true) = (entity, self.track_dependents.load(Ordering::Relaxed)) else {
            return Ok(work);
        };
        for link in links_of(self.table.store(), source).await? {
            let value = entity.properties.get(&link.source_property);
            let before = old.and_then(|o| o.properties.get(&link.source_property));
            if (old.is_some() && value == before) || link.dependent == *source {
                continue;
            }
            let same_partition = link.dependent.table == source.table
                && link.dependent.partition_key == source.partition_key;
            if !same_partition {
                work.operations.push(IndexOperation::SyncDenormalized {
                    dependent: link.dependent,
                    property: link.property,
                    source: source.clone(),
                    source_property: link.source_property,
                });
                continue;
            }
            let claim = Target::Denormalized {
                property: link.property.clone(),
                source: source.clone(),
                source_property: link.source_property.clone(),
            };
            let dependent = self
                .table
                .store()
                .get(
                    &link.dependent.table,
                    &link.dependent.partition_key,
                    &link.dependent.row_key,
                    None,
                )
                .await?;
            let claimed = match &dependent {
                Some(d) => IndexRecord::read(d)?.is_some_and(|r| r.targets.contains(&claim)),
                None => false,
            };
            let sync = IndexOperation::SyncDenormalized {
                dependent: link.dependent.clone(),
                property: link.property.clone(),
                source: source.clone(),
                source_property: link.source_property.clone(),
            };
            match (dependent, claimed, value) {
                (Some(d), true, Some(value)) => {
                    let mut patch = Entity::new(d.partition_key, d.row_key);
                    patch.properties.insert(link.property, value.clone());
                    let if_match = d.etag.map_or(IfMatch::Any, IfMatch::ETag);
                    work.ops.push((WriteOp::Merge(patch, if_match), sync));
                }
                (Some(d), true, None) => {
                    // The source no longer has the property: neither does the copy.
                    if d.properties.contains_key(&link.property) {
                        let if_match = d.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                        let mut whole = d;
                        whole.properties.shift_remove(&link.property);
                        work.ops.push((WriteOp::Replace(whole, if_match), sync));
                    }
                }
                _ => {
                    let remove = IndexOperation::RemoveLink {
                        dependent: link.dependent.clone(),
                        property: link.property.clone(),
                        source: source.clone(),
                        source_property: link.source_property.clone(),
                    };
                    work.ops.push((
                        WriteOp::Delete {
                            partition_key: link.at.partition_key,
                            row_key: link.at.row_key,
                            if_match: link.etag.map_or(IfMatch::Any, IfMatch::ETag),
                        },
                        remove,
                    ));
                }
            }
        }
        Ok(work)
    }

    fn index(&self, name: &str) -> Result<&IndexLayout> {
        self.layout
            .indexes
            .iter()
            .find(|i| i.name == name)
            .ok_or_else(|| {
                tablekit_core::Error::Undeclared {
                    type_name: E::schema().type_name,
                    what: "index",
                    name: name.to_owned(),
                }
                .into()
            })
    }

    fn index_table<'a>(&'a self, index: &'a IndexLayout) -> &'a str {
        index.table.as_deref().unwrap_or(self.table.name())
    }

    /// Reads a copy as the primary's type (or, verified, the primary itself).
    async fn read_hit(&self, index: &IndexLayout, copy: Entity) -> Result<Option<Stored<E>>> {
        let Some((source, _)) = copy_source(&copy) else {
            return Ok(None);
        };
        if self.verify {
            // The primary decides: a renewed entity's copy may still carry the old expiry.
            return self.verified_hit(index, &source, &copy).await;
        }
        if is_expired(&copy, self.clock.now()) {
            return Ok(None);
        }
        let restored = match &self.blobs {
            Some(blobs) => {
                match crate::large::restore(blobs, self.table.name(), copy.clone()).await {
                    Ok(restored) => restored,
                    // A stale copy whose blob the primary's newer write deleted: the
                    // primary answers instead.
                    Err(Error::Malformed { .. }) => {
                        return self.verified_hit(index, &source, &copy).await;
                    }
                    Err(e) => return Err(e),
                }
            }
            None => copy,
        };
        let mut stored = E::from_entity(as_primary(restored, &self.layout.kind_property))?;
        stored.partition_key = source.partition_key;
        stored.row_key = source.row_key;
        stored.etag = None;
        Ok(Some(stored))
    }

    /// The primary of a copy, if it still has that copy.
    async fn verified_hit(
        &self,
        index: &IndexLayout,
        source: &EntityRef,
        copy: &Entity,
    ) -> Result<Option<Stored<E>>> {
        let Some(primary) = self.get(&source.partition_key, &source.row_key).await? else {
            return Ok(None);
        };
        let keys = primary.value.index_keys(&index.name)?;
        let matches = keys.is_some_and(|(pk, rk)| pk == copy.partition_key && rk == copy.row_key);
        Ok(matches.then_some(primary))
    }

    /// The entity whose index value is given: `partition` and `row` are the values of
    /// the fields of the index's PartitionKey and RowKey templates, in template order.
    /// The hit carries the primary's keys (and, with
    /// [`verified_lookups`](Self::verified_lookups), its ETag).
    ///
    /// # Errors
    /// [`tablekit_core::Error::Undeclared`] for an unknown index; key errors; the store's
    /// errors; a copy with a property subset that does not read as `E` (use
    /// [`find_entities`](Self::find_entities)).
    pub async fn find(
        &self,
        index: &str,
        partition: &[&dyn KeyPart],
        row: &[&dyn KeyPart],
    ) -> Result<Option<Stored<E>>> {
        let layout = self.index(index)?;
        let pk = layout
            .partition_key
            .render_args(partition)
            .map_err(tablekit_core::Error::from)?;
        let rk = layout
            .row_key
            .render_args(row)
            .map_err(tablekit_core::Error::from)?;
        let copy = self
            .table
            .store()
            .get_if_table_exists(self.index_table(layout), &pk, &rk)
            .await?;
        match copy {
            Some(copy) => self.read_hit(layout, copy).await,
            None => Ok(None),
        }
    }

    /// The copies of an index in a RowKey range, in index order, as stored entities (the
    /// declared property subset, tablekit's properties included), collected: for results
    /// that fit in memory; [`find_entities_page`](Self::find_entities_page) pages.
    ///
    /// # Errors
    /// As [`find`](Self::find).
    pub async fn find_entities(
        &self,
        index: &str,
        partition: &[&dyn KeyPart],
        bounds: &KeyBounds,
    ) -> Result<Vec<Entity>> {
        crate::cursor::collect_pages(move |cursor| async move {
            self.find_entities_page(index, partition, bounds, 1000, cursor.as_ref())
                .await
        })
        .await
    }

    /// One page of at most `page_size` copies of an index in a RowKey range, in index
    /// order, and the cursor that resumes the read after it (`None` at the end).
    ///
    /// # Errors
    /// As [`find`](Self::find); [`Error::Unsupported`] for a cursor of another read.
    pub async fn find_entities_page(
        &self,
        index: &str,
        partition: &[&dyn KeyPart],
        bounds: &KeyBounds,
        page_size: usize,
        cursor: Option<&Cursor>,
    ) -> Result<CursorPage<Entity>> {
        let layout = self.index(index)?;
        self.copies_page(layout, partition, bounds, page_size, cursor, false)
            .await
    }

    /// A page of copies; `keep_expired` keeps the copies whose expiry passed, for
    /// verified reads, where the primary decides (it may have been renewed after the
    /// copy was written).
    async fn copies_page(
        &self,
        layout: &IndexLayout,
        partition: &[&dyn KeyPart],
        bounds: &KeyBounds,
        page_size: usize,
        cursor: Option<&Cursor>,
        keep_expired: bool,
    ) -> Result<CursorPage<Entity>> {
        let pk = layout
            .partition_key
            .render_args(partition)
            .map_err(tablekit_core::Error::from)?;
        let marker = format!("{}#{}", self.layout.kind, layout.name);
        let query = Query::with_filter(
            filter::partition_key().eq(pk.as_str())
                & bounds.row_key_filter()
                & filter::prop(self.layout.kind_property.as_str()).eq(marker.as_str()),
        );
        let read = format!("index-{}-{}", self.table.name(), layout.name);
        let position = match cursor {
            Some(cursor) => cursor.positions_for(&read, 1)?[0].clone(),
            None => Position::Start,
        };
        let (mut items, position) = crate::cursor::read_from(
            self.table.store(),
            self.index_table(layout),
            query,
            &position,
            page_size,
        )
        .await?;
        if !keep_expired {
            let now = self.clock.now();
            items.retain(|copy| !is_expired(copy, now));
        }
        let cursor = (position != Position::Done).then(|| Cursor::new(read, vec![position]));
        Ok(CursorPage { items, cursor })
    }

    /// The entities whose index values lie in a range, in index order: `row_fixed` are
    /// the values of the RowKey template's leading fields, and the next field lies in
    /// `lo ..= hi` (emails from `a` to `b`).
    ///
    /// # Errors
    /// As [`find`](Self::find); the range errors of [`KeyTemplate::range`].
    pub async fn find_range(
        &self,
        index: &str,
        partition: &[&dyn KeyPart],
        row_fixed: &[&dyn KeyPart],
        lo: &dyn KeyPart,
        hi: &dyn KeyPart,
    ) -> Result<Vec<Stored<E>>> {
        let layout = self.index(index)?;
        let bounds = layout
            .row_key
            .range(row_fixed, lo, hi)
            .map_err(tablekit_core::Error::from)?;
        self.read_hits(layout, partition, &bounds).await
    }

    /// The entities whose index RowKeys start with the given leading field values, in
    /// index order.
    ///
    /// # Errors
    /// As [`find_range`](Self::find_range).
    pub async fn find_prefix(
        &self,
        index: &str,
        partition: &[&dyn KeyPart],
        row_fixed: &[&dyn KeyPart],
    ) -> Result<Vec<Stored<E>>> {
        let layout = self.index(index)?;
        let bounds = layout
            .row_key
            .prefix(row_fixed)
            .map_err(tablekit_core::Error::from)?;
        self.read_hits(layout, partition, &bounds).await
    }

    async fn read_hits(
        &self,
        layout: &IndexLayout,
        partition: &[&dyn KeyPart],
        bounds: &KeyBounds,
    ) -> Result<Vec<Stored<E>>> {
        crate::cursor::collect_pages(move |cursor| async move {
            self.read_hits_page(layout, partition, bounds, 1000, cursor.as_ref())
                .await
        })
        .await
    }

    async fn read_hits_page(
        &self,
        layout: &IndexLayout,
        partition: &[&dyn KeyPart],
        bounds: &KeyBounds,
        page_size: usize,
        cursor: Option<&Cursor>,
    ) -> Result<CursorPage<Stored<E>>> {
        let copies = self
            .copies_page(layout, partition, bounds, page_size, cursor, self.verify)
            .await?;
        let hits: Vec<Option<Stored<E>>> = futures::stream::iter(copies.items)
            .map(|copy| self.read_hit(layout, copy))
            .buffered(self.lookup_concurrency)
            .try_collect()
            .await?;
        Ok(CursorPage {
            items: hits.into_iter().flatten().collect(),
            cursor: copies.cursor,
        })
    }

    /// One page of [`find_range`](Self::find_range): at most `page_size` entities (fewer
    /// when a verified hit's primary moved on), in index order, and the cursor that
    /// resumes the read after it (`None` at the end).
    ///
    /// # Errors
    /// As [`find_range`](Self::find_range); [`Error::Unsupported`] for a cursor of
    /// another read.
    #[allow(clippy::too_many_arguments)]
    pub async fn find_range_page(
        &self,
        index: &str,
        partition: &[&dyn KeyPart],
        row_fixed: &[&dyn KeyPart],
        lo: &dyn KeyPart,
        hi: &dyn KeyPart,
        page_size: usize,
        cursor: Option<&Cursor>,
    ) -> Result<CursorPage<Stored<E>>> {
        let layout = self.index(index)?;
        let bounds = layout
            .row_key
            .range(row_fixed, lo, hi)
            .map_err(tablekit_core::Error::from)?;
        self.read_hits_page(layout, partition, &bounds, page_size, cursor)
            .await
    }

    /// One page of [`find_prefix`](Self::find_prefix), as
    /// [`find_range_page`](Self::find_range_page).
    ///
    /// # Errors
    /// As [`find_range_page`](Self::find_range_page).
    pub async fn find_prefix_page(
        &self,
        index: &str,
        partition: &[&dyn KeyPart],
        row_fixed: &[&dyn KeyPart],
        page_size: usize,
        cursor: Option<&Cursor>,
    ) -> Result<CursorPage<Stored<E>>> {
        let layout = self.index(index)?;
        let bounds = layout
            .row_key
            .prefix(row_fixed)
            .map_err(tablekit_core::Error::from)?;
        self.read_hits_page(layout, partition, &bounds, page_size, cursor)
            .await
    }

    /// Every entity of an index's RowKey range, in index order, read a page of
    /// `page_size` copies at a time (with their primaries' values, as
    /// [`find_range`](Self::find_range)).
    pub fn find_stream<'a>(
        &'a self,
        index: &'a str,
        partition: &'a [&'a dyn KeyPart],
        bounds: KeyBounds,
        page_size: usize,
    ) -> impl Stream<Item = Result<Stored<E>>> + Send + 'a
    where
        E: Send + Sync,
        S: Sync,
    {
        crate::cursor::stream_pages(move |cursor| {
            let bounds = bounds.clone();
            async move {
                let layout = self.index(index)?;
                self.read_hits_page(layout, partition, &bounds, page_size, cursor.as_ref())
                    .await
            }
        })
    }

    /// The primaries listed under a value of an index entity (`value` holds the values of
    /// the fields of its key template). A partition-stored index entity needs the
    /// partition. These are the ids as the list holds them: a list keeps ids only, so an
    /// expired member stays listed until the sweeper deletes it;
    /// [`members`](Self::members), which reads the primaries, leaves it out.
    ///
    /// # Errors
    /// [`tablekit_core::Error::Undeclared`]; [`Error::Unsupported`] when a partition is
    /// needed and missing; [`Error::NoBlobStore`]; the store's errors.
    pub async fn member_ids(
        &self,
        name: &str,
        partition_key: Option<&str>,
        value: &[&dyn KeyPart],
    ) -> Result<Vec<EntityRef>> {
        let member = self
            .layout
            .members
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| tablekit_core::Error::Undeclared {
                type_name: E::schema().type_name,
                what: "index entity",
                name: name.to_owned(),
            })?;
        let value = member
            .key
            .render_args(value)
            .map_err(tablekit_core::Error::from)?;
        let table = member.table.as_deref().unwrap_or(self.table.name());
        match member.storage {
            MemberStorage::Partition => {
                let pk = partition_key.ok_or_else(|| {
                    Error::Unsupported(format!(
                        "index entity `{name}` lives in the primaries' partitions: give the partition"
                    ))
                })?;
                let pages =
                    read_partition_pages(self.table.store(), self.table.name(), pk, name, &value)
                        .await?;
                Ok(pages
                    .into_iter()
                    .flat_map(|p| p.ids)
                    .map(|rk| self.source(pk, &rk))
                    .collect())
            }
            MemberStorage::Table => Ok(read_table_members(self.table.store(), table, name, &value)
                .await?
                .into_iter()
                .filter(|m| m.present)
                .map(|m| m.source)
                .collect()),
            MemberStorage::Blob => {
                let blobs = self.blobs.as_ref().ok_or_else(|| Error::NoBlobStore {
                    index: name.to_owned(),
                })?;
                Ok(read_blob_members(blobs, table, name, &value)
                    .await?
                    .into_iter()
                    .filter(|m| m.present)
                    .map(|m| m.source)
                    .collect())
            }
        }
    }

    /// The primaries listed under a value of an index entity, read with at most
    /// `concurrency` point reads at a time; ids whose primary is gone are left out.
    ///
    /// # Errors
    /// As [`member_ids`](Self::member_ids); the reads' errors.
    pub async fn members(
        &self,
        name: &str,
        partition_key: Option<&str>,
        value: &[&dyn KeyPart],
        concurrency: usize,
    ) -> Result<Vec<Stored<E>>> {
        crate::cursor::collect_pages(move |cursor| async move {
            self.members_page(
                name,
                partition_key,
                value,
                1000,
                concurrency,
                cursor.as_ref(),
            )
            .await
        })
        .await
    }

    /// One page of [`members`](Self::members): the primaries of at most `page_size` ids
    /// of the list, in key order of the ids (fewer when a primary is gone), and the cursor
    /// that resumes after them (`None` at the end). Each page reads the id list (ids
    /// only) and the page's primaries.
    ///
    /// # Errors
    /// As [`members`](Self::members); [`Error::Unsupported`] for a cursor of another
    /// read.
    pub async fn members_page(
        &self,
        name: &str,
        partition_key: Option<&str>,
        value: &[&dyn KeyPart],
        page_size: usize,
        concurrency: usize,
        cursor: Option<&Cursor>,
    ) -> Result<CursorPage<Stored<E>>> {
        let read = format!("members-{}-{name}", self.table.name());
        let position = match cursor {
            Some(cursor) => cursor.positions_for(&read, 1)?[0].clone(),
            None => Position::Start,
        };
        let mut ids = self.member_ids(name, partition_key, value).await?;
        ids.sort_by(|a, b| (&a.partition_key, &a.row_key).cmp(&(&b.partition_key, &b.row_key)));
        let size = page_size.clamp(1, 1000);
        let page: Vec<EntityRef> = ids
            .into_iter()
            .filter(|id| match &position {
                Position::Start => true,
                Position::After(pk, rk) => (&id.partition_key, &id.row_key) > (pk, rk),
                Position::Done => false,
            })
            .take(size + 1)
            .collect();
        let more = page.len() > size;
        let page = &page[..page.len().min(size)];
        let reads: Vec<_> = page
            .iter()
            .map(|id| self.get(&id.partition_key, &id.row_key))
            .collect();
        let found: Vec<Option<Stored<E>>> = futures::stream::iter(reads)
            .buffered(concurrency.max(1))
            .try_collect()
            .await?;
        let cursor = match (more, page.last()) {
            (true, Some(last)) => Some(Cursor::new(
                read,
                vec![Position::After(
                    last.partition_key.clone(),
                    last.row_key.clone(),
                )],
            )),
            _ => None,
        };
        Ok(CursorPage {
            items: found.into_iter().flatten().collect(),
            cursor,
        })
    }

    /// Every primary listed under a value of an index entity, in key order of the ids,
    /// read a page of `page_size` at a time (as [`members_page`](Self::members_page)).
    pub fn members_stream<'a>(
        &'a self,
        name: &'a str,
        partition_key: Option<&'a str>,
        value: &'a [&'a dyn KeyPart],
        page_size: usize,
        concurrency: usize,
    ) -> impl Stream<Item = Result<Stored<E>>> + Send + 'a
    where
        E: Send + Sync,
        S: Sync,
    {
        crate::cursor::stream_pages(move |cursor| async move {
            self.members_page(
                name,
                partition_key,
                value,
                page_size,
                concurrency,
                cursor.as_ref(),
            )
            .await
        })
    }

    /// Audits this table's indexes (and repairs them with [`AuditOptions::repair`]); the
    /// table's blob store is used unless the options name one.
    ///
    /// # Errors
    /// As [`audit()`](super::audit()).
    pub async fn audit(&self, options: &AuditOptions) -> Result<AuditReport> {
        let mut options = options.clone();
        if options.blobs.is_none() {
            options.blobs = self.blobs.clone();
        }
        super::audit::audit(self.table.store(), self.table.name(), &options).await
    }

    /// Backfills an index or index entity declared after the data was written: each
    /// primary of this type gets the index's entries, computed from its value (sparse
    /// indexes included).
    ///
    /// # Errors
    /// [`tablekit_core::Error::Undeclared`]; the store's errors.
    pub async fn backfill(&self, index: &str, options: &AuditOptions) -> Result<AuditReport> {
        if !self.layout.declares(index) {
            return Err(tablekit_core::Error::Undeclared {
                type_name: E::schema().type_name,
                what: "index",
                name: index.to_owned(),
            }
            .into());
        }
        let mut options = options.clone();
        if options.blobs.is_none() {
            options.blobs = self.blobs.clone();
        }
        let layout = Arc::clone(&self.layout);
        let compute =
            move |source: &EntityRef, entity: &Entity| -> Result<Option<BTreeSet<Target>>> {
                let Ok(stored) = E::from_entity(entity.clone()) else {
                    return Ok(None);
                };
                let value = &stored.value;
                let render = |t: &KeyTemplate, kind: KeyKind| -> Result<String> {
                    Ok(render_key(value, t, kind)?)
                };
                layout
                    .targets(source, &render, &|i| value.in_index(i), Some(index))
                    .map(Some)
            };
        super::audit::backfill_with(
            self.table.store(),
            self.table.name(),
            &self.layout,
            index,
            &options,
            &compute,
        )
        .await
    }

    /// The kind property's value marking this type's copies of an index.
    pub fn copy_kind(&self, index: &str) -> String {
        format!("{}#{index}", self.layout.kind)
    }

    /// The value of a stored property of a primary, for tests and tools.
    pub fn property(entity: &Entity, name: &str) -> Option<Value> {
        entity.properties.get(name).cloned()
    }
}

/// Splits a write's index work into operations of at most [`WORK_CHARS`]
/// characters each (one entry of `consistency::outbox` apiece).
///
/// # Errors
/// [`Error::Encode`] when an operation does not serialise.
fn split_work(operations: Vec<IndexOperation>) -> Result<Vec<IndexOperations>> {
    let mut entries: Vec<IndexOperations> = Vec::new();
    let mut chars = 0;
    for operation in operations {
        let size = Error::json("an index operation", &operation)?.len() + 1;
        match entries.last_mut() {
            Some(entry) if chars + size <= WORK_CHARS => {
                entry.operations.push(operation);
                chars += size;
            }
            _ => {
                entries.push(IndexOperations::new(vec![operation]));
                chars = size;
            }
        }
    }
    Ok(entries)
}

/// What a write changes: the primary, the version it records, its targets before and
/// after.
#[derive(Clone, Copy)]
struct Change<'a> {
    source: &'a EntityRef,
    version: i64,
    new_targets: &'a BTreeSet<Target>,
    old_targets: &'a BTreeSet<Target>,
}

/// One indexed write, run by the consistency engine's commit.
struct IndexWrite<'a, E, S> {
    table: &'a IndexedTable<E, S>,
    /// An insert: the primary's keys must be free.
    insert: bool,
    /// A replace or delete: the primary must exist.
    must_exist: bool,
    source: EntityRef,
    new_entity: Option<Entity>,
    new_targets: BTreeSet<Target>,
    /// The caller's ETag condition.
    user_etag: Option<ETag>,
    /// Same-partition copies found missing (their delete is left out of the next plan).
    missing: HashSet<EntityRef>,
    /// The version the last plan records.
    version: i64,
    /// The operations the last plan hands to the worker.
    operations: usize,
    /// The intent recorded before the write's steps outside its transaction (reserving
    /// unique values, putting links, uploading blobs), deleted by its commit.
    intent: Option<crate::consistency::Intent>,
    /// An insert refused by an entity that may have expired (its type expires): the next
    /// plan reads it, and replaces it if it expired and the sweeper has not deleted it yet.
    read_taken: bool,
}

impl<E: EntityType, S: TableStore + Clone + 'static> IndexWrite<'_, E, S> {
    /// Reserves the unique values the new value holds and the old one did not (step 1
    /// of [`super::unique`]), for the write at `version`; a plan run again renews them
    /// with its own version and lease.
    async fn reserve_uniques(
        &mut self,
        old_targets: &BTreeSet<Target>,
        version: i64,
    ) -> Result<()> {
        // A write planned long after its intent (it stalled) may have been fenced and
        // undone meanwhile: it must not reserve after its undoing ran.
        if self
            .new_targets
            .iter()
            .any(|t| matches!(t, Target::Unique { .. }) && !old_targets.contains(t))
            && self.undone_while_stalled().await?
        {
            return Err(self.undone());
        }
        let mut reserved = false;
        for target in &self.new_targets {
            let Target::Unique { at, .. } = target else {
                continue;
            };
            if old_targets.contains(target) {
                continue;
            }
            let intent = self.intent.as_ref().map(crate::consistency::Intent::id);
            super::unique::reserve_for(
                self.table.table.store(),
                at,
                &self.source,
                version,
                self.table.unique_lease,
                intent.as_deref(),
            )
            .await?;
            reserved = true;
        }
        // It may also have stalled while it reserved (a pause, a backoff across a jump of
        // the clock): fenced meanwhile, its undoing may have run before its reservation.
        // It stops; abandoning it records the undoing again, which takes the reservation.
        if reserved && self.undone_while_stalled().await? {
            return Err(self.undone());
        }
        Ok(())
    }

    /// Whether the write's intent, recorded long ago (past half the unique lease: the
    /// write stalled), was claimed meanwhile: its undoing may have run. One point read,
    /// only for such old intents.
    async fn undone_while_stalled(&self) -> Result<bool> {
        match &self.intent {
            Some(intent) if intent.age() > self.table.unique_lease / 2 => {
                Ok(!intent.pending(self.table.table.store()).await?)
            }
            _ => Ok(false),
        }
    }

    /// The error of a write whose intent was claimed (it stalled past the relay's grace):
    /// what it did outside its transaction is being undone, so it must not go on.
    fn undone(&self) -> Error {
        Error::Contention {
            what: format!(
                "{}: it stalled past the relay's grace period and its steps outside the transaction were undone",
                self.what()
            ),
            attempts: 1,
        }
    }

    /// After a write that failed: claims its intent, so what it did outside its
    /// transaction is undone (unless it committed and only its answer was lost, or the
    /// relay claimed it already).
    async fn abandon(&self) {
        if let Some(intent) = &self.intent {
            self.table.engine.abandon(intent).await;
        }
    }
}

impl<E: EntityType, S: TableStore + Clone + 'static> Planner for IndexWrite<'_, E, S> {
    type Role = Role;

    async fn plan(&mut self) -> Result<Option<Plan<Role>>> {
        let table = self.table;
        let EntityRef {
            table: name,
            partition_key: pk,
            row_key: rk,
        } = &self.source;
        let old = if self.insert && !self.read_taken {
            None
        } else {
            table.table.store().get(name, pk, rk, None).await?
        };
        // An entity that expired and waits for the sweeper is absent to every write but a
        // delete (the sweeper's own among them): an insert or upsert replaces it (under
        // its ETag), a replace finds nothing. A delete's tombstone is absent to every
        // write, deletes included.
        let expired = old.as_ref().is_some_and(is_tombstone)
            || (self.new_entity.is_some()
                && old
                    .as_ref()
                    .is_some_and(|o| is_expired(o, table.clock.now())));
        match &old {
            None if self.must_exist => {
                return Err(self.source.not_found());
            }
            Some(_) if expired && self.must_exist => {
                return Err(self.source.not_found());
            }
            Some(_) if self.insert && !expired => {
                return Err(tablekit_core::Error::AlreadyExists {
                    table: name.clone(),
                    partition_key: pk.clone(),
                    row_key: rk.clone(),
                }
                .into());
            }
            Some(old) if self.user_etag.is_some() && old.etag != self.user_etag => {
                return Err(self.source.precondition_failed());
            }
            _ => {}
        }
        let old_record = match &old {
            Some(o) => IndexRecord::read(o)?,
            None => None,
        };
        let previous = old_record.as_ref().map(|r| r.version);
        let version = if self.new_entity.is_some() {
            next_version(previous)
        } else {
            super::record::delete_version(previous)
        };
        let old_targets = old_record.map(|r| r.targets).unwrap_or_default();
        self.reserve_uniques(&old_targets, version).await?;
        let mut entity = self.new_entity.clone();
        let guards = table
            .read_sources(&self.source, entity.as_mut(), &self.new_targets)
            .await?;
        let dependents = table
            .dependents(&self.source, entity.as_ref(), old.as_ref())
            .await?;
        let primary = match entity {
            Some(mut e) => {
                IndexRecord {
                    version,
                    targets: self.new_targets.clone(),
                }
                .write(&mut e)?;
                Some(e)
            }
            None => None,
        };
        let mut plan = Plan::new();
        let mut operations = Vec::new();
        // A delete leaves a tombstone at its version, buried after the grace period.
        let tombstone = match &primary {
            Some(_) => None,
            None => Some(tombstone(
                &self.source,
                version,
                &table.layout.kind_property,
            )?),
        };
        IndexedTable::<E, S>::plan_primary(
            &mut plan,
            &self.source,
            primary.as_ref().or(tombstone.as_ref()),
            old.as_ref(),
        );
        let change = Change {
            source: &self.source,
            version,
            new_targets: &self.new_targets,
            old_targets: &old_targets,
        };
        table.plan_targets(&mut plan, &mut operations, change, primary.as_ref())?;
        IndexedTable::<E, S>::plan_dependents(
            &mut plan,
            &mut operations,
            guards,
            dependents,
            old_targets.len(),
        );
        table.plan_dropped(&mut plan, &mut operations, change, &self.missing);
        table.plan_pages(&mut plan, change).await?;
        if let Some(intent) = &self.intent {
            plan.push(intent.fence(), Role::Intent);
        }
        self.operations = operations.len();
        for work in split_work(operations)? {
            plan.follow_up(work.envelope()?);
        }
        // The change event of a type that publishes its changes, after the commit.
        if let Some(queue) = table.layout.changes.as_deref()
            && let Some(event) = crate::changes::ChangeEvent::of_write(
                queue,
                &table.layout.kind,
                &self.source.table,
                version,
                primary.as_ref(),
                old.as_ref().filter(|_| !expired),
            )
        {
            self.operations += 1;
            plan.follow_up(event.envelope()?);
        }
        if tombstone.is_some() {
            plan.follow_up(IndexOperation::burial(
                &self.source,
                version,
                table.engine.tombstone_grace(),
            )?);
        }
        // Blobs this write stops referencing are deleted after the commit.
        if let Some(dropped) =
            crate::large::DeleteBlobs::dropped(&self.source, old.as_ref(), primary.as_ref())
        {
            self.operations += dropped.names.len();
            plan.follow_up(Envelope::new(&dropped).map_err(|source| Error::Encode {
                what: "a blob deletion".to_owned(),
                source,
            })?);
        }
        self.version = version;
        Ok(Some(plan))
    }

    fn refused(&mut self, error: tablekit_core::Error, role: Option<&Role>) -> Result<()> {
        match (role, error.kind()) {
            (Some(Role::Primary), ErrorKind::AlreadyExists) if self.insert => {
                if !self.read_taken {
                    // The entity in the way may be a delete's tombstone or have expired:
                    // the next plan reads it.
                    self.read_taken = true;
                    Ok(())
                } else {
                    Err(error.into())
                }
            }
            (Some(Role::Primary), ErrorKind::PreconditionFailed | ErrorKind::NotFound)
                if self.user_etag.is_some() =>
            {
                Err(self.source.precondition_failed())
            }
            (Some(Role::NewCopy(index, at)), ErrorKind::AlreadyExists) => {
                Err(Error::IndexValueTaken {
                    index: index.clone(),
                    table: at.table.clone(),
                    partition_key: at.partition_key.clone(),
                    row_key: at.row_key.clone(),
                })
            }
            // The intent was claimed (the write stalled past the relay's grace): what it
            // did outside its transaction is being undone, so it must not commit.
            (Some(Role::Intent), ErrorKind::PreconditionFailed | ErrorKind::NotFound) => {
                Err(self.undone())
            }
            (Some(Role::DroppedCopy(at)), ErrorKind::NotFound) => {
                self.missing.insert(at.clone());
                Ok(())
            }
            _ if lost_race(&error) => Ok(()),
            _ => Err(error.into()),
        }
    }

    fn what(&self) -> String {
        format!("indexed write of {}", self.source)
    }
}

/// Whether a write's own plan refused it (the others of a batch go on without it): its
/// unique value is taken, its key is, or the entity it must find is missing or changed.
fn refused_alone(error: &Error) -> bool {
    // A taken unique or index value answers AlreadyExists too; a failure of the store
    // itself (transient, a bad record) answers none of these.
    matches!(
        error.kind(),
        ErrorKind::AlreadyExists | ErrorKind::NotFound | ErrorKind::PreconditionFailed
    )
}

/// A prepared write and its input position.
type Numbered<'a, E, S> = (usize, IndexWrite<'a, E, S>);

/// Several writes of one partition in one entity group transaction: each write planned
/// as on its own, packed while the transaction holds them (100 operations, 4 MiB with
/// the follow-up entries) and their writes touch distinct entities.
struct BatchWrite<'a, E, S> {
    writes: Vec<Numbered<'a, E, S>>,
    /// How many of `writes` (from the first) the last plan holds.
    taken: usize,
    /// Writes refused on their own, taken out of the batch.
    refused: Vec<(usize, Error)>,
    /// The refused writes, whose reservations go after the commit.
    dropped: Vec<IndexWrite<'a, E, S>>,
}

/// The payload an outbox entry adds to a transaction, at most.
const ENTRY_BYTES: usize = 2 * WORK_CHARS + 1024;

impl<E: EntityType, S: TableStore + Clone + 'static> BatchWrite<'_, E, S> {
    /// Plans the writes that fit one transaction, or names the first write whose unique
    /// value is taken.
    async fn plan_writes(
        &mut self,
    ) -> Result<std::result::Result<Option<Plan<(usize, Role)>>, (usize, Error)>> {
        let mut plan: Plan<(usize, Role)> = Plan::new();
        let mut keys: HashSet<String> = HashSet::new();
        let (mut ops, mut bytes) = (0usize, 0usize);
        self.taken = 0;
        for (slot, (_, write)) in self.writes.iter_mut().enumerate() {
            let own = match write.plan().await {
                Ok(Some(own)) => own,
                Ok(None) => {
                    self.taken = slot + 1;
                    continue;
                }
                // A write refused on its own (a unique value taken, its key taken, its
                // entity missing or changed) fails alone; the others go on.
                Err(own) if refused_alone(&own) => return Ok(Err((slot, own))),
                Err(e) => {
                    // The attempt fails with this write among its own.
                    self.taken = slot + 1;
                    return Err(e);
                }
            };
            let own_ops = own.operations().len() + own.work().len();
            let own_bytes = own
                .operations()
                .iter()
                .map(WriteOp::payload_size)
                .sum::<usize>()
                + own.work().len() * ENTRY_BYTES;
            let collides = own.operations().iter().any(|op| keys.contains(op.key().1));
            let fits = ops + own_ops <= tablekit_core::limits::MAX_BATCH_OPERATIONS
                && bytes + own_bytes <= tablekit_core::limits::MAX_BATCH_BYTES - 64 * 1024;
            if slot > 0 && (collides || !fits) {
                break;
            }
            ops += own_ops;
            bytes += own_bytes;
            let (writes, roles, work) = own.into_parts();
            for (op, role) in writes.into_iter().zip(roles) {
                keys.insert(op.key().1.to_owned());
                plan.push(op, (slot, role));
            }
            for envelope in work {
                plan.follow_up(envelope);
            }
            self.taken = slot + 1;
        }
        Ok(Ok((!plan.is_empty()).then_some(plan)))
    }
}

impl<E: EntityType, S: TableStore + Clone + 'static> Planner for BatchWrite<'_, E, S> {
    type Role = (usize, Role);

    async fn plan(&mut self) -> Result<Option<Plan<(usize, Role)>>> {
        loop {
            match self.plan_writes().await? {
                Ok(plan) => return Ok(plan),
                // A write refused on its own fails alone; the others are planned again
                // without it.
                Err((slot, taken)) => {
                    let (at, write) = self.writes.remove(slot);
                    self.refused.push((at, taken));
                    self.dropped.push(write);
                }
            }
        }
    }

    fn refused(&mut self, error: tablekit_core::Error, role: Option<&(usize, Role)>) -> Result<()> {
        let Some((slot, role)) = role else {
            return if lost_race(&error) {
                Ok(())
            } else {
                Err(error.into())
            };
        };
        let slot = *slot;
        let Some((_, write)) = self.writes.get_mut(slot) else {
            return Err(error.into());
        };
        if let Err(own) = write.refused(error, Some(role)) {
            // This write fails on its own; the others are planned again without it.
            let (at, write) = self.writes.remove(slot);
            self.refused.push((at, own));
            self.dropped.push(write);
        }
        Ok(())
    }

    fn what(&self) -> String {
        format!("{} indexed writes", self.writes.len())
    }
}

/// A primary of any type, as stored: the sweeper deletes expired primaries through the
/// indexed delete with the layout the registry holds, without the application's types.
#[derive(Clone, Debug)]
pub(crate) struct RawPrimary(Entity);

static RAW_SCHEMA: tablekit_core::typed::Schema = tablekit_core::typed::Schema {
    type_name: "a stored primary",
    table: "",
    kind: "",
    version: 1,
    kind_property: tablekit_core::typed::DEFAULT_KIND_PROPERTY,
    version_property: tablekit_core::typed::DEFAULT_VERSION_PROPERTY,
    partition_key: KeyTemplate::from_static("", &[]),
    row_key: KeyTemplate::from_static("", &[]),
    fields: &[],
    indexes: &[],
    index_entities: &[],
    denormalized: &[],
    uniques: &[],
    changes: None,
    expiry: None,
};

impl tablekit_core::typed::Record for RawPrimary {
    const TABLE: &'static str = "";

    fn partition_key(&self) -> tablekit_core::Result<String> {
        Ok(self.0.partition_key.clone())
    }

    fn row_key(&self) -> tablekit_core::Result<String> {
        Ok(self.0.row_key.clone())
    }

    fn to_entity(&self) -> tablekit_core::Result<Entity> {
        Ok(self.0.clone())
    }

    fn from_entity(entity: Entity) -> tablekit_core::Result<Stored<Self>> {
        Ok(Stored {
            partition_key: entity.partition_key.clone(),
            row_key: entity.row_key.clone(),
            etag: entity.etag.clone(),
            timestamp: entity.timestamp,
            upgraded_from: None,
            value: RawPrimary(entity),
        })
    }

    fn kind_filter() -> Option<tablekit_core::Filter> {
        None
    }
}

impl EntityType for RawPrimary {
    const KIND: &'static str = "";
    const VERSION: u32 = 1;
    const KIND_PROPERTY: &'static str = tablekit_core::typed::DEFAULT_KIND_PROPERTY;
    const VERSION_PROPERTY: &'static str = tablekit_core::typed::DEFAULT_VERSION_PROPERTY;

    fn schema() -> &'static tablekit_core::typed::Schema {
        &RAW_SCHEMA
    }

    fn key_part(&self, _field: &str) -> Option<&dyn KeyPart> {
        None
    }

    fn in_index(&self, _index: &str) -> bool {
        true
    }
}

impl<S: TableStore + Clone + 'static> IndexedTable<RawPrimary, S> {
    /// The primaries a registered layout describes (for deletes: a write needs the type).
    pub(crate) fn for_layout(store: S, layout: Layout) -> Self {
        let mut table = IndexedTable::new(store);
        table.table = table.table.with_name(layout.table.as_str());
        table.layout = Arc::new(layout);
        table
    }
}
