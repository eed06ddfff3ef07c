//! Key encodings whose string order is the order of the values they encode: zero-padded
//! integers, inverted .NET ticks (the log-tail pattern), md5 hash prefixes (against the
//! prepend/append anti-pattern) and compound keys joined by a separator lower than every
//! character of their parts. Key templates and the key patterns are built on these.
//!
//! ```
//! use tablekit_core::keys::{self, CompoundKey};
//!
//! // Integers padded to a fixed width sort numerically.
//! assert!(keys::pad(54, 6)? < keys::pad(167, 6)?);
//! // Parts joined by a separator lower than any of their characters sort as tuples.
//! let key = CompoundKey::new(',');
//! assert_eq!(key.join(["000054", "a100", "6777"])?, "000054,a100,6777");
//! assert_eq!(key.split("000054,a100,6777")?, ["000054", "a100", "6777"]);
//! # Ok::<_, tablekit_core::keys::KeyError>(())
//! ```

use chrono::{DateTime, Utc};
use md5::{Digest, Md5};

use crate::model::EdmType;

/// `DateTime.MaxValue.Ticks` in .NET: 9999-12-31T23:59:59.9999999, in 100 ns ticks since
/// 0001-01-01.
pub const DOTNET_MAX_TICKS: i64 = 3_155_378_975_999_999_999;
/// The .NET ticks of the Unix epoch, 1970-01-01T00:00:00Z.
pub const DOTNET_UNIX_EPOCH_TICKS: i64 = 621_355_968_000_000_000;
/// Digits of an inverted-ticks key (`{0:D19}` in .NET).
pub const TICKS_DIGITS: usize = 19;

/// A value that cannot be encoded as a key part, or a key that cannot be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The integer has more digits than the padding width.
    #[error("{value} has more than {width} digits, so it cannot be padded to {width}")]
    TooWide {
        /// The value.
        value: u64,
        /// The width.
        width: usize,
    },
    /// A negative integer, which zero padding cannot keep in order.
    #[error("{value} is negative; padded keys hold non-negative integers only")]
    Negative {
        /// The value.
        value: i64,
    },
    /// An instant outside the .NET `DateTime` range (years 1 to 9999).
    #[error("{value} is outside the .NET DateTime range (0001-01-01 ..= 9999-12-31)")]
    OutOfDotnetRange {
        /// The instant.
        value: DateTime<Utc>,
    },
    /// A compound-key part holding the separator or a character below it, which would
    /// break both the order and the split.
    #[error(
        "key part `{part}` contains {character:?}, not above the separator {separator:?}: every character of a part must sort after the separator"
    )]
    PartBelowSeparator {
        /// The part.
        part: String,
        /// The separator.
        separator: char,
        /// The offending character.
        character: char,
    },
    /// A key-template format that does not apply to the value's type.
    #[error("format `{format}` does not apply to a {type_name} value")]
    Format {
        /// The format, as written in a template (`06`, `hash4`, `ticks_desc`).
        format: String,
        /// The value's type.
        type_name: &'static str,
    },
    /// A key template names a field for which no value was given.
    #[error("key template `{template}` needs a value for `{field}`")]
    MissingField {
        /// The template.
        template: String,
        /// The field.
        field: String,
    },
    /// A field's value could not be written into its key template.
    #[error("key template `{template}`, field `{field}`: {source}")]
    Field {
        /// The template.
        template: String,
        /// The field.
        field: String,
        /// Why.
        #[source]
        source: Box<KeyError>,
    },
    /// A key of an entity type could not be rendered: the entity type named, the template,
    /// field and reason in the source.
    #[error("{type_name}: {source}")]
    Entity {
        /// The entity type.
        type_name: &'static str,
        /// Why.
        #[source]
        source: Box<KeyError>,
    },
    /// A key of a declaration (an index, id list, count, …) could not be rendered: the
    /// declaration named by its attribute and name, the entity type, template, field and
    /// reason in the source.
    #[error("#[{attribute}] `{name}`: {source}")]
    Declaration {
        /// The declaration's attribute (`index`, `index_entity`, `count`, …).
        attribute: String,
        /// The declaration's name.
        name: String,
        /// Why.
        #[source]
        source: Box<KeyError>,
    },
    /// A key range over a field whose key text does not sort as its values do.
    #[error("no key range over `{field}` in `{template}`: {reason}")]
    Unordered {
        /// The template.
        template: String,
        /// The field.
        field: String,
        /// Why the order is not kept.
        reason: &'static str,
    },
    /// A key that does not have the shape expected.
    #[error("key `{key}` is not {expected}")]
    Malformed {
        /// The key.
        key: String,
        /// What was expected.
        expected: String,
    },
    /// A value given for a key field by name (a look-up of an index or an id list chosen
    /// at run time) whose type is stored as another type than the field: its key text
    /// could name no entity.
    #[error(
        "{what} `{name}`: key field `{field}` is stored as {expected}, the value given is a `{given}` (stored as {given_stored})"
    )]
    WrongType {
        /// What the key is of: `index` or `id list`.
        what: &'static str,
        /// The index's or the id list's name.
        name: String,
        /// The key field.
        field: String,
        /// The property type of the field.
        expected: EdmType,
        /// The given value's type.
        given: &'static str,
        /// The property type the given value's type is stored as.
        given_stored: EdmType,
    },
}

