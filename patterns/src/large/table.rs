//! [`LargeTable`]: a typed table whose blob fields and oversized values live in the blob
//! store (see the module docs of [`super`]). Its writes go through the one write path of
//! indexed tables (`crate::index::write`) for primaries without an index record: the
//! blob declaration offloads before the commit and deletes what a write stops
//! referencing after it; a delete removes the row (no tombstone: nothing indexes it).

use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use tablekit_core::blob::BlobStore;
use tablekit_core::clock::SharedClock;
use tablekit_core::typed::{EntityType, Stored};
use tablekit_core::{ETag, Entity, IfMatch, TableStore};

use super::blobs::{DeleteBlobs, SweepReport, addresses, restore, sweep_unreferenced};
use crate::address::EntityRef;
use crate::consistency::{Engine, InlineSink, OutboxSink, Registry};
use crate::error::Result;
use crate::index::write::{Kind, Request, Writer};

/// What a typed write of a large table asks for.
enum WriteKind {
    Insert,
    Upsert,
    Replace(IfMatch),
}

/// A typed table whose blob fields and oversized properties live in the blob store.
pub struct LargeTable<E, S> {
    /// The one write path, for primaries without an index record; its clock decides
    /// whether a read entity expired (`#[entity(expires)]`).
    writer: Writer<S>,
    blobs: BlobStore,
    entity: PhantomData<fn() -> E>,
}

impl<E, S: Clone> Clone for LargeTable<E, S> {
    fn clone(&self) -> Self {
        LargeTable {
            writer: self.writer.clone(),
            blobs: self.blobs.clone(),
            entity: PhantomData,
        }
    }
}

impl<E, S> std::fmt::Debug for LargeTable<E, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LargeTable")
            .field("table", &self.writer.table)
            .field("blobs", &self.blobs)
            .finish()
    }
}

/// A stored entity read without its blobs: the addresses, and the blobs on request.
#[derive(Debug)]
pub struct LazyEntity<E> {
    entity: Entity,
    blobs: BlobStore,
    table: String,
    record: PhantomData<fn() -> E>,
}

impl<E: EntityType> LazyEntity<E> {
    /// The properties held in blobs: (property, blob name).
    pub fn blob_addresses(&self) -> Vec<(String, String)> {
        addresses(&self.entity)
            .into_iter()
            .map(|(p, n, _)| (p, n))
            .collect()
    }

    /// The entity as stored (addresses instead of the offloaded properties).
    pub fn entity(&self) -> &Entity {
        &self.entity
    }

    /// Fetches the blobs and reads the value.
    ///
    /// # Errors
    /// The blob store's errors; [`Error::Malformed`](crate::Error::Malformed) for a missing blob; the read's
    /// errors.
    pub async fn load(self) -> Result<Stored<E>> {
        let entity = restore(&self.blobs, &self.table, self.entity).await?;
        E::from_entity(entity)
    }
}

/// Where a large table's deletions of replaced blobs go after each commit.
#[derive(Clone)]
enum Cleanup {
    /// Done in this process, right after the commit.
    Inline,
    /// Handed to a sink (a queue).
    Given(Arc<dyn OutboxSink>),
}

/// The settings of a [`LargeTable`], given in any order, then built on a store and a blob
/// store with [`build`](Self::build) (no I/O: [`LargeTable::open`] creates the tables).
/// Each setter given twice keeps the last value.
///
/// ```
/// use tablekit_core::MemoryStore;
/// use tablekit_core::blob::BlobStore;
/// use tablekit_derive::Entity;
/// use tablekit_patterns::large::LargeTable;
///
/// #[derive(Entity, Clone, Debug, PartialEq)]
/// #[entity(table = "Employees", partition_key = "{department}", row_key = "{id:06}",
///          crate = "tablekit_core")]
/// struct Employee {
///     department: String,
///     id: u32,
///     #[entity(blob)]
///     photo: Option<Vec<u8>>,
/// }
///
/// let archive = LargeTable::<Employee, _>::options()
///     .name("EmployeesArchive")
///     .inline_cleanup()
///     .build(MemoryStore::new(), BlobStore::memory());
/// ```
pub struct LargeTableOptions<E, S> {
    name: Option<String>,
    clock: Option<SharedClock>,
    engine: Option<Engine<S>>,
    cleanup: Option<Cleanup>,
    entity: PhantomData<fn() -> E>,
}

