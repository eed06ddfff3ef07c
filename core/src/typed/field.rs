//! Field conversions: how the Rust type of a field maps onto a typed property, and back.
//!
//! | Rust type | property |
//! | --- | --- |
//! | `String` | `Edm.String` |
//! | `i8`, `i16`, `i32`, `u8`, `u16` | `Edm.Int32` |
//! | `u32`, `i64`, `u64`, `isize`, `usize` | `Edm.Int64` |
//! | `f64` | `Edm.Double` |
//! | `bool` | `Edm.Boolean` |
//! | `DateTime<Utc>` | `Edm.DateTime` |
//! | `Uuid` | `Edm.Guid` |
//! | `Vec<u8>` | `Edm.Binary` |
//! | `Option<T>` | as `T`; `None` is an absent property |
//! | a unit enum with `#[derive(FieldEnum)]` | `Edm.String` (the variant's name), or `Edm.Int32` (its discriminant) with `#[field_enum(repr = "int")]` |
//! | `#[entity(json)] T` | `Edm.String` holding `T` as JSON; JSON `null` is an absent property |
//!
//! Integers never overflow silently: a `u64` above `i64::MAX` is refused on write (the
//! table service has no unsigned 64-bit type), and a stored integer that does not fit the
//! field is refused on read. Reads accept either integer width when the value fits, so data
//! written by other clients (which pick Int32 or Int64 by magnitude) reads back.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::model::{EdmType, Value};

/// What is wrong with one property of a typed entity.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldProblem {
    /// A required property is absent.
    #[error("the property is missing")]
    Missing,
    /// The property has another type than the field.
    #[error("expected {expected}, found {found}")]
    WrongType {
        /// The type the field reads.
        expected: &'static str,
        /// The stored type.
        found: EdmType,
    },
    /// The value does not fit the field's or the store's type.
    #[error("{value} does not fit {target}")]
    OutOfRange {
        /// The value.
        value: String,
        /// The type it does not fit.
        target: &'static str,
    },
    /// A `json` field could not be written or read.
    #[error("json: {0}")]
    Json(String),
    /// The entity is of another kind.
    #[error("the entity is of kind `{found}`, expected {expected}")]
    WrongKind {
        /// The kinds that were expected.
        expected: String,
        /// The stored kind.
        found: String,
    },
    /// The entity was written by a newer version of its type than this program knows.
    #[error(
        "the entity has version {stored}, newer than version {supported} that this program reads"
    )]
    NewerVersion {
        /// The stored version.
        stored: i64,
        /// The newest version this program reads.
        supported: u32,
    },
    /// The upcaster failed to upgrade an old version.
    #[error("upgrading from version {from}: {message}")]
    Upcast {
        /// The stored version.
        from: u32,
        /// The upcaster's error.
        message: String,
    },
    /// The stored value of a `#[derive(FieldEnum)]` enum names none of its variants (and
    /// the enum has no `#[field_enum(other)]` variant to take it).
    #[error(
        "`{value}` is not a value of `{type_name}`, expected one of {}",
        quoted_list(expected)
    )]
    UnknownVariant {
        /// The enum.
        type_name: &'static str,
        /// The stored value (a name, or an integer's decimal text).
        value: String,
        /// The values the enum stores: its variants' names, or `Name = 1` for an integer
        /// enum.
        expected: &'static [&'static str],
    },
}

/// `` `a`, `b` or `c` ``.
fn quoted_list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Whether a typed entity was being written or read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Converting a value into an entity to write.
    Write,
    /// Reading a stored entity into a value.
    Read,
}

/// A property of a typed entity that could not be written or read, with the entity's keys.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "cannot {verb} property `{property}` of {type_name} (PartitionKey `{partition_key}`, RowKey `{row_key}`): {problem}",
    verb = match direction { Direction::Write => "write", Direction::Read => "read" }
)]
pub struct FieldError {
    /// Writing or reading.
    pub direction: Direction,
    /// The Rust type.
    pub type_name: &'static str,
    /// The entity's PartitionKey.
    pub partition_key: String,
    /// The entity's RowKey.
    pub row_key: String,
    /// The property (or the kind or version property).
    pub property: String,
    /// What is wrong.
    pub problem: FieldProblem,
}

