//! The targets a primary's index record lists: what it keeps in step with itself.

use serde::{Deserialize, Serialize};
use tablekit_core::typed::IndexEntityStorage;

use super::super::expiry::entry::{EXPIRY_INDEX, entry_at};
use super::EntityRef;

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

/// Something a primary keeps in step with itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Target {
    /// A copy of the primary (a secondary index entry).
    Copy {
        /// The index.
        index: String,
        /// Where the copy lives.
        at: EntityRef,
        /// The properties the copy carries; all of them when `None`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        properties: Option<Vec<String>>,
    },
    /// A denormalised property of the primary, copied from another entity (the source);
    /// a link entity beside the source names the primary, so the source's writes reach it.
    Denormalized {
        /// The primary's property holding the copy.
        property: String,
        /// The entity the value comes from.
        source: EntityRef,
        /// The source's property.
        source_property: String,
    },
    /// The primary's membership in the id list of a value (an index entity).
    Member {
        /// The index entity.
        index: String,
        /// Where the id list lives.
        storage: MemberStorage,
        /// The table of the id list (the primary's, for partition storage; the blob
        /// folder's name, for blobs).
        table: String,
        /// The indexed value.
        value: String,
    },
    /// A unique value the primary holds (`#[unique]`): its reservation, which names the
    /// primary as its holder.
    Unique {
        /// The unique value's name.
        name: String,
        /// The reservation: PartitionKey the value, RowKey the name.
        at: EntityRef,
    },
}

impl Target {
    /// The entry of `source` in the expiry index, which expires at `at`
    /// ([`super::super::expiry`]): a copy without properties.
    pub fn expiry_entry(source: &EntityRef, at: chrono::DateTime<chrono::Utc>) -> Target {
        Target::Copy {
            index: EXPIRY_INDEX.to_owned(),
            at: entry_at(source, at),
            properties: Some(Vec::new()),
        }
    }

    /// The index or index entity the target belongs to.
    pub fn index(&self) -> &str {
        match self {
            Target::Copy { index, .. } | Target::Member { index, .. } => index,
            Target::Denormalized { property, .. } => property,
            Target::Unique { name, .. } => name,
        }
    }

    /// What the target occupies: two targets with the same slot are the same entry with
    /// other settings (a changed `properties` list, another source property), so a write
    /// updates it in place instead of adding one and dropping the other.
    pub fn same_slot(&self, other: &Target) -> bool {
        match (self, other) {
            (
                Target::Copy {
                    index: a, at: x, ..
                },
                Target::Copy {
                    index: b, at: y, ..
                },
            ) => a == b && x == y,
            (
                Target::Denormalized {
                    property: a,
                    source: x,
                    ..
                },
                Target::Denormalized {
                    property: b,
                    source: y,
                    ..
                },
            ) => a == b && x == y,
            (a, b) => a == b,
        }
    }

    /// Whether the target is written in the primary's entity group transaction.
    pub fn is_atomic(&self, source: &EntityRef) -> bool {
        match self {
            Target::Copy { at, .. } => {
                at.table == source.table && at.partition_key == source.partition_key
            }
            Target::Member { storage, .. } => *storage == MemberStorage::Partition,
            Target::Denormalized { source: from, .. } => {
                from.table == source.table && from.partition_key == source.partition_key
            }
            // Reserved before the transaction, released after it.
            Target::Unique { .. } => false,
        }
    }
}
