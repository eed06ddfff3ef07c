//! Index operations: the follow-up work of an indexed write that lies outside the
//! primary's partition (copies in other partitions or tables, worker-kept id lists), as
//! serde messages, and [`IndexApplier`], which applies them idempotently.
//!
//! Each operation names the primary and the version of the write that produced it:
//! - a copy is only ever written from the primary's current state, and only when the
//!   primary is still at that version; a copy never replaces a copy of a newer version;
//!   when the primary moved on while the copy was written, the copy is taken back (the
//!   newer write's own operations bring the copy up to date);
//! - a copy is only deleted by an operation at least as new as the copy, and only if it
//!   is the copy of that primary;
//! - id lists are last-writer-wins sets keyed by primary (see [`super::members`]).
//!
//! So a message delivered twice, late, out of order, or again after a crash between two
//! steps converges to the state of the primary's last write.

use serde::{Deserialize, Serialize};
use tablekit_core::blob::BlobStore;
use tablekit_core::{Entity, ErrorKind, IfMatch, TableStore, WriteOp};

use super::members::{self, Member, plan_partition_change, read_partition_pages};
use super::record::{
    EntityRef, IndexRecord, MemberStorage, Target, copy_of, copy_source, same_content,
};
use crate::consistency::{Envelope, Operation, Registry, RetryPolicy};
use crate::error::{Error, Result};

/// One step of follow-up work for an indexed write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum IndexOperation {
    /// Write the copy of `source` (at `version`) for `index` at `target`.
    PutCopy {
        /// The primary.
        source: EntityRef,
        /// The version of the primary's write.
        version: i64,
        /// The index.
        index: String,
        /// Where the copy lives.
        target: EntityRef,
        /// The properties the copy carries; all when `None`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        properties: Option<Vec<String>>,
        /// The primary's kind property (marked `<kind>#<index>` on the copy).
        kind_property: String,
    },
    /// Delete the copy of `source` at `target`, unless a newer one is there.
    DeleteCopy {
        /// The primary.
        source: EntityRef,
        /// The version of the primary's write that dropped the copy.
        version: i64,
        /// The index.
        index: String,
        /// Where the copy lives.
        target: EntityRef,
    },
    /// Add `source` to the id list of `value`.
    AddMember {
        /// The primary.
        source: EntityRef,
        /// The version of the primary's write.
        version: i64,
        /// The index entity.
        index: String,
        /// Where the list lives (table or blob).
        storage: MemberStorage,
        /// The list's table (or blob folder).
        table: String,
        /// The indexed value.
        value: String,
    },
    /// Bring `dependent`'s copy of `source`'s property up to date (a denormalised field).
    SyncDenormalized {
        /// The entity holding the copy.
        dependent: EntityRef,
        /// Its property.
        property: String,
        /// The entity the value comes from.
        source: EntityRef,
        /// The source's property.
        source_property: String,
    },
    /// Delete a denormalisation link that no longer applies, unless the dependent claims
    /// it again (it was written anew since).
    RemoveLink {
        /// The entity that held the copy.
        dependent: EntityRef,
        /// Its property.
        property: String,
        /// The entity the value came from.
        source: EntityRef,
        /// The source's property.
        source_property: String,
    },
    /// Release the reservation of a unique value `source`'s write at `version` dropped
    /// (see [`super::unique::release`]).
    ReleaseUnique {
        /// The primary.
        source: EntityRef,
        /// The version of the primary's write that dropped the value.
        version: i64,
        /// The unique value's name.
        name: String,
        /// The reservation.
        at: EntityRef,
    },
    /// Restore the reservation of a unique value `source` lists (the audit's repair):
    /// reserved again for it unless another entity holds the value.
    ClaimUnique {
        /// The primary.
        source: EntityRef,
        /// The version of the primary's write.
        version: i64,
        /// The unique value's name.
        name: String,
        /// The reservation.
        at: EntityRef,
    },
    /// Remove the tombstone a delete of `source` at `version` left (see
    /// [`super::record::TOMBSTONE_KIND`]), after its grace period: unless a later write
    /// replaced it.
    Bury {
        /// The deleted primary.
        source: EntityRef,
        /// The version of the delete.
        version: i64,
    },
    /// Remove `source` from the id list of `value`.
    RemoveMember {
        /// The primary.
        source: EntityRef,
        /// The version of the primary's write.
        version: i64,
        /// The index entity.
        index: String,
        /// Where the list lives (table or blob).
        storage: MemberStorage,
        /// The list's table (or blob folder).
        table: String,
        /// The indexed value.
        value: String,
    },
}