/// A Rust type that a field of a typed entity may have.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be stored as a property",
    label = "this field's type has no property mapping",
    note = "fields are String, integers, f64, bool, DateTime<Utc>, Uuid, Vec<u8>, unit enums with `#[derive(tablekit::FieldEnum)]`, or Option of these; store a nested serde type with `#[entity(json)]`, or leave the field out with `#[entity(skip)]`"
)]
pub trait FieldValue: Sized {
    /// The property type the field is stored as.
    const EDM: EdmType;
    /// Whether the field may be absent (`Option`).
    const OPTIONAL: bool = false;

    /// The property value, or `None` for an absent property.
    ///
    /// # Errors
    /// [`FieldProblem::OutOfRange`] for a value the store's type cannot hold.
    fn to_value(&self) -> Result<Option<Value>, FieldProblem>;

    /// Reads the field from its property (`None` when absent).
    ///
    /// # Errors
    /// [`FieldProblem::Missing`], [`FieldProblem::WrongType`] or
    /// [`FieldProblem::OutOfRange`].
    fn from_value(value: Option<Value>) -> Result<Self, FieldProblem>;
}

fn wrong(expected: &'static str, found: &Value) -> FieldProblem {
    FieldProblem::WrongType {
        expected,
        found: found.edm_type(),
    }
}

fn required(value: Option<Value>) -> Result<Value, FieldProblem> {
    value.ok_or(FieldProblem::Missing)
}

impl FieldValue for String {
    const EDM: EdmType = EdmType::String;

    fn to_value(&self) -> Result<Option<Value>, FieldProblem> {
        Ok(Some(Value::String(self.clone())))
    }

    fn from_value(value: Option<Value>) -> Result<Self, FieldProblem> {
        match required(value)? {
            Value::String(s) => Ok(s),
            other => Err(wrong("Edm.String", &other)),
        }
    }
}

/// Reads any stored integer into the wide `i128`, for checked narrowing.
fn stored_integer(value: Option<Value>, expected: &'static str) -> Result<i128, FieldProblem> {
    match required(value)? {
        Value::Int32(n) => Ok(i128::from(n)),
        Value::Int64(n) => Ok(i128::from(n)),
        other => Err(wrong(expected, &other)),
    }
}

/// Reads the stored integer of a `#[field_enum(repr = "int")]` enum: an `Int32`, or an
/// `Int64` another client wrote, that fits an `i64`.
///
/// # Errors
/// [`FieldProblem::Missing`] or [`FieldProblem::WrongType`].
#[doc(hidden)]
pub fn enum_discriminant(value: Option<Value>) -> Result<i64, FieldProblem> {
    match required(value)? {
        Value::Int32(n) => Ok(i64::from(n)),
        Value::Int64(n) => Ok(n),
        other => Err(wrong("Edm.Int32", &other)),
    }
}

macro_rules! int32_field {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            const EDM: EdmType = EdmType::Int32;

            fn to_value(&self) -> Result<Option<Value>, FieldProblem> {
                Ok(Some(Value::Int32(i32::from(*self))))
            }

            fn from_value(value: Option<Value>) -> Result<Self, FieldProblem> {
                let n = stored_integer(value, "Edm.Int32")?;
                <$t>::try_from(n).map_err(|_| FieldProblem::OutOfRange {
                    value: n.to_string(),
                    target: stringify!($t),
                })
            }
        }
    )*};
}

macro_rules! int64_field {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            const EDM: EdmType = EdmType::Int64;

            fn to_value(&self) -> Result<Option<Value>, FieldProblem> {
                i64::try_from(*self)
                    .map(|n| Some(Value::Int64(n)))
                    .map_err(|_| FieldProblem::OutOfRange {
                        value: self.to_string(),
                        target: "Int64 (the table service has no unsigned 64-bit type)",
                    })
            }

            fn from_value(value: Option<Value>) -> Result<Self, FieldProblem> {
                let n = stored_integer(value, "Edm.Int64")?;
                <$t>::try_from(n).map_err(|_| FieldProblem::OutOfRange {
                    value: n.to_string(),
                    target: stringify!($t),
                })
            }
        }
    )*};
}

int32_field!(i8, i16, i32, u8, u16);
int64_field!(u32, i64, u64, isize, usize);

impl FieldValue for f64 {
    const EDM: EdmType = EdmType::Double;

