//! Key templates: a PartitionKey or RowKey spelled as text with fields, such as
//! `"empid_{id:06}"`. A template is parsed once (by `#[derive(Entity)]` at compile time, or
//! by [`KeyTemplate::parse`]), rendered from field values, turned into key ranges, and
//! split back into its parts.
//!
//! | syntax | key text | order of the key text |
//! | --- | --- | --- |
//! | `{field}` | the value as text | strings: their own; other types: see [`KeyPart`] |
//! | `{field:06}` | a non-negative integer, zero padded to 6 digits | numeric |
//! | `{field:hash4}` | the first 4 hex characters of the md5 of the value's text | none (spreads keys) |
//! | `{field:ticks_desc}` | inverted .NET ticks of a `DateTime<Utc>`, 19 digits | newest first |
//! | `{{`, `}}` | a literal brace | |
//!
//! Everything else is literal text, which may not hold the characters keys forbid
//! (`/ \ # ?` and control characters). A field may not follow another field directly unless
//! the first has a fixed width (padded, hashed or ticks): without a separator neither the
//! order nor the split would be defined.
//!
//! ```
//! use tablekit_core::typed::{KeyPart, KeyTemplate};
//!
//! let template = KeyTemplate::parse("empid_{id:06}")?;
//! assert_eq!(template.render_args(&[&123u32])?, "empid_000123");
//!
//! // All ids 100..=199, as RowKey bounds.
//! let bounds = template.range(&[], &100u32, &199u32)?;
//! assert_eq!(bounds.start, "empid_000100");
//! assert!(bounds.contains("empid_000150") && !bounds.contains("empid_000200"));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! The compound-key rule of the Tablestore guide applies to string fields followed by a
//! separator: the concatenated keys sort as the tuples of their fields only when the
//! separator sorts below every character the fields use (see [`crate::keys::CompoundKey`]).
//! [`KeyTemplate::range`] and [`KeyTemplate::prefix`] check the values they are given
//! against that rule.

use std::borrow::Cow;
use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use uuid::Uuid;

use crate::filter::{self, Filter};
use crate::keys::{self, KeyError};
use crate::limits::forbidden_in_key;

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

/// A parsed key template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyTemplate {
    source: Cow<'static, str>,
    parts: Cow<'static, [TemplatePart]>,
}

/// Why a key template could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid key template `{template}` at byte {offset}: {message}")]
pub struct TemplateError {
    /// The template.
    pub template: String,
    /// The byte offset of the problem.
    pub offset: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

/// The keys between two bounds: from `start` (inclusive) to `end`, inclusive or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyBounds {
    /// The first key of the range.
    pub start: String,
    /// The end of the range.
    pub end: String,
    /// Whether `end` itself is in the range.
    pub end_inclusive: bool,
}

impl KeyBounds {
    /// The filter `PartitionKey` in the range.
    pub fn partition_key_filter(&self) -> Filter {
        self.filter_on(filter::partition_key())
    }

    /// The filter `RowKey` in the range.
    pub fn row_key_filter(&self) -> Filter {
        self.filter_on(filter::row_key())
    }

    fn filter_on(&self, key: filter::Property) -> Filter {
        let end = if self.end_inclusive {
            key.le(self.end.as_str())
        } else {
            key.lt(self.end.as_str())
        };
        key.ge(self.start.as_str()) & end
    }

    /// Whether a key is in the range.
    pub fn contains(&self, key: &str) -> bool {
        key >= self.start.as_str()
            && if self.end_inclusive {
                key <= self.end.as_str()
            } else {
                key < self.end.as_str()
            }
    }
}

impl KeyTemplate {
    /// A template from parts checked at compile time (what `#[derive(Entity)]` emits).
    pub const fn from_static(source: &'static str, parts: &'static [TemplatePart]) -> Self {
        KeyTemplate {
            source: Cow::Borrowed(source),
            parts: Cow::Borrowed(parts),
        }
    }

    /// Parses a template.
    ///
    /// # Errors
    /// [`TemplateError`] naming the byte offset and what was expected: an unclosed or
    /// unmatched brace, an empty or invalid field name, an unknown format, a padding or
    /// hash width out of range, a character keys forbid, a field following a variable-width
    /// field with no separator, or an empty template.
    pub fn parse(source: &str) -> Result<Self, TemplateError> {
        let parts = parse_parts(source)?;
        Ok(KeyTemplate {
            source: Cow::Owned(source.to_owned()),
            parts: Cow::Owned(parts),
        })
    }

