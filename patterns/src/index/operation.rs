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
//!
//! Each declaration applies its own operations (its `apply` hook, its methods of
//! `IndexApplier` in its folder: `super::copies::apply`, `super::links::apply`,
//! `super::members::apply`, `super::unique::apply`); `super::apply` dispatches.

use serde::{Deserialize, Serialize};
use tablekit_core::TableStore;
use tablekit_core::blob::BlobStore;

pub use super::copies::record::{DeleteCopy, PutCopy};
pub use super::links::record::{RemoveLink, SyncDenormalized, SyncNewDependents};
pub use super::members::record::{AddMember, RemoveMember};
pub use super::record::Bury;
use super::record::{CopyTarget, DenormalizedTarget, MemberTarget, UniqueTarget};
use super::record::{EntityRef, Target};
pub use super::unique::record::{ClaimUnique, ReleaseUnique};
use crate::consistency::{Envelope, Operation, RetryPolicy};
use crate::error::Result;

/// One step of follow-up work for an indexed write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum IndexOperation {
    /// Write the copy of a primary for an index.
    PutCopy(PutCopy),
    /// Delete the copy of a primary, unless a newer one is there.
    DeleteCopy(DeleteCopy),
    /// Add a primary to the id list of a value.
    AddMember(AddMember),
    /// Bring a dependent's copy of a source's property up to date (a denormalised field).
    SyncDenormalized(SyncDenormalized),
    /// Bring up to date the dependents of a source whose links its write did not read.
    SyncNewDependents(SyncNewDependents),
    /// Delete a denormalisation link that no longer applies, unless the dependent claims
    /// it again (it was written anew since).
    RemoveLink(RemoveLink),
    /// Release the reservation of a unique value a primary's write dropped (see
    /// [`super::unique::release`]).
    ReleaseUnique(ReleaseUnique),
    /// Restore the reservation of a unique value a primary lists (the audit's repair):
    /// reserved again for it unless another entity holds the value.
    ClaimUnique(ClaimUnique),
    /// Remove the tombstone a delete left (see [`super::record::TOMBSTONE_KIND`]), after
    /// its grace period: unless a later write replaced it.
    Bury(Bury),
    /// Remove a primary from the id list of a value.
    RemoveMember(RemoveMember),
}

/// What one operation writes: operations on one resource are applied in order, those on
/// different resources at once.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Resource<'a> {
    /// One entity (a copy's slot, a reservation, a tombstone, a dependent of links:
    /// its links' operations write it, each conditional on its ETag).
    Entity(&'a EntityRef),
    /// The id list of one value.
    List(&'a str, &'a str, &'a str),
}

impl IndexOperation {
    /// The resource this operation writes.
    pub(crate) fn resource(&self) -> Resource<'_> {
        match self {
            IndexOperation::PutCopy(PutCopy { target, .. })
            | IndexOperation::DeleteCopy(DeleteCopy { target, .. }) => Resource::Entity(target),
            IndexOperation::ReleaseUnique(ReleaseUnique { at, .. })
            | IndexOperation::ClaimUnique(ClaimUnique { at, .. }) => Resource::Entity(at),
            IndexOperation::Bury(Bury { source, .. }) => Resource::Entity(source),
            IndexOperation::SyncDenormalized(SyncDenormalized { dependent, .. })
            | IndexOperation::RemoveLink(RemoveLink { dependent, .. }) => {
                Resource::Entity(dependent)
            }
            IndexOperation::SyncNewDependents(SyncNewDependents { source, .. }) => {
                Resource::Entity(source)
            }
            IndexOperation::AddMember(AddMember {
                index,
                table,
                value,
                ..
            })
            | IndexOperation::RemoveMember(RemoveMember {
                index,
                table,
                value,
                ..
            }) => Resource::List(index, table, value),
        }
    }

    /// The burial of the tombstone a delete of `source` at `version` leaves: delayed
    /// work the relay publishes once `grace` has passed.
    ///
    /// # Errors
    /// [`Error::Encode`](crate::Error::Encode) when it does not serialise.
    pub fn burial(
        source: &EntityRef,
        version: i64,
        grace: std::time::Duration,
    ) -> Result<Envelope> {
        let due = tablekit_core::clock::now()
            + chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
        let bury = IndexOperation::Bury(Bury {
            source: source.clone(),
            version,
        });
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
                Target::Copy(CopyTarget {
                    index,
                    at,
                    properties,
                }),
                true,
            ) => IndexOperation::PutCopy(PutCopy {
                source: source.clone(),
                version,
                index: index.clone(),
                target: at.clone(),
                properties: properties.clone(),
                kind_property: kind_property.to_owned(),
            }),
            (Target::Copy(CopyTarget { index, at, .. }), false) => {
                IndexOperation::DeleteCopy(DeleteCopy {
                    source: source.clone(),
                    version,
                    index: index.clone(),
                    target: at.clone(),
                })
            }
            (
                Target::Denormalized(DenormalizedTarget {
                    property,
                    source: from,
                    source_property,
                }),
                true,
            ) => IndexOperation::SyncDenormalized(SyncDenormalized {
                dependent: source.clone(),
                property: property.clone(),
                source: from.clone(),
                source_property: source_property.clone(),
            }),
            (
                Target::Denormalized(DenormalizedTarget {
                    property,
                    source: from,
                    source_property,
                }),
                false,
            ) => IndexOperation::RemoveLink(RemoveLink {
                dependent: source.clone(),
                property: property.clone(),
                source: from.clone(),
                source_property: source_property.clone(),
            }),
            (Target::Unique(UniqueTarget { name, at }), present) => {
                let (source, name, at) = (source.clone(), name.clone(), at.clone());
                if present {
                    IndexOperation::ClaimUnique(ClaimUnique {
                        source,
                        version,
                        name,
                        at,
                    })
                } else {
                    IndexOperation::ReleaseUnique(ReleaseUnique {
                        source,
                        version,
                        name,
                        at,
                    })
                }
            }
            (
                Target::Member(MemberTarget {
                    index,
                    storage,
                    table,
                    value,
                }),
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
                    IndexOperation::AddMember(AddMember {
                        source,
                        version,
                        index,
                        storage,
                        table,
                        value,
                    })
                } else {
                    IndexOperation::RemoveMember(RemoveMember {
                        source,
                        version,
                        index,
                        storage,
                        table,
                        value,
                    })
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
    /// The steps: those on one target applied in order, the others at once.
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
    /// [`Error::Encode`](crate::Error::Encode) when the work does not serialise.
    pub fn envelope(&self) -> Result<Envelope> {
        let id = uuid::Uuid::parse_str(&self.id).unwrap_or_else(|_| tablekit_core::random::uuid());
        Envelope::with_id(id, self)
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
    pub(crate) store: S,
    pub(crate) blobs: Option<BlobStore>,
    pub(crate) retry: RetryPolicy,
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

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The blob store, if any.
    pub fn blobs(&self) -> Option<&BlobStore> {
        self.blobs.as_ref()
    }
}