    fn to_value(&self) -> Result<Option<Value>, FieldProblem> {
        Ok(Some(Value::Double(*self)))
    }

    fn from_value(value: Option<Value>) -> Result<Self, FieldProblem> {
        match required(value)? {
            Value::Double(n) => Ok(n),
            other => Err(wrong("Edm.Double", &other)),
        }
    }
}

impl FieldValue for bool {
    const EDM: EdmType = EdmType::Boolean;

    fn to_value(&self) -> Result<Option<Value>, FieldProblem> {
        Ok(Some(Value::Boolean(*self)))
    }

    fn from_value(value: Option<Value>) -> Result<Self, FieldProblem> {
        match required(value)? {
            Value::Boolean(b) => Ok(b),
            other => Err(wrong("Edm.Boolean", &other)),
        }
    }
}

impl FieldValue for DateTime<Utc> {
    const EDM: EdmType = EdmType::DateTime;

    fn to_value(&self) -> Result<Option<Value>, FieldProblem> {
        Ok(Some(Value::DateTime(*self)))
    }

    fn from_value(value: Option<Value>) -> Result<Self, FieldProblem> {
        match required(value)? {
            Value::DateTime(at) => Ok(at),
            other => Err(wrong("Edm.DateTime", &other)),
        }
    }
}

impl FieldValue for Uuid {
    const EDM: EdmType = EdmType::Guid;

    fn to_value(&self) -> Result<Option<Value>, FieldProblem> {
        Ok(Some(Value::Guid(*self)))
    }

    fn from_value(value: Option<Value>) -> Result<Self, FieldProblem> {
        match required(value)? {
            Value::Guid(id) => Ok(id),
            other => Err(wrong("Edm.Guid", &other)),
        }
    }
}

impl FieldValue for Vec<u8> {
    const EDM: EdmType = EdmType::Binary;

    fn to_value(&self) -> Result<Option<Value>, FieldProblem> {
        Ok(Some(Value::Binary(self.clone())))
    }

    fn from_value(value: Option<Value>) -> Result<Self, FieldProblem> {
        match required(value)? {
            Value::Binary(bytes) => Ok(bytes),
            other => Err(wrong("Edm.Binary", &other)),
        }
    }
}

impl<T: FieldValue> FieldValue for Option<T> {
    const EDM: EdmType = T::EDM;
    const OPTIONAL: bool = true;

    fn to_value(&self) -> Result<Option<Value>, FieldProblem> {
        match self {
            Some(value) => value.to_value(),
            None => Ok(None),
        }
    }

    fn from_value(value: Option<Value>) -> Result<Self, FieldProblem> {
        match value {
            None => Ok(None),
            value => T::from_value(value).map(Some),
        }
    }
}

/// The property of a `json` field: the value as a JSON string, or absent when it is JSON
/// `null` (so `Option<T>` fields are absent when `None`).
///
/// # Errors
/// [`FieldProblem::Json`] when serialisation fails.
pub fn json_to_value<T: Serialize>(value: &T) -> Result<Option<Value>, FieldProblem> {
    let json = serde_json::to_value(value).map_err(|e| FieldProblem::Json(e.to_string()))?;
    if json.is_null() {
        return Ok(None);
    }
    serde_json::to_string(&json)
        .map(|s| Some(Value::String(s)))
        .map_err(|e| FieldProblem::Json(e.to_string()))
}

/// Reads a `json` field: an absent property reads as JSON `null`.
///
/// # Errors
/// [`FieldProblem::WrongType`] for a property that is not a string, [`FieldProblem::Missing`]
/// when absent and the type does not accept `null`, [`FieldProblem::Json`] for text that
/// does not deserialise.
pub fn json_from_value<T: DeserializeOwned>(value: Option<Value>) -> Result<T, FieldProblem> {
    match value {
        None => serde_json::from_value(serde_json::Value::Null).map_err(|_| FieldProblem::Missing),
        Some(Value::String(text)) => {
            serde_json::from_str(&text).map_err(|e| FieldProblem::Json(e.to_string()))
        }
        Some(other) => Err(wrong("Edm.String (JSON)", &other)),
    }
}