impl KeyError {
    /// Whether the error is a value refused for holding the separator that follows its
    /// field, or a character below it ([`KeyError::PartBelowSeparator`]), however deeply
    /// the template, field and entity type wrap it.
    pub fn is_separator_refusal(&self) -> bool {
        match self {
            KeyError::PartBelowSeparator { .. } => true,
            KeyError::Field { source, .. }
            | KeyError::Entity { source, .. }
            | KeyError::Declaration { source, .. } => source.is_separator_refusal(),
            _ => false,
        }
    }
}

/// A non-negative integer padded with zeros to `width` digits: for values that fit, the
/// order of the strings is the order of the numbers.
///
/// # Errors
/// [`KeyError::TooWide`] when the value has more than `width` digits.
pub fn pad(value: u64, width: usize) -> Result<String, KeyError> {
    let text = format!("{value:0width$}");
    if text.len() > width {
        Err(KeyError::TooWide { value, width })
    } else {
        Ok(text)
    }
}

/// As [`pad`], for signed integers; negative values are refused.
///
/// # Errors
/// [`KeyError::Negative`], [`KeyError::TooWide`].
pub fn pad_signed(value: i64, width: usize) -> Result<String, KeyError> {
    let unsigned = u64::try_from(value).map_err(|_| KeyError::Negative { value })?;
    pad(unsigned, width)
}

/// Reads a padded integer back.
///
/// # Errors
/// [`KeyError::Malformed`] for anything but ASCII digits that fit a `u64`.
pub fn parse_padded(key: &str) -> Result<u64, KeyError> {
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed(key, "a zero-padded integer"));
    }
    key.parse()
        .map_err(|_| malformed(key, "a zero-padded integer within u64"))
}

/// The inclusive key bounds of every padded integer in `lo..=hi` behind `prefix`: all ids
/// 100 to 199 as `empid_` keys are `empid_000100 ..= empid_000199`.
///
/// # Errors
/// As [`pad`].
pub fn padded_range(
    prefix: &str,
    lo: u64,
    hi: u64,
    width: usize,
) -> Result<(String, String), KeyError> {
    Ok((
        format!("{prefix}{}", pad(lo, width)?),
        format!("{prefix}{}", pad(hi, width)?),
    ))
}

fn malformed(key: &str, expected: &str) -> KeyError {
    KeyError::Malformed {
        key: key.to_owned(),
        expected: expected.to_owned(),
    }
}

