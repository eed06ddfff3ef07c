//! The table service's limits and naming rules, checked before any I/O.
//!
//! Every backend calls these checks before it touches storage, so a request that breaks a
//! rule fails the same way everywhere and never writes anything. Sizes are computed the
//! way the table service computes them (strings counted as UTF-16, two bytes a unit):
//!
//! ```text
//! entity = 4 + 2·(len(PartitionKey) + len(RowKey))
//!            + Σ (8 + 2·len(name) + value)      value: String 4 + 2·len, Binary 4 + len,
//!                                                      DateTime/Int64/Double 8, Guid 16,
//!                                                      Int32 4, Boolean 1
//! ```

use std::fmt;

use chrono::{DateTime, TimeZone, Utc};

use crate::model::{Entity, PARTITION_KEY, ROW_KEY, TIMESTAMP, Value};

/// Longest PartitionKey or RowKey, in UTF-16 code units: "up to 1 KiB" of the service's
/// UTF-16 strings, as the table service emulator enforces it.
pub const MAX_KEY_CHARS: usize = 512;
/// Most user properties an entity may have (255 with the three system properties).
pub const MAX_USER_PROPERTIES: usize = 252;
/// Longest property name, in characters.
pub const MAX_PROPERTY_NAME_CHARS: usize = 255;
/// Largest String or Binary property value, in bytes as the service counts them (64 KiB).
pub const MAX_PROPERTY_BYTES: usize = 64 * 1024;
/// Largest entity, in bytes as the service counts them (1 MiB).
pub const MAX_ENTITY_BYTES: usize = 1024 * 1024;
/// Most operations in one entity group transaction.
pub const MAX_BATCH_OPERATIONS: usize = 100;
/// Largest entity group transaction, in bytes (4 MiB).
pub const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;
/// Most entities a query returns in one page.
pub const MAX_PAGE_SIZE: usize = 1000;
/// Most discrete comparisons in one `$filter`.
pub const MAX_FILTER_COMPARISONS: usize = 15;

/// Which key a violation is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// The PartitionKey.
    PartitionKey,
    /// The RowKey.
    RowKey,
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyKind::PartitionKey => PARTITION_KEY,
            KeyKind::RowKey => ROW_KEY,
        })
    }
}

/// A broken limit or naming rule. Each names the limit and the offending key or property.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Violation {
    /// A key is longer than [`MAX_KEY_CHARS`].
    #[error("{key} `{value}` is {length} UTF-16 units long; the limit is {max}")]
    KeyTooLong {
        /// Which key.
        key: KeyKind,
        /// The start of the key.
        value: String,
        /// Its length in UTF-16 code units.
        length: usize,
        /// The limit.
        max: usize,
    },
    /// A key holds `/`, `\`, `#`, `?` or a control character.
    #[error(
        "{key} `{value}` contains the forbidden character {character:?} at position {position}; keys may not contain / \\ # ? or control characters"
    )]
    KeyForbiddenCharacter {
        /// Which key.
        key: KeyKind,
        /// The key (shortened when long).
        value: String,
        /// The forbidden character.
        character: char,
        /// Its character position in the key.
        position: usize,
    },
    /// A table name breaks the naming rules.
    #[error("invalid table name `{name}`: {reason}")]
    TableName {
        /// The name.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// A property name breaks the naming rules.
    #[error("invalid property name `{name}`: {reason}")]
    PropertyName {
        /// The name.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// The entity has more than [`MAX_USER_PROPERTIES`] user properties.
    #[error(
        "entity (`{partition_key}`, `{row_key}`) has {count} user properties; the limit is {max}"
    )]
    TooManyProperties {
        /// The entity's partition key.
        partition_key: String,
        /// The entity's row key.
        row_key: String,
        /// How many it has.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A String or Binary value is over [`MAX_PROPERTY_BYTES`].
    #[error("property `{property}` is {size} bytes; the limit is {max}")]
    PropertyTooLarge {
        /// The property.
        property: String,
        /// Its size as the service counts it.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A DateTime value is outside the range the table service stores.
    #[error("property `{property}` holds {value}, outside 1601-01-01 ..= 9999-12-31 UTC")]
    DateTimeOutOfRange {
        /// The property.
        property: String,
        /// The value.
        value: DateTime<Utc>,
    },
    /// The entity is over [`MAX_ENTITY_BYTES`].
    #[error("entity (`{partition_key}`, `{row_key}`) is {size} bytes; the limit is {max}")]
    EntityTooLarge {
        /// The entity's partition key.
        partition_key: String,
        /// The entity's row key.
        row_key: String,
        /// Its size as the service counts it.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A batch with no operations.
    #[error("a batch needs at least one operation")]
    BatchEmpty,
    /// A batch with more than [`MAX_BATCH_OPERATIONS`] operations.
    #[error("batch has {count} operations; the limit is {max}")]
    BatchTooManyOperations {
        /// How many it has.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A batch operation in another partition than the first.
    #[error(
        "batch operation {index} is in partition `{found}`, but a batch must stay in partition `{expected}`"
    )]
    BatchMixedPartitions {
        /// The operation's index.
        index: usize,
        /// The batch's partition.
        expected: String,
        /// The operation's partition.
        found: String,
    },
    /// A second operation on the same entity in one batch.
    #[error(
        "batch operation {index} touches RowKey `{row_key}` again (first at {first_index}); one operation per entity"
    )]
    BatchDuplicateEntity {
        /// The operation's index.
        index: usize,
        /// The index of the first operation on that entity.
        first_index: usize,
        /// The entity's row key.
        row_key: String,
    },
    /// A batch over [`MAX_BATCH_BYTES`].
    #[error("batch is {size} bytes; the limit is {max}")]
    BatchTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// An operation of a batch breaks a rule.
    #[error("batch operation {index}: {violation}")]
    InBatch {
        /// The operation's index.
        index: usize,
        /// The rule it breaks.
        violation: Box<Violation>,
    },
    /// `top` outside `1 ..= 1000`.
    #[error("top must be between 1 and {max}, got {top}")]
    TopOutOfRange {
        /// The requested value.
        top: usize,
        /// The limit.
        max: usize,
    },
    /// A filter with more than [`MAX_FILTER_COMPARISONS`] comparisons.
    #[error("filter has {count} comparisons; the limit is {max}")]
    FilterTooComplex {
        /// How many it has.
        count: usize,
        /// The limit.
        max: usize,
    },
}

