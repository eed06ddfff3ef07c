//! Large entities: `#[entity(blob)]` fields, and any property that would break the
//! table service's limits (a value over 64 KiB, an entity over 1 MiB), kept in the blob
//! store while the entity holds the blob's address.
//!
//! The order makes every crash safe:
//! 1. the blob is written first, under a name made of the entity's keys, the property, a
//!    part unique to the write and the SHA-256 of the content (a blob is never shared by
//!    two writes, so deleting a replaced one never takes one in use);
//! 2. the entity is written with the address in `TablekitBlob_<property>` through the
//!    consistency engine's commit, with a [`DeleteBlobs`] operation naming the blobs it no
//!    longer references as its follow-up work;
//! 3. after the commit those blobs are deleted (by the sink: in process, or the worker),
//!    each only if the entity does not reference it.
//!
//! A crash after 1 leaves a blob no entity references: [`LargeTable::sweep`] deletes such
//! blobs once they are older than a grace period. A crash after 2 leaves the outbox entry,
//! which the relay publishes.
//!
//! ```
//! use tablekit_core::MemoryStore;
//! use tablekit_core::blob::BlobStore;
//! use tablekit_derive::Entity;
//! use tablekit_patterns::large::LargeTable;
//!
//! #[derive(Entity, Clone, Debug, PartialEq)]
//! #[entity(table = "Employees", partition_key = "{department}", row_key = "{id:06}",
//!          crate = "tablekit_core")]
//! struct Employee {
//!     department: String,
//!     id: u32,
//!     #[entity(blob)]
//!     photo: Option<Vec<u8>>,
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let blobs = BlobStore::memory();
//! let employees = LargeTable::<Employee, _>::new(MemoryStore::new(), blobs.clone())
//!     .with_inline_cleanup();
//! employees.open().await?;
//! let jun = Employee { department: "Sales".into(), id: 1, photo: Some(vec![7; 200_000]) };
//! employees.upsert(&jun).await?;
//! assert_eq!(employees.get("Sales", "000001").await?.map(|e| e.value), Some(jun));
//! assert_eq!(blobs.list("large/").await?.len(), 1);
//! # Ok::<_, tablekit_patterns::Error>(())
//! # }).unwrap();
//! ```

use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use percent_encoding::utf8_percent_encode;
use serde::{Deserialize, Serialize};
use tablekit_core::blob::BlobStore;
use tablekit_core::clock::SharedClock;
use tablekit_core::limits::{self, MAX_ENTITY_BYTES, MAX_PROPERTY_BYTES};
use tablekit_core::typed::{EntityType, Stored};
use tablekit_core::{ETag, Entity, ErrorKind, IfMatch, TableStore, Value, WriteOp};

use crate::address::{BLOB_NAME_SET as NAME_SET, EntityRef};
use crate::consistency::outbox::ago;
use crate::consistency::{
    Engine, InlineSink, Operation, OutboxSink, Plan, Planner, Registry, lost_race,
};
use crate::error::{Error, Result};

/// The prefix of the property holding a property's blob address.
pub const ADDRESS_PREFIX: &str = "TablekitBlob_";

/// Deletes the blobs an entity stopped referencing (operation kind `delete_blobs`), each
/// unless the entity references it again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteBlobs {
    /// The entity that held the blobs' addresses.
    pub entity: EntityRef,
    /// The blobs.
    pub names: Vec<String>,
}

impl Operation for DeleteBlobs {
    const KIND: &'static str = "delete_blobs";
    const VERSION: u32 = 1;
}

impl DeleteBlobs {
    /// The blobs `old` references and `new` does not; `None` when there are none.
    pub fn dropped(entity: &EntityRef, old: Option<&Entity>, new: Option<&Entity>) -> Option<Self> {
        let kept: Vec<String> = new
            .map(|e| addresses(e).into_iter().map(|(_, n, _)| n).collect())
            .unwrap_or_default();
        let names: Vec<String> = old
            .map(addresses)
            .unwrap_or_default()
            .into_iter()
            .map(|(_, name, _)| name)
            .filter(|name| !kept.contains(name))
            .collect();
        (!names.is_empty()).then(|| DeleteBlobs {
            entity: entity.clone(),
            names,
        })
    }

