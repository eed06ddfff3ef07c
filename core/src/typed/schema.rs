//! The static description of a derived entity type: its table, kind, version, keys, fields,
//! and the indexes, index entities, blob fields and denormalised fields it declares. The
//! pattern modules read it to maintain what the type declares.

use crate::model::EdmType;

use super::template::KeyTemplate;

/// The static description of an entity type, built by `#[derive(Entity)]`.
#[derive(Debug)]
pub struct Schema {
    /// The Rust type's name.
    pub type_name: &'static str,
    /// The table the entities live in.
    pub table: &'static str,
    /// The kind recorded on every entity.
    pub kind: &'static str,
    /// The version of the type, recorded on every entity.
    pub version: u32,
    /// The property holding the kind.
    pub kind_property: &'static str,
    /// The property holding the version.
    pub version_property: &'static str,
    /// The PartitionKey template.
    pub partition_key: KeyTemplate,
    /// The RowKey template.
    pub row_key: KeyTemplate,
    /// The fields, in declaration order.
    pub fields: &'static [FieldMeta],
    /// The declared secondary indexes.
    pub indexes: &'static [IndexMeta],
    /// The declared index entities.
    pub index_entities: &'static [IndexEntityMeta],
    /// The declared denormalised fields.
    pub denormalized: &'static [DenormalizedMeta],
    /// The data series the type declares (`#[series(..)]`), if it does.
    pub series: Option<super::SeriesMeta>,
    /// The declarations described by their attribute alone (`#[unique(..)]`, `#[count(..)]`): each is
    /// laid out, written and kept by the declaration its attribute names, found through
    /// the patterns' registry, so the schema needs no field of its own for it.
    pub declared: &'static [DeclaredMeta],
}

/// A declaration of a type, described by its attribute: its name, its key template, its
/// table and its other settings as written (`#[count(name = "by_status", key =
/// "{status}", shards = 4)]`). What they mean is its declaration's to say.
#[derive(Debug)]
pub struct DeclaredMeta {
    /// The attribute (`unique`, `count`).
    pub attribute: &'static str,
    /// The name, unique within the type among its declarations.
    pub name: &'static str,
    /// The key template, if it has one.
    pub key: Option<KeyTemplate>,
    /// The table it keeps its entities in, when declared.
    pub table: Option<&'static str>,
    /// Its other settings, as `(key, value)` text.
    pub settings: &'static [(&'static str, &'static str)],
}

impl DeclaredMeta {
    /// A setting by key.
    pub fn setting(&self, key: &str) -> Option<&'static str> {
        self.settings
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }
}

impl Schema {
    /// A field by its Rust name.
    pub fn field(&self, name: &str) -> Option<&FieldMeta> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// An index by name.
    pub fn index(&self, name: &str) -> Option<&IndexMeta> {
        self.indexes.iter().find(|i| i.name == name)
    }

    /// An index entity by name.
    pub fn index_entity(&self, name: &str) -> Option<&IndexEntityMeta> {
        self.index_entities.iter().find(|i| i.name == name)
    }

    /// How entities of the type expire (`#[entity(ttl = "30d")]` or an
    /// `#[entity(expires)]` field), if they do: a declaration described by its attribute
    /// alone (`expiry`, with the setting `ttl` in seconds or `field`).
    pub fn expiry(&self) -> Option<ExpiryMeta> {
        let declared = self.declared("expiry", "expiry")?;
        match (declared.setting("ttl"), declared.setting("field")) {
            (Some(seconds), _) => seconds.parse().ok().map(ExpiryMeta::Ttl),
            (None, Some(field)) => Some(ExpiryMeta::Field(field)),
            (None, None) => None,
        }
    }

    /// How the type is stored in chunks, if it is wide (`#[wide]`, or a series that
    /// spills to chunks): a declaration described by its attribute alone (`wide`, with
    /// the setting `chunks`).
    pub fn wide(&self) -> Option<super::WideMeta> {
        let chunks = self.declared("wide", "wide")?.setting("chunks")?;
        chunks.parse().ok().map(|chunks| super::WideMeta { chunks })
    }

    /// The queue every committed change of the type is published to
    /// (`#[entity(changes = "queue")]`, a declaration described by its attribute alone:
    /// `changes`).
    pub fn changes(&self) -> Option<&'static str> {
        self.declared("changes", "changes")
            .and_then(|d| d.setting("queue"))
    }

    /// A declaration described by its attribute (`unique`, `count`), by name.
    pub fn declared(&self, attribute: &str, name: &str) -> Option<&DeclaredMeta> {
        self.declared
            .iter()
            .find(|d| d.attribute == attribute && d.name == name)
    }

    /// The blob fields.
    pub fn blob_fields(&self) -> impl Iterator<Item = &FieldMeta> {
        self.fields
            .iter()
            .filter(|f| f.storage == FieldStorage::Blob)
    }

    /// The properties an entity of this type may have, system properties excluded: the
    /// kind and version properties and every stored field's property.
    pub fn properties(&self) -> impl Iterator<Item = &'static str> + '_ {
        [self.kind_property, self.version_property]
            .into_iter()
            .chain(self.fields.iter().filter_map(|f| match f.storage {
                FieldStorage::Skipped => None,
                _ => Some(f.property),
            }))
    }
}

