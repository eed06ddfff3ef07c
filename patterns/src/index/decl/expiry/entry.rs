//! The expiry index's entries: their table, keys and query (see [`super`]). A leaf of
//! the index: it knows addresses and times, not targets or tables.

use chrono::{DateTime, Timelike, Utc};
use sha2::{Digest, Sha256};
use tablekit_core::{Query, filter};

use crate::address::EntityRef;

/// The name of the expiry index among a primary's targets.
pub const EXPIRY_INDEX: &str = "TablekitExpiry";
/// What names the expiry index's table after its primaries' table.
pub const EXPIRY_TABLE_SUFFIX: &str = "Expiry";
/// The shards of each hour's entries.
const SHARDS: u8 = 16;

/// The expiry index's table for primaries in `table`.
pub fn expiry_table(table: &str) -> String {
    format!("{table}{EXPIRY_TABLE_SUFFIX}")
}

/// When a time to live of `seconds` that starts at `now` ends: at the latest the last
/// second the table service stores (9999-12-31T23:59:59Z).
pub fn ttl_end(now: DateTime<Utc>, seconds: u64) -> DateTime<Utc> {
    let last = DateTime::<Utc>::from_timestamp(LAST_STORED_SECOND, 0).unwrap_or(now);
    let seconds = i64::try_from(seconds).unwrap_or(i64::MAX);
    chrono::Duration::try_seconds(seconds)
        .and_then(|d| now.checked_add_signed(d))
        .map_or(last, |end| end.min(last))
}

/// 9999-12-31T23:59:59Z, seconds since the epoch.
const LAST_STORED_SECOND: i64 = 253_402_300_799;

fn hour(at: DateTime<Utc>) -> String {
    at.format("%Y%m%d%H").to_string()
}

fn instant(at: DateTime<Utc>) -> String {
    at.format("%Y%m%d%H%M%S%6f").to_string()
}

/// Where the expiry index entry of `source`, which expires at `at`, lives.
pub fn entry_at(source: &EntityRef, at: DateTime<Utc>) -> EntityRef {
    let mut hasher = Sha256::new();
    hasher.update(source.partition_key.as_bytes());
    hasher.update([0]);
    hasher.update(source.row_key.as_bytes());
    let digest = hasher.finalize();
    let hash: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    let shard = digest[0] % SHARDS;
    EntityRef::new(
        expiry_table(&source.table),
        format!("{}-{shard:02}", hour(at)),
        format!("{}-{hash}", instant(at)),
    )
}

/// The query of the entries expired at `now`: the hours up to `now`, the instants up to
/// `now`.
pub fn expired_query(now: DateTime<Utc>) -> Query {
    let next_hour = now
        .with_minute(0)
        .and_then(|t| t.with_second(0))
        .and_then(|t| t.with_nanosecond(0))
        .and_then(|t| t.checked_add_signed(chrono::Duration::hours(1)))
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    Query::with_filter(
        filter::partition_key().lt(hour(next_hour).as_str())
            & filter::row_key().lt(format!("{}~", instant(now)).as_str()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_to_live_ends_by_the_last_stored_second() {
        let now = DateTime::parse_from_rfc3339("2026-11-24T06:30:15Z")
            .expect("time")
            .with_timezone(&Utc);
        assert_eq!(ttl_end(now, 3600).to_rfc3339(), "2026-11-24T07:30:15+00:00");
        let last = "9999-12-31T23:59:59+00:00";
        assert_eq!(ttl_end(now, 10_000 * 365 * 86_400).to_rfc3339(), last);
        assert_eq!(ttl_end(now, u64::MAX).to_rfc3339(), last);
    }

    #[test]
    fn entries_sort_by_expiry_and_the_query_takes_the_expired_ones() {
        let source = EntityRef::new("Sessions", "p", "r");
        let at = DateTime::parse_from_rfc3339("2026-11-24T06:30:15.123456Z")
            .expect("time")
            .with_timezone(&Utc);
        let entry = entry_at(&source, at);
        assert_eq!(entry.table, "SessionsExpiry");
        assert!(entry.partition_key.starts_with("2026112406-"));
        assert!(entry.row_key.starts_with("20261124063015123456-"));
        let matches = |now: DateTime<Utc>| {
            expired_query(now)
                .filter
                .expect("a filter")
                .matches(&tablekit_core::Entity::new(
                    entry.partition_key.clone(),
                    entry.row_key.clone(),
                ))
        };
        assert!(!matches(at - chrono::Duration::microseconds(1)));
        assert!(matches(at));
        assert!(matches(at + chrono::Duration::hours(5)));
    }
}