impl IndexOperation {
    /// The burial of the tombstone a delete of `source` at `version` leaves: delayed
    /// work the relay publishes once `grace` has passed.
    ///
    /// # Errors
    /// [`Error::Encode`] when it does not serialise.
    pub fn burial(
        source: &EntityRef,
        version: i64,
        grace: std::time::Duration,
    ) -> Result<Envelope> {
        let due = tablekit_core::clock::now()
            + chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
        let bury = IndexOperation::Bury {
            source: source.clone(),
            version,
        };
        Ok(IndexOperations::new(vec![bury]).envelope()?.not_before(due))
    }

    /// The operation that brings a target in line with a primary at `version`: the
    /// target's write when the primary has it, its removal otherwise.
    pub fn for_target(
        source: &EntityRef,
        version: i64,
        target: &Target,
        present: bool,
        kind_property: &str,
    ) -> Self {
        match (target, present) {
            (
                Target::Copy {
                    index,
                    at,
                    properties,
                },
                true,
            ) => IndexOperation::PutCopy {
                source: source.clone(),
                version,
                index: index.clone(),
                target: at.clone(),
                properties: properties.clone(),
                kind_property: kind_property.to_owned(),
            },
            (Target::Copy { index, at, .. }, false) => IndexOperation::DeleteCopy {
                source: source.clone(),
                version,
                index: index.clone(),
                target: at.clone(),
            },
            (
                Target::Denormalized {
                    property,
                    source: from,
                    source_property,
                },
                true,
            ) => IndexOperation::SyncDenormalized {
                dependent: source.clone(),
                property: property.clone(),
                source: from.clone(),
                source_property: source_property.clone(),
            },
            (
                Target::Denormalized {
                    property,
                    source: from,
                    source_property,
                },
                false,
            ) => IndexOperation::RemoveLink {
                dependent: source.clone(),
                property: property.clone(),
                source: from.clone(),
                source_property: source_property.clone(),
            },
            (Target::Unique { name, at }, present) => {
                let (source, name, at) = (source.clone(), name.clone(), at.clone());
                if present {
                    IndexOperation::ClaimUnique {
                        source,
                        version,
                        name,
                        at,
                    }
                } else {
                    IndexOperation::ReleaseUnique {
                        source,
                        version,
                        name,
                        at,
                    }
                }
            }
            (
                Target::Member {
                    index,
                    storage,
                    table,
                    value,
                },
                present,
            ) => {
                let (source, index, storage, table, value) = (
                    source.clone(),
                    index.clone(),
                    *storage,
                    table.clone(),
                    value.clone(),
                );
                if present {
                    IndexOperation::AddMember {
                        source,
                        version,
                        index,
                        storage,
                        table,
                        value,
                    }
                } else {
                    IndexOperation::RemoveMember {
                        source,
                        version,
                        index,
                        storage,
                        table,
                        value,
                    }
                }
            }
        }
    }
}

/// The follow-up work of one indexed write (operation kind `index`): the payload of one
/// queue message, recorded first in the primary's partition by the consistency engine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexOperations {
    /// The work's id (unique per write; the envelope's and the queue message's id).
    pub id: String,
    /// The steps, applied in order.
    pub operations: Vec<IndexOperation>,
}

impl Operation for IndexOperations {
    const KIND: &'static str = "index";
    const VERSION: u32 = 1;
}

impl IndexOperations {
    /// The operations under a new id.
    pub fn new(operations: Vec<IndexOperation>) -> Self {
        IndexOperations {
            id: tablekit_core::random::uuid().simple().to_string(),
            operations,
        }
    }

