//! The registered declarations, by role, and the dispatch of each stored target and
//! operation to its own declaration's type. Adding a declaration: its module implements
//! the traits of the roles it takes, and one line per role here names it (one line per
//! variant its targets and operations add to the shared enums).

use tablekit_core::TableStore;

use super::super::operation::IndexOperation;
use super::super::record::Target;
use super::super::upkeep::{Applies, Kept, Upkeep};
use super::super::{blobs, changes, copies, expiry, links, members, unique, wide};
use super::declaration::{ReadSteps, Role, WriteSteps};

/// Every declaration's write steps, in order: the expiry time first (it adds a target),
/// the blobs before the links (a blob field is offloaded before the links are put),
/// unique values reserved before a denormalised source is read, copies and id lists
/// before the dependents (which take the room the transaction has left), the change
/// event and the blob deletions, then a wide primary cut into chunks (every other step
/// sees it whole).
pub(crate) fn write_steps<S: TableStore + Clone + 'static>() -> [&'static dyn WriteSteps<S>; 8] {
    [
        &expiry::write::Expiry,
        &blobs::Blobs,
        &unique::write::Unique,
        &copies::write::Copies,
        &members::write::Lists,
        &links::write::Denormalized,
        &changes::Changes,
        &wide::write::Wide,
    ]
}

/// The declarations that act on the read path: expiry hides (an expired entity, a
/// tombstone), a wide primary's chunks are hidden and put back together (before blobs
/// restore what any chunk offloaded), blobs restore.
pub(crate) fn read_steps<S: TableStore + Clone + 'static>() -> [&'static dyn ReadSteps<S>; 3] {
    [&expiry::write::Expiry, &wide::write::Wide, &blobs::Blobs]
}

/// The declarations that keep entities naming no target (stored entities of their kind;
/// a failed write's steps).
pub(crate) fn upkeep<S: TableStore + Clone + 'static>() -> [&'static dyn Upkeep<S>; 6] {
    [
        &copies::write::Copies,
        &members::write::Lists,
        &links::write::Denormalized,
        &unique::write::Unique,
        &blobs::Blobs,
        &wide::write::Wide,
    ]
}

impl Role {
    /// The declaration whose operation this is, to read a refusal of it (`None`: the
    /// planner's own, the primary and the intent).
    pub(crate) fn steps<S: TableStore + Clone + 'static>(
        &self,
    ) -> Option<&'static dyn WriteSteps<S>> {
        match self {
            Role::NewCopy(..) | Role::KeptCopy | Role::DroppedCopy(_) => {
                Some(&copies::write::Copies)
            }
            Role::Page => Some(&members::write::Lists),
            Role::Guard | Role::Dependent => Some(&links::write::Denormalized),
            Role::Chunk => Some(&wide::write::Wide),
            Role::Primary | Role::Intent => None,
        }
    }
}

impl IndexOperation {
    /// The operation, as its declaration applies it.
    pub(crate) fn applies<S: TableStore + Clone + 'static>(&self) -> &dyn Applies<S> {
        match self {
            IndexOperation::PutCopy(op) => op,
            IndexOperation::DeleteCopy(op) => op,
            IndexOperation::AddMember(op) => op,
            IndexOperation::RemoveMember(op) => op,
            IndexOperation::SyncDenormalized(op) => op,
            IndexOperation::RemoveLink(op) => op,
            IndexOperation::SyncNewDependents(op) => op,
            IndexOperation::ReleaseUnique(op) => op,
            IndexOperation::ClaimUnique(op) => op,
            IndexOperation::Bury(op) => op,
        }
    }
}

impl Target {
    /// The target, as its declaration keeps it.
    pub(crate) fn kept<S: TableStore + Clone + 'static>(&self) -> &dyn Kept<S> {
        match self {
            Target::Copy(target) => target,
            Target::Denormalized(target) => target,
            Target::Member(target) => target,
            Target::Unique(target) => target,
        }
    }
}
