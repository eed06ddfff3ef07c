//! Typed entities: the traits `#[derive(Entity)]`, `#[derive(EntityKind)]` and
//! `#[derive(Projection)]` implement, the static metadata they describe, key templates,
//! field conversions, and [`Table`], the typed view of a table.
//!
//! Every entity written through a typed table carries its kind and version in two
//! properties, `EntityKind` and `EntityVersion` by default
//! ([`DEFAULT_KIND_PROPERTY`], [`DEFAULT_VERSION_PROPERTY`]; a type may name others with
//! `#[entity(kind_property = "…", version_property = "…")]`). Reading checks them:
//! - another kind is an error (a typed table's queries only return its kind; an
//!   `EntityKind` enum reads a mixed partition);
//! - an entity without a kind property reads as the type asked for (data written by other
//!   clients);
//! - an entity without a version property is version 1;
//! - an older version passes through the type's upcaster, if it declares one
//!   (`#[entity(upcast = "path")]`), before its fields are read;
//! - a newer version than the type's is an error: this program does not know its fields.

pub(crate) mod field;
pub mod handle;
mod primary;
mod property;
mod schema;
mod table;
pub(crate) mod template;
mod wide;

pub use field::{
    BlobField, Direction, ExpiresField, FieldError, FieldProblem, FieldValue, json_from_value,
    json_to_value,
};
pub use handle::{Declared, IdList, Index, KeyArg};
pub use primary::{
    GET_MANY_CONCURRENCY, InRange, IntoKeys, KEYS_PER_QUERY, KeyUpdate, PrimaryKey, PrimaryTable,
    PrimaryWrite, Scannable, TableScan,
};
pub use property::{
    BlobProperty, Compared, Condition, FieldArg, Fields, KeyField, Property, Selected, Set,
    Settable, Update,
};
pub use schema::{DeclaredMeta, ExpiryMeta, FieldMeta, FieldStorage, Schema};
pub use table::{BatchOutcome, Stored, Table, TableOptions, TypedWrite, WriteReport};
pub use template::{
    KeyBounds, KeyFormat, KeyPart, KeyTemplate, KeyText, PaddedKeyPart, TemplateError,
    TemplatePart, TicksKeyPart, separator_fits,
};
pub use wide::{
    FIELDS_PER_CHUNK, FIELDS_PER_ENTITY, MAX_CHUNKS, Points, SPREAD_SEPARATOR, SeriesMeta,
    SeriesType, SeriesValue, SpreadField, WideMeta,
};

use crate::error::{Error, Result};
use crate::filter::{self, Filter};
use crate::limits::{self, KeyKind};
use crate::model::{Entity, Value};

/// The property holding an entity's kind, unless its type names another.
pub const DEFAULT_KIND_PROPERTY: &str = "EntityKind";
/// The property holding an entity's version, unless its type names another.
pub const DEFAULT_VERSION_PROPERTY: &str = "EntityVersion";

/// The property holding an entity's expiry time (`Edm.DateTime`), on entities whose type
/// declares a time to live or an expiry field, and on their copies.
pub const EXPIRES_PROPERTY: &str = "TablekitExpires";

/// When an entity expires, if it does.
pub fn expires_at(entity: &Entity) -> Option<chrono::DateTime<chrono::Utc>> {
    match entity.properties.get(EXPIRES_PROPERTY) {
        Some(Value::DateTime(at)) => Some(*at),
        _ => None,
    }
}

/// Whether an entity has expired at `now`: reads never return it, and the expiry sweeper
/// deletes it.
pub fn is_expired(entity: &Entity, now: chrono::DateTime<chrono::Utc>) -> bool {
    expires_at(entity).is_some_and(|at| at <= now)
}

