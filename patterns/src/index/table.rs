//! [`IndexedTable`]: a typed table whose declared indexes and index entities are kept by
//! the framework. The application declares them on the entity type and writes through
//! this table; nothing else.
//!
//! Every write runs the design guide's read–modify–write under ETags:
//! 1. read the stored primary (not for an insert) and its index record;
//! 2. compute the new targets from the new value; diff them with the old ones;
//! 3. submit one entity group transaction with the primary (under the ETag read), the
//!    same-partition copies (an insert for a new copy, so a value another entity holds is
//!    refused; a delete for a dropped one), the changed partition id-list pages (each under
//!    its ETag), and — when anything lies outside the partition — an outbox entry holding
//!    that work;
//! 4. on a conflict (a concurrent writer changed the primary or a page), start over.
//!
//! After the commit the outbox entry goes to the sink and is deleted; if that does not
//! happen the relay does it later.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use rand::Rng;
use tablekit_core::blob::BlobStore;
use tablekit_core::limits::KeyKind;
use tablekit_core::typed::{
    EntityType, KeyBounds, KeyPart, KeyTemplate, Stored, Table, render_key,
};
use tablekit_core::{
    Batch, ETag, Entity, ErrorKind, IfMatch, Query, TableStore, Value, WriteOp, filter,
};

use super::links::links_of;

use super::audit::{AuditOptions, AuditReport};
use super::members::{
    plan_partition_change, read_blob_members, read_partition_pages, read_table_members,
};
use super::operation::{IndexApplier, IndexOperation, IndexOperations};
use super::outbox::{InlineSink, OutboxSink, outbox_entity, publish_entry};
use super::record::{
    EntityRef, IndexLayout, IndexRecord, Layout, MemberStorage, Target, as_primary, copy_of,
    copy_source, next_version,
};
use super::registry::SchemaRecord;
use crate::error::{Error, Result};

/// What an indexed write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The primary's new ETag (`None` for a delete).
    pub etag: Option<ETag>,
    /// The version recorded on the primary.
    pub version: i64,
    /// The operations recorded in the outbox for the worker (0: everything was atomic).
    pub operations: usize,
    /// Whether the outbox entry was handed to the sink and removed (otherwise the relay
    /// publishes it later).
    pub published: bool,
}