/// The .NET ticks (100 ns since 0001-01-01) of an instant; sub-tick precision is dropped.
///
/// # Errors
/// [`KeyError::OutOfDotnetRange`].
pub fn dotnet_ticks(value: DateTime<Utc>) -> Result<i64, KeyError> {
    let out_of_range = || KeyError::OutOfDotnetRange { value };
    let ticks = value
        .timestamp()
        .checked_mul(10_000_000)
        .and_then(|t| t.checked_add(i64::from(value.timestamp_subsec_nanos() / 100)))
        .and_then(|t| t.checked_add(DOTNET_UNIX_EPOCH_TICKS))
        .ok_or_else(out_of_range)?;
    if (0..=DOTNET_MAX_TICKS).contains(&ticks) {
        Ok(ticks)
    } else {
        Err(out_of_range())
    }
}

/// The instant of a number of .NET ticks.
///
/// # Errors
/// [`KeyError::Malformed`] outside `0 ..= DOTNET_MAX_TICKS`.
pub fn from_dotnet_ticks(ticks: i64) -> Result<DateTime<Utc>, KeyError> {
    if !(0..=DOTNET_MAX_TICKS).contains(&ticks) {
        return Err(malformed(&ticks.to_string(), "a .NET tick count"));
    }
    let since_epoch = ticks - DOTNET_UNIX_EPOCH_TICKS;
    let secs = since_epoch.div_euclid(10_000_000);
    let nanos = (since_epoch.rem_euclid(10_000_000) * 100) as u32;
    DateTime::from_timestamp(secs, nanos)
        .ok_or_else(|| malformed(&ticks.to_string(), "a .NET tick count"))
}

/// The log-tail key of an instant: `DateTime.MaxValue.Ticks - ticks`, 19 digits, exactly
/// as .NET's `string.Format("{0:D19}", DateTime.MaxValue.Ticks - dt.Ticks)`. Later
/// instants give smaller keys, so a partition lists its newest entities first.
///
/// # Errors
/// [`KeyError::OutOfDotnetRange`].
pub fn ticks_desc(value: DateTime<Utc>) -> Result<String, KeyError> {
    Ok(format!("{:019}", DOTNET_MAX_TICKS - dotnet_ticks(value)?))
}

/// The instant of a log-tail key (`new DateTime(DateTime.MaxValue.Ticks - long.Parse(key))`).
///
/// # Errors
/// [`KeyError::Malformed`] for anything but 19 digits of a valid tick count.
pub fn parse_ticks_desc(key: &str) -> Result<DateTime<Utc>, KeyError> {
    if key.len() != TICKS_DIGITS || !key.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed(key, "19 digits of inverted .NET ticks"));
    }
    let inverted: i64 = key
        .parse()
        .map_err(|_| malformed(key, "19 digits of inverted .NET ticks"))?;
    if inverted > DOTNET_MAX_TICKS {
        return Err(malformed(key, "19 digits of inverted .NET ticks"));
    }
    from_dotnet_ticks(DOTNET_MAX_TICKS - inverted)
}

/// The first `chars` hex characters (at most 32) of the md5 of `value`: the hash prefix
/// of the Tablestore guide, which spreads sequential keys over partitions.
pub fn hash_prefix(value: &str, chars: usize) -> String {
    let digest = Md5::digest(value.as_bytes());
    let mut hex = String::with_capacity(32);
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex.truncate(chars.min(32));
    hex
}

/// `value` behind its hash prefix: `hashed("200004", 4)` is the prefix and the value.
pub fn hashed(value: &str, chars: usize) -> String {
    let mut key = hash_prefix(value, chars);
    key.push_str(value);
    key
}

/// Compound keys: parts joined by one separator that sorts below every character the
/// parts use. Then the order of the joined strings is the order of the part tuples, and
/// the key splits back into its parts.
///
/// Why the separator must be the lowest: with `:` between `a100` and `a1001`, the key
/// `a100:…` sorts after `a1001…` (`:` > `1`), though `a100` < `a1001`. With `,` (below
/// every digit and letter) `a100,…` sorts first, as the tuple does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompoundKey {
    separator: char,
}