/// Something a typed table holds: an entity type (`#[derive(Entity)]`) or an enum of the
/// entity types that share a table (`#[derive(EntityKind)]`).
pub trait Record: Sized + Send + Sync + 'static {
    /// The table.
    const TABLE: &'static str;

    /// The PartitionKey of this value.
    ///
    /// # Errors
    /// [`Error::Key`] when a field does not fit its template; [`Error::Limit`] when the key
    /// breaks the key rules.
    fn partition_key(&self) -> Result<String>;

    /// The RowKey of this value.
    ///
    /// # Errors
    /// As [`partition_key`](Self::partition_key).
    fn row_key(&self) -> Result<String>;

    /// The entity to store, with its keys, kind and version.
    ///
    /// # Errors
    /// Key errors as [`partition_key`](Self::partition_key); [`Error::Field`] for a field
    /// value the store cannot hold.
    fn to_entity(&self) -> Result<Entity>;

    /// Reads a stored entity.
    ///
    /// # Errors
    /// [`Error::Field`] naming the property and the entity's keys: a missing required
    /// property, another type, another kind, a newer version, a failed upcast.
    fn from_entity(entity: Entity) -> Result<Stored<Self>>;

    /// The condition a typed query adds so that it only returns entities of this record's
    /// kinds, if any.
    fn kind_filter() -> Option<Filter>;

    /// Whether entities of this record may expire (a time to live or an expiry field):
    /// projected queries then read [`EXPIRES_PROPERTY`] too, to leave expired ones out.
    fn expires() -> bool {
        false
    }
}

/// A record a plain [`Table`] may write: its type declares nothing that follows a write.
///
/// `#[derive(Entity)]` implements it for a type without indexes, id lists, unique values,
/// counts, a feed, change events, denormalised fields, expiry or wide storage, and
/// `#[derive(EntityKind)]` for an enum whose every variant has it. A type that declares
/// any of them is written through `tablekit_patterns::index::IndexedTable`, the one write
/// path that keeps them: a plain `Table` writing it would store the primary and leave its
/// copies, memberships, counts and feed behind, silently. Its plain `Table` still reads
/// (`get`, `query`, `primary().get()`, `scan()`); its writes do not compile.
#[diagnostic::on_unimplemented(
    message = "`{Self}` declares work that follows its writes, so a plain `Table` does not write it",
    label = "its indexes, id lists, unique values, counts, feed, change events or expiry would be left behind",
    note = "write it through `tablekit_patterns::index::IndexedTable` (`IndexedTable::<{Self}, _>::options().build(store)`): the one write path that keeps its declarations; a plain `Table` still reads it"
)]
pub trait PlainWrite: Record {}

/// An entity type declared with `#[derive(Entity)]`.
pub trait EntityType: Record {
    /// The kind recorded on every entity.
    const KIND: &'static str;
    /// The version of the type.
    const VERSION: u32;
    /// The property holding the kind.
    const KIND_PROPERTY: &'static str;
    /// The property holding the version.
    const VERSION_PROPERTY: &'static str;

    /// The types of the primary key's fields in order (the PartitionKey template's, then
    /// the RowKey template's), as a chain of [`handle::Partition`], [`handle::Row`] and
    /// [`handle::End`]: what [`PrimaryKey`] takes.
    type Key;

    /// The static description of the type.
    fn schema() -> &'static Schema;

    /// The value of a field used in a key template, by field name.
    fn key_part(&self, field: &str) -> Option<&dyn KeyPart>;

    /// Whether this value has a copy in a sparse index (`#[index(when = …)]`); `true`
    /// for every other index.
    fn in_index(&self, index: &str) -> bool;

    /// The keys of this value's copy in the named index, or `None` when a sparse index
    /// leaves it out.
    ///
    /// # Errors
    /// [`Error::Undeclared`] for an index the type does not declare; keys as
    /// [`Record::partition_key`].
    fn index_keys(&self, index: &str) -> Result<Option<(String, String)>> {
        let meta = Self::schema()
            .index(index)
            .ok_or_else(|| unknown_name::<Self>("index", index))?;
        if !self.in_index(index) {
            return Ok(None);
        }
        let template = |name: &str| {
            meta.template(name)
                .ok_or_else(|| unknown_name::<Self>("index", index))
        };
        let pk = render_key(self, template("partition_key")?, KeyKind::PartitionKey)?;
        let rk = render_key(self, template("row_key")?, KeyKind::RowKey)?;
        Ok(Some((pk, rk)))
    }

