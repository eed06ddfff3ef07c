//! The pieces a key template is made of: literal text, and fields with the format their
//! value is written in.

use std::borrow::Cow;
use std::fmt;

use crate::keys;

/// How a field is written into a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyFormat {
    /// The value's own text (`{field}`).
    Plain,
    /// A non-negative integer zero padded to this many digits (`{field:06}`).
    Pad(u8),
    /// The first this many hex characters of the md5 of the value's text (`{field:hash4}`).
    Hash(u8),
    /// Inverted .NET ticks, 19 digits (`{field:ticks_desc}`), for `DateTime<Utc>` fields.
    TicksDesc,
}

impl KeyFormat {
    /// The number of characters every value takes in this format, when fixed.
    pub fn fixed_width(self) -> Option<usize> {
        match self {
            KeyFormat::Plain => None,
            KeyFormat::Pad(n) | KeyFormat::Hash(n) => Some(usize::from(n)),
            KeyFormat::TicksDesc => Some(keys::TICKS_DIGITS),
        }
    }
}

impl fmt::Display for KeyFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyFormat::Plain => Ok(()),
            KeyFormat::Pad(n) => write!(f, "0{n}"),
            KeyFormat::Hash(n) => write!(f, "hash{n}"),
            KeyFormat::TicksDesc => f.write_str("ticks_desc"),
        }
    }
}

/// One piece of a key template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplatePart {
    /// Literal text.
    Literal(Cow<'static, str>),
    /// A field's value, in a format.
    Field {
        /// The field's name (the Rust field of a derived entity).
        name: Cow<'static, str>,
        /// How the value is written.
        format: KeyFormat,
    },
}

impl TemplatePart {
    /// Literal text, in a `static` template.
    pub const fn literal(text: &'static str) -> Self {
        TemplatePart::Literal(Cow::Borrowed(text))
    }

    /// A field, in a `static` template.
    pub const fn field(name: &'static str, format: KeyFormat) -> Self {
        TemplatePart::Field {
            name: Cow::Borrowed(name),
            format,
        }
    }
}
