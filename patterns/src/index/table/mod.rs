//! [`IndexedTable`]: a typed table whose declared indexes and index entities are kept by
//! the framework. The application declares them on the entity type and writes through
//! this table; nothing else.
//!
//! The table is a thin typed face of the one write path (`super::write`): a typed write
//! becomes an untyped request — the value's entity and the targets its layout gives it —
//! which the write path prepares and plans with every declaration of the type. Reads
//! (`get`, index look-ups in `find`, id lists in `lists`) are here and in its children.

mod find;
mod lists;
mod lookup;
mod options;

pub use lookup::{ListLookup, Lookup, Ranged, Readable, Whole};
pub use options::IndexedTableOptions;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use futures::{StreamExt, TryStreamExt};

use tablekit_core::clock::SharedClock;
use tablekit_core::limits::KeyKind;
use tablekit_core::typed::{EntityType, KeyTemplate, Stored, Table, TypedWrite, render_key};
use tablekit_core::{Entity, ErrorKind, IfMatch, TableStore, Value};
use tracing::Instrument;

use super::audit::{AuditOptions, AuditReport};
use super::record::{EntityRef, IndexLayout, Layout, MemberLayout};
use super::registry::schema::SchemaRecord;
use super::write::{IndexedWriteReport, Kind, Request, WriteOutcome, Writer};
use crate::consistency::Engine;
use crate::error::Result;

/// How many primaries a look-up reads at a time, unless the options say otherwise.
const DEFAULT_LOOKUP_CONCURRENCY: usize = 16;

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
/// let employees = IndexedTable::<Employee, _>::options().open(MemoryStore::new()).await?;
/// employees
///     .insert(&Employee { department: "Sales".into(), id: 1, email: "a@x.com".into() })
///     .await?;
/// let hit = employees.lookup(Employee::EMAIL).key("Sales").key("a@x.com").get().await?;
/// assert_eq!(hit.map(|e| e.id), Some(1));
/// let jun = employees.primary().key("Sales").key(1).get().await?;
/// assert_eq!(jun.map(|e| e.value.email), Some("a@x.com".to_owned()));
/// # Ok::<_, tablekit_patterns::Error>(())
/// # }).unwrap();
/// ```
pub struct IndexedTable<E, S> {
    table: Table<E, S>,
    /// The one write path, with the layout, engine, blob store and clock it writes with.
    writer: Writer<S>,
    /// The indexes and id lists its look-ups read, laid out once when it is built.
    reads: Arc<Reads>,
    verify: bool,
    lookup_concurrency: usize,
}

/// The indexes and id lists of a type, as its look-ups read them.
struct Reads {
    indexes: Vec<IndexLayout>,
    lists: Vec<MemberLayout>,
}

impl<E, S: Clone> Clone for IndexedTable<E, S> {
    fn clone(&self) -> Self {
        IndexedTable {
            table: self.table.clone(),
            writer: self.writer.clone(),
            reads: Arc::clone(&self.reads),
            verify: self.verify,
            lookup_concurrency: self.lookup_concurrency,
        }
    }
}

impl<E, S> std::fmt::Debug for IndexedTable<E, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexedTable")
            .field("table", &self.writer.layout.table)
            .field("indexes", &self.reads.indexes.len())
            .field("index_entities", &self.reads.lists.len())
            .finish()
    }
}