    /// Deletes the blobs the entity does not reference. Returns how many were deleted.
    ///
    /// # Errors
    /// The store's and the blob store's errors.
    pub async fn apply<S: TableStore>(&self, store: &S, blobs: &BlobStore) -> Result<usize> {
        let holder = store
            .get_if_table_exists(
                &self.entity.table,
                &self.entity.partition_key,
                &self.entity.row_key,
            )
            .await?;
        let mut deleted = 0;
        for name in &self.names {
            if holder.as_ref().is_some_and(|h| references(h, name)) {
                continue;
            }
            if blobs.delete(name).await? {
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// Registers the handler of this operation in `registry`.
    pub fn register<S: TableStore + Clone + 'static>(
        registry: Registry,
        store: S,
        blobs: BlobStore,
    ) -> Registry {
        registry.register(move |operation: DeleteBlobs| {
            let (store, blobs) = (store.clone(), blobs.clone());
            async move {
                operation.apply(&store, &blobs).await?;
                Ok(())
            }
        })
    }
}

/// The blob folder of one property of one entity.
pub fn blob_folder(entity: &EntityRef, property: &str) -> String {
    format!(
        "large/{}/{}/{}/{}/",
        segment(&entity.table),
        segment(&entity.partition_key),
        segment(&entity.row_key),
        segment(property)
    )
}

/// The folder of every blob of one entity.
pub fn blob_root(entity: &EntityRef) -> String {
    format!(
        "large/{}/{}/{}/",
        segment(&entity.table),
        segment(&entity.partition_key),
        segment(&entity.row_key),
    )
}

/// A key as a blob-name segment: percent-encoded, and `~` (which encoding never
/// produces) for the empty key.
fn segment(text: &str) -> String {
    if text.is_empty() {
        "~".to_owned()
    } else {
        utf8_percent_encode(text, NAME_SET).to_string()
    }
}

/// The blob addresses an entity holds: (property, blob name, whether the value is text).
pub fn addresses(entity: &Entity) -> Vec<(String, String, bool)> {
    entity
        .properties
        .iter()
        .filter_map(|(name, value)| {
            let property = name.strip_prefix(ADDRESS_PREFIX)?;
            let Value::String(address) = value else {
                return None;
            };
            let (kind, blob) = address.split_once(':')?;
            Some((property.to_owned(), blob.to_owned(), kind == "s"))
        })
        .collect()
}

/// Whether an entity holds the address of `blob`.
pub fn references(entity: &Entity, blob: &str) -> bool {
    addresses(entity).iter().any(|(_, name, _)| name == blob)
}

/// What a sweep found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Blobs looked at.
    pub blobs: usize,
    /// Blobs no entity referenced, deleted.
    pub deleted: usize,
    /// Unreferenced blobs younger than the grace period, left.
    pub young: usize,
}

/// A typed table whose blob fields and oversized properties live in the blob store.
pub struct LargeTable<E, S> {
    engine: Engine<S>,
    table: String,
    blobs: BlobStore,
    /// The clock that decides whether a read entity expired (`#[entity(expires)]`).
    clock: SharedClock,
    entity: PhantomData<fn() -> E>,
}

impl<E, S: Clone> Clone for LargeTable<E, S> {
    fn clone(&self) -> Self {
        LargeTable {
            engine: self.engine.clone(),
            table: self.table.clone(),
            blobs: self.blobs.clone(),
            clock: self.clock.clone(),
            entity: PhantomData,
        }
    }
}

impl<E, S> std::fmt::Debug for LargeTable<E, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LargeTable")
            .field("table", &self.table)
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
    /// The blob store's errors; [`Error::Malformed`] for a missing blob; the read's
    /// errors.
    pub async fn load(self) -> Result<Stored<E>> {
        let entity = restore(&self.blobs, &self.table, self.entity).await?;
        Ok(E::from_entity(entity)?)
    }
}

/// Moves the `declared` blob properties, values over 64 KiB and, while the entity would
/// pass 1 MiB, its largest values to the blob store; the entity keeps their addresses.
///
/// # Errors
/// The blob store's errors.
pub async fn offload(
    blobs: &BlobStore,
    table: &str,
    declared: &[&str],
    entity: &mut Entity,
) -> Result<()> {
    let nonce = tablekit_core::random::uuid().simple().to_string();
    offload_with_nonce(blobs, table, declared, entity, &nonce[..12]).await
}

/// Whether [`offload`] would move any value of `entity` to the blob store: a declared
/// field it holds, a value over the property limit, or an entity over the entity limit.
pub fn would_offload(declared: &[&str], entity: &Entity) -> bool {
    entity.properties.iter().any(|(name, value)| {
        matches!(value, Value::Binary(_) | Value::String(_))
            && (declared.contains(&name.as_str()) || limits::value_size(value) > MAX_PROPERTY_BYTES)
    }) || limits::entity_size(entity) > MAX_ENTITY_BYTES
}