/// How entities of a type expire. Either way the expiry time is stored on the entity in
/// [`EXPIRES_PROPERTY`](super::EXPIRES_PROPERTY), which reads check and the expiry sweeper
/// indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpiryMeta {
    /// Every write of an entity sets its expiry to the write's time plus this many seconds
    /// (`#[entity(ttl = "30d")]`).
    Ttl(u64),
    /// The entity's own `DateTime<Utc>` field says when it expires (`#[entity(expires)]`;
    /// an `Option` field that is `None` never expires).
    Field(&'static str),
}

/// How a field is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FieldStorage {
    /// As a typed property.
    Property,
    /// As a JSON string property (`#[entity(json)]`).
    Json,
    /// As content for the blob store (`#[entity(blob)]`): offloaded by the tables that
    /// have a blob store (`LargeTable`, `IndexedTable::with_blobs`), inline in a plain
    /// [`Table`](crate::typed::Table).
    Blob,
    /// Spread over many properties, one per entry (a `#[wide]` map, a series' points).
    Spread,
    /// Not stored (`#[entity(skip)]`).
    Skipped,
}

/// One field of an entity type.
#[derive(Debug)]
pub struct FieldMeta {
    /// The Rust field's name.
    pub name: &'static str,
    /// The property's name (after `rename`).
    pub property: &'static str,
    /// The property type; `String` for JSON fields; `None` for skipped fields.
    pub edm: Option<EdmType>,
    /// How the field is stored.
    pub storage: FieldStorage,
    /// Whether the property may be absent (an `Option` field).
    pub optional: bool,
    /// Whether a missing property reads as a default (`#[entity(default)]`).
    pub has_default: bool,
}

/// Where an index's copies live relative to the primary entity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IndexPlacement {
    /// In the primary's partition: written in the primary's entity group transaction.
    SamePartition,
    /// In another partition of the primary's table: kept eventually consistent.
    OtherPartition,
    /// In another table: kept eventually consistent.
    OtherTable,
}

impl IndexPlacement {
    /// Whether copies are written atomically with the primary.
    pub fn is_atomic(self) -> bool {
        self == IndexPlacement::SamePartition
    }
}

/// A declared secondary index (`#[index(...)]`): a copy of the entity under other keys.
#[derive(Debug)]
pub struct IndexMeta {
    /// The index name, unique within the type.
    pub name: &'static str,
    /// The table of the copies, when not the primary's.
    pub table: Option<&'static str>,
    /// The copies' PartitionKey template.
    pub partition_key: KeyTemplate,
    /// The copies' RowKey template.
    pub row_key: KeyTemplate,
    /// The properties a copy carries (property names), or `None` for all of them.
    pub properties: Option<&'static [&'static str]>,
    /// Whether some entities have no copy (`when = ...`).
    pub sparse: bool,
    /// Where the copies live.
    pub placement: IndexPlacement,
}

/// Where an index entity (a value → list of ids) is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexEntityStorage {
    /// In the primary's partition, updated in its entity group transaction.
    Partition,
    /// In another partition or table, kept eventually consistent by the worker.
    Table,
    /// One blob per value in the blob store, kept by the worker.
    Blob,
}

/// A declared index entity (`#[index_entity(...)]`).
#[derive(Debug)]
pub struct IndexEntityMeta {
    /// The index name, unique within the type.
    pub name: &'static str,
    /// The template of the indexed value (`"{last_name}"`).
    pub key: KeyTemplate,
    /// The table of the index entities, when not the primary's.
    pub table: Option<&'static str>,
    /// Where the index entities live.
    pub storage: IndexEntityStorage,
}

/// A denormalised field (`#[entity(denormalized(...))]`): a copy of a property of another
/// entity, found by keys computed from this entity's fields.
#[derive(Debug)]
pub struct DenormalizedMeta {
    /// The field holding the copy.
    pub field: &'static str,
    /// Its property.
    pub property: &'static str,
    /// The kind of the source entity.
    pub from_kind: &'static str,
    /// The source's table, when not this type's.
    pub table: Option<&'static str>,
    /// The source's PartitionKey, from this entity's fields.
    pub partition_key: KeyTemplate,
    /// The source's RowKey, from this entity's fields.
    pub row_key: KeyTemplate,
    /// The property copied from the source.
    pub source_property: &'static str,
}