impl<E, S> std::fmt::Debug for LargeTableOptions<E, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LargeTableOptions")
            .field("name", &self.name)
            .field("clock", &self.clock.is_some())
            .field("engine", &self.engine.is_some())
            .field(
                "cleanup",
                &match self.cleanup {
                    None => "none",
                    Some(Cleanup::Inline) => "inline",
                    Some(Cleanup::Given(_)) => "given",
                },
            )
            .finish()
    }
}

impl<E, S> Default for LargeTableOptions<E, S> {
    fn default() -> Self {
        LargeTableOptions {
            name: None,
            clock: None,
            engine: None,
            cleanup: None,
            entity: PhantomData,
        }
    }
}

impl<E: EntityType, S: TableStore + Clone + 'static> LargeTableOptions<E, S> {
    /// The defaults: the table `E` declares, the wall clock, and no sink: blobs a write
    /// stops referencing wait in the outbox for the relay; see
    /// [`inline_cleanup`](Self::inline_cleanup) and [`sink`](Self::sink).
    pub fn new() -> Self {
        Self::default()
    }

    /// Another table than `E` declares.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// Decides expiry with `clock` (the wall clock by default): reads leave out an entity
    /// whose expiry (an `#[entity(expires)]` field) passed by its time. Deleting expired
    /// entities is the [`Sweeper`](crate::index::Sweeper)'s work, for entities written
    /// through an [`IndexedTable`](crate::index::IndexedTable) with blobs.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Deletes replaced blobs in this process, right after the commit. One of
    /// `inline_cleanup` and [`sink`](Self::sink): the last given is kept.
    pub fn inline_cleanup(mut self) -> Self {
        self.cleanup = Some(Cleanup::Inline);
        self
    }

    /// Hands the deletion of replaced blobs to `sink` (the worker's queue). One of
    /// [`inline_cleanup`](Self::inline_cleanup) and `sink`: the last given is kept.
    pub fn sink(mut self, sink: Arc<dyn OutboxSink>) -> Self {
        self.cleanup = Some(Cleanup::Given(sink));
        self
    }

    /// Commits through `engine` (its sink, markers and retry policy) instead of an engine
    /// of its own on the store. An [`inline_cleanup`](Self::inline_cleanup) or
    /// [`sink`](Self::sink) given too replaces its sink, whatever the order.
    pub fn engine(mut self, engine: Engine<S>) -> Self {
        self.engine = Some(engine);
        self
    }

    /// The table on `store`, with blobs in `blobs`, without I/O.
    pub fn build(self, store: S, blobs: BlobStore) -> LargeTable<E, S> {
        let blob_fields = E::schema().blob_fields().map(|f| f.property).collect();
        let engine = self.engine.unwrap_or_else(|| Engine::new(store));
        let engine = match self.cleanup {
            Some(Cleanup::Inline) => {
                let store = engine.store().clone();
                let registry = DeleteBlobs::register(Registry::new(), store, blobs.clone());
                engine.with_sink(Arc::new(InlineSink::new(registry)))
            }
            Some(Cleanup::Given(sink)) => engine.with_sink(sink),
            None => engine,
        };
        let table = self.name.as_deref().unwrap_or(E::TABLE);
        let mut writer = Writer::unindexed(engine, table, blobs.clone(), blob_fields);
        if let Some(clock) = self.clock {
            writer.clock = clock;
        }
        LargeTable {
            writer,
            blobs,
            entity: PhantomData,
        }
    }
}