/// As [`offload`], naming each blob after `nonce` (a part unique to the write, which an
/// intent can name before the upload: see [`crate::index::reclaim`]).
///
/// # Errors
/// The blob store's errors.
pub async fn offload_with_nonce(
    blobs: &BlobStore,
    table: &str,
    declared: &[&str],
    entity: &mut Entity,
    nonce: &str,
) -> Result<()> {
    let at = EntityRef::new(table, &entity.partition_key, &entity.row_key);
    let declared: BTreeSet<&str> = declared.iter().copied().collect();
    let mut chosen: Vec<String> = entity
        .properties
        .iter()
        .filter(|(name, value)| {
            matches!(value, Value::Binary(_) | Value::String(_))
                && (declared.contains(name.as_str())
                    || limits::value_size(value) > MAX_PROPERTY_BYTES)
        })
        .map(|(name, _)| name.clone())
        .collect();
    // Then the largest values, until the entity fits.
    let mut rest: Vec<(usize, String)> = entity
        .properties
        .iter()
        .filter(|(name, value)| {
            matches!(value, Value::Binary(_) | Value::String(_)) && !chosen.contains(name)
        })
        .map(|(name, value)| (limits::value_size(value), name.clone()))
        .collect();
    rest.sort();
    let mut size = limits::entity_size(entity);
    for name in &chosen {
        size -= entity.properties.get(name).map_or(0, limits::value_size);
    }
    // An address costs its property name and the blob name, in UTF-16.
    let address_bytes = 2 * (blob_folder(&at, "").len() + 160);
    while size + address_bytes * chosen.len() > MAX_ENTITY_BYTES {
        let Some((value_size, name)) = rest.pop() else {
            break;
        };
        size -= value_size;
        chosen.push(name);
    }
    for name in chosen {
        let Some(value) = entity.properties.shift_remove(&name) else {
            continue;
        };
        let (bytes, kind) = match value {
            Value::Binary(b) => (b, "b"),
            Value::String(s) => (s.into_bytes(), "s"),
            other => {
                entity.properties.insert(name, other);
                continue;
            }
        };
        let blob = blobs
            // The content's hash names the blob, after a part unique to this write: a
            // blob is never shared by two writes, so deleting one a write replaced can
            // never take one a later write uses.
            .put_content_addressed(&format!("{}{nonce}-", blob_folder(&at, &name)), bytes)
            .await?;
        entity.properties.insert(
            format!("{ADDRESS_PREFIX}{name}"),
            Value::String(format!("{kind}:{blob}")),
        );
    }
    Ok(())
}

/// Puts the offloaded properties back.
///
/// # Errors
/// The blob store's errors; [`Error::Malformed`] for a missing blob.
pub async fn restore(blobs: &BlobStore, table: &str, mut entity: Entity) -> Result<Entity> {
    for (property, name, text) in addresses(&entity) {
        let bytes = blobs.get(&name).await?.ok_or_else(|| {
            Error::malformed(
                format!("{table}({}, {})", entity.partition_key, entity.row_key),
                format!("the blob `{name}` of `{property}` is missing"),
            )
        })?;
        let value = if text {
            Value::String(
                String::from_utf8(bytes)
                    .map_err(|e| Error::malformed(format!("blob `{name}`"), e))?,
            )
        } else {
            Value::Binary(bytes)
        };
        entity
            .properties
            .shift_remove(&format!("{ADDRESS_PREFIX}{property}"));
        entity.properties.insert(property, value);
    }
    Ok(entity)
}

