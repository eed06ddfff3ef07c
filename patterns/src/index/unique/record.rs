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

/// The reservation of a unique value of `source` at `version`: released (the write
/// dropped the value, see [`super::release`]) or restored (the audit's repair: reserved
/// again for it unless another entity holds the value).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationChange {
    /// The primary.
    pub source: EntityRef,
    /// The version of the primary's write.
    pub version: i64,
    /// The unique value's name.
    pub name: String,
    /// The reservation.
    pub at: EntityRef,
}
