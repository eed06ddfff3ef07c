//! What an index entity (an id list) stores: where its lists are kept, its target in a
//! primary's index record (a membership) and its operations of follow-up work (a member
//! added or removed). Held by the shared [`Target`](super::super::record::Target) and
//! [`IndexOperation`](super::super::operation::IndexOperation) as newtype variants, so
//! they are stored as they always were.

use serde::{Deserialize, Serialize};
use tablekit_core::typed::IndexEntityStorage;

use super::super::record::EntityRef;

/// Where an id list (an index entity) is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberStorage {
    /// In the primary's partition, in its entity group transaction (option 2).
    Partition,
    /// In its own partition of a table, by the worker (option 3).
    Table,
    /// One blob per value, by the worker (option 1).
    Blob,
}

impl From<IndexEntityStorage> for MemberStorage {
    fn from(storage: IndexEntityStorage) -> Self {
        match storage {
            IndexEntityStorage::Partition => MemberStorage::Partition,
            IndexEntityStorage::Table => MemberStorage::Table,
            IndexEntityStorage::Blob => MemberStorage::Blob,
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