impl<E: EntityType, S: TableStore + Clone + 'static> LargeTable<E, S> {
    /// The table `E` declares, on `store`, with blobs in `blobs`. Without a sink, blobs a
    /// write stops referencing wait in the outbox for the relay; see
    /// [`with_inline_cleanup`](Self::with_inline_cleanup) and [`with_sink`](Self::with_sink).
    pub fn new(store: S, blobs: BlobStore) -> Self {
        LargeTable {
            engine: Engine::new(store),
            table: E::TABLE.to_owned(),
            blobs,
            clock: tablekit_core::clock::system(),
            entity: PhantomData,
        }
    }

    /// Decides expiry with `clock` (the wall clock by default): reads leave out an entity
    /// whose expiry (an `#[entity(expires)]` field) passed by its time. Deleting expired
    /// entities is the [`Sweeper`](crate::index::Sweeper)'s work, for entities written
    /// through an [`IndexedTable`](crate::index::IndexedTable) with blobs.
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The same table under another name.
    pub fn with_name(mut self, name: &str) -> Self {
        self.table = name.to_owned();
        self
    }

    /// Deletes replaced blobs in this process, right after the commit.
    pub fn with_inline_cleanup(mut self) -> Self {
        let registry = DeleteBlobs::register(
            Registry::new(),
            self.engine.store().clone(),
            self.blobs.clone(),
        );
        self.engine = self.engine.with_sink(Arc::new(InlineSink::new(registry)));
        self
    }

    /// Hands the deletion of replaced blobs to `sink` (the worker's queue).
    pub fn with_sink(mut self, sink: Arc<dyn OutboxSink>) -> Self {
        self.engine = self.engine.with_sink(sink);
        self
    }

    /// Commits through `engine` (its sink, markers and retry policy) instead.
    pub fn with_engine(mut self, engine: Engine<S>) -> Self {
        self.engine = engine;
        self
    }

    /// Creates the table (and the consistency engine's table of pending markers).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn open(&self) -> Result<()> {
        self.engine
            .store()
            .create_table_if_not_exists(&self.table)
            .await?;
        self.engine.open().await
    }

    /// Inserts a value; `AlreadyExists` when its keys are taken.
    ///
    /// # Errors
    /// The store's and the blob store's errors; limit violations.
    pub async fn insert(&self, value: &E) -> Result<ETag> {
        self.write(Some(value), None, Mode::Insert)
            .await
            .map(|e| e.unwrap_or_else(|| ETag::new("")))
    }

    /// Inserts or replaces a value.
    ///
    /// # Errors
    /// As [`insert`](Self::insert).
    pub async fn upsert(&self, value: &E) -> Result<ETag> {
        self.write(Some(value), None, Mode::Upsert)
            .await
            .map(|e| e.unwrap_or_else(|| ETag::new("")))
    }

    /// Replaces a stored value if `if_match` holds.
    ///
    /// # Errors
    /// As [`insert`](Self::insert); `NotFound`, `PreconditionFailed`.
    pub async fn replace(&self, value: &E, if_match: IfMatch) -> Result<ETag> {
        self.write(Some(value), None, Mode::Replace(if_match))
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
        self.write(
            None,
            Some((partition_key, row_key)),
            Mode::Replace(if_match),
        )
        .await
        .map(drop)
    }

    /// Reads a value with its blobs.
    ///
    /// # Errors
    /// The store's and blob store's errors; [`Error::Malformed`] for a missing blob.
    pub async fn get(&self, partition_key: &str, row_key: &str) -> Result<Option<Stored<E>>> {
        match self.get_lazy(partition_key, row_key).await? {
            Some(lazy) => lazy.load().await.map(Some),
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
            .engine
            .store()
            .get_if_table_exists(&self.table, partition_key, row_key)
            .await?;
        let now = self.clock.now();
        Ok(found
            .filter(|entity| !tablekit_core::typed::is_expired(entity, now))
            .map(|entity| LazyEntity {
                entity,
                blobs: self.blobs.clone(),
                table: self.table.clone(),
                record: PhantomData,
            }))
    }

    async fn offload(&self, entity: &mut Entity) -> Result<()> {
        let declared: Vec<&str> = E::schema().blob_fields().map(|f| f.property).collect();
        offload(&self.blobs, &self.table, &declared, entity).await
    }

    async fn write(
        &self,
        value: Option<&E>,
        keys: Option<(&str, &str)>,
        mode: Mode,
    ) -> Result<Option<ETag>> {
        let mut entity = match value {
            Some(v) => Some(v.to_entity()?),
            None => None,
        };
        let (pk, rk) = match (&entity, keys) {
            (Some(e), _) => (e.partition_key.clone(), e.row_key.clone()),
            (None, Some((pk, rk))) => (pk.to_owned(), rk.to_owned()),
            (None, None) => unreachable!("a delete names its keys"),
        };
        if let Some(e) = entity.as_mut() {
            self.offload(e).await?;
            limits::check_entity(e).map_err(tablekit_core::Error::from)?;
        }
        let source = EntityRef::new(&self.table, &pk, &rk);
        let mut write = LargeWrite {
            store: self.engine.store(),
            source,
            entity,
            mode,
        };
        let committed = self.engine.commit(&self.table, &pk, &mut write).await?;
        Ok(committed.and_then(|c| c.etags.into_iter().next().flatten()))
    }

    /// Deletes the blobs of this table that no entity references and that are older than
    /// `grace` (younger ones may belong to a write in progress).
    ///
    /// # Errors
    /// The store's and blob store's errors.
    pub async fn sweep(&self, grace: Duration) -> Result<SweepReport> {
        sweep_unreferenced(self.engine.store(), &self.blobs, &self.table, grace).await
    }
}