    /// The template as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[TemplatePart] {
        &self.parts
    }

    /// The fields, in order of first use, each once.
    pub fn fields(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for part in self.parts.iter() {
            if let TemplatePart::Field { name, .. } = part
                && !names.contains(&name.as_ref())
            {
                names.push(name);
            }
        }
        names
    }

    /// The literal text before the first field: the namespace the keys share.
    pub fn literal_prefix(&self) -> &str {
        match self.parts.first() {
            Some(TemplatePart::Literal(text)) => text,
            _ => "",
        }
    }

    /// Whether the template has no fields (a constant key).
    pub fn is_constant(&self) -> bool {
        self.fields().is_empty()
    }

    /// Renders the key, asking `value_of` for each field's value.
    ///
    /// # Errors
    /// [`KeyError::MissingField`] when `value_of` has no value for a field;
    /// [`KeyError::Field`] when a value does not fit its format (a negative or too wide
    /// padded integer, a date outside the .NET range, a format for another type).
    pub fn render<'v, F>(&self, value_of: F) -> Result<String, KeyError>
    where
        F: Fn(&str) -> Option<&'v dyn KeyPart>,
    {
        let mut key = String::with_capacity(self.source.len() + 16);
        for part in self.parts.iter() {
            match part {
                TemplatePart::Literal(text) => key.push_str(text),
                TemplatePart::Field { name, format } => {
                    let value = value_of(name).ok_or_else(|| self.missing(name))?;
                    self.write_field(name, value, *format, &mut key)?;
                }
            }
        }
        Ok(key)
    }

    /// Renders the key from values given in the order of [`fields`](Self::fields).
    ///
    /// # Errors
    /// As [`render`](Self::render); [`KeyError::MissingField`] when fewer values than fields
    /// are given.
    pub fn render_args(&self, args: &[&dyn KeyPart]) -> Result<String, KeyError> {
        let fields = self.fields();
        self.render(|name| {
            fields
                .iter()
                .position(|f| *f == name)
                .and_then(|i| args.get(i).copied())
        })
    }

    /// The bounds of every key whose leading fields have the values `fixed` (in the order of
    /// [`fields`](Self::fields)): with `"{device}_{seller}_{card}"`, the prefix `["d1"]`
    /// is every record of device `d1`.
    ///
    /// # Errors
    /// As [`render`](Self::render); [`KeyError::PartBelowSeparator`] when a fixed string
    /// value holds a character not above the separator that follows it.
    pub fn prefix(&self, fixed: &[&dyn KeyPart]) -> Result<KeyBounds, KeyError> {
        let (prefix, next) = self.render_prefix(fixed)?;
        match next {
            None => Ok(KeyBounds {
                start: prefix.clone(),
                end: prefix,
                end_inclusive: true,
            }),
            Some(_) => Ok(KeyBounds {
                end: prefix_successor(&prefix),
                start: prefix,
                end_inclusive: false,
            }),
        }
    }

    /// The bounds of every key whose leading fields have the values `fixed` and whose next
    /// field lies in `lo ..= hi`: with `"empid_{id:06}"`, ids 100 to 199 are
    /// `empid_000100 ..= empid_000199`. For a `ticks_desc` field `lo` and `hi` are instants
    /// and the bounds are inverted for you.
    ///
    /// # Errors
    /// [`KeyError::Unordered`] when the field's key text does not sort as its values (a
    /// hashed field, or an unpadded integer or string followed by more fields without a
    /// separator); [`KeyError::PartBelowSeparator`] when a string bound holds a character
    /// not above the separator that follows the field; as [`render`](Self::render).
    pub fn range(
        &self,
        fixed: &[&dyn KeyPart],
        lo: &dyn KeyPart,
        hi: &dyn KeyPart,
    ) -> Result<KeyBounds, KeyError> {
        let (prefix, next) = self.render_prefix(fixed)?;
        let Some(index) = next else {
            return Err(self.missing("(a field after the fixed ones)"));
        };
        let TemplatePart::Field { name, format } = &self.parts[index] else {
            return Err(self.missing("(a field after the fixed ones)"));
        };
        let mut lo_text = String::new();
        let mut hi_text = String::new();
        self.write_field(name, lo, *format, &mut lo_text)?;
        self.write_field(name, hi, *format, &mut hi_text)?;
        let (low, high) = match format {
            KeyFormat::Hash(_) => {
                return Err(
                    self.unordered(name, "a hashed field spreads its values; it has no order")
                );
            }
            KeyFormat::TicksDesc => (hi_text, lo_text),
            KeyFormat::Plain | KeyFormat::Pad(_) => (lo_text, hi_text),
        };
        let start = format!("{prefix}{low}");
        let last = index + 1 == self.parts.len();
        if last {
            return Ok(KeyBounds {
                start,
                end: format!("{prefix}{high}"),
                end_inclusive: true,
            });
        }
        if format.fixed_width().is_some() {
            return Ok(KeyBounds {
                start,
                end: prefix_successor(&format!("{prefix}{high}")),
                end_inclusive: false,
            });
        }
        match &self.parts[index + 1] {
            TemplatePart::Literal(separator) => {
                let separator = separator.chars().next().unwrap_or(char::MAX);
                if lo.is_numeric() {
                    return Err(self.unordered(
                        name,
                        "an unpadded integer followed by more of the key does not sort numerically; pad it (`{field:06}`)",
                    ));
                }
                let rule = keys::CompoundKey::new(separator);
                rule.check_part(&low)?;
                rule.check_part(&high)?;
                let above = char::from_u32(separator as u32 + 1).unwrap_or(char::MAX);
                Ok(KeyBounds {
                    start,
                    end: format!("{prefix}{high}{above}"),
                    end_inclusive: false,
                })
            }
            TemplatePart::Field { .. } => Err(self.unordered(
                name,
                "a variable-width field followed directly by another field has no order",
            )),
        }
    }

    /// Splits a key made by this template back into the text of each field occurrence, in
    /// template order: `"empid_000123"` with `"empid_{id:06}"` is `[("id", "000123")]`. The
    /// key helpers ([`crate::keys::parse_padded`], [`crate::keys::parse_ticks_desc`]) read
    /// the texts back into values.
    ///
    /// # Errors
    /// [`KeyError::Malformed`] when the key does not have the template's shape.
    pub fn split<'k>(&self, key: &'k str) -> Result<Vec<(&str, &'k str)>, KeyError> {
        let malformed = || KeyError::Malformed {
            key: key.to_owned(),
            expected: format!("a key of the template `{}`", self.source),
        };
        let mut rest = key;
        let mut out = Vec::new();
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                TemplatePart::Literal(text) => {
                    rest = rest.strip_prefix(text.as_ref()).ok_or_else(malformed)?;
                }
                TemplatePart::Field { name, format } => {
                    let end = match format.fixed_width() {
                        Some(width) => rest
                            .char_indices()
                            .nth(width)
                            .map_or(rest.len(), |(at, _)| at),
                        None => match self.parts.get(i + 1) {
                            Some(TemplatePart::Literal(text)) => {
                                rest.find(text.as_ref()).ok_or_else(malformed)?
                            }
                            _ => rest.len(),
                        },
                    };
                    let (text, after) = rest.split_at(end);
                    if format
                        .fixed_width()
                        .is_some_and(|w| text.chars().count() != w)
                    {
                        return Err(malformed());
                    }
                    out.push((name.as_ref(), text));
                    rest = after;
                }
            }
        }
        if rest.is_empty() {
            Ok(out)
        } else {
            Err(malformed())
        }
    }

    /// Renders the parts before the first field without a value in `fixed`; returns the
    /// text and the index of that field's part, if any.
    fn render_prefix(&self, fixed: &[&dyn KeyPart]) -> Result<(String, Option<usize>), KeyError> {
        let fields = self.fields();
        if fixed.len() > fields.len() {
            return Err(KeyError::Malformed {
                key: format!("{} values", fixed.len()),
                expected: format!(
                    "at most {} values for the template `{}`",
                    fields.len(),
                    self.source
                ),
            });
        }
        let mut prefix = String::new();
        for (index, part) in self.parts.iter().enumerate() {
            match part {
                TemplatePart::Literal(text) => prefix.push_str(text),
                TemplatePart::Field { name, format } => {
                    let position = fields.iter().position(|f| f == name);
                    match position.and_then(|p| fixed.get(p)) {
                        Some(value) => {
                            let start = prefix.len();
                            self.write_field(name, *value, *format, &mut prefix)?;
                            if format.fixed_width().is_none()
                                && let Some(TemplatePart::Literal(separator)) =
                                    self.parts.get(index + 1)
                            {
                                let separator = separator.chars().next().unwrap_or(char::MAX);
                                keys::CompoundKey::new(separator).check_part(&prefix[start..])?;
                            }
                        }
                        None => return Ok((prefix, Some(index))),
                    }
                }
            }
        }
        Ok((prefix, None))
    }

    fn write_field(
        &self,
        name: &str,
        value: &dyn KeyPart,
        format: KeyFormat,
        out: &mut String,
    ) -> Result<(), KeyError> {
        value
            .write_key(format, out)
            .map_err(|source| KeyError::Field {
                template: self.source.to_string(),
                field: name.to_owned(),
                source: Box::new(source),
            })
    }

    fn missing(&self, field: &str) -> KeyError {
        KeyError::MissingField {
            template: self.source.to_string(),
            field: field.to_owned(),
        }
    }

    fn unordered(&self, field: &str, reason: &'static str) -> KeyError {
        KeyError::Unordered {
            template: self.source.to_string(),
            field: field.to_owned(),
            reason,
        }
    }
}

