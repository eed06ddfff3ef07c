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
//! - id lists are last-writer-wins sets keyed by primary (see [`crate::index::decl::index_entity`]).
//!
//! So a message delivered twice, late, out of order, or again after a crash between two
//! steps converges to the state of the primary's last write.
//!
//! Each declaration applies its own operations (its `apply` hook, its methods of
//! `IndexApplier` in its folder: `crate::index::decl::index::apply`, `crate::index::decl::denormalized::apply`,
//! `crate::index::decl::index_entity::apply`, `crate::index::decl::unique::apply`); `super::apply` dispatches.

use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tablekit_core::TableStore;
use tablekit_core::blob::BlobStore;

pub use super::record::Bury;
use super::record::{EntityRef, Target};
use super::registry::open::{self, Codec, TagKey};
use crate::consistency::{Envelope, Operation, RetryPolicy};
use crate::error::Result;
pub use crate::index::decl::denormalized::record::{
    RemoveLink, SyncDenormalized, SyncNewDependents,
};
pub use crate::index::decl::index::record::{DeleteCopy, PutCopy};
pub use crate::index::decl::index_entity::record::{AddMember, RemoveMember};
pub use crate::index::decl::unique::record::{ClaimUnique, ReleaseUnique};

/// A declaration's operation type: one step of follow-up work it hands the worker.
pub(crate) trait OperationType:
    Clone + PartialEq + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// The tag it is stored under (`op`).
    const TAG: &'static str;

    /// The resource it writes.
    fn resource(&self) -> Resource<'_>;
}

/// The object-safe side of [`OperationType`].
trait AnyOperation: Any + Debug + Send + Sync {
    fn tag(&self) -> &'static str;
    fn any(&self) -> &dyn Any;
    fn fields(&self) -> &dyn erased_serde::Serialize;
    fn eq_any(&self, other: &dyn AnyOperation) -> bool;
    fn resource(&self) -> Resource<'_>;
}

impl<T: OperationType> AnyOperation for T {
    fn tag(&self) -> &'static str {
        T::TAG
    }

    fn any(&self) -> &dyn Any {
        self
    }

    fn fields(&self) -> &dyn erased_serde::Serialize {
        self
    }

    fn eq_any(&self, other: &dyn AnyOperation) -> bool {
        other.any().downcast_ref::<T>() == Some(self)
    }

    fn resource(&self) -> Resource<'_> {
        OperationType::resource(self)
    }
}

/// One step of follow-up work for an indexed write: an operation of one of the
/// declarations (a copy put, a member added, a reservation released, …) or the
/// planner's own ([`Bury`]). Built from the operation's type (`PutCopy::into`), read
/// back as one with [`IndexOperation::get`]; stored internally tagged by `op`.
#[derive(Clone)]
pub struct IndexOperation(Arc<dyn AnyOperation>);

impl IndexOperation {
    /// The operation, of a declaration's operation type.
    pub(crate) fn new<T: OperationType>(operation: T) -> Self {
        IndexOperation(Arc::new(operation))
    }

    /// The operation as a `T`, if it is one.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.0.any().downcast_ref()
    }

    /// The tag the operation is stored under (`put_copy`, `add_member`, …).
    pub fn tag(&self) -> &'static str {
        self.0.tag()
    }

    /// The resource this operation writes.
    pub(crate) fn resource(&self) -> Resource<'_> {
        self.0.resource()
    }
}

impl Debug for IndexOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for IndexOperation {
    fn eq(&self, other: &Self) -> bool {
        self.0.eq_any(other.0.as_ref())
    }
}

impl Eq for IndexOperation {}

impl Serialize for IndexOperation {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        open::serialize(TagKey::Operation, self.0.tag(), self.0.fields(), serializer)
    }
}

impl<'de> Deserialize<'de> for IndexOperation {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let (tag, fields) = open::deserialize(TagKey::Operation, deserializer)?;
        open::decode_by_tag(
            "operation",
            &tag,
            fields,
            inventory::iter::<Codec<IndexOperation>>.into_iter(),
        )
        .map_err(serde::de::Error::custom)
    }
}

inventory::collect!(Codec<IndexOperation>);

// The planner's own stored operation: a tombstone's burial.
inventory::submit! { IndexOperation::codec::<Bury>("tombstone") }

impl IndexOperation {
    /// The codec of the operation type `T` of the declaration `attribute`, for its folder
    /// to submit (`inventory::submit! { IndexOperation::codec::<T>(ATTRIBUTE) }`).
    pub(crate) const fn codec<T: OperationType>(attribute: &'static str) -> Codec<IndexOperation>
    where
        IndexOperation: From<T>,
    {
        Codec {
            attribute,
            tag: T::TAG,
            decode: open::decode::<T, IndexOperation>,
        }
    }
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
        let bury = IndexOperation::new(Bury {
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
        target.operation(source, version, present, kind_property)
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
#[non_exhaustive]
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
