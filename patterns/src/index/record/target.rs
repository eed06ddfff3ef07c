//! The targets a primary's index record lists: what it keeps in step with itself, each
//! the type of the declaration it belongs to, held as a newtype variant (internally
//! tagged by `t`, so a target is stored as it always was).

use serde::{Deserialize, Serialize};

use super::super::copies::record::CopyTarget;
use super::super::expiry::entry::{EXPIRY_INDEX, entry_at};
use super::super::links::record::DenormalizedTarget;
use super::super::members::record::{MemberStorage, MemberTarget};
use super::super::unique::record::UniqueTarget;
use super::EntityRef;

/// Something a primary keeps in step with itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Target {
    /// A copy of the primary (a secondary index entry).
    Copy(CopyTarget),
    /// A denormalised property of the primary, copied from another entity.
    Denormalized(DenormalizedTarget),
    /// The primary's membership in the id list of a value (an index entity).
    Member(MemberTarget),
    /// A unique value the primary holds (`#[unique]`).
    Unique(UniqueTarget),
}

impl Target {
    /// The entry of `source` in the expiry index, which expires at `at`
    /// ([`super::super::expiry`]): a copy without properties.
    pub fn expiry_entry(source: &EntityRef, at: chrono::DateTime<chrono::Utc>) -> Target {
        Target::Copy(CopyTarget {
            index: EXPIRY_INDEX.to_owned(),
            at: entry_at(source, at),
            properties: Some(Vec::new()),
        })
    }

    /// The index or index entity the target belongs to.
    pub fn index(&self) -> &str {
        match self {
            Target::Copy(CopyTarget { index, .. }) | Target::Member(MemberTarget { index, .. }) => {
                index
            }
            Target::Denormalized(DenormalizedTarget { property, .. }) => property,
            Target::Unique(UniqueTarget { name, .. }) => name,
        }
    }

    /// What the target occupies: two targets with the same slot are the same entry with
    /// other settings (a changed `properties` list, another source property), so a write
    /// updates it in place instead of adding one and dropping the other.
    pub fn same_slot(&self, other: &Target) -> bool {
        match (self, other) {
            (
                Target::Copy(CopyTarget {
                    index: a, at: x, ..
                }),
                Target::Copy(CopyTarget {
                    index: b, at: y, ..
                }),
            ) => a == b && x == y,
            (
                Target::Denormalized(DenormalizedTarget {
                    property: a,
                    source: x,
                    ..
                }),
                Target::Denormalized(DenormalizedTarget {
                    property: b,
                    source: y,
                    ..
                }),
            ) => a == b && x == y,
            (a, b) => a == b,
        }
    }

    /// Whether the target is written in the primary's entity group transaction.
    pub fn is_atomic(&self, source: &EntityRef) -> bool {
        match self {
            Target::Copy(CopyTarget { at, .. }) => {
                at.table == source.table && at.partition_key == source.partition_key
            }
            Target::Member(MemberTarget { storage, .. }) => *storage == MemberStorage::Partition,
            Target::Denormalized(DenormalizedTarget { source: from, .. }) => {
                from.table == source.table && from.partition_key == source.partition_key
            }
            // Reserved before the transaction, released after it.
            Target::Unique(..) => false,
        }
    }
}
