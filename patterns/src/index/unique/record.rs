//! What a unique value stores: its target in a primary's index record (the reservation
//! it holds) and its operations of follow-up work (a reservation released, or restored
//! by the audit's repair). Held by the shared [`Target`](super::super::record::Target)
//! and [`IndexOperation`](super::super::operation::IndexOperation) as newtype variants,
//! so they are stored as they always were.

use serde::{Deserialize, Serialize};

use super::super::record::EntityRef;

/// A unique value the primary holds (`#[unique]`): its reservation, which names the
/// primary as its holder.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UniqueTarget {
    /// The unique value's name.
    pub name: String,
    /// The reservation: PartitionKey the value, RowKey the name.
    pub at: EntityRef,
}

/// Release the reservation of a unique value `source`'s write at `version` dropped
/// (see [`super::release`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseUnique {
    /// The primary.
    pub source: EntityRef,
    /// The version of the primary's write.
    pub version: i64,
    /// The unique value's name.
    pub name: String,
    /// The reservation.
    pub at: EntityRef,
}

/// Restore the reservation of a unique value `source` lists (the audit's repair):
/// reserved again for it unless another entity holds the value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimUnique {
    /// The primary.
    pub source: EntityRef,
    /// The version of the primary's write.
    pub version: i64,
    /// The unique value's name.
    pub name: String,
    /// The reservation.
    pub at: EntityRef,
}
