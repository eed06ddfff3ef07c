//! What tablekit keeps beside an application's properties to maintain indexes:
//!
//! - on a primary, `TablekitVersion` (a version that grows with every indexed write) and
//!   `TablekitTargets` (JSON: every copy and id-list membership the primary has at that
//!   version), so a worker, the audit and the repair know what should exist without the
//!   entity type;
//! - on a copy, `TablekitSource` (the primary's table and keys) and the `TablekitVersion`
//!   of the primary it was made from, so a late or repeated message never replaces a newer
//!   copy with an older one; its kind property reads `<kind>#<index>`, so queries of the
//!   primary's kind never return copies.
//!
//! Split by concern: the [`Target`]s a record lists (`target`), tombstones (`tombstone`),
//! copies (`copy`), and a type's [`Layout`] (`layout`); the record itself and versions
//! here.

mod copy;
mod layout;
mod target;
mod tombstone;

use std::collections::BTreeSet;

use tablekit_core::{Entity, Value};

use crate::error::{Error, Result};

pub use crate::index::decl::denormalized::layout::DenormalizedLayout;
pub use crate::index::decl::denormalized::record::DenormalizedTarget;
pub use crate::index::decl::index::layout::IndexLayout;
pub use crate::index::decl::index::record::CopyTarget;
pub use crate::index::decl::index_entity::layout::MemberLayout;
pub use crate::index::decl::index_entity::record::{MemberStorage, MemberTarget};
pub use crate::index::decl::unique::record::UniqueTarget;
pub use copy::{as_primary, copy_of, copy_source, same_content};
pub use layout::{DeclaredLayout, ExpiryLayout, Layout};
pub(crate) use layout::{Elsewhere, LaidOut, LaysOut, Primary, lays_out};
pub use target::Target;
pub(crate) use target::TargetType;
pub use tombstone::{Bury, TOMBSTONE_KIND, is_tombstone, tombstone};

/// The property holding the version of a primary or of the primary a copy was made from.
pub use crate::consistency::commit::VERSION_PROPERTY;
/// The property of a primary listing its copies and id-list memberships (JSON).
pub const TARGETS_PROPERTY: &str = "TablekitTargets";
/// The property of a copy naming its primary (JSON).
pub const SOURCE_PROPERTY: &str = "TablekitSource";
pub use crate::consistency::outbox::{MARKER_PROPERTY, OUTBOX_KIND};
/// The marker of an id-list page (an index entity).
pub const INDEX_ENTITY_KIND: &str = "TablekitIndexEntity";

/// Whether a property is tablekit's, not the application's.
pub fn is_hidden(name: &str) -> bool {
    matches!(name, VERSION_PROPERTY | TARGETS_PROPERTY | SOURCE_PROPERTY)
}

pub use crate::address::EntityRef;

/// A primary's index state: its version and its targets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexRecord {
    /// The version of the write that stored the primary.
    pub version: i64,
    /// The copies and memberships the primary has at that version.
    pub targets: BTreeSet<Target>,
}

impl IndexRecord {
    /// The record of a stored entity; `None` when the entity is not a primary written
    /// through an indexed table.
    ///
    /// # Errors
    /// [`Error::Malformed`] when the record does not read.
    pub fn read(entity: &Entity) -> Result<Option<Self>> {
        let Some(targets) = entity.properties.get(TARGETS_PROPERTY) else {
            return Ok(None);
        };
        let what = || {
            format!(
                "index record of {}/{}",
                entity.partition_key, entity.row_key
            )
        };
        let Value::String(json) = targets else {
            return Err(Error::malformed(what(), "TablekitTargets is not a string"));
        };
        let targets = serde_json::from_str(json).map_err(|e| Error::malformed(what(), e))?;
        let version = version_of(entity).ok_or_else(|| {
            Error::malformed(what(), "TablekitVersion is missing or not an Int64")
        })?;
        Ok(Some(IndexRecord { version, targets }))
    }

    /// Writes the record onto an entity.
    ///
    /// # Errors
    /// [`Error::Encode`] when the targets do not encode.
    pub fn write(&self, entity: &mut Entity) -> Result<()> {
        let json = crate::error::json("an index record", &self.targets)?;
        entity
            .properties
            .insert(TARGETS_PROPERTY.to_owned(), Value::String(json));
        entity
            .properties
            .insert(VERSION_PROPERTY.to_owned(), Value::Int64(self.version));
        Ok(())
    }
}

/// The `TablekitVersion` of an entity.
pub fn version_of(entity: &Entity) -> Option<i64> {
    match entity.properties.get(VERSION_PROPERTY) {
        Some(Value::Int64(v)) => Some(*v),
        Some(Value::Int32(v)) => Some(i64::from(*v)),
        _ => None,
    }
}

/// The version of the next write of a primary: microseconds since the epoch, and always
/// above the previous version, so versions grow with every write of a primary — also
/// across a delete and a new insert with the same keys, as far as the writers' clocks
/// agree.
pub fn next_version(previous: Option<i64>) -> i64 {
    let now = tablekit_core::clock::now().timestamp_micros();
    previous.map_or(now, |p| now.max(p.saturating_add(1)))
}

/// The version of a delete of a primary stored at `previous`: as for any write (the
/// clock, above `previous`). A write planned before the delete that lands after it
/// conflicts with the delete's tombstone and is planned again above it, so the clock
/// cannot put a delete above a later write; and the stamp stays the attempt's own (two
/// concurrent deletes of one version stamp different tombstones, so a delete whose
/// answer was lost is not taken for another's).
pub fn delete_version(previous: Option<i64>) -> i64 {
    next_version(previous)
}