/// The field types a `#[entity(blob)]` field may have: binary or text content, optional or
/// not. `LargeTable` and `IndexedTable::with_blobs` (tablekit-patterns) offload it to their
/// blob store; a plain [`Table`](crate::typed::Table) stores it inline as its property.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a blob field",
    label = "marked `#[entity(blob)]`",
    note = "blob fields hold content: Vec<u8>, String, or an Option of either"
)]
pub trait BlobField: FieldValue {}

impl BlobField for Vec<u8> {}
impl BlobField for String {}
impl BlobField for Option<Vec<u8>> {}
impl BlobField for Option<String> {}
impl<V: serde::Serialize + serde::de::DeserializeOwned> BlobField for super::Points<V> {}

/// The field types an `#[entity(expires)]` field may have: the instant the entity
/// expires, or `None` for an entity that never does.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot say when an entity expires",
    label = "marked `#[entity(expires)]`",
    note = "an expiry field is a `DateTime<Utc>` or an `Option<DateTime<Utc>>` (`None`: never expires)"
)]
pub trait ExpiresField: FieldValue {
    /// When the entity expires.
    fn expires_at(&self) -> Option<DateTime<Utc>>;
}

impl ExpiresField for DateTime<Utc> {
    fn expires_at(&self) -> Option<DateTime<Utc>> {
        Some(*self)
    }
}

impl ExpiresField for Option<DateTime<Utc>> {
    fn expires_at(&self) -> Option<DateTime<Utc>> {
        *self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_map_to_the_narrowest_type_that_holds_them() {
        assert_eq!(7u16.to_value(), Ok(Some(Value::Int32(7))));
        assert_eq!(
            u32::MAX.to_value(),
            Ok(Some(Value::Int64(i64::from(u32::MAX))))
        );
        assert!(matches!(
            u64::MAX.to_value(),
            Err(FieldProblem::OutOfRange { .. })
        ));
        assert_eq!(
            (i64::MAX as u64).to_value(),
            Ok(Some(Value::Int64(i64::MAX)))
        );
    }

    #[test]
    fn reads_accept_either_width_when_the_value_fits() {
        assert_eq!(u32::from_value(Some(Value::Int32(5))), Ok(5));
        assert_eq!(i32::from_value(Some(Value::Int64(5))), Ok(5));
        assert!(matches!(
            i32::from_value(Some(Value::Int64(i64::MAX))),
            Err(FieldProblem::OutOfRange { .. })
        ));
        assert!(matches!(
            u8::from_value(Some(Value::Int32(-1))),
            Err(FieldProblem::OutOfRange { .. })
        ));
        assert!(matches!(
            i32::from_value(Some(Value::String("5".into()))),
            Err(FieldProblem::WrongType { .. })
        ));
        assert_eq!(i32::from_value(None), Err(FieldProblem::Missing));
        assert_eq!(Option::<i32>::from_value(None), Ok(None));
    }

    #[test]
    fn json_null_is_an_absent_property() {
        assert_eq!(json_to_value(&Option::<Vec<u8>>::None), Ok(None));
        assert_eq!(
            json_to_value(&vec![1, 2]),
            Ok(Some(Value::String("[1,2]".into())))
        );
        assert_eq!(json_from_value::<Option<Vec<u8>>>(None), Ok(None));
        assert_eq!(json_from_value::<Vec<u8>>(None), Err(FieldProblem::Missing));
        assert!(matches!(
            json_from_value::<Vec<u8>>(Some(Value::String("{".into()))),
            Err(FieldProblem::Json(_))
        ));
    }

    #[test]
    fn an_unknown_enum_value_names_the_values_expected() {
        let problem = FieldProblem::UnknownVariant {
            type_name: "Status",
            value: "Lost".into(),
            expected: &["placed", "shipped", "delivered"],
        };
        assert_eq!(
            problem.to_string(),
            "`Lost` is not a value of `Status`, expected one of `placed`, `shipped` or `delivered`"
        );
    }

    #[test]
    fn enum_discriminants_read_from_either_integer_width() {
        assert_eq!(enum_discriminant(Some(Value::Int32(2))), Ok(2));
        assert_eq!(enum_discriminant(Some(Value::Int64(1 << 40))), Ok(1 << 40));
        assert_eq!(enum_discriminant(None), Err(FieldProblem::Missing));
        assert!(matches!(
            enum_discriminant(Some(Value::String("2".into()))),
            Err(FieldProblem::WrongType { .. })
        ));
    }
}
