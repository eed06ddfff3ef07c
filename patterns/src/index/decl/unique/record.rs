//! What a unique value stores: its target in a primary's index record (the reservation
//! it holds) and its operations of follow-up work (a reservation released, or restored
//! by the audit's repair), each a type of its own behind the shared
//! [`Target`](crate::index::record::Target) and
//! [`IndexOperation`](crate::index::operation::IndexOperation), stored under its tag as it
//! always was.

use serde::{Deserialize, Serialize};

use crate::index::operation::{IndexOperation, OperationType, Resource};
use crate::index::reclaim::Reclaim;
use crate::index::record::{EntityRef, Target, TargetType};

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

impl TargetType for UniqueTarget {
    const TAG: &'static str = "unique";
    const RANK: u16 = 3;

    fn name(&self) -> &str {
        &self.name
    }

    /// Reserved before the transaction, released after it.
    fn is_atomic(&self, _source: &EntityRef) -> bool {
        false
    }

    fn reclaim(&self, _source: &EntityRef, reclaim: &mut Reclaim) {
        reclaim.reservations.push(self.at.clone());
    }

    fn operation(
        &self,
        source: &EntityRef,
        version: i64,
        present: bool,
        _kind_property: &str,
    ) -> IndexOperation {
        let (source, name, at) = (source.clone(), self.name.clone(), self.at.clone());
        if present {
            ClaimUnique {
                source,
                version,
                name,
                at,
            }
            .into()
        } else {
            ReleaseUnique {
                source,
                version,
                name,
                at,
            }
            .into()
        }
    }
}

impl From<UniqueTarget> for Target {
    fn from(target: UniqueTarget) -> Self {
        Target::new(target)
    }
}

impl OperationType for ReleaseUnique {
    const TAG: &'static str = "release_unique";

    fn resource(&self) -> Resource<'_> {
        Resource::Entity(&self.at)
    }
}

impl From<ReleaseUnique> for IndexOperation {
    fn from(operation: ReleaseUnique) -> Self {
        IndexOperation::new(operation)
    }
}

impl OperationType for ClaimUnique {
    const TAG: &'static str = "claim_unique";

    fn resource(&self) -> Resource<'_> {
        Resource::Entity(&self.at)
    }
}

impl From<ClaimUnique> for IndexOperation {
    fn from(operation: ClaimUnique) -> Self {
        IndexOperation::new(operation)
    }
}
