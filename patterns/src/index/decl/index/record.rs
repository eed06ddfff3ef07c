//! What a secondary index stores: its target in a primary's index record (a copy) and
//! its operations of follow-up work (a copy put, a copy deleted), each a type of its own
//! behind the shared [`Target`](crate::index::record::Target) and
//! [`IndexOperation`](crate::index::operation::IndexOperation), stored under its tag as it
//! always was.

use serde::{Deserialize, Serialize};

use crate::index::operation::{IndexOperation, OperationType, Resource};
use crate::index::record::{EntityRef, Target, TargetType};

/// A copy of the primary (a secondary index entry).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CopyTarget {
    /// The index.
    pub index: String,
    /// Where the copy lives.
    pub at: EntityRef,
    /// The properties the copy carries; all of them when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<Vec<String>>,
}

/// Write the copy of `source` (at `version`) for `index` at `target`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutCopy {
    /// The primary.
    pub source: EntityRef,
    /// The version of the primary's write.
    pub version: i64,
    /// The index.
    pub index: String,
    /// Where the copy lives.
    pub target: EntityRef,
    /// The properties the copy carries; all when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<Vec<String>>,
    /// The primary's kind property (marked `<kind>#<index>` on the copy).
    pub kind_property: String,
}

/// Delete the copy of `source` at `target`, unless a newer one is there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteCopy {
    /// The primary.
    pub source: EntityRef,
    /// The version of the primary's write that dropped the copy.
    pub version: i64,
    /// The index.
    pub index: String,
    /// Where the copy lives.
    pub target: EntityRef,
}

impl TargetType for CopyTarget {
    const TAG: &'static str = "copy";
    const RANK: u16 = 0;

    fn name(&self) -> &str {
        &self.index
    }

    fn same_slot(&self, other: &Self) -> bool {
        self.index == other.index && self.at == other.at
    }

    fn is_atomic(&self, source: &EntityRef) -> bool {
        self.at.table == source.table && self.at.partition_key == source.partition_key
    }

    fn carries(&self, property: &str) -> Option<&EntityRef> {
        let carried = self.properties.as_ref();
        (carried.is_none_or(|p| p.iter().any(|p| p == property))).then_some(&self.at)
    }

    fn operation(
        &self,
        source: &EntityRef,
        version: i64,
        present: bool,
        kind_property: &str,
    ) -> IndexOperation {
        let (source, index, target) = (source.clone(), self.index.clone(), self.at.clone());
        if present {
            PutCopy {
                source,
                version,
                index,
                target,
                properties: self.properties.clone(),
                kind_property: kind_property.to_owned(),
            }
            .into()
        } else {
            DeleteCopy {
                source,
                version,
                index,
                target,
            }
            .into()
        }
    }
}

impl From<CopyTarget> for Target {
    fn from(target: CopyTarget) -> Self {
        Target::new(target)
    }
}

impl OperationType for PutCopy {
    const TAG: &'static str = "put_copy";

    fn resource(&self) -> Resource<'_> {
        Resource::Entity(&self.target)
    }
}

impl From<PutCopy> for IndexOperation {
    fn from(operation: PutCopy) -> Self {
        IndexOperation::new(operation)
    }
}

impl OperationType for DeleteCopy {
    const TAG: &'static str = "delete_copy";

    fn resource(&self) -> Resource<'_> {
        Resource::Entity(&self.target)
    }
}

impl From<DeleteCopy> for IndexOperation {
    fn from(operation: DeleteCopy) -> Self {
        IndexOperation::new(operation)
    }
}
