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

mod key_part;
mod parse;
mod part;

pub use key_part::{KeyPart, KeyText, PaddedKeyPart, TicksKeyPart, separator_fits};
pub use parse::TemplateError;
pub use part::{KeyFormat, TemplatePart};

use std::borrow::Cow;
use std::fmt;

use crate::filter::{self, Filter};
use crate::keys::{self, KeyError};
use parse::parse_parts;

/// A parsed key template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyTemplate {
    source: Cow<'static, str>,
    parts: Cow<'static, [TemplatePart]>,
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

    /// The filter `PartitionKey eq partition_key` and `RowKey` in the range.
    pub fn in_partition(&self, partition_key: &str) -> Filter {
        filter::partition_key().eq(partition_key) & self.row_key_filter()
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
    /// A string field followed by a separator (`{customer},{id:08}`) must hold only
    /// characters above the separator: otherwise `bob,x` and `bob` could render keys that
    /// one look-up cannot tell apart, so such a value is refused and nothing is written.
    ///
    /// # Errors
    /// [`KeyError::MissingField`] when `value_of` has no value for a field;
    /// [`KeyError::Field`] when a value does not fit its format (a negative or too wide
    /// padded integer, a date outside the .NET range, a format for another type) or, with
    /// [`KeyError::PartBelowSeparator`] as its source, when a string holds the separator
    /// that follows it or a character below it.
    pub fn render<'v, F>(&self, value_of: F) -> Result<String, KeyError>
    where
        F: Fn(&str) -> Option<&'v dyn KeyPart>,
    {
        let mut key = String::with_capacity(self.source.len() + 16);
        for (index, part) in self.parts.iter().enumerate() {
            match part {
                TemplatePart::Literal(text) => key.push_str(text),
                TemplatePart::Field { name, format } => {
                    let value = value_of(name).ok_or_else(|| self.missing(name))?;
                    let start = key.len();
                    self.write_field(name, value, *format, &mut key)?;
                    if value.is_text() {
                        self.check_separated(name, *format, index, &key[start..])?;
                    }
                }
            }
        }
        Ok(key)
    }

    /// The separator that follows the field at `index` when its text has no fixed width:
    /// the first character of the literal after it.
    fn separator_after(&self, format: KeyFormat, index: usize) -> Option<char> {
        if format.fixed_width().is_some() {
            return None;
        }
        match self.parts.get(index + 1) {
            Some(TemplatePart::Literal(text)) => text.chars().next(),
            _ => None,
        }
    }

    /// Refuses a field's text that holds the separator after it or a character below it:
    /// two values would render one key, or keys would not sort as their values.
    fn check_separated(
        &self,
        name: &str,
        format: KeyFormat,
        index: usize,
        text: &str,
    ) -> Result<(), KeyError> {
        match self.separator_after(format, index) {
            Some(separator) => {
                keys::CompoundKey::new(separator)
                    .check_part(text)
                    .map_err(|source| KeyError::Field {
                        template: self.source.to_string(),
                        field: name.to_owned(),
                        source: Box::new(source),
                    })
            }
            None => Ok(()),
        }
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
                            self.check_separated(name, *format, index, &prefix[start..])?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, TimeZone, Utc};

    fn parse(source: &str) -> KeyTemplate {
        KeyTemplate::parse(source).expect("a valid template")
    }

    #[test]
    fn renders_every_format() {
        let at = Utc
            .with_ymd_and_hms(2000, 1, 1, 0, 0, 0)
            .single()
            .expect("valid");
        let template = parse("{dept},{id:06}_{id:hash4}_{at:ticks_desc}_{at}");
        let key = template
            .render_args(&[&"Sales", &123u32, &at])
            .expect("renders");
        assert_eq!(
            key,
            format!(
                "Sales,000123_{}_{}_2000-01-01T00:00:00.000000000Z",
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