impl Violation {
    /// Whether this is a size limit (reported as [`ErrorKind::TooLarge`](crate::ErrorKind)).
    pub fn is_size_limit(&self) -> bool {
        match self {
            Violation::KeyTooLong { .. }
            | Violation::TooManyProperties { .. }
            | Violation::PropertyTooLarge { .. }
            | Violation::EntityTooLarge { .. }
            | Violation::BatchTooManyOperations { .. }
            | Violation::BatchTooLarge { .. } => true,
            Violation::InBatch { violation, .. } => violation.is_size_limit(),
            _ => false,
        }
    }

    /// For a violation inside a batch, the index of the operation.
    pub fn batch_index(&self) -> Option<usize> {
        match self {
            Violation::BatchMixedPartitions { index, .. }
            | Violation::BatchDuplicateEntity { index, .. }
            | Violation::InBatch { index, .. } => Some(*index),
            _ => None,
        }
    }

    pub(crate) fn in_batch(self, index: usize) -> Self {
        Violation::InBatch {
            index,
            violation: Box::new(self),
        }
    }
}

fn shorten(value: &str) -> String {
    const SHOWN: usize = 64;
    if value.chars().count() <= SHOWN {
        value.to_owned()
    } else {
        let mut s: String = value.chars().take(SHOWN).collect();
        s.push('…');
        s
    }
}

fn utf16_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().map(char::len_utf16).sum()
    }
}

/// Whether a character may not appear in a PartitionKey or RowKey: `/ \ # ?` and control
/// characters.
pub fn forbidden_in_key(c: char) -> bool {
    matches!(c, '/' | '\\' | '#' | '?') || c.is_control()
}

/// Checks a PartitionKey or RowKey: at most [`MAX_KEY_CHARS`] UTF-16 units and none of
/// `/ \ # ?` or control characters. An empty key is allowed, as in the table service.
///
/// # Errors
/// [`Violation::KeyTooLong`] or [`Violation::KeyForbiddenCharacter`].
pub fn check_key(key: KeyKind, value: &str) -> Result<(), Violation> {
    // Most keys are short ASCII without a forbidden character: one table look-up a byte,
    // and the length in UTF-16 units is the length in bytes.
    if value.len() <= MAX_KEY_CHARS && value.bytes().all(|b| ASCII_KEY[usize::from(b)]) {
        return Ok(());
    }
    let length = utf16_len(value);
    if length > MAX_KEY_CHARS {
        return Err(Violation::KeyTooLong {
            key,
            value: shorten(value),
            length,
            max: MAX_KEY_CHARS,
        });
    }
    if let Some((position, character)) = value
        .chars()
        .enumerate()
        .find(|(_, c)| forbidden_in_key(*c))
    {
        return Err(Violation::KeyForbiddenCharacter {
            key,
            value: shorten(value),
            character,
            position,
        });
    }
    Ok(())
}