impl fmt::Display for KeyTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// The smallest string above every string that starts with `prefix`.
fn prefix_successor(prefix: &str) -> String {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let mut next = last as u32 + 1;
        if (0xD800..0xE000).contains(&next) {
            next = 0xE000;
        }
        if let Some(c) = char::from_u32(next) {
            chars.push(c);
            return chars.into_iter().collect();
        }
    }
    // Every character was char::MAX: no string above them all but the unbounded end.
    String::from(char::MAX).repeat(prefix.chars().count() + 1)
}

fn parse_parts(source: &str) -> Result<Vec<TemplatePart>, TemplateError> {
    let error = |offset: usize, message: String| TemplateError {
        template: source.to_owned(),
        offset,
        message,
    };
    if source.is_empty() {
        return Err(error(0, "a key template cannot be empty".to_owned()));
    }
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut chars = source.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '{' if matches!(chars.peek(), Some((_, '{'))) => {
                chars.next();
                literal.push('{');
            }
            '}' if matches!(chars.peek(), Some((_, '}'))) => {
                chars.next();
                literal.push('}');
            }
            '}' => {
                return Err(error(
                    at,
                    "unmatched `}`; write `}}` for a literal brace".to_owned(),
                ));
            }
            '{' => {
                let close = source[at..]
                    .find('}')
                    .map(|i| at + i)
                    .ok_or_else(|| error(at, "unclosed `{`, expected `{field}`".to_owned()))?;
                let inner = &source[at + 1..close];
                let (name, format_text) = match inner.split_once(':') {
                    Some((name, format)) => (name, Some(format)),
                    None => (inner, None),
                };
                if name.is_empty() {
                    return Err(error(at, "empty field name, expected `{field}`".to_owned()));
                }
                if !is_identifier(name) {
                    return Err(error(
                        at + 1,
                        format!("`{name}` is not a field name, expected an identifier"),
                    ));
                }
                let format = match format_text {
                    None => KeyFormat::Plain,
                    Some(text) => parse_format(text)
                        .map_err(|message| error(at + 1 + name.len() + 1, message))?,
                };
                if !literal.is_empty() {
                    parts.push(TemplatePart::Literal(Cow::Owned(std::mem::take(
                        &mut literal,
                    ))));
                }
                if let Some(TemplatePart::Field {
                    name: previous,
                    format: previous_format,
                }) = parts.last()
                    && previous_format.fixed_width().is_none()
                {
                    return Err(error(
                        at,
                        format!(
                            "field `{name}` follows field `{previous}` with no separator; put a separator between them or give `{previous}` a fixed width (`{{{previous}:06}}`)"
                        ),
                    ));
                }
                parts.push(TemplatePart::Field {
                    name: Cow::Owned(name.to_owned()),
                    format,
                });
                while chars.peek().is_some_and(|(i, _)| *i <= close) {
                    chars.next();
                }
            }
            c if forbidden_in_key(c) => {
                return Err(error(
                    at,
                    format!(
                        "{c:?} may not appear in a key (keys forbid `/ \\ # ?` and control characters)"
                    ),
                ));
            }
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        parts.push(TemplatePart::Literal(Cow::Owned(literal)));
    }
    Ok(parts)
}

