//! What a denormalised field stores: its target in a primary's index record (the field
//! and its source) and its operations of follow-up work (a dependent brought up to date,
//! a source's new dependents, a link removed), each a type of its own behind the shared
//! [`Target`](crate::index::record::Target) and
//! [`IndexOperation`](crate::index::operation::IndexOperation), stored under its tag as it
//! always was.

use serde::{Deserialize, Serialize};

use crate::index::operation::{IndexOperation, OperationType, Resource};
use crate::index::reclaim::Reclaim;
use crate::index::record::{EntityRef, Target, TargetType};

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

impl TargetType for DenormalizedTarget {
    const TAG: &'static str = "denormalized";
    const RANK: u16 = 1;

    fn name(&self) -> &str {
        &self.property
    }

    fn same_slot(&self, other: &Self) -> bool {
        self.property == other.property && self.source == other.source
    }

    fn is_atomic(&self, source: &EntityRef) -> bool {
        self.source.table == source.table && self.source.partition_key == source.partition_key
    }

    fn reclaim(&self, source: &EntityRef, reclaim: &mut Reclaim) {
        if !self.is_atomic(source) {
            reclaim.links.push((
                self.property.clone(),
                self.source.clone(),
                self.source_property.clone(),
            ));
        }
    }

    fn operation(
        &self,
        source: &EntityRef,
        _version: i64,
        present: bool,
        _kind_property: &str,
    ) -> IndexOperation {
        let (dependent, property, from, source_property) = (
            source.clone(),
            self.property.clone(),
            self.source.clone(),
            self.source_property.clone(),
        );
        if present {
            SyncDenormalized {
                dependent,
                property,
                source: from,
                source_property,
            }
            .into()
        } else {
            RemoveLink {
                dependent,
                property,
                source: from,
                source_property,
            }
            .into()
        }
    }
}

impl From<DenormalizedTarget> for Target {
    fn from(target: DenormalizedTarget) -> Self {
        Target::new(target)
    }
}

impl OperationType for SyncDenormalized {
    const TAG: &'static str = "sync_denormalized";

    fn resource(&self) -> Resource<'_> {
        Resource::Entity(&self.dependent)
    }
}

impl From<SyncDenormalized> for IndexOperation {
    fn from(operation: SyncDenormalized) -> Self {
        IndexOperation::new(operation)
    }
}

impl OperationType for SyncNewDependents {
    const TAG: &'static str = "sync_new_dependents";

    fn resource(&self) -> Resource<'_> {
        Resource::Entity(&self.source)
    }
}

impl From<SyncNewDependents> for IndexOperation {
    fn from(operation: SyncNewDependents) -> Self {
        IndexOperation::new(operation)
    }
}

impl OperationType for RemoveLink {
    const TAG: &'static str = "remove_link";

    fn resource(&self) -> Resource<'_> {
        Resource::Entity(&self.dependent)
    }
}

impl From<RemoveLink> for IndexOperation {
    fn from(operation: RemoveLink) -> Self {
        IndexOperation::new(operation)
    }
}