    /// The indexed value of the named index entity for this value (`"Jones"` for
    /// `#[index_entity(name = "last_name", key = "{last_name}")]`).
    ///
    /// # Errors
    /// As [`index_keys`](Self::index_keys).
    fn index_entity_key(&self, name: &str) -> Result<String> {
        let key = Self::schema()
            .index_entity(name)
            .and_then(|meta| meta.key.as_ref())
            .ok_or_else(|| unknown_name::<Self>("index entity", name))?;
        render_key(self, key, KeyKind::RowKey)
    }

    /// The value this entity holds for the named unique value (`"ada@example.com"` for
    /// `#[unique(name = "email", key = "{email}")]`), rendered with the PartitionKey
    /// rules: the reservation's PartitionKey.
    ///
    /// # Errors
    /// As [`index_keys`](Self::index_keys).
    fn unique_key(&self, name: &str) -> Result<String> {
        let key = Self::schema()
            .declared("unique", name)
            .and_then(|meta| meta.key.as_ref())
            .ok_or_else(|| unknown_name::<Self>("unique value", name))?;
        render_key(self, key, KeyKind::PartitionKey)
    }
}

/// An enum of entity types that share a table, declared with `#[derive(EntityKind)]`.
pub trait EntityKinds: Record {
    /// The kinds of the variants, in declaration order.
    fn kinds() -> &'static [&'static str];
}

/// A subset of an entity type's properties read by a projected query, declared with
/// `#[derive(Projection)]`.
pub trait Projection: Sized + Send + 'static {
    /// The properties the query selects.
    const PROPERTIES: &'static [&'static str];

    /// Reads the projected properties of a stored entity.
    ///
    /// # Errors
    /// As [`Record::from_entity`].
    fn from_entity(entity: Entity) -> Result<Stored<Self>>;
}

fn unknown_name<E: EntityType>(what: &'static str, name: &str) -> Error {
    Error::Undeclared {
        type_name: E::schema().type_name,
        what,
        name: name.to_owned(),
    }
}

/// Renders one of a value's key templates and checks the result against the key rules.
///
/// # Errors
/// [`Error::Key`] or [`Error::Limit`].
pub fn render_key<E: EntityType>(
    value: &E,
    template: &KeyTemplate,
    kind: KeyKind,
) -> Result<String> {
    let key = template
        .render(|field| value.key_part(field))
        .map_err(|source| crate::keys::KeyError::Entity {
            type_name: E::schema().type_name,
            source: Box::new(source),
        })?;
    limits::check_key(kind, &key)?;
    Ok(key)
}

/// Builds the entity of a typed value: keys, kind, version, then each field.
#[doc(hidden)]
pub struct EntityWriter {
    entity: Entity,
    type_name: &'static str,
}

impl EntityWriter {
    /// Starts the entity of an entity type.
    pub fn new<E: EntityType>(partition_key: String, row_key: String, fields: usize) -> Self {
        let mut entity = Entity::new(partition_key, row_key);
        entity.properties.reserve(fields + 2);
        entity.properties.insert(
            E::KIND_PROPERTY.to_owned(),
            Value::String(E::KIND.to_owned()),
        );
        entity.properties.insert(
            E::VERSION_PROPERTY.to_owned(),
            Value::Int32(i32::try_from(E::VERSION).unwrap_or(i32::MAX)),
        );
        EntityWriter {
            entity,
            type_name: E::schema().type_name,
        }
    }

    /// Writes a field.
    ///
    /// # Errors
    /// [`Error::Field`].
    pub fn field<T: FieldValue>(&mut self, property: &'static str, value: &T) -> Result<()> {
        let value = value.to_value().map_err(|p| self.error(property, p))?;
        self.put(property, value);
        Ok(())
    }

    /// Writes a `json` field.
    ///
    /// # Errors
    /// [`Error::Field`].
    pub fn json<T: serde::Serialize>(&mut self, property: &'static str, value: &T) -> Result<()> {
        let value = json_to_value(value).map_err(|p| self.error(property, p))?;
        self.put(property, value);
        Ok(())
    }

