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
    /// What the type declares beyond its own keys and fields (`#[index(..)]`,
    /// `#[index_entity(..)]`, `denormalized(..)`, `#[unique(..)]`, `#[count(..)]`,
    /// `#[wide]`, `#[series(..)]`, expiry, change events), each described by its
    /// attribute: it is laid out, written and kept by the declaration its attribute names,
    /// found through the patterns' registry, so the schema has no field of its own for
    /// any of them. [`index`](Self::index), [`series`](Self::series) and the like read
    /// them back.
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
    /// Its other key templates, by name (an index's `partition_key` and `row_key`).
    pub templates: &'static [(&'static str, KeyTemplate)],
    /// The table it keeps its entities in, when declared.
    pub table: Option<&'static str>,
    /// Its other settings, as `(key, value)` text.
    pub settings: &'static [(&'static str, &'static str)],
}

impl DeclaredMeta {
    /// A key template by name: `key` is the key template, any other name one of
    /// [`templates`](Self::templates).
    pub fn template(&self, name: &str) -> Option<&KeyTemplate> {
        match name {
            "key" => self.key.as_ref(),
            _ => self
                .templates
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| t),
        }
    }

    /// Whether a setting is present (a flag such as an index's `sparse`).
    pub fn flag(&self, key: &str) -> bool {
        self.setting(key).is_some()
    }

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

    /// A secondary index by name (`#[index(..)]`, a declaration described by its
    /// attribute: `index`, with the templates `partition_key` and `row_key`, its copies'
    /// `table` when they live in another table, and the settings `properties` (the
    /// properties a copy carries, comma-separated) and `sparse`).
    pub fn index(&self, name: &str) -> Option<&DeclaredMeta> {
        self.declared("index", name)
    }

    /// The secondary indexes, in declaration order.
    pub fn indexes(&self) -> impl Iterator<Item = &DeclaredMeta> {
        self.declared_as("index")
    }

    /// An index entity by name (`#[index_entity(..)]`, a declaration described by its
    /// attribute: `index_entity`, with its `key` template, its `table` and the setting
    /// `storage`: `partition`, `table` or `blob`).
    pub fn index_entity(&self, name: &str) -> Option<&DeclaredMeta> {
        self.declared("index_entity", name)
    }

    /// The index entities, in declaration order.
    pub fn index_entities(&self) -> impl Iterator<Item = &DeclaredMeta> {
        self.declared_as("index_entity")
    }

    /// The denormalised fields (`denormalized(..)`, declarations described by their
    /// attribute: `denormalized`, named after the property holding the copy, with the
    /// source's `partition_key` and `row_key` templates, its `table`, and the settings
    /// `field`, `from` (the source's kind) and `property` (the source's property)).
    pub fn denormalized(&self) -> impl Iterator<Item = &DeclaredMeta> {
        self.declared_as("denormalized")
    }

    /// The data series the type declares (`#[series(..)]`, a declaration described by
    /// its attribute: `series`, with the settings `start`, `points`, `every` and `span`,
    /// the last two in seconds), if it does.
    pub fn series(&self) -> Option<super::SeriesMeta> {
        let declared = self.declared("series", "series")?;
        Some(super::SeriesMeta {
            start: declared.setting("start")?,
            points: declared.setting("points")?,
            every_seconds: declared.setting("every")?.parse().ok()?,
            span_seconds: declared.setting("span")?.parse().ok()?,
        })
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

    /// The declarations of one attribute, in declaration order.
    pub fn declared_as<'a>(&'a self, attribute: &'a str) -> impl Iterator<Item = &'a DeclaredMeta> {
        self.declared
            .iter()
            .filter(move |d| d.attribute == attribute)
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
