//! The table-service data model: typed property values, ETags and entities.

use std::fmt;

use chrono::{DateTime, Utc};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The name of the partition-key system property.
pub const PARTITION_KEY: &str = "PartitionKey";
/// The name of the row-key system property.
pub const ROW_KEY: &str = "RowKey";
/// The name of the timestamp system property (set by the store on every write).
pub const TIMESTAMP: &str = "Timestamp";

/// The type of a property value, named as the table service names it (`Edm.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EdmType {
    /// `Edm.String`: UTF-8 text.
    String,
    /// `Edm.Int32`.
    Int32,
    /// `Edm.Int64`.
    Int64,
    /// `Edm.Double`.
    Double,
    /// `Edm.Boolean`.
    Boolean,
    /// `Edm.DateTime`: an instant in UTC.
    DateTime,
    /// `Edm.Guid`.
    Guid,
    /// `Edm.Binary`: a byte array.
    Binary,
}

impl EdmType {
    /// The OData type name, e.g. `Edm.Int64`.
    pub fn odata_name(self) -> &'static str {
        match self {
            EdmType::String => "Edm.String",
            EdmType::Int32 => "Edm.Int32",
            EdmType::Int64 => "Edm.Int64",
            EdmType::Double => "Edm.Double",
            EdmType::Boolean => "Edm.Boolean",
            EdmType::DateTime => "Edm.DateTime",
            EdmType::Guid => "Edm.Guid",
            EdmType::Binary => "Edm.Binary",
        }
    }
}

impl fmt::Display for EdmType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.odata_name())
    }
}

/// A typed property value.
///
/// Serialised with serde as `{"type": "Int64", "value": 5}` so that the type survives a
/// round trip through JSON (a plain JSON number could not tell Int32 from Int64).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value")]
pub enum Value {
    /// `Edm.String`.
    String(String),
    /// `Edm.Int32`.
    Int32(i32),
    /// `Edm.Int64`.
    Int64(i64),
    /// `Edm.Double`.
    Double(f64),
    /// `Edm.Boolean`.
    Boolean(bool),
    /// `Edm.DateTime`, always UTC.
    DateTime(DateTime<Utc>),
    /// `Edm.Guid`.
    Guid(Uuid),
    /// `Edm.Binary`.
    Binary(Vec<u8>),
}

impl Value {
    /// The value's type.
    pub fn edm_type(&self) -> EdmType {
        match self {
            Value::String(_) => EdmType::String,
            Value::Int32(_) => EdmType::Int32,
            Value::Int64(_) => EdmType::Int64,
            Value::Double(_) => EdmType::Double,
            Value::Boolean(_) => EdmType::Boolean,
            Value::DateTime(_) => EdmType::DateTime,
            Value::Guid(_) => EdmType::Guid,
            Value::Binary(_) => EdmType::Binary,
        }
    }