    /// Writes a field spread over many properties (`<property>_<entry>`).
    ///
    /// # Errors
    /// [`Error::Field`].
    pub fn spread<T: SpreadField>(&mut self, property: &'static str, value: &T) -> Result<()> {
        let entries = value.entries().map_err(|p| self.error(property, p))?;
        for (entry, value) in entries {
            self.entity
                .properties
                .insert(format!("{property}{SPREAD_SEPARATOR}{entry}"), value);
        }
        Ok(())
    }

    /// Records when the entity expires, from its `#[entity(expires)]` field.
    pub fn expires<T: ExpiresField>(&mut self, value: &T) {
        if let Some(at) = value.expires_at() {
            self.put(EXPIRES_PROPERTY, Some(Value::DateTime(at)));
        }
    }

    fn put(&mut self, property: &'static str, value: Option<Value>) {
        if let Some(value) = value {
            self.entity.properties.insert(property.to_owned(), value);
        }
    }

    fn error(&self, property: &str, problem: FieldProblem) -> Error {
        Error::Field(Box::new(FieldError {
            direction: Direction::Write,
            type_name: self.type_name,
            partition_key: self.entity.partition_key.clone(),
            row_key: self.entity.row_key.clone(),
            property: property.to_owned(),
            problem,
        }))
    }

    /// The finished entity.
    pub fn finish(self) -> Entity {
        self.entity
    }
}

/// An entity type's upcaster, adapted: upgrades a stored entity from the version given.
pub type Upcaster = fn(&mut Entity, u32) -> Result<(), String>;

/// Reads the fields of a stored entity into a typed value.
#[doc(hidden)]
pub struct EntityReader {
    entity: Entity,
    type_name: &'static str,
    upgraded_from: Option<u32>,
}

impl EntityReader {
    /// Starts reading an entity as the entity type `E`: checks its kind and version and
    /// runs `upcast` on an older version.
    ///
    /// # Errors
    /// [`Error::Field`] for another kind, a newer version, a version of the wrong type or a
    /// failed upcast.
    pub fn new<E: EntityType>(mut entity: Entity, upcast: Option<Upcaster>) -> Result<Self> {
        let type_name = E::schema().type_name;
        let fail = |entity: &Entity, property: &str, problem| {
            Error::Field(Box::new(FieldError {
                direction: Direction::Read,
                type_name,
                partition_key: entity.partition_key.clone(),
                row_key: entity.row_key.clone(),
                property: property.to_owned(),
                problem,
            }))
        };
        match entity.properties.swap_remove(E::KIND_PROPERTY) {
            None => {}
            Some(Value::String(kind)) if kind == E::KIND => {}
            Some(Value::String(kind)) => {
                return Err(fail(
                    &entity,
                    E::KIND_PROPERTY,
                    FieldProblem::WrongKind {
                        expected: format!("`{}`", E::KIND),
                        found: kind,
                    },
                ));
            }
            Some(other) => {
                return Err(fail(
                    &entity,
                    E::KIND_PROPERTY,
                    FieldProblem::WrongType {
                        expected: "Edm.String",
                        found: other.edm_type(),
                    },
                ));
            }
        }
        let version = match entity.properties.swap_remove(E::VERSION_PROPERTY) {
            None => 1,
            Some(Value::Int32(v)) => i64::from(v),
            Some(Value::Int64(v)) => v,
            Some(other) => {
                return Err(fail(
                    &entity,
                    E::VERSION_PROPERTY,
                    FieldProblem::WrongType {
                        expected: "Edm.Int32",
                        found: other.edm_type(),
                    },
                ));
            }
        };
        let version = match u32::try_from(version) {
            Ok(v) if v > E::VERSION => {
                return Err(fail(
                    &entity,
                    E::VERSION_PROPERTY,
                    FieldProblem::NewerVersion {
                        stored: version,
                        supported: E::VERSION,
                    },
                ));
            }
            Ok(v) if v >= 1 => v,
            _ => {
                return Err(fail(
                    &entity,
                    E::VERSION_PROPERTY,
                    FieldProblem::OutOfRange {
                        value: version.to_string(),
                        target: "a version (1 or more)",
                    },
                ));
            }
        };
        let mut upgraded_from = None;
        if version < E::VERSION {
            if let Some(upcast) = upcast {
                upcast(&mut entity, version).map_err(|message| {
                    fail(
                        &entity,
                        E::VERSION_PROPERTY,
                        FieldProblem::Upcast {
                            from: version,
                            message,
                        },
                    )
                })?;
            }
            upgraded_from = Some(version);
        }
        Ok(EntityReader {
            entity,
            type_name,
            upgraded_from,
        })
    }

