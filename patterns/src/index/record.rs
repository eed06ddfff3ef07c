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

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tablekit_core::limits::KeyKind;
use tablekit_core::typed::{
    EXPIRES_PROPERTY, ExpiryMeta, IndexEntityStorage, IndexPlacement, KeyTemplate, Schema,
};
use tablekit_core::{Entity, Value};

use super::expiry::entry::{EXPIRY_INDEX, entry_at, expiry_table};
use crate::error::{Error, Result};

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
    /// ([`super::expiry`]): a copy without properties.
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
        let json = Error::json("an index record", &self.targets)?;
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
/// after the grace period with a delayed [`super::IndexOperation::Bury`].
pub const TOMBSTONE_KIND: &str = "TablekitTombstone";

/// The tombstone a delete at `version` leaves at `source` (see [`TOMBSTONE_KIND`]);
/// `kind_property` is the property the primary's type records its kind in.
///
/// # Errors
/// [`Error::Encode`] when the record does not encode.
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

/// The primary a copy was made from, and its version.
pub fn copy_source(entity: &Entity) -> Option<(EntityRef, i64)> {
    let Some(Value::String(json)) = entity.properties.get(SOURCE_PROPERTY) else {
        return None;
    };
    let source = serde_json::from_str(json).ok()?;
    Some((source, version_of(entity)?))
}

/// The copy of a primary for an index: the primary's application properties (or the
/// declared subset), its kind marked `<kind>#<index>`, its source and version.
pub fn copy_of(
    primary: &Entity,
    source: &EntityRef,
    version: i64,
    index: &str,
    at: &EntityRef,
    properties: Option<&[String]>,
    kind_property: &str,
) -> Result<Entity> {
    let mut copy = Entity::new(at.partition_key.clone(), at.row_key.clone());
    for (name, value) in &primary.properties {
        if is_hidden(name) {
            continue;
        }
        let keep = name == kind_property
            || name == EXPIRES_PROPERTY
            || properties.is_none_or(|subset| subset.iter().any(|p| p == name));
        if !keep {
            continue;
        }
        let value = match value {
            Value::String(kind) if name == kind_property => {
                Value::String(format!("{kind}#{index}"))
            }
            other => other.clone(),
        };
        copy.properties.insert(name.clone(), value);
    }
    copy.properties.insert(
        SOURCE_PROPERTY.to_owned(),
        Value::String(Error::json("a copy's source", source)?),
    );
    copy.properties
        .insert(VERSION_PROPERTY.to_owned(), Value::Int64(version));
    Ok(copy)
}

/// A copy as its primary's entity type reads it: the kind marker undone, tablekit's
/// properties removed.
pub fn as_primary(mut copy: Entity, kind_property: &str) -> Entity {
    if let Some(Value::String(kind)) = copy.properties.get_mut(kind_property)
        && let Some(at) = kind.rfind('#')
    {
        kind.truncate(at);
    }
    copy.properties.retain(|name, _| !is_hidden(name));
    copy
}

/// Whether two entities hold the same application properties (copies are compared with
/// what they should be; timestamps and ETags are ignored).
pub fn same_content(a: &Entity, b: &Entity) -> bool {
    a.partition_key == b.partition_key
        && a.row_key == b.row_key
        && a.properties.len() == b.properties.len()
        && a.properties
            .iter()
            .all(|(name, value)| b.properties.get(name) == Some(value))
}

/// One declared secondary index, with its templates parsed.
#[derive(Clone, Debug)]
pub struct IndexLayout {
    /// The name.
    pub name: String,
    /// The copies' table; the primary's when `None`.
    pub table: Option<String>,
    /// The copies' PartitionKey template.
    pub partition_key: KeyTemplate,
    /// The copies' RowKey template.
    pub row_key: KeyTemplate,
    /// The properties a copy carries.
    pub properties: Option<Vec<String>>,
    /// Whether some entities have no copy.
    pub sparse: bool,
}

/// One declared index entity, with its template parsed.
#[derive(Clone, Debug)]
pub struct MemberLayout {
    /// The name.
    pub name: String,
    /// The template of the indexed value.
    pub key: KeyTemplate,
    /// The id lists' table; the primary's when `None`.
    pub table: Option<String>,
    /// Where the id lists live.
    pub storage: MemberStorage,
}

