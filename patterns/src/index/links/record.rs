//! What a denormalised field stores: its target in a primary's index record (the field
//! and its source) and its operations of follow-up work (a dependent brought up to date,
//! a source's new dependents, a link removed). Held by the shared
//! [`Target`](super::super::record::Target) and
//! [`IndexOperation`](super::super::operation::IndexOperation) as newtype variants, so
//! they are stored as they always were.

use serde::{Deserialize, Serialize};

use super::super::record::EntityRef;

/// A denormalised property of the primary, copied from another entity (the source); a
/// link entity beside the source names the primary, so the source's writes reach it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DenormalizedTarget {
    /// The primary's property holding the copy.
    pub property: String,
    /// The entity the value comes from.
    pub source: EntityRef,
    /// The source's property.
    pub source_property: String,
}

/// Bring `dependent`'s copy of `source`'s property up to date (a denormalised field).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncDenormalized {
    /// The entity holding the copy.
    pub dependent: EntityRef,
    /// Its property.
    pub property: String,
    /// The entity the value comes from.
    pub source: EntityRef,
    /// The source's property.
    pub source_property: String,
}

/// Delete a denormalisation link that no longer applies, unless the dependent claims
/// it again (it was written anew since).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveLink {
    /// The entity holding the copy.
    pub dependent: EntityRef,
    /// Its property.
    pub property: String,
    /// The entity the value comes from.
    pub source: EntityRef,
    /// The source's property.
    pub source_property: String,
}

/// Bring up to date the dependents of `source` whose links its write did not read: a
/// write of a source reads its links before its commit, and a dependent may put its link
/// after that read and read the source before the commit (so it copies the old value).
/// Applied after the commit, this reads the links again: a link put before this read is
/// synced here, one put after it belongs to a dependent that reads the committed value
/// itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncNewDependents {
    /// The source.
    pub source: EntityRef,
    /// The source's properties the write changed (a link copying another one needs
    /// nothing).
    pub properties: Vec<String>,
    /// The RowKeys of the links the write read before its commit (their dependents have
    /// operations of their own).
    pub seen: Vec<String>,
}