/// Checks both keys of an entity address.
///
/// # Errors
/// As [`check_key`].
pub fn check_keys(partition_key: &str, row_key: &str) -> Result<(), Violation> {
    check_key(KeyKind::PartitionKey, partition_key)?;
    check_key(KeyKind::RowKey, row_key)
}

/// Checks a table name: 3 to 63 ASCII letters and digits, starting with a letter, and not
/// the reserved name `tables`. Names are case-insensitive.
///
/// # Errors
/// [`Violation::TableName`].
pub fn check_table_name(name: &str) -> Result<(), Violation> {
    let reason = if !(3..=63).contains(&name.len()) {
        Some("a table name has 3 to 63 characters")
    } else if !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
        Some("a table name has only ASCII letters and digits")
    } else if !name.as_bytes()[0].is_ascii_alphabetic() {
        Some("a table name starts with a letter")
    } else if name.eq_ignore_ascii_case("tables") {
        Some("`tables` is reserved")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Violation::TableName {
            name: shorten(name),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks a user property name: 1 to 255 characters, an identifier (a letter or `_`, then
/// letters, digits or `_`), and not one of the system properties.
///
/// # Errors
/// [`Violation::PropertyName`].
pub fn check_property_name(name: &str) -> Result<(), Violation> {
    // The usual name, short ASCII of letters, digits and `_`: one table look-up a byte.
    let bytes = name.as_bytes();
    if let Some(first) = bytes.first()
        && bytes.len() <= MAX_PROPERTY_NAME_CHARS
        && !first.is_ascii_digit()
        && bytes.iter().all(|&b| ASCII_IDENTIFIER[usize::from(b)])
        && !is_system_name(name)
    {
        return Ok(());
    }
    let mut chars = name.chars();
    let reason = match chars.next() {
        None => Some("a property name may not be empty"),
        // A name of at most 255 bytes has at most 255 characters: count only longer ones.
        Some(_)
            if name.len() > MAX_PROPERTY_NAME_CHARS
                && name.chars().count() > MAX_PROPERTY_NAME_CHARS =>
        {
            Some("a property name has at most 255 characters")
        }
        Some(first) if !(first.is_alphabetic() || first == '_') => {
            Some("a property name starts with a letter or `_`")
        }
        Some(_) if !chars.all(|c| c.is_alphanumeric() || c == '_') => {
            Some("a property name has only letters, digits and `_`")
        }
        Some(_) if is_system_name(name) => {
            Some("system properties are set through the entity's fields, not as properties")
        }
        Some(_) => None,
    };
    match reason {
        Some(reason) => Err(Violation::PropertyName {
            name: shorten(name),
            reason,
        }),
        None => Ok(()),
    }
}

/// The ASCII bytes a key may hold: all but `/ \\ # ?` and the control characters.
const ASCII_KEY: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        table[b] = !(c.is_ascii_control() || matches!(c, b'/' | b'\\' | b'#' | b'?'));
        b += 1;
    }
    table
};

/// The bytes of an ASCII identifier: letters, digits and `_`.
const ASCII_IDENTIFIER: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_';
        b += 1;
    }
    table
};

/// Whether `name` is one of the system properties (PartitionKey, RowKey, Timestamp).
fn is_system_name(name: &str) -> bool {
    [PARTITION_KEY, ROW_KEY, TIMESTAMP].contains(&name)
}

/// Checks a name used in a projection (`select`) or a filter: a property name or one of
/// the system properties.
///
/// # Errors
/// [`Violation::PropertyName`].
pub fn check_selectable_name(name: &str) -> Result<(), Violation> {
    if is_system_name(name) {
        Ok(())
    } else {
        check_property_name(name)
    }
}

/// Checks a point read: the table name, both keys and every projected name.
///
/// # Errors
/// The first [`Violation`] found.
pub fn check_point_read(
    table: &str,
    partition_key: &str,
    row_key: &str,
    select: Option<&[&str]>,
) -> Result<(), Violation> {
    check_table_name(table)?;
    check_keys(partition_key, row_key)?;
    select
        .into_iter()
        .flatten()
        .try_for_each(|name| check_selectable_name(name))
}