    /// The envelope of this work; its id is the work's, so the writer and the relay
    /// publish one message id.
    ///
    /// # Errors
    /// [`Error::Encode`] when the work does not serialise.
    pub fn envelope(&self) -> Result<Envelope> {
        let id = uuid::Uuid::parse_str(&self.id).unwrap_or_else(|_| tablekit_core::random::uuid());
        Envelope::with_id(id, self).map_err(|source| Error::Encode {
            what: "index work".to_owned(),
            source,
        })
    }
}

/// What applying one operation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The target changed.
    Changed,
    /// The target was already in that state, or newer.
    Unchanged,
    /// The primary moved on (a newer write, or deleted): that write's own operations
    /// apply instead.
    Superseded,
}

/// Applies index operations to a store (and a blob store, for blob-stored id lists).
#[derive(Clone, Debug)]
pub struct IndexApplier<S> {
    store: S,
    blobs: Option<BlobStore>,
    retry: RetryPolicy,
}

async fn get_or_none<S: TableStore>(store: &S, at: &EntityRef) -> Result<Option<Entity>> {
    Ok(store
        .get_if_table_exists(&at.table, &at.partition_key, &at.row_key)
        .await?)
}

/// Deletes `at` under `if_match`; one that changed or went meanwhile is left as it is.
/// Whether it deleted.
async fn delete_unless_changed<S: TableStore>(
    store: &S,
    at: &EntityRef,
    if_match: IfMatch,
) -> Result<bool> {
    match store
        .delete(&at.table, &at.partition_key, &at.row_key, if_match)
        .await
    {
        Ok(()) => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::PreconditionFailed | ErrorKind::NotFound
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

impl<S: TableStore> IndexApplier<S> {
    /// An applier over a store, without blob-stored id lists.
    pub fn new(store: S) -> Self {
        IndexApplier {
            store,
            blobs: None,
            retry: RetryPolicy::default(),
        }
    }

    /// The same applier, with a blob store for blob-stored id lists.
    pub fn with_blobs(mut self, blobs: BlobStore) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// Registers the handlers of index work (kind `index`) and of the undoing of writes
    /// that never committed (kind `reclaim`) in `registry`.
    pub fn register(self, registry: Registry) -> Registry
    where
        S: Clone + 'static,
    {
        let reclaimer = self.clone();
        registry
            .register(move |operations: IndexOperations| {
                let applier = self.clone();
                async move { Ok(applier.apply_all(&operations).await?) }
            })
            .register(move |reclaim: super::reclaim::Reclaim| {
                let applier = reclaimer.clone();
                async move { Ok(applier.undo(&reclaim).await?) }
            })
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The blob store, if any.
    pub fn blobs(&self) -> Option<&BlobStore> {
        self.blobs.as_ref()
    }

    /// Applies every operation of a message, in order.
    ///
    /// # Errors
    /// The first failure; the message can be applied again.
    pub async fn apply_all(&self, operations: &IndexOperations) -> Result<()> {
        for operation in &operations.operations {
            self.apply(operation).await?;
        }
        Ok(())
    }

    /// Applies one operation.
    ///
    /// # Errors
    /// The store's errors; [`Error::NoBlobStore`]; [`Error::Contention`].
    pub async fn apply(&self, operation: &IndexOperation) -> Result<Applied> {
        match operation {
            IndexOperation::PutCopy {
                source,
                version,
                index,
                target,
                properties,
                kind_property,
            } => {
                self.put_copy(
                    source,
                    *version,
                    index,
                    target,
                    properties.as_deref(),
                    kind_property,
                    false,
                )
                .await
            }
            IndexOperation::DeleteCopy {
                source,
                version,
                target,
                ..
            } => self.delete_copy(source, Some(*version), target).await,
            IndexOperation::AddMember {
                source,
                version,
                index,
                storage,
                table,
                value,
            } => {
                self.change_member(source, *version, index, *storage, table, value, true, false)
                    .await
            }
            IndexOperation::RemoveMember {
                source,
                version,
                index,
                storage,
                table,
                value,
            } => {
                self.change_member(
                    source, *version, index, *storage, table, value, false, false,
                )
                .await
            }
            IndexOperation::SyncDenormalized {
                dependent,
                property,
                source,
                source_property,
            } => {
                self.sync_denormalized(dependent, property, source, source_property)
                    .await
            }
            IndexOperation::RemoveLink {
                dependent,
                property,
                source,
                source_property,
            } => {
                self.remove_link(dependent, property, source, source_property)
                    .await
            }
            IndexOperation::ReleaseUnique {
                source,
                version,
                at,
                ..
            } => Ok(
                if super::unique::release(&self.store, at, source, *version).await? {
                    Applied::Changed
                } else {
                    Applied::Unchanged
                },
            ),
            IndexOperation::ClaimUnique {
                source,
                version,
                at,
                ..
            } => self.claim_unique(source, *version, at).await,
            IndexOperation::Bury { source, version } => self.bury(source, *version).await,
        }
    }

    /// Removes the tombstone of the delete of `source` at `version`, if it is still
    /// there (a write that replaced it, or a later delete's, stays).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn bury(&self, source: &EntityRef, version: i64) -> Result<Applied> {
        let Some(found) = get_or_none(&self.store, source).await? else {
            return Ok(Applied::Unchanged);
        };
        if !super::record::is_tombstone(&found)
            || super::record::version_of(&found) != Some(version)
        {
            return Ok(Applied::Unchanged);
        }
        let if_match = found.etag.map_or(IfMatch::Any, IfMatch::ETag);
        Ok(
            if delete_unless_changed(&self.store, source, if_match).await? {
                Applied::Changed
            } else {
                Applied::Unchanged
            },
        )
    }

    /// Restores the reservation at `at` for `source`, if `source` still lists it: the
    /// reservation is made again (with no lease: its holder is committed) or renewed.
    ///
    /// # Errors
    /// [`Error::ValueTaken`] when another entity holds the value; the store's errors.
    pub async fn claim_unique(
        &self,
        source: &EntityRef,
        version: i64,
        at: &EntityRef,
    ) -> Result<Applied> {
        if !super::unique::holder_lists(&self.store, source, at).await? {
            return Ok(Applied::Superseded);
        }
        if let Some(found) = super::unique::read(&self.store, at).await?
            && found.holder == *source
        {
            return Ok(Applied::Unchanged);
        }
        super::unique::reserve(&self.store, at, source, version, std::time::Duration::ZERO).await?;
        Ok(Applied::Changed)
    }

    /// Deletes the link of `dependent`'s `property` to `source`, unless the dependent
    /// claims it (a late or repeated removal never undoes a newer claim).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn remove_link(
        &self,
        dependent: &EntityRef,
        property: &str,
        source: &EntityRef,
        source_property: &str,
    ) -> Result<Applied> {
        self.remove_link_of(dependent, property, source, source_property, None)
            .await
    }

    /// As [`remove_link`](Self::remove_link), run by the undoing of the write whose intent
    /// is `intent` (that write is not counted among those in flight).
    ///
    /// # Errors
    /// The store's errors; [`Error::Contention`].
    pub async fn remove_link_of(
        &self,
        dependent: &EntityRef,
        property: &str,
        source: &EntityRef,
        source_property: &str,
        intent: Option<&str>,
    ) -> Result<Applied> {
        let claim = Target::Denormalized {
            property: property.to_owned(),
            source: source.clone(),
            source_property: source_property.to_owned(),
        };
        let link = super::links::link_ref(dependent, property, source);
        let mut retry = self.retry.start();
        loop {
            retry
                .next(|| format!("link of `{property}` of {dependent}"))
                .await?;
            let Some(found) = get_or_none(&self.store, &link).await? else {
                return Ok(Applied::Unchanged);
            };
            if self
                .link_wanted_in_flight(dependent, property, source, intent)
                .await?
            {
                // A write of the dependent that puts this link has not committed yet:
                // its commit claims the link, or its undoing decides again.
                return Ok(Applied::Superseded);
            }
            let claimed = match get_or_none(&self.store, dependent).await? {
                Some(d) => IndexRecord::read(&d)?.is_some_and(|r| r.targets.contains(&claim)),
                None => false,
            };
            if claimed {
                return Ok(Applied::Superseded);
            }
            let if_match = found.etag.map_or(IfMatch::Any, IfMatch::ETag);
            match self
                .store
                .delete(&link.table, &link.partition_key, &link.row_key, if_match)
                .await
            {
                Ok(()) => return Ok(Applied::Changed),
                Err(e) if e.kind() == ErrorKind::PreconditionFailed => {}
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Applied::Unchanged),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Undoes what a write that never committed did outside its transaction and holds no
    /// more (see [`super::reclaim`]): its reservations, its links, its blobs.
    ///
    /// # Errors
    /// The store's and blob store's errors; the work can be applied again.
    pub async fn undo(&self, undoing: &super::reclaim::Reclaim) -> Result<()> {
        for at in &undoing.reservations {
            super::unique::release_intent(&self.store, at, &undoing.source).await?;
        }
        for (property, from, source_property) in &undoing.links {
            self.remove_link_of(
                &undoing.source,
                property,
                from,
                source_property,
                Some(&undoing.id),
            )
            .await?;
        }
        if let (Some(nonce), Some(blobs)) = (&undoing.blob_nonce, &self.blobs) {
            super::reclaim::undo_blobs(&self.store, blobs, &undoing.source, nonce).await?;
        }
        Ok(())
    }

    /// Whether a write of `dependent` other than `undoing_id`'s is pending (its intent
    /// recorded, neither committed nor undone) and puts the link of `property` to
    /// `source`: it may yet commit and claim it. Read after the link and before the
    /// dependent, so a write that commits in between is seen claiming it. Reads the
    /// dependent partition's outbox entries (its pending work, not its entities).
    async fn link_wanted_in_flight(
        &self,
        dependent: &EntityRef,
        property: &str,
        source: &EntityRef,
        undoing_id: Option<&str>,
    ) -> Result<bool> {
        Ok(super::reclaim::pending_writes(&self.store, dependent)
            .await?
            .iter()
            .any(|(_, undoing)| {
                Some(undoing.id.as_str()) != undoing_id
                    && undoing
                        .links
                        .iter()
                        .any(|(p, from, _)| p == property && from == source)
            }))
    }

    /// Writes the link of a denormalised field beside its source (idempotent).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn put_link(
        &self,
        dependent: &EntityRef,
        property: &str,
        source: &EntityRef,
        source_property: &str,
    ) -> Result<()> {
        self.put_link_for(dependent, property, source, source_property, None)
            .await
    }

    /// As [`put_link`](Self::put_link), for a write that recorded the intent `intent`
    /// (its id): the link names it, so only that intent's undoing removes it.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn put_link_for(
        &self,
        dependent: &EntityRef,
        property: &str,
        source: &EntityRef,
        source_property: &str,
        intent: Option<&str>,
    ) -> Result<()> {
        let mut link = super::links::link_entity(dependent, property, source, source_property)?;
        if let Some(intent) = intent {
            link.properties.insert(
                super::links::INTENT_PROPERTY.to_owned(),
                tablekit_core::Value::String(intent.to_owned()),
            );
        }
        match self
            .store
            .insert_or_replace(&source.table, link.clone())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == ErrorKind::TableNotFound => {
                self.store.create_table_if_not_exists(&source.table).await?;
                self.store.insert_or_replace(&source.table, link).await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Copies `source`'s property into `dependent`'s, if the dependent still declares
    /// that source; again when the source changed meanwhile, so the last run leaves the
    /// source's latest value.
    ///
    /// # Errors
    /// The store's errors; [`Error::Contention`].
    pub async fn sync_denormalized(
        &self,
        dependent: &EntityRef,
        property: &str,
        source: &EntityRef,
        source_property: &str,
    ) -> Result<Applied> {
        let claim = Target::Denormalized {
            property: property.to_owned(),
            source: source.clone(),
            source_property: source_property.to_owned(),
        };
        let mut retry = self.retry.start();
        loop {
            retry
                .next(|| format!("denormalised `{property}` of {dependent}"))
                .await?;
            let Some(from) = get_or_none(&self.store, source).await? else {
                // An earlier delivery may have merged the field and stopped before the
                // dependent's copies.
                self.refresh_copies(dependent, property).await?;
                return Ok(Applied::Unchanged);
            };
            let Some(current) = get_or_none(&self.store, dependent).await? else {
                return Ok(Applied::Superseded);
            };
            let claims = IndexRecord::read(&current)?.is_some_and(|r| r.targets.contains(&claim));
            if !claims {
                return Ok(Applied::Superseded);
            }
            let value = from.properties.get(source_property);
            if current.properties.get(property) == value {
                // A delivery after a crash finds the field up to date: its copies may
                // not be yet.
                self.refresh_copies(dependent, property).await?;
                return Ok(Applied::Unchanged);
            }
            let if_match = current.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            let op = match value {
                Some(value) => {
                    let mut patch = Entity::new(&dependent.partition_key, &dependent.row_key);
                    patch.properties.insert(property.to_owned(), value.clone());
                    WriteOp::Merge(patch, if_match)
                }
                None => {
                    let mut whole = current.clone();
                    whole.properties.shift_remove(property);
                    WriteOp::Replace(whole, if_match)
                }
            };
            match self.store.execute(&dependent.table, op).await {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::PreconditionFailed => continue,
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Applied::Superseded),
                Err(e) => return Err(e.into()),
            }
            // The source may have changed while the copy was written: copy again.
            let again = get_or_none(&self.store, source).await?;
            if again.and_then(|a| a.etag) == from.etag {
                self.refresh_copies(dependent, property).await?;
                return Ok(Applied::Changed);
            }
        }
    }

    /// Brings `property` of the dependent's index copies (those that carry it) to the
    /// dependent's current value: a denormalised field changed by its source's write
    /// changes the copies too, at the dependent's unchanged version.
    async fn refresh_copies(&self, dependent: &EntityRef, property: &str) -> Result<()> {
        let mut retry = self.retry.start();
        'again: loop {
            retry
                .next(|| format!("the copies of `{property}` of {dependent}"))
                .await?;
            let Some(current) = get_or_none(&self.store, dependent).await? else {
                return Ok(());
            };
            let Some(record) = IndexRecord::read(&current)? else {
                return Ok(());
            };
            let value = current.properties.get(property);
            for target in &record.targets {
                let Target::Copy { at, properties, .. } = target else {
                    continue;
                };
                if properties
                    .as_ref()
                    .is_some_and(|p| !p.iter().any(|p| p == property))
                {
                    continue;
                }
                let Some(copy) = get_or_none(&self.store, at).await? else {
                    continue;
                };
                let ours = copy_source(&copy)
                    .is_some_and(|(owner, v)| owner == *dependent && v == record.version);
                if !ours || copy.properties.get(property) == value {
                    continue;
                }
                let if_match = copy.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                let mut whole = copy;
                match value {
                    Some(v) => {
                        whole.properties.insert(property.to_owned(), v.clone());
                    }
                    None => {
                        whole.properties.shift_remove(property);
                    }
                }
                match self
                    .store
                    .execute(&at.table, WriteOp::Replace(whole, if_match))
                    .await
                {
                    Ok(_) => {}
                    // The copy changed or went meanwhile: read everything again.
                    Err(e)
                        if matches!(
                            e.kind(),
                            ErrorKind::PreconditionFailed | ErrorKind::NotFound
                        ) =>
                    {
                        continue 'again;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            return Ok(());
        }
    }

    /// Writes the copy of `source` at `target` from the primary's current state, if the
    /// primary is at `version`. With `force` (repair) a copy of the same version whose
    /// content differs is rewritten too.
    ///
    /// # Errors
    /// The store's errors; [`Error::Contention`].
    #[allow(clippy::too_many_arguments)]
    pub async fn put_copy(
        &self,
        source: &EntityRef,
        version: i64,
        index: &str,
        target: &EntityRef,
        properties: Option<&[String]>,
        kind_property: &str,
        force: bool,
    ) -> Result<Applied> {
        let repair = force;
        // Set when the primary's content moved at the same version (a denormalised field
        // brought up to date) while the copy was written: the copy is made again.
        let mut force = force;
        let mut retry = self.retry.start();
        loop {
            retry.next(|| format!("copy {target} of {source}")).await?;
            let primary = match get_or_none(&self.store, source).await? {
                Some(p) if IndexRecord::read(&p)?.is_some_and(|r| r.version == version) => Some(p),
                _ => None,
            };
            let Some(primary) = primary else {
                // The primary moved on. An earlier run of this work may have written the
                // copy and failed before taking it back (below): take it back now.
                self.take_back(source, version, target).await?;
                return Ok(Applied::Superseded);
            };
            let copy = copy_of(
                &primary,
                source,
                version,
                index,
                target,
                properties,
                kind_property,
            )?;
            let existing = get_or_none(&self.store, target).await?;
            let op = match existing {
                Some(existing) => {
                    let Some((owner, existing_version)) = copy_source(&existing) else {
                        // Not a copy: an application entity holds the slot; never
                        // overwritten (the audit reports the copy missing).
                        tracing::warn!(%target, index, "an entity that is not a copy holds the index slot");
                        return Ok(Applied::Unchanged);
                    };
                    if owner != *source && self.claims(&owner, index, target).await? {
                        // Two primaries share one index value: the copy stays its
                        // holder's (the audit reports the other's copy missing).
                        tracing::warn!(%target, index, holder = %owner, "index value held by another entity");
                        return Ok(Applied::Unchanged);
                    }
                    let current = existing_version > version
                        || (existing_version == version
                            && (!force || same_content(&existing, &copy)));
                    if current {
                        // Another delivery of this work wrote it: this one may have read
                        // the primary before it moved on (and that delivery failed
                        // before taking the copy back).
                        if self.primary_version(source).await? != Some(version) {
                            self.take_back(source, version, target).await?;
                            return Ok(Applied::Superseded);
                        }
                        return Ok(Applied::Unchanged);
                    }
                    let etag = existing.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                    WriteOp::Replace(copy, etag)
                }
                None => WriteOp::Insert(copy),
            };
            let written = match self.store.execute(&target.table, op.clone()).await {
                Ok(etag) => etag,
                Err(e) if e.kind() == ErrorKind::TableNotFound => {
                    self.store.create_table_if_not_exists(&target.table).await?;
                    continue;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed
                            | ErrorKind::AlreadyExists
                            | ErrorKind::NotFound
                    ) =>
                {
                    continue;
                }
                Err(e) => {
                    // The write may have landed (its answer lost): if the primary moved
                    // on meanwhile, the copy is taken back before the work is retried
                    // (a concurrent delivery may settle the work first).
                    // (A read that fails proves nothing: the copy stays, the retry decides.)
                    if e.is_retryable()
                        && matches!(self.primary_version(source).await, Ok(now) if now != Some(version))
                    {
                        let _ = self.take_back(source, version, target).await;
                    }
                    return Err(e.into());
                }
            };
            // The primary may have moved on while the copy was written, and the newer
            // write's removal of this copy may already have run: take the copy back.
            let again = get_or_none(&self.store, source).await?;
            let still = match &again {
                Some(again) => IndexRecord::read(again)?.map(|r| r.version),
                None => None,
            };
            if still == Some(version) && again.and_then(|a| a.etag) != primary.etag {
                force = true;
                continue;
            }
            if still != Some(version) {
                delete_unless_changed(
                    &self.store,
                    target,
                    written.map_or(IfMatch::Any, IfMatch::ETag),
                )
                .await?;
                return Ok(Applied::Superseded);
            }
            if !repair {
                // A repair's copy (audit, backfill) is not a write converging.
                record_copy_lag(&source.table, index, version);
            }
            return Ok(Applied::Changed);
        }
    }

    /// The version of `source`'s current write (`None` when it is gone).
    async fn primary_version(&self, source: &EntityRef) -> Result<Option<i64>> {
        Ok(match get_or_none(&self.store, source).await? {
            Some(p) => IndexRecord::read(&p)?.map(|r| r.version),
            None => None,
        })
    }

    /// Deletes the copy at `target` if it is `source`'s at exactly `version` (one this
    /// work wrote for a write its primary has moved on from).
    async fn take_back(&self, source: &EntityRef, version: i64, target: &EntityRef) -> Result<()> {
        let Some(existing) = get_or_none(&self.store, target).await? else {
            return Ok(());
        };
        if copy_source(&existing) != Some((source.clone(), version)) {
            return Ok(());
        }
        let if_match = existing.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        delete_unless_changed(&self.store, target, if_match)
            .await
            .map(drop)
    }

    /// Whether a primary's record names the copy of `index` at `target`.
    async fn claims(&self, primary: &EntityRef, index: &str, target: &EntityRef) -> Result<bool> {
        Ok(match get_or_none(&self.store, primary).await? {
            Some(p) => IndexRecord::read(&p)?.is_some_and(|r| {
                r.targets.iter().any(
                    |t| matches!(t, Target::Copy { index: i, at, .. } if i == index && at == target),
                )
            }),
            None => false,
        })
    }

    /// Deletes the copy of `source` at `target` unless it is newer than `version` (any
    /// version when `None`: an orphan found by the audit).
    ///
    /// # Errors
    /// The store's errors; [`Error::Contention`].
    pub async fn delete_copy(
        &self,
        source: &EntityRef,
        version: Option<i64>,
        target: &EntityRef,
    ) -> Result<Applied> {
        let mut retry = self.retry.start();
        loop {
            retry.next(|| format!("copy {target} of {source}")).await?;
            let Some(existing) = get_or_none(&self.store, target).await? else {
                return Ok(Applied::Unchanged);
            };
            let Some((owner, existing_version)) = copy_source(&existing) else {
                return Ok(Applied::Unchanged);
            };
            if owner != *source || version.is_some_and(|v| existing_version > v) {
                return Ok(Applied::Unchanged);
            }
            let if_match = existing.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            match self
                .store
                .delete(
                    &target.table,
                    &target.partition_key,
                    &target.row_key,
                    if_match,
                )
                .await
            {
                Ok(()) => return Ok(Applied::Changed),
                Err(e) if e.kind() == ErrorKind::PreconditionFailed => continue,
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Applied::Unchanged),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Adds `source` to or removes it from the id list of `value`. With `force` (repair)
    /// the membership is set whatever the versions say.
    ///
    /// # Errors
    /// The store's errors; [`Error::NoBlobStore`]; [`Error::Contention`].
    #[allow(clippy::too_many_arguments)]
    pub async fn change_member(
        &self,
        source: &EntityRef,
        version: i64,
        index: &str,
        storage: MemberStorage,
        table: &str,
        value: &str,
        present: bool,
        force: bool,
    ) -> Result<Applied> {
        let change = Member {
            source: source.clone(),
            version,
            present,
        };
        let changed = match storage {
            MemberStorage::Table => {
                members::change_table_member(&self.store, table, index, value, &change, force)
                    .await?
            }
            MemberStorage::Blob => {
                let blobs = self.blobs.as_ref().ok_or_else(|| Error::NoBlobStore {
                    index: index.to_owned(),
                })?;
                members::change_blob_member(blobs, table, index, value, &change, force).await?
            }
            MemberStorage::Partition => {
                self.change_partition_member(source, index, value, present)
                    .await?
            }
        };
        Ok(if changed {
            Applied::Changed
        } else {
            Applied::Unchanged
        })
    }

    /// Repairs a partition-stored id list outside a primary's write (the audit).
    async fn change_partition_member(
        &self,
        source: &EntityRef,
        index: &str,
        value: &str,
        present: bool,
    ) -> Result<bool> {
        let mut retry = self.retry.start();
        loop {
            retry
                .next(|| format!("id list `{index}` value `{value}` of {source}"))
                .await?;
            let pages = read_partition_pages(
                &self.store,
                &source.table,
                &source.partition_key,
                index,
                value,
            )
            .await?;
            let ops = plan_partition_change(
                &pages,
                &source.partition_key,
                index,
                value,
                &source.row_key,
                present,
            )?;
            let Some(op) = ops.into_iter().next() else {
                return Ok(false);
            };
            match self.store.execute(&source.table, op).await {
                Ok(_) => return Ok(true),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed | ErrorKind::AlreadyExists
                    ) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Records how long after its primary's write (the version: microseconds since the epoch)
/// a copy appeared: `tablekit_copy_lag_seconds{index,table}`, the convergence lag of an
/// index of the primaries' table.
fn record_copy_lag(table: &str, index: &str, version: i64) {
    let lag_micros = chrono::Utc::now()
        .timestamp_micros()
        .saturating_sub(version)
        .max(0);
    #[allow(clippy::cast_precision_loss)]
    let lag = lag_micros as f64 / 1e6;
    metrics::histogram!(
        "tablekit_copy_lag_seconds",
        "index" => index.to_owned(),
        "table" => table.to_owned()
    )
    .record(lag);
}
