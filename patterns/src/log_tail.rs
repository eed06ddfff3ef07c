//! The log-tail pattern: RowKeys of inverted .NET ticks
//! (`DateTime.MaxValue.Ticks - DateTime.UtcNow.Ticks`, 19 digits, zero padded), so a
//! partition lists its newest entities first and the newest `n` are one query. Writes in
//! the same tick get a uniqueness suffix that keeps the order by time.
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use tablekit_patterns::log_tail;
//!
//! let at = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
//! let key = log_tail::row_key(at).unwrap();
//! // DateTime(2024, 1, 1).Ticks is 638396640000000000 in .NET.
//! assert_eq!(key, (3_155_378_975_999_999_999i64 - 638_396_640_000_000_000).to_string());
//! assert_eq!(log_tail::instant_of(&key).unwrap(), at);
//! ```

use chrono::{DateTime, Utc};
use tablekit_core::keys;
use tablekit_core::typed::{Record, Stored, Table};
use tablekit_core::{Entity, ErrorKind, Query, TableStore};

use crate::error::Result;

/// The separator before a uniqueness suffix. `_` (0x5F) sorts above the digits, which
/// does not disturb the order: the ticks are always 19 digits, so two keys differ in their
/// ticks before either reaches a separator, and keys of the same tick sort as
/// `<ticks>` < `<ticks>_<suffix>` (a prefix first), then by suffix.
pub const SUFFIX_SEPARATOR: char = '_';

/// The log-tail RowKey of an instant.
///
/// # Errors
/// A key error for an instant outside .NET's range (years 1 to 9999).
pub fn row_key(at: DateTime<Utc>) -> Result<String> {
    keys::ticks_desc(at).map_err(tablekit_core::Error::from)
}

/// The log-tail RowKey of an instant with a uniqueness suffix (8 random hex digits):
/// entities written in the same tick get distinct keys, still in time order.
///
/// # Errors
/// As [`row_key`].
pub fn unique_row_key(at: DateTime<Utc>) -> Result<String> {
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    Ok(format!("{}{SUFFIX_SEPARATOR}{suffix}", row_key(at)?))
}

/// The instant a log-tail RowKey (with or without a suffix) was made from.
///
/// # Errors
/// A key error for a key that is not a log-tail key.
pub fn instant_of(row_key: &str) -> Result<DateTime<Utc>> {
    let ticks = row_key
        .split_once(SUFFIX_SEPARATOR)
        .map_or(row_key, |(t, _)| t);
    keys::parse_ticks_desc(ticks).map_err(tablekit_core::Error::from)
}

/// Appends an entity to the log of a partition at `at`, with a uniqueness suffix; a
/// (vanishingly rare) clash of suffixes takes another. Returns the RowKey.
///
/// # Errors
/// The store's errors.
pub async fn append<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    at: DateTime<Utc>,
    mut entity: Entity,
) -> Result<String> {
    entity.partition_key = partition_key.to_owned();
    let mut retry = crate::consistency::RetryPolicy::default()
        .attempts(8)
        .start();
    loop {
        retry
            .next(|| format!("log-tail append to {table}({partition_key})"))
            .await?;
        entity.row_key = unique_row_key(at)?;
        match store.insert(table, entity.clone()).await {
            Ok(_) => return Ok(entity.row_key),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The newest `n` entities of a partition (at most 1,000), newest first, in one query.
///
/// # Errors
/// The store's errors; `InvalidInput` for `n` outside 1 ..= 1000.
pub async fn latest<R: Record, S: TableStore>(
    table: &Table<R, S>,
    partition_key: &str,
    n: usize,
) -> Result<Vec<Stored<R>>> {
    let (page, _) = table
        .query_page(Query::partition(partition_key).top(n))
        .await?;
    Ok(page)
}

/// The entities of a partition written from `from` to `to` (inclusive), newest first.
///
/// # Errors
/// The store's errors; key errors for instants outside .NET's range.
pub async fn between<R: Record, S: TableStore>(
    table: &Table<R, S>,
    partition_key: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<Stored<R>>> {
    // Newer instants have smaller keys: `to` bounds the start, `from` the end (with any
    // suffix of the tick of `from`).
    let start = row_key(to)?;
    let end = format!("{}{}", row_key(from)?, char::from(b'`'));
    let filter = tablekit_core::filter::partition_key().eq(partition_key)
        & tablekit_core::filter::row_key().ge(start.as_str())
        & tablekit_core::filter::row_key().lt(end.as_str());
    table.query(Query::with_filter(filter)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_separator_orders_keys_by_time_then_suffix() {
        let at = Utc
            .with_ymd_and_hms(2026, 11, 22, 10, 0, 0)
            .single()
            .expect("a valid instant");
        let later = at + chrono::Duration::microseconds(1);
        let bare = row_key(at).expect("key");
        let suffixed = unique_row_key(at).expect("key");
        let newer = unique_row_key(later).expect("key");
        assert!('_' > '9', "the separator sorts above the digits");
        assert!(bare < suffixed, "same tick: the bare key first");
        assert!(
            newer < bare && newer < suffixed,
            "a later instant first, suffix or not"
        );
        assert_eq!(instant_of(&suffixed).expect("instant"), at);
    }
}