    /// The value as a string slice, if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an `i32`, if it is an Int32.
    pub fn as_i32(&self) -> Option<i32> {
        match self {
            Value::Int32(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as an `i64`, if it is an Int64.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int64(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as an `f64`, if it is a Double.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Double(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as a `bool`, if it is a Boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Boolean(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as a UTC instant, if it is a DateTime.
    pub fn as_datetime(&self) -> Option<DateTime<Utc>> {
        match self {
            Value::DateTime(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as a GUID, if it is a Guid.
    pub fn as_guid(&self) -> Option<Uuid> {
        match self {
            Value::Guid(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as bytes, if it is Binary.
    pub fn as_binary(&self) -> Option<&[u8]> {
        match self {
            Value::Binary(v) => Some(v),
            _ => None,
        }
    }
}

macro_rules! value_from {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(impl From<$t> for Value {
            fn from(v: $t) -> Self {
                Value::$variant(v.into())
            }
        })*
    };
}

value_from!(
    String => String,
    &str => String,
    i32 => Int32,
    i64 => Int64,
    f64 => Double,
    bool => Boolean,
    DateTime<Utc> => DateTime,
    Uuid => Guid,
    Vec<u8> => Binary,
    &[u8] => Binary,
);

/// An entity tag: the version of a stored entity, fresh on every write.
///
/// Opaque to callers; compare two ETags only for equality.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ETag(String);

impl ETag {
    /// Wraps an ETag value as a backend returned it.
    pub fn new(value: impl Into<String>) -> Self {
        ETag(value.into())
    }

    /// The ETag as the backend wrote it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ETag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The optimistic-concurrency condition of a replace, merge or delete.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IfMatch {
    /// Apply whatever version is stored (`If-Match: *`).
    Any,
    /// Apply only if the stored entity still has this ETag.
    ETag(ETag),
}

impl IfMatch {
    /// Whether a stored entity with `current` as its ETag satisfies the condition.
    pub fn matches(&self, current: &ETag) -> bool {
        match self {
            IfMatch::Any => true,
            IfMatch::ETag(expected) => expected == current,
        }
    }
}

impl From<ETag> for IfMatch {
    fn from(etag: ETag) -> Self {
        IfMatch::ETag(etag)
    }
}

impl From<&ETag> for IfMatch {
    fn from(etag: &ETag) -> Self {
        IfMatch::ETag(etag.clone())
    }
}

/// The user properties of an entity, in the order they were set.
pub type Properties = IndexMap<String, Value>;

/// An entity: PartitionKey + RowKey, the store-managed Timestamp and ETag, and its typed
/// user properties in order.
///
/// ```
/// use tablekit_core::{Entity, Value};
///
/// let e = Entity::new("Sales", "empid_000123")
///     .with("FirstName", "Jun")
///     .with("Age", 47);
/// assert_eq!(e.get("Age"), Some(&Value::Int32(47)));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entity {
    /// The partition key.
    #[serde(rename = "PartitionKey")]
    pub partition_key: String,
    /// The row key, unique within the partition.
    #[serde(rename = "RowKey")]
    pub row_key: String,
    /// When the store last wrote the entity; `None` on an entity that was never stored.
    #[serde(rename = "Timestamp", default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<DateTime<Utc>>,
    /// The stored version; `None` on an entity that was never stored.
    #[serde(rename = "ETag", default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<ETag>,
    /// The user properties.
    #[serde(rename = "Properties", default)]
    pub properties: Properties,
}

impl Entity {
    /// An entity with the given keys and no properties.
    pub fn new(partition_key: impl Into<String>, row_key: impl Into<String>) -> Self {
        Entity {
            partition_key: partition_key.into(),
            row_key: row_key.into(),
            timestamp: None,
            etag: None,
            properties: Properties::new(),
        }
    }

    /// Sets a property and returns the entity (builder style).
    pub fn with(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.set(name, value);
        self
    }

    /// Sets a property, replacing any value of the same name in place.
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<Value>) {
        self.properties.insert(name.into(), value.into());
    }

    /// A property's value.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.properties.get(name)
    }

    /// Removes a property, keeping the order of the others.
    pub fn remove(&mut self, name: &str) -> Option<Value> {
        self.properties.shift_remove(name)
    }

    /// A property or system property by name: `PartitionKey`, `RowKey` and `Timestamp`
    /// resolve to the system values, anything else to a user property.
    pub fn lookup(&self, name: &str) -> Option<Value> {
        match name {
            PARTITION_KEY => Some(Value::String(self.partition_key.clone())),
            ROW_KEY => Some(Value::String(self.row_key.clone())),
            TIMESTAMP => self.timestamp.map(Value::DateTime),
            _ => self.properties.get(name).cloned(),
        }
    }

    /// The (PartitionKey, RowKey) pair.
    pub fn key(&self) -> (&str, &str) {
        (&self.partition_key, &self.row_key)
    }

    /// Keeps only the named user properties (projection); system properties always stay.
    pub fn project<S: AsRef<str>>(&mut self, select: &[S]) {
        self.properties
            .retain(|name, _| select.iter().any(|s| s.as_ref() == name));
    }
}

/// An entity's address.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EntityRef {
    /// The table.
    pub table: String,
    /// The PartitionKey.
    pub partition_key: String,
    /// The RowKey.
    pub row_key: String,
}

impl EntityRef {
    /// An address.
    pub fn new(
        table: impl Into<String>,
        partition_key: impl Into<String>,
        row_key: impl Into<String>,
    ) -> Self {
        EntityRef {
            table: table.into(),
            partition_key: partition_key.into(),
            row_key: row_key.into(),
        }
    }

    /// The address of a stored entity.
    pub fn of(table: &str, entity: &Entity) -> Self {
        EntityRef::new(table, &entity.partition_key, &entity.row_key)
    }

    /// [`Error::NotFound`](crate::Error::NotFound) for this entity.
    pub fn not_found(&self) -> crate::Error {
        crate::Error::not_found(&self.table, &self.partition_key, &self.row_key)
    }

    /// [`Error::PreconditionFailed`](crate::Error::PreconditionFailed) for this entity (its
    /// ETag is not the one expected).
    pub fn precondition_failed(&self) -> crate::Error {
        crate::Error::precondition_failed(&self.table, &self.partition_key, &self.row_key)
    }
}

impl std::fmt::Display for EntityRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}({}, {})",
            self.table, self.partition_key, self.row_key
        )
    }
}
