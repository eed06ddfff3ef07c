//! The values a key template writes: the [`KeyPart`] trait and its impls (strings,
//! integers, `bool`, `Uuid`, `DateTime<Utc>`, stored values), and the traits that mark
//! the types a padded or a `ticks_desc` field accepts.

use chrono::{DateTime, SecondsFormat, Utc};
use uuid::Uuid;

use super::part::KeyFormat;
use crate::keys::{self, KeyError};
use crate::model::EdmType;

/// A value that can be written into a key.
///
/// | type | `{f}` | `{f:0N}` | `{f:hashN}` | `{f:ticks_desc}` |
/// | --- | --- | --- | --- | --- |
/// | `String`, `str` | the text | – | yes | – |
/// | unsigned integers | decimal | yes | yes | – |
/// | signed integers | decimal | non-negative values only | yes | – |
/// | `bool` | `true` / `false` | – | yes | – |
/// | `Uuid` | lower-case hyphenated (fixed width) | – | yes | – |
/// | `DateTime<Utc>` | RFC 3339, 9 fraction digits, `Z` (fixed width, sorts by time) | – | yes | yes |
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be part of a key",
    label = "used in a key template",
    note = "key fields are String, integers, bool, Uuid or DateTime<Utc>; an Option, float, binary or json field cannot be in a key because a key always has one exact text"
)]
pub trait KeyPart: Sync {
    /// Appends the value's key text in `format`.
    ///
    /// # Errors
    /// [`KeyError::Format`] for a format that does not apply to the type; the key
    /// helpers' errors for values they refuse (negative, too wide, out of range).
    fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError>;

    /// Whether the value is an integer (whose plain text does not sort numerically).
    fn is_numeric(&self) -> bool {
        false
    }

    /// Whether the value's plain text is free text (a string), which a key template checks
    /// against the separator after it when it renders: a string holding the separator or a
    /// character below it is refused, so that no two values render the same key and the
    /// keys sort as the values. Closed alphabets (numbers, `bool`, enums) are checked once,
    /// at compile time, through [`KeyText`].
    fn is_text(&self) -> bool {
        false
    }

    /// The property type a field of the value's type is stored as, which a look-up by
    /// name (an index chosen at run time) checks against its key field's. `None`, the
    /// default, leaves the value unchecked.
    fn stored_type(&self) -> Option<EdmType> {
        None
    }

    /// The value's type, as an error about it names it.
    fn type_name(&self) -> &'static str {
        std::any::type_name::<Self>()
    }
}

/// What a separator after a field's plain text (`{field},…`) must sort below, checked by
/// `#[derive(Entity)]` at compile time so that no template can render one key for two
/// values.
///
/// | type | `FLOOR` | why |
/// | --- | --- | --- |
/// | `String`, `str` | `-` | below digits, letters and `- . _`; each value is checked when it renders |
/// | unsigned integers | `0` | below every digit |
/// | signed integers | `-` | below the sign and every digit |
/// | `bool` | `a` | below every letter of `true` and `false` |
/// | `Uuid`, `DateTime<Utc>` | `char::MAX` | fixed-width text: any separator keeps them apart |
/// | `#[derive(tablekit::FieldEnum)]` enums | below every character of their stored names | |
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say which separators may follow it in a key",
    label = "a separator follows this field in the key template",
    note = "implement `KeyText` for the type (its `FLOOR` is the lowest character its key text can hold), or derive it with `#[derive(tablekit::FieldEnum)]`"
)]
pub trait KeyText: KeyPart {
    /// A separator after the field's plain text must sort below this character.
    const FLOOR: char;
}

/// Whether `separator` may follow the plain text of a `T` in a key template (what the
/// derive checks at compile time).
pub const fn separator_fits<T: KeyText + ?Sized>(separator: char) -> bool {
    (separator as u32) < (T::FLOOR as u32)
}

fn wrong_format(format: KeyFormat, type_name: &'static str) -> KeyError {
    KeyError::Format {
        format: format.to_string(),
        type_name,
    }
}

fn write_plain_or_hash(
    text: &str,
    format: KeyFormat,
    type_name: &'static str,
    out: &mut String,
) -> Result<(), KeyError> {
    match format {
        KeyFormat::Plain => out.push_str(text),
        KeyFormat::Hash(n) => out.push_str(&keys::hash_prefix(text, usize::from(n))),
        other => return Err(wrong_format(other, type_name)),
    }
    Ok(())
}

impl KeyPart for str {
    fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError> {
        write_plain_or_hash(self, format, "string", out)
    }

    fn is_text(&self) -> bool {
        true
    }

    fn stored_type(&self) -> Option<EdmType> {
        Some(EdmType::String)
    }

    fn type_name(&self) -> &'static str {
        "str"
    }
}

impl KeyPart for String {
    fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError> {
        self.as_str().write_key(format, out)
    }

    fn is_text(&self) -> bool {
        true
    }

    fn stored_type(&self) -> Option<EdmType> {
        Some(EdmType::String)
    }

    fn type_name(&self) -> &'static str {
        "String"
    }
}

impl<T: KeyPart + ?Sized> KeyPart for &T {
    fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError> {
        (**self).write_key(format, out)
    }

    fn is_numeric(&self) -> bool {
        (**self).is_numeric()
    }

    fn is_text(&self) -> bool {
        (**self).is_text()
    }

    fn stored_type(&self) -> Option<EdmType> {
        (**self).stored_type()
    }

    fn type_name(&self) -> &'static str {
        (**self).type_name()
    }
}

