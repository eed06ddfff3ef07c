//! Tombstones: what a delete of a primary leaves in its place for a grace period.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use tablekit_core::typed::EXPIRES_PROPERTY;
use tablekit_core::{Entity, Value};

use super::super::operation::{IndexOperation, OperationType, Resource};
use super::{EntityRef, IndexRecord, MARKER_PROPERTY};
use crate::error::Result;

/// The kind of a tombstone: what a delete of a primary leaves in its place for a grace
/// period ([`crate::consistency::Engine::tombstone_grace`]), so that a write planned
/// before the delete and landing after it conflicts with something and is planned again
/// above the delete's version (an insert can only require its row absent, and a delete
/// that left nothing would let it land under an older version than the delete's).
///
/// A tombstone is hidden from every read: its kind is this marker (queries of a type's
/// kind skip it), it carries an expiry time long past (typed reads leave expired
/// entities out), and its record lists no targets (the worker and the audit see a
/// primary that holds nothing, at the delete's version). A write replaces it under its
/// ETag as it would an expired entity; a delete finds nothing. The delete buries it
/// after the grace period with a delayed [`Bury`].
pub const TOMBSTONE_KIND: &str = "TablekitTombstone";

/// The tombstone a delete at `version` leaves at `source` (see [`TOMBSTONE_KIND`]);
/// `kind_property` is the property the primary's type records its kind in.
///
/// # Errors
/// [`Error::Encode`](crate::Error::Encode) when the record does not encode.
pub fn tombstone(source: &EntityRef, version: i64, kind_property: &str) -> Result<Entity> {
    let mut entity = Entity::new(source.partition_key.clone(), source.row_key.clone());
    for property in [MARKER_PROPERTY, kind_property] {
        if !property.is_empty() {
            entity.properties.insert(
                property.to_owned(),
                Value::String(TOMBSTONE_KIND.to_owned()),
            );
        }
    }
    // Expired for every clock a reader may run on.
    entity.properties.insert(
        EXPIRES_PROPERTY.to_owned(),
        Value::DateTime(chrono::DateTime::UNIX_EPOCH),
    );
    IndexRecord {
        version,
        targets: BTreeSet::new(),
    }
    .write(&mut entity)?;
    Ok(entity)
}

/// Whether a stored entity is a tombstone (see [`TOMBSTONE_KIND`]).
pub fn is_tombstone(entity: &Entity) -> bool {
    matches!(entity.properties.get(MARKER_PROPERTY), Some(Value::String(k)) if k == TOMBSTONE_KIND)
}

/// Remove the tombstone a delete of `source` at `version` left (see [`TOMBSTONE_KIND`]),
/// after its grace period: unless a later write replaced it. The planner's own
/// operation of follow-up work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bury {
    /// The deleted primary.
    pub source: EntityRef,
    /// The version of the delete.
    pub version: i64,
}

impl OperationType for Bury {
    const TAG: &'static str = "bury";

    fn resource(&self) -> Resource<'_> {
        Resource::Entity(&self.source)
    }
}

impl From<Bury> for IndexOperation {
    fn from(operation: Bury) -> Self {
        IndexOperation::new(operation)
    }
}