/// One declared denormalised field, with its templates parsed.
#[derive(Clone, Debug)]
pub struct DenormalizedLayout {
    /// The property holding the copy.
    pub property: String,
    /// The kind of the source.
    pub from_kind: String,
    /// The source's table; the primary's when `None`.
    pub table: Option<String>,
    /// The source's PartitionKey, from the primary's fields.
    pub partition_key: KeyTemplate,
    /// The source's RowKey, from the primary's fields.
    pub row_key: KeyTemplate,
    /// The source's property.
    pub source_property: String,
}

/// One declared unique value, with its template parsed.
#[derive(Clone, Debug)]
pub struct UniqueLayout {
    /// The name.
    pub name: String,
    /// The template of the value (PartitionKey rules).
    pub key: KeyTemplate,
    /// The reservation table; `<primaries' table>Unique` when `None`.
    pub table: Option<String>,
}

impl UniqueLayout {
    /// The reservation table for primaries in `table`.
    pub fn table_for(&self, table: &str) -> String {
        self.table
            .clone()
            .unwrap_or_else(|| format!("{table}{RESERVATION_TABLE_SUFFIX}"))
    }
}

/// What names a type's default reservation table after its primaries' table.
pub const RESERVATION_TABLE_SUFFIX: &str = "Unique";

/// How a type's entities expire, as the layout keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpiryLayout {
    /// Each write sets the expiry this many seconds after it.
    Ttl(u64),
    /// A field says when (the expiry is stored beside it, in `TablekitExpires`).
    Field,
}

impl From<ExpiryMeta> for ExpiryLayout {
    fn from(meta: ExpiryMeta) -> Self {
        match meta {
            ExpiryMeta::Ttl(seconds) => ExpiryLayout::Ttl(seconds),
            ExpiryMeta::Field(_) => ExpiryLayout::Field,
        }
    }
}

/// The indexes and index entities of an entity type: what its primaries keep in step.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The primaries' table.
    pub table: String,
    /// The kind of the primaries.
    pub kind: String,
    /// The property holding the kind.
    pub kind_property: String,
    /// The secondary indexes.
    pub indexes: Vec<IndexLayout>,
    /// The index entities.
    pub members: Vec<MemberLayout>,
    /// The denormalised fields.
    pub denormalized: Vec<DenormalizedLayout>,
    /// The unique values.
    pub uniques: Vec<UniqueLayout>,
    /// How the primaries expire, if they do: each has an entry in the expiry index
    /// ([`super::expiry`]).
    pub expiry: Option<ExpiryLayout>,
    /// The queue the type's change events go to, if it publishes them.
    pub changes: Option<String>,
}

impl Layout {
    /// The layout a derived entity type declares.
    pub fn of(schema: &Schema) -> Self {
        Layout {
            table: schema.table.to_owned(),
            kind: schema.kind.to_owned(),
            kind_property: schema.kind_property.to_owned(),
            indexes: schema
                .indexes
                .iter()
                .map(|i| IndexLayout {
                    name: i.name.to_owned(),
                    table: match i.placement {
                        IndexPlacement::OtherTable => i.table.map(str::to_owned),
                        _ => None,
                    },
                    partition_key: i.partition_key.clone(),
                    row_key: i.row_key.clone(),
                    properties: i
                        .properties
                        .map(|p| p.iter().map(|s| (*s).to_owned()).collect()),
                    sparse: i.sparse,
                })
                .collect(),
            members: schema
                .index_entities
                .iter()
                .map(|m| MemberLayout {
                    name: m.name.to_owned(),
                    key: m.key.clone(),
                    table: m.table.map(str::to_owned),
                    storage: m.storage.into(),
                })
                .collect(),
            denormalized: schema
                .denormalized
                .iter()
                .map(|d| DenormalizedLayout {
                    property: d.property.to_owned(),
                    from_kind: d.from_kind.to_owned(),
                    table: d.table.map(str::to_owned),
                    partition_key: d.partition_key.clone(),
                    row_key: d.row_key.clone(),
                    source_property: d.source_property.to_owned(),
                })
                .collect(),
            uniques: schema
                .uniques
                .iter()
                .map(|u| UniqueLayout {
                    name: u.name.to_owned(),
                    key: u.key.clone(),
                    table: u.table.map(str::to_owned),
                })
                .collect(),
            expiry: schema.expiry.map(ExpiryLayout::from),
            changes: schema.changes.map(str::to_owned),
        }
    }

    /// The layout of primaries whose type is not registered: nothing declared, the
    /// default kind property. Deleting one through it removes what its record names.
    pub fn bare(table: &str) -> Self {
        Layout {
            table: table.to_owned(),
            kind: String::new(),
            kind_property: tablekit_core::typed::DEFAULT_KIND_PROPERTY.to_owned(),
            indexes: Vec::new(),
            members: Vec::new(),
            denormalized: Vec::new(),
            uniques: Vec::new(),
            expiry: None,
            changes: None,
        }
    }