/// The size of a value as the table service counts it.
pub fn value_size(value: &Value) -> usize {
    match value {
        Value::String(s) => 4 + 2 * utf16_len(s),
        Value::Binary(b) => 4 + b.len(),
        Value::Int32(_) => 4,
        Value::Int64(_) | Value::Double(_) | Value::DateTime(_) => 8,
        Value::Boolean(_) => 1,
        Value::Guid(_) => 16,
    }
}

/// The size of an entity as the table service counts it (see the module docs).
pub fn entity_size(entity: &Entity) -> usize {
    key_size(&entity.partition_key, &entity.row_key)
        + entity
            .properties
            .iter()
            .map(|(name, value)| property_size(name, value_size(value)))
            .sum::<usize>()
}

/// What one property adds to an entity's size, given its value's size.
fn property_size(name: &str, value_size: usize) -> usize {
    8 + 2 * utf16_len(name) + value_size
}

/// The size of a key pair alone (what a delete sends).
pub fn key_size(partition_key: &str, row_key: &str) -> usize {
    4 + 2 * (utf16_len(partition_key) + utf16_len(row_key))
}

fn datetime_range() -> (DateTime<Utc>, DateTime<Utc>) {
    static RANGE: std::sync::LazyLock<(DateTime<Utc>, DateTime<Utc>)> =
        std::sync::LazyLock::new(compute_datetime_range);
    *RANGE
}