impl CompoundKey {
    /// A compound key with this separator.
    pub fn new(separator: char) -> Self {
        CompoundKey { separator }
    }

    /// The separator.
    pub fn separator(&self) -> char {
        self.separator
    }

    /// Checks that every character of `part` sorts after the separator.
    ///
    /// # Errors
    /// [`KeyError::PartBelowSeparator`].
    pub fn check_part(&self, part: &str) -> Result<(), KeyError> {
        match part.chars().find(|&c| c <= self.separator) {
            Some(character) => Err(KeyError::PartBelowSeparator {
                part: part.to_owned(),
                separator: self.separator,
                character,
            }),
            None => Ok(()),
        }
    }

    /// Joins the parts with the separator.
    ///
    /// # Errors
    /// [`KeyError::PartBelowSeparator`] for a part that would break the order.
    pub fn join<I, S>(&self, parts: I) -> Result<String, KeyError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut key = String::new();
        for (i, part) in parts.into_iter().enumerate() {
            let part = part.as_ref();
            self.check_part(part)?;
            if i > 0 {
                key.push(self.separator);
            }
            key.push_str(part);
        }
        Ok(key)
    }

    /// Splits a key back into its parts.
    ///
    /// # Errors
    /// [`KeyError::Malformed`] for a key holding a character below the separator, which
    /// [`join`](Self::join) never writes.
    pub fn split<'k>(&self, key: &'k str) -> Result<Vec<&'k str>, KeyError> {
        if let Some(c) = key.chars().find(|&c| c < self.separator) {
            return Err(malformed(
                key,
                &format!("a compound key (it holds {c:?}, below the separator)"),
            ));
        }
        Ok(key.split(self.separator).collect())
    }

    /// The half-open bounds `[start, end)` of every key whose leading parts are
    /// `prefix_parts`: from the joined prefix and the separator, up to (excluding) the
    /// prefix and the character just above the separator.
    ///
    /// # Errors
    /// As [`join`](Self::join).
    pub fn prefix_range<I, S>(&self, prefix_parts: I) -> Result<(String, String), KeyError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let prefix = self.join(prefix_parts)?;
        let above = char::from_u32(self.separator as u32 + 1).unwrap_or(char::MAX);
        Ok((
            format!("{prefix}{}", self.separator),
            format!("{prefix}{above}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
            .single()
            .expect("a valid date")
    }

    #[test]
    fn ticks_match_dotnet() {
        // new DateTime(2000, 1, 1).Ticks == 630822816000000000
        assert_eq!(
            dotnet_ticks(utc(2000, 1, 1, 0, 0, 0)),
            Ok(630_822_816_000_000_000)
        );
        assert_eq!(
            dotnet_ticks(utc(1970, 1, 1, 0, 0, 0)),
            Ok(DOTNET_UNIX_EPOCH_TICKS)
        );
        assert_eq!(dotnet_ticks(utc(1, 1, 1, 0, 0, 0)), Ok(0));
        assert_eq!(
            ticks_desc(utc(2000, 1, 1, 0, 0, 0)).as_deref(),
            Ok("2524556159999999999")
        );
        let max = utc(9999, 12, 31, 23, 59, 59) + chrono::Duration::nanoseconds(999_999_900);
        assert_eq!(ticks_desc(max).as_deref(), Ok("0000000000000000000"));
        assert_eq!(
            parse_ticks_desc("2524556159999999999"),
            Ok(utc(2000, 1, 1, 0, 0, 0))
        );
    }

    #[test]
    fn ticks_outside_the_dotnet_range_are_refused() {
        let before = utc(1, 1, 1, 0, 0, 0) - chrono::Duration::seconds(1);
        assert!(matches!(
            ticks_desc(before),
            Err(KeyError::OutOfDotnetRange { .. })
        ));
        for bad in [
            "",
            "123",
            "x524556159999999999",
            "9999999999999999999",
            "25245561599999999990",
        ] {
            assert!(parse_ticks_desc(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn padding_refuses_values_that_do_not_fit() {
        assert_eq!(pad(54, 6).as_deref(), Ok("000054"));
        assert_eq!(pad(999_999, 6).as_deref(), Ok("999999"));
        assert_eq!(
            pad(1_000_000, 6),
            Err(KeyError::TooWide {
                value: 1_000_000,
                width: 6
            })
        );
        assert_eq!(pad_signed(-1, 6), Err(KeyError::Negative { value: -1 }));
        assert_eq!(parse_padded("000054"), Ok(54));
        assert!(parse_padded("-54").is_err());
        assert!(parse_padded("").is_err());
        assert_eq!(
            padded_range("empid_", 100, 199, 6),
            Ok(("empid_000100".to_owned(), "empid_000199".to_owned()))
        );
    }

    #[test]
    fn hash_prefix_is_the_start_of_the_md5_hex() {
        assert_eq!(hash_prefix("", 32), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(hash_prefix("abc", 4), "9001");
        assert_eq!(hash_prefix("abc", 99).len(), 32);
        assert_eq!(hashed("abc", 4), "9001abc");
    }

    /// The consumer-records table of the Tablestore guide: rows keyed by
    /// (DeviceID, SellerID, CardID) keep their order in one concatenated key only with
    /// zero padding and a separator below every character used.
    #[test]
    fn consumer_records_keep_their_order_with_padding_and_a_low_separator() {
        let rows: [(u64, &str, u64); 4] = [
            (16, "a100", 66661),
            (54, "a100", 6777),
            (54, "a1001", 6777),
            (167, "a101", 283_408),
        ];
        let sorted = |mut keys: Vec<(String, usize)>| {
            keys.sort();
            keys.into_iter().map(|(_, i)| i).collect::<Vec<_>>()
        };
        let original: Vec<usize> = (0..rows.len()).collect();

        // Plain numbers with `:`: 167 sorts before 54.
        let plain = rows
            .iter()
            .enumerate()
            .map(|(i, (d, s, c))| (format!("{d}:{s}:{c}"), i))
            .collect();
        assert_eq!(sorted(plain), [3, 0, 2, 1]);

        // Padded with `:`: `000054:a1001` sorts before `000054:a100:` since `1` < `:`.
        let colon = rows
            .iter()
            .enumerate()
            .map(|(i, (d, s, c))| (format!("{}:{s}:{c}", pad(*d, 6).expect("fits")), i))
            .collect();
        assert_eq!(sorted(colon), [0, 2, 1, 3]);
        // The helper refuses `:` for these parts: digits sort below it.
        assert!(matches!(
            CompoundKey::new(':').join(["000054", "a1001"]),
            Err(KeyError::PartBelowSeparator { character: '0', .. })
        ));

        // Padded with `,`, below every digit and letter: the original order.
        let key = CompoundKey::new(',');
        let comma = rows
            .iter()
            .enumerate()
            .map(|(i, (d, s, c))| {
                let d = pad(*d, 6).expect("fits");
                (
                    key.join([d.as_str(), s, &c.to_string()])
                        .expect("parts above `,`"),
                    i,
                )
            })
            .collect();
        assert_eq!(sorted(comma), original);
    }

    #[test]
    fn compound_parts_below_the_separator_are_refused() {
        let key = CompoundKey::new(',');
        assert!(matches!(
            key.join(["a", "b c"]),
            Err(KeyError::PartBelowSeparator { character: ' ', .. })
        ));
        assert!(key.join(["a", "b,c"]).is_err());
        assert!(key.split("a b").is_err());
        assert_eq!(key.split("a,,b"), Ok(vec!["a", "", "b"]));
        assert_eq!(
            key.prefix_range(["000054"]),
            Ok(("000054,".to_owned(), "000054-".to_owned()))
        );
    }
}