    /// Whether the layout declares nothing.
    pub fn is_bare(&self) -> bool {
        self.indexes.is_empty()
            && self.members.is_empty()
            && self.denormalized.is_empty()
            && self.uniques.is_empty()
            && self.expiry.is_none()
            && self.changes.is_none()
    }

    /// The same layout on another table name (one table per tenant).
    pub fn on_table(mut self, table: &str) -> Self {
        self.table = table.to_owned();
        self
    }

    /// The targets of a primary: `render` renders a template (PartitionKey or RowKey
    /// rules), `in_index` says whether a sparse index holds the primary. With `only`, the
    /// targets of that index or index entity alone.
    ///
    /// # Errors
    /// The rendering's errors.
    pub fn targets(
        &self,
        source: &EntityRef,
        render: &dyn Fn(&KeyTemplate, KeyKind) -> Result<String>,
        in_index: &dyn Fn(&str) -> bool,
        only: Option<&str>,
    ) -> Result<BTreeSet<Target>> {
        let mut targets = BTreeSet::new();
        for index in &self.indexes {
            if only.is_some_and(|o| o != index.name) || (index.sparse && !in_index(&index.name)) {
                continue;
            }
            let at = EntityRef::new(
                index.table.clone().unwrap_or_else(|| source.table.clone()),
                render(&index.partition_key, KeyKind::PartitionKey)?,
                render(&index.row_key, KeyKind::RowKey)?,
            );
            targets.insert(Target::Copy {
                index: index.name.clone(),
                at,
                properties: index.properties.clone(),
            });
        }
        for member in &self.members {
            if only.is_some_and(|o| o != member.name) {
                continue;
            }
            let table = match member.storage {
                MemberStorage::Partition => source.table.clone(),
                _ => member.table.clone().unwrap_or_else(|| source.table.clone()),
            };
            targets.insert(Target::Member {
                index: member.name.clone(),
                storage: member.storage,
                table,
                value: render(&member.key, KeyKind::RowKey)?,
            });
        }
        for field in &self.denormalized {
            if only.is_some_and(|o| o != field.property) {
                continue;
            }
            targets.insert(Target::Denormalized {
                property: field.property.clone(),
                source: EntityRef::new(
                    field.table.clone().unwrap_or_else(|| source.table.clone()),
                    render(&field.partition_key, KeyKind::PartitionKey)?,
                    render(&field.row_key, KeyKind::RowKey)?,
                ),
                source_property: field.source_property.clone(),
            });
        }
        for unique in &self.uniques {
            if only.is_some_and(|o| o != unique.name) {
                continue;
            }
            targets.insert(Target::Unique {
                name: unique.name.clone(),
                at: EntityRef::new(
                    unique.table_for(&source.table),
                    render(&unique.key, KeyKind::PartitionKey)?,
                    unique.name.clone(),
                ),
            });
        }
        Ok(targets)
    }

    /// Whether the layout declares an index or index entity of that name.
    pub fn declares(&self, name: &str) -> bool {
        self.indexes.iter().any(|i| i.name == name)
            || self.members.iter().any(|m| m.name == name)
            || self.denormalized.iter().any(|d| d.property == name)
            || self.uniques.iter().any(|u| u.name == name)
            || (self.expiry.is_some() && name == EXPIRY_INDEX)
    }

    /// The entry of a primary in the expiry index, when the layout expires its primaries
    /// and the primary (`entity`, as it is written) has an expiry time.
    pub fn expiry_target(&self, source: &EntityRef, entity: &Entity) -> Option<Target> {
        self.expiry?;
        let at = tablekit_core::typed::expires_at(entity)?;
        Some(Target::expiry_entry(source, at))
    }

    /// The tables other than the primaries' that hold copies, id lists or reservations.
    pub fn other_tables(&self) -> BTreeSet<String> {
        self.indexes
            .iter()
            .filter_map(|i| i.table.clone())
            .chain(
                self.members
                    .iter()
                    .filter(|m| m.storage == MemberStorage::Table)
                    .filter_map(|m| m.table.clone()),
            )
            .chain(self.uniques.iter().map(|u| u.table_for(&self.table)))
            .chain(self.expiry.map(|_| expiry_table(&self.table)))
            .filter(|t| *t != self.table)
            .collect()
    }
}