impl<E: EntityType, S: TableStore + Clone + 'static> IndexedTable<E, S> {
    /// The settings of a table, given in any order, then
    /// [`open`](IndexedTableOptions::open)ed on a store.
    pub fn options() -> IndexedTableOptions<E, S> {
        IndexedTableOptions::new()
    }

    /// The table `E` declares, on `store`, with the default settings and without I/O:
    /// what [`IndexedTableOptions::build`] starts from, before it checks that a type
    /// needing follow-up work says where it is done. Without a sink, follow-up work
    /// outside the partition waits in its partition for the relay.
    ///
    /// # Errors
    /// [`crate::Error::Malformed`] for an index or index entity its declaration does not
    /// describe whole.
    fn new(store: S) -> Result<Self> {
        let schema = E::schema();
        let layout = Layout::of(schema);
        let reads = Reads {
            indexes: IndexLayout::all(&layout).collect::<Result<_>>()?,
            lists: MemberLayout::all(&layout).collect::<Result<_>>()?,
        };
        Ok(IndexedTable {
            reads: Arc::new(reads),
            writer: Writer {
                table: schema.table.to_owned(),
                layout: Arc::new(layout),
                engine: Engine::new(store.clone()),
                blobs: None,
                blob_fields: schema.blob_fields().map(|f| f.property).collect(),
                clock: tablekit_core::clock::system(),
                unique_lease: crate::index::decl::unique::DEFAULT_LEASE,
                track_dependents: Arc::new(AtomicBool::new(false)),
                dependents_checked: Arc::default(),
                indexed: true,
            },
            table: Table::new(store),
            verify: false,
            lookup_concurrency: DEFAULT_LOOKUP_CONCURRENCY,
        })
    }

    /// The clock of expiry.
    pub fn clock(&self) -> &SharedClock {
        &self.writer.clock
    }

    /// The same table under another name (copies in the primaries' table follow it).
    fn renamed(mut self, name: &str) -> Self {
        self.writer.table = name.to_owned();
        self.writer.layout = Arc::new(Layout::of(E::schema()).on_table(name));
        self.retable();
        self
    }

    /// The typed table rebuilt from the writer's table name and clock, which it follows.
    fn retable(&mut self) {
        self.table = Table::options()
            .name(self.writer.table.clone())
            .clock(self.writer.clock.clone())
            .build(self.table.store().clone());
    }

    /// The engine writes commit through.
    pub fn engine(&self) -> &Engine<S> {
        &self.writer.engine
    }

    /// Waits until the outbox entries of the writes that returned so far are removed: a
    /// write returns once its follow-up work is in the sink and hands its entry's removal
    /// to a task of the process (see [`Engine::flush`]). Call it before the process stops;
    /// what it leaves, the relay publishes again after its grace period.
    pub async fn flush(&self) {
        self.writer.engine.flush().await;
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
        &self.writer.layout
    }

    /// Creates the primaries' table and the index tables, and records the schema in the
    /// registry (for the worker's relay, the audit and the backfill): what
    /// [`IndexedTableOptions::open`] does, for a table [`build`](IndexedTableOptions::build)t
    /// without I/O.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn create(&self) -> Result<()> {
        let store = self.table.store();
        store.create_table_if_not_exists(self.table.name()).await?;
        for table in self.writer.layout.other_tables() {
            store.create_table_if_not_exists(&table).await?;
        }
        self.writer.engine.open().await?;
        SchemaRecord::of(E::schema(), self.table.name())
            .register(store)
            .await?;
        self.writer.check_dependents().await
    }

    /// Inserts a value and its index entries; `AlreadyExists` when its keys are taken,
    /// [`Error::IndexValueTaken`](crate::Error::IndexValueTaken) when a same-partition index value is.
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
        let changes = properties
            .into_iter()
            .map(|property| (property, patch.properties.get(property).cloned()))
            .collect();
        self.update_properties(&patch.partition_key, &patch.row_key, changes, if_match)
            .await
    }

    /// A partial update through the one write path: the properties given set (or, with
    /// `None`, removed) on the stored primary, which must still read as `E`; its index
    /// copies, id-list entries, unique values, change events and denormalised dependents
    /// follow as for a full write. Typed updates build the changes from typed properties
    /// (`table.primary().key(..).update().set(Order::fields().status, ..)`).
    ///
    /// # Errors
    /// `NotFound`, `PreconditionFailed`; as [`insert`](Self::insert).
    pub async fn update_properties(
        &self,
        partition_key: &str,
        row_key: &str,
        changes: Vec<(&'static str, Option<Value>)>,
        if_match: IfMatch,
    ) -> Result<WriteOutcome> {
        let source = self.source(partition_key, row_key);
        let mut retry = self.writer.engine.retry().start();
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
            if self.writer.hidden(&current) {
                return Err(source.not_found());
            }
            if let IfMatch::ETag(expected) = &if_match
                && current.etag.as_ref() != Some(expected)
            {
                return Err(source.precondition_failed());
            }
            let read = current.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            let mut merged = self.writer.restore(current).await?;
            tablekit_core::typed::Update::<E>::apply_to(&changes, &mut merged);
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
        let mut requests = Vec::new();
        let mut merges = Vec::new();
        let mut report = IndexedWriteReport::default();
        for (at, write) in writes.iter().enumerate() {
            let intent = match write {
                TypedWrite::Insert(v) => Intent::Insert(v),
                TypedWrite::Upsert(v) => Intent::Upsert(v),
                TypedWrite::Replace(v, if_match) => Intent::Replace(v, if_match.clone()),
                TypedWrite::Delete {
                    partition_key,
                    row_key,
                    if_match,
                } => Intent::Delete(partition_key.clone(), row_key.clone(), if_match.clone()),
                TypedWrite::Merge(..) => {
                    merges.push(at);
                    continue;
                }
            };
            requests.push((at, self.request(intent)));
        }
        self.writer.write_all(requests, &mut report).await?;
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

    /// A read or delete by typed primary key, without a hand-built key string: give the
    /// key's fields in template order with `key`, then `get` or `delete` (every field),
    /// or `all`/`stream` (the partition, a RowKey prefix, or a `range` of the next field).
    /// A delete here removes the entity's index entries as [`delete`](Self::delete) does.
    ///
    /// ```
    /// # use tablekit_core::{MemoryStore, IfMatch};
    /// # use tablekit_patterns::index::IndexedTable;
    /// # use tablekit_derive::Entity;
    /// #[derive(Entity, Clone, Debug, PartialEq)]
    /// #[entity(table = "Employees", partition_key = "{department}", row_key = "empid_{id:06}",
    ///          crate = "tablekit_core")]
    /// struct Employee {
    ///     department: String,
    ///     id: u32,
    ///     name: String,
    /// }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let employees = IndexedTable::<Employee, _>::options().open(MemoryStore::new()).await?;
    /// employees.create().await?;
    /// for id in 1..=3 {
    ///     employees.insert(&Employee { department: "Sales".into(), id, name: "Jun".into() }).await?;
    /// }
    /// let jun = employees.primary().key("Sales").key(2).get().await?;   // empid_000002
    /// assert_eq!(jun.map(|s| s.value.id), Some(2));
    /// let sales = employees.primary().key("Sales").all().await?;        // the partition
    /// assert_eq!(sales.len(), 3);
    /// let some = employees.primary().key("Sales").range(2, 3).all().await?;
    /// assert_eq!(some.len(), 2);
    /// employees.primary().key("Sales").key(1).delete(IfMatch::Any).await?;
    /// # Ok::<_, tablekit_patterns::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn primary(&self) -> tablekit_core::typed::PrimaryKey<'_, Self, E::Key>
    where
        S: Sync,
    {
        tablekit_core::typed::PrimaryKey::new(self)
    }

    /// A read of the whole table: [`filter`](tablekit_core::typed::TableScan::filter) by
    /// typed properties, then [`stream`](tablekit_core::typed::TableScan::stream),
    /// [`all`](tablekit_core::typed::TableScan::all) or
    /// [`count_scan`](tablekit_core::typed::TableScan::count_scan). **A table scan**:
    /// every row is read, page by page; a `#[count]` or an `#[index]` answers without one.
    pub fn scan(&self) -> tablekit_core::typed::TableScan<'_, Self>
    where
        S: Sync,
    {
        tablekit_core::typed::TableScan::new(self)
    }

    /// Reads many primaries by key, in the order asked (`None` for a key with no
    /// entity), grouped by partition into queries of at most 14 RowKeys run concurrently:
    /// see [`Table::get_many`].
    ///
    /// # Errors
    /// As [`Table::get_many`].
    pub async fn get_many<K: tablekit_core::typed::IntoKeys>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Stored<E>>>> {
        let found = self.table.get_many_entities(keys).await?;
        // What a write moved out of an entity (blob fields, wide chunks) is restored as
        // `get` restores it, a few entities at a time.
        futures::stream::iter(found)
            .map(|entity| async move {
                match self.writer.read(entity).await? {
                    Some(entity) => Ok(Some(E::from_entity(entity)?)),
                    None => Ok(None),
                }
            })
            .buffered(tablekit_core::typed::GET_MANY_CONCURRENCY)
            .try_collect()
            .await
    }

    /// Reads one primary.
    ///
    /// # Errors
    /// As [`Table::get`].
    pub async fn get(&self, partition_key: &str, row_key: &str) -> Result<Option<Stored<E>>> {
        let found = self
            .table
            .store()
            .get(self.table.name(), partition_key, row_key, None)
            .await?;
        match self.writer.read(found).await? {
            Some(entity) => Ok(Some(E::from_entity(entity)?)),
            None => Ok(None),
        }
    }

    fn source(&self, partition_key: &str, row_key: &str) -> EntityRef {
        EntityRef::new(self.table.name(), partition_key, row_key)
    }

    async fn write(&self, intent: Intent<'_, E>) -> Result<WriteOutcome> {
        let span = tracing::debug_span!(
            "tablekit.indexed_write",
            tablekit.kind = %self.writer.layout.kind,
            tablekit.intent = intent.name(),
            db.collection.name = self.table.name(),
        );
        async { self.writer.write(self.request(intent)?).await }
            .instrument(span)
            .await
    }

    /// The untyped request of a typed write: its keys, its entity and the targets the
    /// layout gives its value.
    fn request(&self, intent: Intent<'_, E>) -> Result<Request> {
        let etag_of = |if_match: IfMatch| match if_match {
            IfMatch::ETag(etag) => Some(etag),
            IfMatch::Any => None,
        };
        let (kind, v, user_etag) = match intent {
            Intent::Insert(v) => (Kind::Insert, v, None),
            Intent::Upsert(v) => (Kind::Upsert, v, None),
            Intent::Replace(v, if_match) => (Kind::Replace, v, etag_of(if_match)),
            Intent::Delete(pk, rk, if_match) => {
                return Ok(Request::delete(self.source(&pk, &rk), if_match));
            }
        };
        let source = self.source(&v.partition_key()?, &v.row_key()?);
        let render = |t: &KeyTemplate, kind: KeyKind| -> Result<String> { render_key(v, t, kind) };
        let in_index = |index: &str| v.in_index(index);
        let targets = self
            .writer
            .layout
            .targets(&source, &render, &in_index, None)?;
        Ok(Request {
            kind,
            source,
            entity: Some(v.to_entity()?),
            targets,
            user_etag,
            blob_nonce: None,
        })
    }

    /// Audits this table's indexes (and repairs them with [`AuditOptions::repair`]); the
    /// table's blob store is used unless the options name one.
    ///
    /// The future is `Send`: a table shared through an [`Arc`] is audited on a Tokio task
    /// of its own, beside the application's other work.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tablekit_core::MemoryStore;
    /// # use tablekit_derive::Entity;
    /// # use tablekit_patterns::index::{AuditOptions, IndexedTable};
    /// # #[derive(Entity, Clone, Debug, PartialEq)]
    /// # #[entity(table = "Employees", kind = "Employee", partition_key = "{department}",
    /// #          row_key = "empid_{id:06}", crate = "tablekit_core")]
    /// # #[index(name = "email", partition_key = "{department}", row_key = "email_{email}")]
    /// # struct Employee {
    /// #     department: String,
    /// #     id: u32,
    /// #     email: String,
    /// # }
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let employees = Arc::new(IndexedTable::<Employee, _>::options().open(MemoryStore::new()).await?);
    /// let table = Arc::clone(&employees);
    /// let audit = tokio::spawn(async move { table.audit(&AuditOptions::default()).await });
    /// let report = audit.await.expect("the audit's task")?;
    /// assert!(report.is_clean());
    /// # Ok::<_, tablekit_patterns::Error>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`audit()`](super::audit()).
    pub async fn audit(&self, options: &AuditOptions) -> Result<AuditReport> {
        let mut options = options.clone();
        if options.blobs.is_none() {
            options.blobs = self.writer.blobs.clone();
        }
        super::audit::audit(self.table.store(), self.table.name(), &options).await
    }

    /// Backfills an index or index entity declared after the data was written: each
    /// primary of this type gets the index's entries, computed from its value (sparse
    /// indexes included).
    ///
    /// The future is `Send`: spawn it on a Tokio task as [`audit`](Self::audit) shows
    /// (`tokio::spawn(async move { table.backfill("email", &options).await })`).
    ///
    /// # Errors
    /// [`tablekit_core::Error::Undeclared`]; the store's errors.
    pub async fn backfill(&self, index: &str, options: &AuditOptions) -> Result<AuditReport> {
        if !self.writer.layout.declares(index) {
            return Err(tablekit_core::Error::Undeclared {
                type_name: E::schema().type_name,
                what: "index",
                name: index.to_owned(),
            });
        }
        let mut options = options.clone();
        if options.blobs.is_none() {
            options.blobs = self.writer.blobs.clone();
        }
        let layout = Arc::clone(&self.writer.layout);
        let compute = move |source: &EntityRef,
                            entity: &Entity|
              -> Result<Option<BTreeSet<super::record::Target>>> {
            let Ok(stored) = E::from_entity(entity.clone()) else {
                return Ok(None);
            };
            let value = &stored.value;
            let render =
                |t: &KeyTemplate, kind: KeyKind| -> Result<String> { render_key(value, t, kind) };
            layout
                .targets(source, &render, &|i| value.in_index(i), Some(index))
                .map(Some)
        };
        super::audit::backfill_with(
            self.table.store(),
            self.table.name(),
            &self.writer.layout,
            index,
            &options,
            &compute,
        )
        .await
    }

    /// The kind property's value marking this type's copies of an index.
    pub fn copy_kind(&self, index: &str) -> String {
        format!("{}#{index}", self.writer.layout.kind)
    }

    /// The value of a stored property of a primary, for tests and tools.
    pub fn property(entity: &Entity, name: &str) -> Option<Value> {
        entity.properties.get(name).cloned()
    }
}

/// What a count selects of each entity: its keys, and the properties by which a read hides
/// one (its expiry; a wide entity's chunk row).
const HIDING_PROPERTIES: [&str; 4] = [
    "PartitionKey",
    "RowKey",
    tablekit_core::typed::EXPIRES_PROPERTY,
    crate::index::decl::wide::CHUNK_OF_PROPERTY,
];

impl<E: EntityType, S: TableStore + Clone + Sync + 'static> tablekit_core::typed::PrimaryTable
    for IndexedTable<E, S>
{
    type Entity = E;
    type Deleted = WriteOutcome;

    fn read_at(
        &self,
        partition_key: &str,
        row_key: &str,
    ) -> impl Future<Output = Result<Option<Stored<E>>>> + Send {
        self.get(partition_key, row_key)
    }

    fn read_query(
        &self,
        query: tablekit_core::Query,
    ) -> impl futures::Stream<Item = Result<Stored<E>>> + Send + '_ {
        // As `get` reads: hidden entities (tombstones) left out, moved fields restored.
        self.table
            .stream_entities(query)
            .and_then(move |entity| async move { self.writer.read(Some(entity)).await })
            .try_filter_map(|entity| async move { entity.map(E::from_entity).transpose() })
    }

    async fn count_query(&self, query: tablekit_core::Query) -> Result<u64> {
        let query = query.select(HIDING_PROPERTIES.iter().copied());
        self.count_seen(self.table.stream_entities(query)).await
    }

    fn read_entities(
        &self,
        query: tablekit_core::Query,
    ) -> impl futures::Stream<Item = Result<Entity>> + Send + '_ {
        self.table
            .stream_entities(query)
            .try_filter(move |entity| std::future::ready(!self.writer.hidden(entity)))
    }
}

impl<E: EntityType, S: TableStore + Clone + Sync + 'static> tablekit_core::typed::PrimaryWrite
    for IndexedTable<E, S>
{
    fn update_at(
        &self,
        partition_key: &str,
        row_key: &str,
        changes: Vec<(&'static str, Option<Value>)>,
        if_match: IfMatch,
    ) -> impl Future<Output = Result<WriteOutcome>> + Send {
        self.update_properties(partition_key, row_key, changes, if_match)
    }

    fn delete_at(
        &self,
        partition_key: &str,
        row_key: &str,
        if_match: IfMatch,
    ) -> impl Future<Output = Result<WriteOutcome>> + Send {
        self.delete(partition_key, row_key, if_match)
    }
}
