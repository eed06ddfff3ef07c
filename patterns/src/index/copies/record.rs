//! What a secondary index stores: its target in a primary's index record (a copy) and
//! its operations of follow-up work (a copy put, a copy deleted). Held by the shared
//! [`Target`](super::super::record::Target) and
//! [`IndexOperation`](super::super::operation::IndexOperation) as newtype variants, so
//! they are stored as they always were.

use serde::{Deserialize, Serialize};

use super::super::record::EntityRef;

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