impl KeyText for str {
    const FLOOR: char = '-';
}
impl KeyText for String {
    const FLOOR: char = '-';
}
impl<T: KeyText + ?Sized> KeyText for &T {
    const FLOOR: char = T::FLOOR;
}
impl KeyText for bool {
    const FLOOR: char = 'a';
}
impl KeyText for Uuid {
    const FLOOR: char = char::MAX;
}
impl KeyText for DateTime<Utc> {
    const FLOOR: char = char::MAX;
}

impl KeyPart for bool {
    fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError> {
        write_plain_or_hash(if *self { "true" } else { "false" }, format, "bool", out)
    }

    fn stored_type(&self) -> Option<EdmType> {
        Some(EdmType::Boolean)
    }

    fn type_name(&self) -> &'static str {
        "bool"
    }
}

impl KeyPart for Uuid {
    fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError> {
        write_plain_or_hash(
            self.hyphenated().encode_lower(&mut Uuid::encode_buffer()),
            format,
            "Uuid",
            out,
        )
    }

    fn stored_type(&self) -> Option<EdmType> {
        Some(EdmType::Guid)
    }

    fn type_name(&self) -> &'static str {
        "Uuid"
    }
}

impl KeyPart for DateTime<Utc> {
    fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError> {
        match format {
            KeyFormat::TicksDesc => {
                out.push_str(&keys::ticks_desc(*self)?);
                Ok(())
            }
            other => write_plain_or_hash(
                &self.to_rfc3339_opts(SecondsFormat::Nanos, true),
                other,
                "DateTime<Utc>",
                out,
            ),
        }
    }

    fn stored_type(&self) -> Option<EdmType> {
        Some(EdmType::DateTime)
    }

    fn type_name(&self) -> &'static str {
        "DateTime<Utc>"
    }
}

macro_rules! unsigned_key_part {
    ($($t:ty),*) => {$(
        impl KeyPart for $t {
            fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError> {
                match format {
                    KeyFormat::Pad(width) => {
                        out.push_str(&keys::pad(*self as u64, usize::from(width))?);
                        Ok(())
                    }
                    other => write_plain_or_hash(&self.to_string(), other, stringify!($t), out),
                }
            }

            fn is_numeric(&self) -> bool {
                true
            }

            fn stored_type(&self) -> Option<EdmType> {
                Some(<$t as crate::typed::FieldValue>::EDM)
            }

            fn type_name(&self) -> &'static str {
                stringify!($t)
            }
        }

        impl PaddedKeyPart for $t {}

        impl KeyText for $t {
            const FLOOR: char = '0';
        }
    )*};
}

macro_rules! signed_key_part {
    ($($t:ty),*) => {$(
        impl KeyPart for $t {
            fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError> {
                match format {
                    KeyFormat::Pad(width) => {
                        out.push_str(&keys::pad_signed(*self as i64, usize::from(width))?);
                        Ok(())
                    }
                    other => write_plain_or_hash(&self.to_string(), other, stringify!($t), out),
                }
            }

            fn is_numeric(&self) -> bool {
                true
            }

            fn stored_type(&self) -> Option<EdmType> {
                Some(<$t as crate::typed::FieldValue>::EDM)
            }

            fn type_name(&self) -> &'static str {
                stringify!($t)
            }
        }

        impl KeyText for $t {
            const FLOOR: char = '-';
        }
    )*};
}

unsigned_key_part!(u8, u16, u32, u64, usize);
signed_key_part!(i8, i16, i32, i64, isize);

/// A stored property as a key part, so a template renders from an entity's properties
/// as it does from the typed fields they were written from (an unsigned field stored as
/// `Int64` pads the same way).
impl KeyPart for crate::model::Value {
    fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError> {
        use crate::model::Value;
        match self {
            Value::String(s) => s.write_key(format, out),
            Value::Int32(n) => n.write_key(format, out),
            Value::Int64(n) => n.write_key(format, out),
            Value::Boolean(b) => b.write_key(format, out),
            Value::DateTime(t) => t.write_key(format, out),
            Value::Guid(g) => g.write_key(format, out),
            Value::Double(_) => Err(wrong_format(format, "Double")),
            Value::Binary(_) => Err(wrong_format(format, "Binary")),
        }
    }

    fn is_numeric(&self) -> bool {
        matches!(
            self,
            crate::model::Value::Int32(_) | crate::model::Value::Int64(_)
        )
    }

    fn is_text(&self) -> bool {
        matches!(self, crate::model::Value::String(_))
    }

    fn stored_type(&self) -> Option<EdmType> {
        Some(self.edm_type())
    }

    fn type_name(&self) -> &'static str {
        self.edm_type().odata_name()
    }
}

/// The types a `{field:0N}` template may pad: unsigned integers, whose padded text sorts
/// numerically. `#[derive(Entity)]` requires it at compile time.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be zero padded in a key",
    label = "padded in this key template",
    note = "padding keeps numeric order only for non-negative integers: use an unsigned integer type (u8, u16, u32, u64, usize); a negative number would sort wrongly"
)]
pub trait PaddedKeyPart: KeyPart {}

/// The types a `{field:ticks_desc}` template accepts: `DateTime<Utc>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be written as inverted ticks",
    label = "`ticks_desc` in this key template",
    note = "`ticks_desc` (inverted .NET ticks, the log-tail key) applies to DateTime<Utc> fields"
)]
pub trait TicksKeyPart: KeyPart {}

impl TicksKeyPart for DateTime<Utc> {}
