//! What a count stores: its target in a primary's index record (the primary counted
//! under one value, in one shard) and its one operation of follow-up work (that
//! membership brought in line with the primary). Each is a type of its own behind the
//! shared [`Target`] and [`IndexOperation`], stored under its tag.

use serde::{Deserialize, Serialize};

use crate::index::operation::{IndexOperation, OperationType, Resource};
use crate::index::record::{EntityRef, Target, TargetType};

/// The primary counted under one value of a `#[count]`: its member row in the shard
/// partition of that value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CountTarget {
    /// The count's name.
    pub count: String,
    /// The primary's member row (table: the counts' table; PartitionKey: the value's
    /// shard; RowKey: the primary's address).
    pub at: EntityRef,
}

impl TargetType for CountTarget {
    const TAG: &'static str = "count";
    const RANK: u16 = 4;

    fn name(&self) -> &str {
        &self.count
    }

    /// Kept by the worker, in its shard's partition.
    fn is_atomic(&self, _source: &EntityRef) -> bool {
        false
    }

    fn operation(
        &self,
        source: &EntityRef,
        version: i64,
        _present: bool,
        _kind_property: &str,
    ) -> IndexOperation {
        SyncCount {
            source: source.clone(),
            version,
            count: self.count.clone(),
            at: self.at.clone(),
        }
        .into()
    }
}

impl From<CountTarget> for Target {
    fn from(target: CountTarget) -> Self {
        Target::new(target)
    }
}

/// Bring the membership of `source` at `at` in line with the primary's current record:
/// counted when the record lists it, not counted otherwise. One operation for adding
/// and removing, since either reads the primary and does what its record says (see
/// [`super`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncCount {
    /// The primary.
    pub source: EntityRef,
    /// The version of the primary's write that produced the operation.
    pub version: i64,
    /// The count's name.
    pub count: String,
    /// The member row.
    pub at: EntityRef,
}

impl OperationType for SyncCount {
    const TAG: &'static str = "sync_count";

    fn resource(&self) -> Resource<'_> {
        Resource::Entity(&self.at)
    }
}

impl From<SyncCount> for IndexOperation {
    fn from(operation: SyncCount) -> Self {
        IndexOperation::new(operation)
    }
}