enum Intent<'a, E> {
    Insert(&'a E),
    Upsert(&'a E),
    Replace(&'a E, IfMatch),
    Delete(String, String, IfMatch),
}

/// The role of each operation of a write's batch, to read a failure back.
enum Role {
    Primary,
    NewCopy(String, EntityRef),
    KeptCopy,
    DroppedCopy(EntityRef),
    Page,
    Outbox,
    /// An unchanged source of a denormalised field, under the ETag its value was read at.
    Guard,
    /// A dependent's denormalised field, or a stale link.
    Dependent,
}

/// What a write does to the entities that copy one of its properties.
struct DependentWork {
    /// Writes in this transaction, each with the worker operation that does the same
    /// when the transaction has no room left.
    ops: Vec<(WriteOp, IndexOperation)>,
    operations: Vec<IndexOperation>,
}

/// The most characters of operations one outbox entry holds (a string property holds
/// 32 Ki UTF-16 units); more work is spread over several entries.
const OUTBOX_ENTRY_CHARS: usize = 30_000;

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
    sink: Option<Arc<dyn OutboxSink>>,
    blobs: Option<BlobStore>,
    verify: bool,
    max_attempts: usize,
    lookup_concurrency: usize,
    track_dependents: Arc<AtomicBool>,
    /// When the registry was last asked whether another type copies from this one.
    dependents_checked: Arc<std::sync::Mutex<Option<std::time::Instant>>>,
}

/// How often a table that no registered type copies from asks the registry again.
const DEPENDENTS_RECHECK: Duration = Duration::from_secs(30);

impl<E, S: Clone> Clone for IndexedTable<E, S> {
    fn clone(&self) -> Self {
        IndexedTable {
            table: self.table.clone(),
            layout: Arc::clone(&self.layout),
            sink: self.sink.clone(),
            blobs: self.blobs.clone(),
            verify: self.verify,
            max_attempts: self.max_attempts,
            lookup_concurrency: self.lookup_concurrency,
            track_dependents: Arc::clone(&self.track_dependents),
            dependents_checked: Arc::clone(&self.dependents_checked),
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
    /// partition waits in the outbox for the relay; see [`with_sink`](Self::with_sink)
    /// and [`with_inline_apply`](Self::with_inline_apply).
    pub fn new(store: S) -> Self {
        IndexedTable {
            table: Table::new(store),
            layout: Arc::new(Layout::of(E::schema())),
            sink: None,
            blobs: None,
            verify: false,
            max_attempts: 64,
            lookup_concurrency: 16,
            track_dependents: Arc::new(AtomicBool::new(false)),
            dependents_checked: Arc::default(),
        }
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
        self.sink = Some(sink);
        self
    }

    /// Applies each write's follow-up work in this process, right after the commit.
    pub fn with_inline_apply(mut self) -> Self {
        let mut applier = IndexApplier::new(self.table.store().clone());
        if let Some(blobs) = &self.blobs {
            applier = applier.with_blobs(blobs.clone());
        }
        self.sink = Some(Arc::new(InlineSink::new(applier)));
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
        self.max_attempts = attempts.max(1);
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
            *checked = Some(std::time::Instant::now());
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
            Some(entity) => {
                let entity = crate::large::restore(blobs, self.table.name(), entity).await?;
                Ok(Some(E::from_entity(entity)?))
            }
            None => Ok(None),
        }
    }

    fn source(&self, partition_key: &str, row_key: &str) -> EntityRef {
        EntityRef::new(self.table.name(), partition_key, row_key)
    }

    async fn write(&self, intent: Intent<'_, E>) -> Result<WriteOutcome> {
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
                (
                    Some(v.to_entity()?),
                    self.layout.targets(&source, &render, &in_index, None)?,
                )
            }
            None => (None, BTreeSet::new()),
        };
        self.precheck(&source, &new_targets)?;
        self.recheck_dependents().await?;
        // Large values go to the blob store first (with a blob store configured): the
        // entity and its copies hold their addresses.
        if let (Some(blobs), Some(entity)) = (&self.blobs, new_entity.as_mut()) {
            let declared: Vec<&str> = E::schema().blob_fields().map(|f| f.property).collect();
            crate::large::offload(blobs, self.table.name(), &declared, entity).await?;
        }
        let user_etag = match &intent {
            Intent::Replace(_, IfMatch::ETag(e)) | Intent::Delete(_, _, IfMatch::ETag(e)) => {
                Some(e.clone())
            }
            _ => None,
        };
        // Links beside sources in other partitions come first: a source written after
        // this point finds the link, one written before is read below.
        if value.is_some() {
            let applier = IndexApplier::new(self.table.store().clone());
            for target in &new_targets {
                if let Target::Denormalized {
                    property,
                    source: from,
                    source_property,
                } = target
                    && !target.is_atomic(&source)
                {
                    applier
                        .put_link(&source, property, from, source_property)
                        .await?;
                }
            }
        }
        let mut missing: HashSet<EntityRef> = HashSet::new();
        for attempt in 0..self.max_attempts {
            if attempt > 0 {
                backoff(attempt).await;
            }
            let old = match intent {
                Intent::Insert(_) => None,
                _ => {
                    self.table
                        .store()
                        .get(self.table.name(), &pk, &rk, None)
                        .await?
                }
            };
            match (&intent, &old) {
                (Intent::Replace(..) | Intent::Delete(..), None) => {
                    return Err(tablekit_core::Error::NotFound {
                        table: self.table.name().to_owned(),
                        partition_key: pk,
                        row_key: rk,
                    }
                    .into());
                }
                (_, Some(old)) if user_etag.is_some() && old.etag != user_etag => {
                    return Err(precondition_failed(self.table.name(), &pk, &rk));
                }
                _ => {}
            }
            let old_record = match &old {
                Some(o) => IndexRecord::read(o)?,
                None => None,
            };
            let version = next_version(old_record.as_ref().map(|r| r.version));
            let old_targets = old_record.map(|r| r.targets).unwrap_or_default();
            let mut entity = new_entity.clone();
            let guards = self
                .read_sources(&source, entity.as_mut(), &new_targets)
                .await?;
            let mut dependents = self
                .dependents(&source, entity.as_ref(), old.as_ref())
                .await?;
            // Blobs this write stops referencing are deleted after the commit.
            let kept: Vec<String> = entity
                .as_ref()
                .map(|e| {
                    crate::large::addresses(e)
                        .into_iter()
                        .map(|(_, n, _)| n)
                        .collect()
                })
                .unwrap_or_default();
            for (_, name, _) in old
                .as_ref()
                .map(crate::large::addresses)
                .unwrap_or_default()
            {
                if !kept.contains(&name) {
                    dependents.operations.push(IndexOperation::DeleteBlob {
                        entity: source.clone(),
                        name,
                    });
                }
            }
            let (batch, roles, outbox) = self
                .plan(
                    &source,
                    version,
                    entity.as_ref(),
                    &new_targets,
                    old.as_ref(),
                    &old_targets,
                    &missing,
                    guards,
                    dependents,
                )
                .await?;
            batch.check().map_err(tablekit_core::Error::from)?;
            match self
                .table
                .store()
                .submit_batch(self.table.name(), batch)
                .await
            {
                Ok(etags) => {
                    let outbox_etags = roles
                        .iter()
                        .zip(&etags)
                        .filter(|(r, _)| matches!(r, Role::Outbox))
                        .map(|(_, etag)| etag.clone());
                    let mut published = !outbox.is_empty();
                    for (entry, etag) in outbox.iter().zip(outbox_etags) {
                        published &= self.publish(&pk, Some(entry), etag).await;
                    }
                    return Ok(WriteOutcome {
                        etag: etags.first().cloned().flatten(),
                        version,
                        operations: outbox.iter().map(|o| o.operations.len()).sum(),
                        published,
                    });
                }
                Err(e) => {
                    let role = e.batch_index().and_then(|at| roles.get(at));
                    match (role, e.kind()) {
                        (Some(Role::Primary), ErrorKind::AlreadyExists)
                            if matches!(intent, Intent::Insert(_)) =>
                        {
                            return Err(e.into());
                        }
                        (
                            Some(Role::Primary),
                            ErrorKind::PreconditionFailed | ErrorKind::NotFound,
                        ) if user_etag.is_some() => {
                            return Err(precondition_failed(self.table.name(), &pk, &rk));
                        }
                        (Some(Role::NewCopy(index, at)), ErrorKind::AlreadyExists) => {
                            return Err(Error::IndexValueTaken {
                                index: index.clone(),
                                table: at.table.clone(),
                                partition_key: at.partition_key.clone(),
                                row_key: at.row_key.clone(),
                            });
                        }
                        (Some(Role::DroppedCopy(at)), ErrorKind::NotFound) => {
                            missing.insert(at.clone());
                        }
                        (
                            Some(
                                Role::Primary
                                | Role::Page
                                | Role::Outbox
                                | Role::KeptCopy
                                | Role::Guard
                                | Role::Dependent,
                            ),
                            ErrorKind::PreconditionFailed
                            | ErrorKind::AlreadyExists
                            | ErrorKind::NotFound,
                        ) => {}
                        _ => return Err(e.into()),
                    }
                }
            }
        }
        Err(Error::Contention {
            what: format!("indexed write of {source}"),
            attempts: self.max_attempts,
        })
    }

    /// Refuses, before any I/O, a write whose entity group transaction cannot fit.
    fn precheck(&self, source: &EntityRef, targets: &BTreeSet<Target>) -> Result<()> {
        let atomic = targets.iter().filter(|t| t.is_atomic(source)).count();
        let outbox = usize::from(targets.iter().any(|t| !t.is_atomic(source)));
        let needed = 1 + atomic + outbox;
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

    #[allow(clippy::too_many_arguments)]
    async fn plan(
        &self,
        source: &EntityRef,
        version: i64,
        new_entity: Option<&Entity>,
        new_targets: &BTreeSet<Target>,
        old: Option<&Entity>,
        old_targets: &BTreeSet<Target>,
        missing: &HashSet<EntityRef>,
        guards: Vec<(EntityRef, ETag)>,
        dependents: DependentWork,
    ) -> Result<(Batch, Vec<Role>, Vec<IndexOperations>)> {
        let kind_property = &self.layout.kind_property;
        let mut batch = Batch::new();
        let mut roles = Vec::new();
        let old_if_match = || {
            old.and_then(|o| o.etag.clone())
                .map_or(IfMatch::Any, IfMatch::ETag)
        };
        let primary = new_entity.map(|e| {
            let mut e = e.clone();
            IndexRecord {
                version,
                targets: new_targets.clone(),
            }
            .write(&mut e);
            e
        });
        match (&primary, old) {
            (Some(e), None) => {
                batch.insert(e.clone());
            }
            (Some(e), Some(_)) => {
                batch.replace(e.clone(), old_if_match());
            }
            (None, _) => {
                batch.delete(&source.partition_key, &source.row_key, old_if_match());
            }
        }
        roles.push(Role::Primary);
        let mut operations = Vec::new();
        for target in new_targets {
            let kept = old_targets.iter().any(|o| o.same_slot(target));
            match target {
                Target::Copy {
                    index,
                    at,
                    properties,
                } if target.is_atomic(source) => {
                    let Some(primary) = &primary else { continue };
                    let copy = copy_of(
                        primary,
                        source,
                        version,
                        index,
                        at,
                        properties.as_deref(),
                        kind_property,
                    );
                    if kept {
                        batch.insert_or_replace(copy);
                        roles.push(Role::KeptCopy);
                    } else {
                        batch.insert(copy);
                        roles.push(Role::NewCopy(index.clone(), at.clone()));
                    }
                }
                Target::Copy { .. } => operations.push(IndexOperation::for_target(
                    source,
                    version,
                    target,
                    true,
                    kind_property,
                )),
                Target::Member { .. } if kept => {}
                Target::Member {
                    storage: MemberStorage::Partition,
                    ..
                } => {}
                Target::Member { .. } => operations.push(IndexOperation::for_target(
                    source,
                    version,
                    target,
                    true,
                    kind_property,
                )),
                Target::Denormalized {
                    property,
                    source: from,
                    source_property,
                } if !kept && target.is_atomic(source) && from != source => {
                    batch.insert_or_replace(super::links::link_entity(
                        source,
                        property,
                        from,
                        source_property,
                    ));
                    roles.push(Role::KeptCopy);
                }
                // A source in another partition may have changed between the read above
                // and this commit: the worker copies its value again afterwards.
                Target::Denormalized { .. } if !target.is_atomic(source) => operations.push(
                    IndexOperation::for_target(source, version, target, true, kind_property),
                ),
                Target::Denormalized { .. } => {}
            }
        }
        for (from, etag) in guards {
            // A source that is also a dependent of this write is merged below, under the
            // ETag read: that is its guard.
            let also_dependent = dependents
                .ops
                .iter()
                .any(|(op, _)| op.key() == (from.partition_key.as_str(), from.row_key.as_str()));
            if also_dependent {
                continue;
            }
            batch.merge(
                Entity::new(from.partition_key, from.row_key),
                IfMatch::ETag(etag),
            );
            roles.push(Role::Guard);
        }
        // Dependents in the partition join the transaction while it has room (keeping
        // room for the dropped copies, pages and outbox entries below); past that the
        // worker updates them.
        let room = tablekit_core::limits::MAX_BATCH_OPERATIONS
            .saturating_sub(batch.len() + 2 * old_targets.len() + 4);
        let in_batch = dependents.ops.len() <= room;
        for (op, fallback) in dependents.ops {
            if in_batch {
                batch.push(op);
                roles.push(Role::Dependent);
            } else {
                operations.push(fallback);
            }
        }
        operations.extend(dependents.operations);
        let dropped: Vec<&Target> = old_targets
            .iter()
            .filter(|o| !new_targets.iter().any(|n| n.same_slot(o)))
            .collect();
        for target in dropped {
            match target {
                Target::Copy { at, .. } if target.is_atomic(source) => {
                    if !missing.contains(at) {
                        batch.delete(&at.partition_key, &at.row_key, IfMatch::Any);
                        roles.push(Role::DroppedCopy(at.clone()));
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
                        batch.delete(&link.partition_key, &link.row_key, IfMatch::Any);
                        roles.push(Role::DroppedCopy(link));
                    }
                }
                _ => operations.push(IndexOperation::for_target(
                    source,
                    version,
                    target,
                    false,
                    kind_property,
                )),
            }
        }
        // Partition id lists: one page write per changed membership, under its ETag.
        for (target, add) in new_targets
            .difference(old_targets)
            .map(|t| (t, true))
            .chain(old_targets.difference(new_targets).map(|t| (t, false)))
        {
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
                for op in plan_partition_change(
                    &pages,
                    &source.partition_key,
                    index,
                    value,
                    &source.row_key,
                    add,
                ) {
                    batch.push(op);
                    roles.push(Role::Page);
                }
            }
        }
        let mut outbox: Vec<IndexOperations> = Vec::new();
        let mut chars = 0;
        for operation in operations {
            let size = serde_json::to_string(&operation).map_or(0, |j| j.len()) + 1;
            match outbox.last_mut() {
                Some(entry) if chars + size <= OUTBOX_ENTRY_CHARS => {
                    entry.operations.push(operation);
                    chars += size;
                }
                _ => {
                    outbox.push(IndexOperations {
                        id: uuid::Uuid::new_v4().simple().to_string(),
                        operations: vec![operation],
                    });
                    chars = size;
                }
            }
        }
        for entry in &outbox {
            batch.insert(outbox_entity(&source.partition_key, entry));
            roles.push(Role::Outbox);
        }
        Ok((batch, roles, outbox))
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

    async fn publish(
        &self,
        partition_key: &str,
        outbox: Option<&IndexOperations>,
        etag: Option<ETag>,
    ) -> bool {
        let (Some(operations), Some(sink)) = (outbox, &self.sink) else {
            return false;
        };
        publish_entry(
            self.table.store(),
            self.table.name(),
            partition_key,
            sink.as_ref(),
            operations,
            etag,
        )
        .await
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
            return self.verified_hit(index, &source, &copy).await;
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
    /// declared property subset, tablekit's properties included).
    ///
    /// # Errors
    /// As [`find`](Self::find).
    pub async fn find_entities(
        &self,
        index: &str,
        partition: &[&dyn KeyPart],
        bounds: &KeyBounds,
    ) -> Result<Vec<Entity>> {
        let layout = self.index(index)?;
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
        match self
            .table
            .store()
            .query_all(self.index_table(layout), query)
            .await
        {
            Ok(rows) => Ok(rows),
            Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
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
        let copies = self.find_entities(&layout.name, partition, bounds).await?;
        let hits: Vec<Option<Stored<E>>> = futures::stream::iter(copies)
            .map(|copy| self.read_hit(layout, copy))
            .buffered(self.lookup_concurrency)
            .try_collect()
            .await?;
        Ok(hits.into_iter().flatten().collect())
    }

    /// The primaries listed under a value of an index entity (`value` holds the values of
    /// the fields of its key template). A partition-stored index entity needs the
    /// partition.
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
        let ids = self.member_ids(name, partition_key, value).await?;
        let found: Vec<Option<Stored<E>>> = futures::stream::iter(ids)
            .map(|id| async move { self.get(&id.partition_key, &id.row_key).await })
            .buffered(concurrency.max(1))
            .try_collect()
            .await?;
        Ok(found.into_iter().flatten().collect())
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

fn precondition_failed(table: &str, pk: &str, rk: &str) -> Error {
    tablekit_core::Error::PreconditionFailed {
        table: table.to_owned(),
        partition_key: pk.to_owned(),
        row_key: rk.to_owned(),
    }
    .into()
}

async fn backoff(attempt: usize) {
    let cap = 1u64 << attempt.min(7);
    let millis = rand::rng().random_range(0..=cap.min(100));
    tokio::time::sleep(Duration::from_millis(millis)).await;
}