/// Deletes the blobs of `table`'s entities that no entity references and that are older
/// than `grace` (younger ones may belong to a write in progress): what a write that
/// failed, or whose process died, after uploading its blobs left. It lists the table's
/// blob folder.
///
/// # Errors
/// The store's and blob store's errors.
pub async fn sweep_unreferenced<S: TableStore>(
    store: &S,
    blobs: &BlobStore,
    table: &str,
    grace: Duration,
) -> Result<SweepReport> {
    let folder = format!("large/{}/", utf8_percent_encode(table, NAME_SET));
    let cutoff = ago(grace);
    let mut report = SweepReport::default();
    for blob in blobs.list(&folder).await? {
        report.blobs += 1;
        let Some(rest) = blob.name.strip_prefix(&folder) else {
            continue;
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let [pk, rk, ..] = parts.as_slice() else {
            continue;
        };
        let decode = |s: &str| {
            if s == "~" {
                return Ok(String::new());
            }
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(|c| c.into_owned())
        };
        let (Ok(pk), Ok(rk)) = (decode(pk), decode(rk)) else {
            continue;
        };
        let entity = store.get_if_table_exists(table, &pk, &rk).await?;
        if entity.is_some_and(|e| references(&e, &blob.name)) {
            continue;
        }
        if blob.last_modified > cutoff {
            report.young += 1;
            continue;
        }
        if blobs.delete(&blob.name).await? {
            report.deleted += 1;
        }
    }
    Ok(report)
}

#[derive(Clone)]
enum Mode {
    Insert,
    Upsert,
    Replace(IfMatch),
}

/// One large-entity write, run by the engine: the entity (or its delete) under the ETag
/// read, and the deletion of the blobs it stops referencing as follow-up work.
struct LargeWrite<'a, S> {
    store: &'a S,
    source: EntityRef,
    entity: Option<Entity>,
    mode: Mode,
}

impl<S: TableStore> LargeWrite<'_, S> {
    fn user_etag(&self) -> Option<&ETag> {
        match &self.mode {
            Mode::Replace(IfMatch::ETag(e)) => Some(e),
            _ => None,
        }
    }
}

impl<S: TableStore> Planner for LargeWrite<'_, S> {
    type Role = ();

    async fn plan(&mut self) -> Result<Option<Plan<()>>> {
        let EntityRef {
            table,
            partition_key: pk,
            row_key: rk,
        } = &self.source;
        let old = match &self.mode {
            Mode::Insert => None,
            _ => self.store.get(table, pk, rk, None).await?,
        };
        if let Mode::Replace(_) = &self.mode {
            match &old {
                None => return Err(self.source.not_found()),
                Some(o) if self.user_etag().is_some() && o.etag.as_ref() != self.user_etag() => {
                    return Err(self.source.precondition_failed());
                }
                _ => {}
            }
        }
        let if_match = old
            .as_ref()
            .and_then(|o| o.etag.clone())
            .map_or(IfMatch::Any, IfMatch::ETag);
        let mut plan = Plan::new();
        let op = match (&self.entity, &old) {
            (Some(e), None) => WriteOp::Insert(e.clone()),
            (Some(e), Some(_)) => WriteOp::Replace(e.clone(), if_match),
            (None, _) => WriteOp::Delete {
                partition_key: pk.clone(),
                row_key: rk.clone(),
                if_match,
            },
        };
        plan.push(op, ());
        if let Some(dropped) =
            DeleteBlobs::dropped(&self.source, old.as_ref(), self.entity.as_ref())
        {
            plan.follow_up(
                crate::consistency::Envelope::new(&dropped).map_err(|source| Error::Encode {
                    what: "a blob deletion".to_owned(),
                    source,
                })?,
            );
        }
        Ok(Some(plan))
    }

    fn refused(&mut self, error: tablekit_core::Error, _: Option<&()>) -> Result<()> {
        match (error.batch_index(), error.kind(), &self.mode) {
            (Some(0), ErrorKind::AlreadyExists, Mode::Insert) => Err(error.into()),
            (Some(0), ErrorKind::PreconditionFailed | ErrorKind::NotFound, Mode::Replace(_))
                if self.user_etag().is_some() =>
            {
                Err(error.into())
            }
            _ if lost_race(&error) => Ok(()),
            _ => Err(error.into()),
        }
    }

    fn what(&self) -> String {
        format!("large-entity write of {}", self.source)
    }
}