    /// Starts reading a projection: no kind or version checks.
    pub fn projection<P: Projection>(entity: Entity) -> Self {
        EntityReader {
            entity,
            type_name: std::any::type_name::<P>(),
            upgraded_from: None,
        }
    }

    /// Reads a field.
    ///
    /// # Errors
    /// [`Error::Field`].
    pub fn field<T: FieldValue>(&mut self, property: &str) -> Result<T> {
        let value = self.entity.properties.swap_remove(property);
        T::from_value(value).map_err(|p| self.error(property, p))
    }

    /// Reads a field, or its default when the property is absent.
    ///
    /// # Errors
    /// [`Error::Field`].
    pub fn field_or<T: FieldValue>(&mut self, property: &str, default: fn() -> T) -> Result<T> {
        match self.entity.properties.swap_remove(property) {
            None => Ok(default()),
            value => T::from_value(value).map_err(|p| self.error(property, p)),
        }
    }

    /// Reads a `json` field.
    ///
    /// # Errors
    /// [`Error::Field`].
    pub fn json<T: serde::de::DeserializeOwned>(&mut self, property: &str) -> Result<T> {
        let value = self.entity.properties.swap_remove(property);
        json_from_value(value).map_err(|p| self.error(property, p))
    }

    /// Reads a `json` field, or its default when the property is absent.
    ///
    /// # Errors
    /// [`Error::Field`].
    pub fn json_or<T: serde::de::DeserializeOwned>(
        &mut self,
        property: &str,
        default: fn() -> T,
    ) -> Result<T> {
        match self.entity.properties.swap_remove(property) {
            None => Ok(default()),
            value => json_from_value(value).map_err(|p| self.error(property, p)),
        }
    }

    fn error(&self, property: &str, problem: FieldProblem) -> Error {
        Error::Field(Box::new(FieldError {
            direction: Direction::Read,
            type_name: self.type_name,
            partition_key: self.entity.partition_key.clone(),
            row_key: self.entity.row_key.clone(),
            property: property.to_owned(),
            problem,
        }))
    }

    /// Reads a field spread over many properties (`<property>_<entry>`).
    ///
    /// # Errors
    /// [`Error::Field`].
    pub fn spread<T: SpreadField>(&mut self, property: &str) -> Result<T> {
        let prefix = format!("{property}{SPREAD_SEPARATOR}");
        let names: Vec<String> = self
            .entity
            .properties
            .keys()
            .filter(|n| n.starts_with(&prefix))
            .cloned()
            .collect();
        let mut entries = Vec::with_capacity(names.len());
        for name in names {
            if let Some(value) = self.entity.properties.swap_remove(&name) {
                entries.push((name[prefix.len()..].to_owned(), value));
            }
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        T::from_entries(entries).map_err(|p| self.error(property, p))
    }

    /// The value with the entity's keys, ETag and timestamp.
    pub fn finish<T>(self, value: T) -> Stored<T> {
        Stored {
            value,
            partition_key: self.entity.partition_key,
            row_key: self.entity.row_key,
            etag: self.entity.etag,
            timestamp: self.entity.timestamp,
            upgraded_from: self.upgraded_from,
        }
    }
}

/// The kind recorded on a stored entity, for an `EntityKind` enum to dispatch on.
///
/// # Errors
/// [`Error::Field`] when the kind property is absent or not a string.
#[doc(hidden)]
pub fn stored_kind<'e>(
    entity: &'e Entity,
    kind_property: &str,
    type_name: &'static str,
) -> Result<&'e str> {
    match entity.get(kind_property) {
        Some(Value::String(kind)) => Ok(kind),
        other => Err(Error::Field(Box::new(FieldError {
            direction: Direction::Read,
            type_name,
            partition_key: entity.partition_key.clone(),
            row_key: entity.row_key.clone(),
            property: kind_property.to_owned(),
            problem: match other {
                None => FieldProblem::Missing,
                Some(v) => FieldProblem::WrongType {
                    expected: "Edm.String",
                    found: v.edm_type(),
                },
            },
        }))),
    }
}