impl<E: EntityType, S: TableStore + Clone + 'static> LargeTable<E, S> {
    /// The settings of a large table, given in any order, then
    /// built on a store and a blob store with [`build`](LargeTableOptions::build).
    pub fn options() -> LargeTableOptions<E, S> {
        LargeTableOptions::new()
    }

    /// The table `E` declares, on `store`, with blobs in `blobs` and the default settings:
    /// the shortcut for `LargeTable::options().build(store, blobs)`. Without a sink, blobs
    /// a write stops referencing wait in the outbox for the relay.
    pub fn new(store: S, blobs: BlobStore) -> Self {
        Self::options().build(store, blobs)
    }

    /// Waits until the outbox entries of the writes that returned so far are removed
    /// (see [`Engine::flush`]).
    pub async fn flush(&self) {
        self.writer.engine.flush().await;
    }

    /// Creates the table (and the consistency engine's table of pending markers).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn open(&self) -> Result<()> {
        self.writer
            .store()
            .create_table_if_not_exists(&self.writer.table)
            .await?;
        self.writer.engine.open().await
    }

    /// Inserts a value; `AlreadyExists` when its keys are taken.
    ///
    /// # Errors
    /// The store's and the blob store's errors; limit violations.
    pub async fn insert(&self, value: &E) -> Result<ETag> {
        self.write(WriteKind::Insert, value)
            .await
            .map(|e| e.unwrap_or_else(|| ETag::new("")))
    }

    /// Inserts or replaces a value.
    ///
    /// # Errors
    /// As [`insert`](Self::insert).
    pub async fn upsert(&self, value: &E) -> Result<ETag> {
        self.write(WriteKind::Upsert, value)
            .await
            .map(|e| e.unwrap_or_else(|| ETag::new("")))
    }

    /// Replaces a stored value if `if_match` holds.
    ///
    /// # Errors
    /// As [`insert`](Self::insert); `NotFound`, `PreconditionFailed`.
    pub async fn replace(&self, value: &E, if_match: IfMatch) -> Result<ETag> {
        self.write(WriteKind::Replace(if_match), value)
            .await
            .map(|e| e.unwrap_or_else(|| ETag::new("")))
    }

    /// Deletes an entity and, after the commit, its blobs.
    ///
    /// # Errors
    /// `NotFound`, `PreconditionFailed`; the store's errors.
    pub async fn delete(
        &self,
        partition_key: &str,
        row_key: &str,
        if_match: IfMatch,
    ) -> Result<()> {
        let source = EntityRef::new(&self.writer.table, partition_key, row_key);
        self.writer.delete(source, if_match).await.map(drop)
    }

    /// Reads a value with its blobs.
    ///
    /// # Errors
    /// The store's and blob store's errors; [`Error::Malformed`](crate::Error::Malformed) for a missing blob.
    pub async fn get(&self, partition_key: &str, row_key: &str) -> Result<Option<Stored<E>>> {
        let found = self
            .writer
            .store()
            .get_if_table_exists(&self.writer.table, partition_key, row_key)
            .await?;
        match self.writer.read(found).await? {
            Some(entity) => Ok(Some(E::from_entity(entity)?)),
            None => Ok(None),
        }
    }

    /// Reads a value without its blobs; [`LazyEntity::load`] fetches them.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn get_lazy(
        &self,
        partition_key: &str,
        row_key: &str,
    ) -> Result<Option<LazyEntity<E>>> {
        let found = self
            .writer
            .store()
            .get_if_table_exists(&self.writer.table, partition_key, row_key)
            .await?;
        Ok(found
            .filter(|entity| !self.writer.hidden(entity))
            .map(|entity| LazyEntity {
                entity,
                blobs: self.blobs.clone(),
                table: self.writer.table.clone(),
                record: PhantomData,
            }))
    }

    /// A write through the one write path: the blob declaration moves the blob fields
    /// and oversized values to the blob store before the commit and deletes the blobs
    /// the write stops referencing after it.
    async fn write(&self, kind: WriteKind, value: &E) -> Result<Option<ETag>> {
        let entity = value.to_entity()?;
        let source = EntityRef::new(&self.writer.table, &entity.partition_key, &entity.row_key);
        let (kind, user_etag) = match kind {
            WriteKind::Insert => (Kind::Insert, None),
            WriteKind::Upsert => (Kind::Upsert, None),
            WriteKind::Replace(IfMatch::ETag(etag)) => (Kind::Replace, Some(etag)),
            WriteKind::Replace(IfMatch::Any) => (Kind::Replace, None),
        };
        let outcome = self
            .writer
            .write(Request {
                kind,
                source,
                entity: Some(entity),
                targets: BTreeSet::new(),
                user_etag,
                blob_nonce: None,
            })
            .await?;
        Ok(outcome.etag)
    }

    /// Deletes the blobs of this table that no entity references and that are older than
    /// `grace` (younger ones may belong to a write in progress).
    ///
    /// # Errors
    /// The store's and blob store's errors.
    pub async fn sweep(&self, grace: Duration) -> Result<SweepReport> {
        sweep_unreferenced(self.writer.store(), &self.blobs, &self.writer.table, grace).await
    }
}
