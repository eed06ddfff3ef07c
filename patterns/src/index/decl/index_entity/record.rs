//! What an index entity (an id list) stores: where its lists are kept, its target in a
//! primary's index record (a membership) and its operations of follow-up work (a member
//! added or removed), each a type of its own behind the shared
//! [`Target`](crate::index::record::Target) and
//! [`IndexOperation`](crate::index::operation::IndexOperation), stored under its tag as it
//! always was.

use serde::{Deserialize, Serialize};

use crate::index::operation::{IndexOperation, OperationType, Resource};
use crate::index::record::{EntityRef, Target, TargetType};

/// Where an id list (an index entity) is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MemberStorage {
    /// In the primary's partition, in its entity group transaction (option 2).
    Partition,
    /// In its own partition of a table, by the worker (option 3).
    Table,
    /// One blob per value, by the worker (option 1).
    Blob,
}

impl MemberStorage {
    /// The storage a declaration's `storage` setting names (`partition`, `table`,
    /// `blob`).
    pub fn from_setting(setting: &str) -> Option<Self> {
        match setting {
            "partition" => Some(MemberStorage::Partition),
            "table" => Some(MemberStorage::Table),
            "blob" => Some(MemberStorage::Blob),
            _ => None,
        }
    }

    /// The name the `storage` setting gives it.
    pub fn setting(self) -> &'static str {
        match self {
            MemberStorage::Partition => "partition",
            MemberStorage::Table => "table",
            MemberStorage::Blob => "blob",
        }
    }
}

/// The primary's membership in the id list of a value (an index entity).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MemberTarget {
    /// The index entity.
    pub index: String,
    /// Where the id list lives.
    pub storage: MemberStorage,
    /// The table of the id list (the primary's, for partition storage; the blob
    /// folder's name, for blobs).
    pub table: String,
    /// The indexed value.
    pub value: String,
}

/// Add `source` to the id list of `value`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddMember {
    /// The primary.
    pub source: EntityRef,
    /// The version of the primary's write.
    pub version: i64,
    /// The index entity.
    pub index: String,
    /// Where the list lives (table or blob).
    pub storage: MemberStorage,
    /// The list's table (or blob folder).
    pub table: String,
    /// The indexed value.
    pub value: String,
}

/// Remove `source` from the id list of `value`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveMember {
    /// The primary.
    pub source: EntityRef,
    /// The version of the primary's write.
    pub version: i64,
    /// The index entity.
    pub index: String,
    /// Where the list lives (table or blob).
    pub storage: MemberStorage,
    /// The list's table (or blob folder).
    pub table: String,
    /// The indexed value.
    pub value: String,
}

impl TargetType for MemberTarget {
    const TAG: &'static str = "member";
    const RANK: u16 = 2;

    fn name(&self) -> &str {
        &self.index
    }

    fn is_atomic(&self, _source: &EntityRef) -> bool {
        self.storage == MemberStorage::Partition
    }

    fn operation(
        &self,
        source: &EntityRef,
        version: i64,
        present: bool,
        _kind_property: &str,
    ) -> IndexOperation {
        let (source, index, storage, table, value) = (
            source.clone(),
            self.index.clone(),
            self.storage,
            self.table.clone(),
            self.value.clone(),
        );
        if present {
            AddMember {
                source,
                version,
                index,
                storage,
                table,
                value,
            }
            .into()
        } else {
            RemoveMember {
                source,
                version,
                index,
                storage,
                table,
                value,
            }
            .into()
        }
    }
}

impl From<MemberTarget> for Target {
    fn from(target: MemberTarget) -> Self {
        Target::new(target)
    }
}

impl OperationType for AddMember {
    const TAG: &'static str = "add_member";

    fn resource(&self) -> Resource<'_> {
        Resource::List(&self.index, &self.table, &self.value)
    }
}

impl From<AddMember> for IndexOperation {
    fn from(operation: AddMember) -> Self {
        IndexOperation::new(operation)
    }
}

impl OperationType for RemoveMember {
    const TAG: &'static str = "remove_member";

    fn resource(&self) -> Resource<'_> {
        Resource::List(&self.index, &self.table, &self.value)
    }
}

impl From<RemoveMember> for IndexOperation {
    fn from(operation: RemoveMember) -> Self {
        IndexOperation::new(operation)
    }
}