fn compute_datetime_range() -> (DateTime<Utc>, DateTime<Utc>) {
    // Both instants are valid calendar dates, so `single()` always has a value.
    let min = Utc
        .with_ymd_and_hms(1601, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    let max = Utc
        .with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
        .single()
        .map(|d| d + chrono::Duration::nanoseconds(999_999_900))
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    (min, max)
}

/// Checks one property: its name, and for Strings and Binaries the 64 KiB limit, for
/// DateTimes the stored range.
///
/// # Errors
/// [`Violation::PropertyName`], [`Violation::PropertyTooLarge`] or
/// [`Violation::DateTimeOutOfRange`].
pub fn check_property(name: &str, value: &Value) -> Result<(), Violation> {
    checked_property_size(name, value).map(drop)
}

/// Checks one property as [`check_property`] does and returns what it adds to the
/// entity's size, walking the name and the value once.
fn checked_property_size(name: &str, value: &Value) -> Result<usize, Violation> {
    checked_value_size(name, value, false)
}

/// As [`checked_property_size`], checking the name unless `name_known` says it passed.
fn checked_value_size(name: &str, value: &Value, name_known: bool) -> Result<usize, Violation> {
    if !name_known {
        check_property_name(name)?;
    }
    let size = value_size(value);
    match value {
        Value::String(_) | Value::Binary(_) => {
            let payload = size - 4;
            if payload > MAX_PROPERTY_BYTES {
                return Err(Violation::PropertyTooLarge {
                    property: name.to_owned(),
                    size: payload,
                    max: MAX_PROPERTY_BYTES,
                });
            }
        }
        Value::DateTime(dt) => {
            let (min, max) = datetime_range();
            if *dt < min || *dt > max {
                return Err(Violation::DateTimeOutOfRange {
                    property: name.to_owned(),
                    value: *dt,
                });
            }
        }
        _ => {}
    }
    Ok(property_size(name, size))
}

/// Checks a whole entity before it is written: keys, property count, every property and
/// the 1 MiB size.
///
/// # Errors
/// The first [`Violation`] found.
pub fn check_entity(entity: &Entity) -> Result<(), Violation> {
    check_entity_sized(entity).map(drop)
}

/// As [`check_entity`], returning the entity's size.
///
/// # Errors
/// The first [`Violation`] found.
pub fn check_entity_sized(entity: &Entity) -> Result<usize, Violation> {
    check_entity_sized_after(entity, None)
}

/// As [`check_entity_sized`], given an entity that passed the same check just before
/// (the previous operation of a batch): a property name equal to that entity's name at
/// the same position is known valid and is compared instead of checked. The entities of
/// a batch are most often of one type, with the same names in the same order.
pub(crate) fn check_entity_sized_after(
    entity: &Entity,
    previous: Option<&Entity>,
) -> Result<usize, Violation> {
    check_keys(&entity.partition_key, &entity.row_key)?;
    if entity.properties.len() > MAX_USER_PROPERTIES {
        return Err(Violation::TooManyProperties {
            partition_key: shorten(&entity.partition_key),
            row_key: shorten(&entity.row_key),
            count: entity.properties.len(),
            max: MAX_USER_PROPERTIES,
        });
    }
    let mut size = key_size(&entity.partition_key, &entity.row_key);
    let known = previous.map(|p| &p.properties);
    for (position, (name, value)) in entity.properties.iter().enumerate() {
        let name_known = known
            .and_then(|k| k.get_index(position))
            .is_some_and(|(known, _)| known == name);
        size += checked_value_size(name, value, name_known)?;
    }
    if size > MAX_ENTITY_BYTES {
        return Err(Violation::EntityTooLarge {
            partition_key: shorten(&entity.partition_key),
            row_key: shorten(&entity.row_key),
            size,
            max: MAX_ENTITY_BYTES,
        });
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_size_follows_the_service_formula() {
        let e = Entity::new("ab", "c")
            .with("Name", "xyz")
            .with("N", 1i32)
            .with("B", true)
            .with("G", uuid::Uuid::nil())
            .with("Bin", vec![1u8, 2, 3]);
        let expected = 4
            + 2 * 3
            + (8 + 2 * 4 + 4 + 2 * 3)
            + (8 + 2 + 4)
            + (8 + 2 + 1)
            + (8 + 2 + 16)
            + (8 + 2 * 3 + 4 + 3);
        assert_eq!(entity_size(&e), expected);
    }

    #[test]
    fn key_length_counts_utf16_units() {
        let astral = "𝄞".repeat(256); // 2 units each
        assert!(check_key(KeyKind::RowKey, &astral).is_ok());
        let over = format!("{astral}a");
        assert!(matches!(
            check_key(KeyKind::RowKey, &over),
            Err(Violation::KeyTooLong { length: 513, .. })
        ));
    }

    #[test]
    fn keys_reject_each_forbidden_character() {
        for bad in [
            "a/b", "a\\b", "a#b", "a?b", "a\u{0}b", "a\nb", "a\u{7f}b", "a\u{9f}b",
        ] {
            let err = check_key(KeyKind::PartitionKey, bad).expect_err("forbidden character");
            assert!(
                matches!(err, Violation::KeyForbiddenCharacter { position: 1, .. }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn byte_tables_agree_with_the_character_rules() {
        for b in 0..=255u8 {
            let c = char::from(b);
            assert_eq!(
                ASCII_KEY[usize::from(b)],
                b.is_ascii() && !forbidden_in_key(c),
                "key byte {b:#x}"
            );
            assert_eq!(
                ASCII_IDENTIFIER[usize::from(b)],
                c.is_ascii_alphanumeric() || c == '_',
                "name byte {b:#x}"
            );
        }
    }

    #[test]
    fn a_name_known_from_the_previous_entity_is_not_checked_again_but_others_are() {
        let first = Entity::new("p", "1").with("Name", "a").with("Age", 1);
        let same = Entity::new("p", "2").with("Name", "b").with("Age", 2);
        assert_eq!(
            check_entity_sized_after(&same, Some(&first)),
            check_entity_sized(&same)
        );
        // A different name at a known position is still checked.
        let mut bad = Entity::new("p", "3").with("Name", "c");
        bad.properties.insert("1st".to_owned(), Value::Int32(1));
        assert!(matches!(
            check_entity_sized_after(&bad, Some(&first)),
            Err(Violation::PropertyName { .. })
        ));
    }

    #[test]
    fn table_names_follow_the_service_rules() {
        for ok in ["abc", "Employees", "a1b2c3", &"a".repeat(63)] {
            assert!(check_table_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ab",
            "1abc",
            "ab-c",
            "Tables",
            &"a".repeat(64),
            "ab c",
            "ábc",
        ] {
            assert!(check_table_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn property_names_follow_identifier_rules() {
        for ok in ["Name", "_x", "Ä1", "a_b_9"] {
            assert!(check_property_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "1a",
            "a-b",
            "a.b",
            "PartitionKey",
            "RowKey",
            "Timestamp",
            "odata.etag",
        ] {
            assert!(check_property_name(bad).is_err(), "{bad}");
        }
        assert!(check_property_name(&"a".repeat(255)).is_ok());
        assert!(check_property_name(&"a".repeat(256)).is_err());
    }
}