fn parse_format(text: &str) -> Result<KeyFormat, String> {
    let expected = "expected `0N` (zero padding to N digits, e.g. `06`), `hashN` (e.g. `hash4`) or `ticks_desc`";
    if text == "ticks_desc" {
        return Ok(KeyFormat::TicksDesc);
    }
    if let Some(width) = text.strip_prefix("hash") {
        return match width.parse::<u8>() {
            Ok(n @ 1..=32) => Ok(KeyFormat::Hash(n)),
            _ => Err(format!(
                "`{text}`: a hash prefix has 1 to 32 hex characters (`hash1` ..= `hash32`)"
            )),
        };
    }
    if text.starts_with('-') {
        return Err(format!(
            "`{text}`: a padding width cannot be negative; {expected}"
        ));
    }
    if let Some(width) = text.strip_prefix('0') {
        return match width.parse::<u8>() {
            Ok(n @ 1..=20) if width.bytes().all(|b| b.is_ascii_digit()) => Ok(KeyFormat::Pad(n)),
            _ => Err(format!(
                "`{text}`: a padding width is 1 to 20 digits (`01` ..= `020`)"
            )),
        };
    }
    if text.bytes().all(|b| b.is_ascii_digit()) && !text.is_empty() {
        return Err(format!(
            "`{text}`: padding is written with a leading zero (`0{text}`)"
        ));
    }
    Err(format!("unknown key format `{text}`, {expected}"))
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn parse(source: &str) -> KeyTemplate {
        KeyTemplate::parse(source).expect("a valid template")
    }

    fn parse_error(source: &str) -> String {
        KeyTemplate::parse(source)
            .expect_err("an invalid template")
            .message
    }

    #[test]
    fn parses_fields_formats_literals_and_escaped_braces() {
        let template = parse("e{{x}}_{id:06}-{name:hash4}{name}|{at:ticks_desc}");
        assert_eq!(
            template.parts(),
            &[
                TemplatePart::literal("e{x}_"),
                TemplatePart::field("id", KeyFormat::Pad(6)),
                TemplatePart::literal("-"),
                TemplatePart::field("name", KeyFormat::Hash(4)),
                TemplatePart::field("name", KeyFormat::Plain),
                TemplatePart::literal("|"),
                TemplatePart::field("at", KeyFormat::TicksDesc),
            ]
        );
        assert_eq!(template.fields(), ["id", "name", "at"]);
        assert_eq!(template.literal_prefix(), "e{x}_");
    }

    #[test]
    fn rejects_malformed_templates_with_what_was_expected() {
        assert!(parse_error("").contains("empty"));
        assert!(parse_error("a{id").contains("unclosed"));
        assert!(parse_error("a}").contains("unmatched"));
        assert!(parse_error("{}").contains("empty field name"));
        assert!(parse_error("{1x}").contains("not a field name"));
        assert!(parse_error("{id:6}").contains("leading zero"));
        assert!(parse_error("{id:-6}").contains("negative"));
        assert!(parse_error("{id:00}").contains("1 to 20"));
        assert!(parse_error("{id:021}").contains("1 to 20"));
        assert!(parse_error("{id:hash0}").contains("1 to 32"));
        assert!(parse_error("{id:upper}").contains("unknown key format"));
        assert!(parse_error("a/{id}").contains("may not appear in a key"));
        assert!(parse_error("{a}{b}").contains("no separator"));
        assert!(KeyTemplate::parse("{a:04}{b}").is_ok());
        assert_eq!(
            KeyTemplate::parse("ab{x:zz}").expect_err("bad").offset,
            5,
            "the offset points at the format"
        );
    }

    #[test]
    fn renders_every_format() {
        let at = Utc
            .with_ymd_and_hms(2000, 1, 1, 0, 0, 0)
            .single()
            .expect("valid");
        let template = parse("{dept}_{id:06}_{id:hash4}_{at:ticks_desc}_{at}");
        let key = template
            .render_args(&[&"Sales", &123u32, &at])
            .expect("renders");
        assert_eq!(
            key,
            format!(
                "Sales_000123_{}_{}_2000-01-01T00:00:00.000000000Z",
                keys::hash_prefix("123", 4),
                keys::ticks_desc(at).expect("in range")
            )
        );
    }

    #[test]
    fn render_names_the_field_that_failed() {
        let template = parse("empid_{id:03}");
        let error = template.render_args(&[&1234u32]).expect_err("too wide");
        assert!(
            matches!(&error, KeyError::Field { field, .. } if field == "id"),
            "{error}"
        );
        let error = template.render_args(&[&-1i32]).expect_err("negative");
        assert!(error.to_string().contains("negative"), "{error}");
        let error = template.render_args(&[]).expect_err("missing");
        assert!(matches!(error, KeyError::MissingField { .. }));
        let error = parse("{name:06}").render_args(&[&"x"]).expect_err("format");
        assert!(error.to_string().contains("does not apply"), "{error}");
    }

    #[test]
    fn ranges_over_padded_ids_are_inclusive_and_exact() {
        let template = parse("empid_{id:06}");
        let bounds = template.range(&[], &100u32, &199u32).expect("a range");
        assert_eq!(
            bounds,
            KeyBounds {
                start: "empid_000100".into(),
                end: "empid_000199".into(),
                end_inclusive: true
            }
        );
        let review = parse("{id:06}_{year}");
        let bounds = review.range(&[], &123u32, &123u32).expect("a range");
        assert!(bounds.contains("000123_2012"));
        assert!(bounds.contains("000123_2099"));
        assert!(!bounds.contains("000124_2012"));
        assert!(!bounds.contains("000122_2012"));
    }

    #[test]
    fn ranges_over_ticks_are_inverted() {
        let template = parse("{at:ticks_desc}_{n}");
        let a = Utc
            .with_ymd_and_hms(2020, 1, 1, 0, 0, 0)
            .single()
            .expect("valid");
        let b = Utc
            .with_ymd_and_hms(2021, 1, 1, 0, 0, 0)
            .single()
            .expect("valid");
        let mid = Utc
            .with_ymd_and_hms(2020, 6, 1, 0, 0, 0)
            .single()
            .expect("valid");
        let bounds = template.range(&[], &a, &b).expect("a range");
        let key = |at: DateTime<Utc>| template.render_args(&[&at, &"x"]).expect("renders");
        assert!(bounds.contains(&key(a)));
        assert!(bounds.contains(&key(b)));
        assert!(bounds.contains(&key(mid)));
        let later = Utc
            .with_ymd_and_hms(2021, 1, 2, 0, 0, 0)
            .single()
            .expect("valid");
        assert!(!bounds.contains(&key(later)));
    }

    #[test]
    fn ranges_refuse_fields_whose_text_has_no_order() {
        assert!(matches!(
            parse("{id:hash4}{id}").range(&[], &1u32, &2u32),
            Err(KeyError::Unordered { .. })
        ));
        assert!(matches!(
            parse("{id}_{x}").range(&[], &1u32, &2u32),
            Err(KeyError::Unordered { .. })
        ));
        assert!(matches!(
            parse("{name},{x}").range(&[], &"a b", &"c"),
            Err(KeyError::PartBelowSeparator { .. })
        ));
    }

    #[test]
    fn prefixes_cover_the_keys_that_share_leading_fields() {
        let template = parse("{device},{seller},{card}");
        let bounds = template.prefix(&[&"d1"]).expect("a prefix");
        assert!(bounds.contains("d1,s1,c1"));
        assert!(!bounds.contains("d10,s1,c1"));
        assert!(!bounds.contains("d2,s1,c1"));
        let exact = template.prefix(&[&"d1", &"s1", &"c1"]).expect("a key");
        assert!(exact.contains("d1,s1,c1") && exact.end_inclusive);
    }

    #[test]
    fn split_reads_each_field_back() {
        let template = parse("{id:hash4}{id}_{year}");
        let key = template.render_args(&[&123u32, &2012u32]).expect("renders");
        let parts = template.split(&key).expect("splits");
        assert_eq!(parts[1], ("id", "123"));
        assert_eq!(parts[2], ("year", "2012"));
        assert!(template.split("zz").is_err());
        assert!(parse("empid_{id:06}").split("empid_12").is_err());
    }

    #[test]
    fn prefix_successor_is_the_first_string_past_the_prefix() {
        assert_eq!(prefix_successor("ab"), "ac");
        assert_eq!(prefix_successor("a\u{D7FF}"), "a\u{E000}");
        assert_eq!(prefix_successor(&format!("a{}", char::MAX)), "b");
    }
}