/// The error for a kind no variant of an `EntityKind` enum reads.
#[doc(hidden)]
pub fn unknown_kind(
    entity: &Entity,
    kind_property: &str,
    type_name: &'static str,
    kinds: &[&str],
    found: &str,
) -> Error {
    Error::Field(Box::new(FieldError {
        direction: Direction::Read,
        type_name,
        partition_key: entity.partition_key.clone(),
        row_key: entity.row_key.clone(),
        property: kind_property.to_owned(),
        problem: FieldProblem::WrongKind {
            expected: format!("one of {kinds:?}"),
            found: found.to_owned(),
        },
    }))
}

/// The filter `kind_property eq 'kind'`.
pub fn kind_filter(kind_property: &str, kind: &str) -> Filter {
    filter::property_named(kind_property).eq(kind)
}

/// Whether two strings are equal, in a `const` context (for the derive's compile-time
/// checks across types).
#[doc(hidden)]
pub const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Items the derive macros' generated code names. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use super::field::{FieldProblem, enum_discriminant};
    pub use super::handle::{Declared, End, IdList, Index, Partition, Row};
    pub use super::property::{BlobProperty, KeyField, Property, Settable};
    pub use super::template::{KeyText, separator_fits};
    pub use super::{
        BlobField, DeclaredMeta, EXPIRES_PROPERTY, EntityKinds, EntityReader, EntityType,
        EntityWriter, FieldMeta, FieldStorage, FieldValue, KeyFormat, KeyPart, KeyTemplate,
        PaddedKeyPart, PlainWrite, Points, Projection, Record, Schema, SeriesType, SpreadField,
        Stored, TemplatePart, TicksKeyPart, const_str_eq, kind_filter, render_key, stored_kind,
        unknown_kind,
    };
    pub use crate::error::{Error, Result};
    pub use crate::filter::Filter;
    pub use crate::keys::KeyError;
    pub use crate::limits::KeyKind;
    pub use crate::model::{EdmType, Entity, Value};
    pub use ::core::option::Option::{self, None, Some};
    pub use ::core::result::Result::{Err, Ok};
    pub use serde::Serialize;
    pub use serde::de::DeserializeOwned;
    pub use std::string::String;

    /// Compile-time check that a field type may be spread over many properties.
    pub const fn assert_spread<T: SpreadField>() {}
    /// Compile-time check that a field type has a property mapping.
    pub const fn assert_field<T: FieldValue>() {}
    /// Compile-time check that a field type may be a key part.
    pub const fn assert_key_part<T: KeyPart>() {}
    /// Compile-time check that a field type may be zero padded.
    pub const fn assert_padded<T: PaddedKeyPart>() {}
    /// Compile-time check that a field type may be written as inverted ticks.
    pub const fn assert_ticks<T: TicksKeyPart>() {}
    /// Compile-time check that a field type may be a blob field.
    pub const fn assert_blob<T: BlobField>() {}
    /// Compile-time check that a json field type is serde-serialisable.
    pub const fn assert_json<T: Serialize + DeserializeOwned>() {}
    /// Compile-time check that a skipped field's type has a default.
    pub const fn assert_default<T: Default>() {}
    /// Compile-time check that a variant's type is an entity type.
    pub const fn assert_entity_type<T: EntityType>() {}

    /// Adapts an upcaster with any displayable error.
    pub fn upcast_with<E: std::fmt::Display>(
        entity: &mut Entity,
        version: u32,
        upcaster: fn(&mut Entity, u32) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), String> {
        upcaster(entity, version).map_err(|e| e.to_string())
    }
}
