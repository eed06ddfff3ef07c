//! The values a key template writes: the [`KeyPart`] trait and its impls (strings,
//! integers, `bool`, `Uuid`, `DateTime<Utc>`, stored values), and the traits that mark
//! the types a padded or a `ticks_desc` field accepts.

use chrono::{DateTime, SecondsFormat, Utc};
use uuid::Uuid;

use super::part::KeyFormat;
use crate::keys::{self, KeyError};

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
}

impl KeyPart for String {
    fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError> {
        self.as_str().write_key(format, out)
    }
}

impl<T: KeyPart + ?Sized> KeyPart for &T {
    fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError> {
        (**self).write_key(format, out)
    }

    fn is_numeric(&self) -> bool {
        (**self).is_numeric()
    }
}

impl KeyPart for bool {
    fn write_key(&self, format: KeyFormat, out: &mut String) -> Result<(), KeyError> {
        write_plain_or_hash(if *self { "true" } else { "false" }, format, "bool", out)
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
        }

        impl PaddedKeyPart for $t {}
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
