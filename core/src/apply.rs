//! How one write changes one stored entity, as the table service defines it; shared by the
//! backends that store entities themselves (the embedded SQLite and in-memory stores).

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::limits;
use crate::model::{ETag, Entity, IfMatch};
use crate::store::WriteOp;

/// What a write does to the stored entity.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Store this entity (Timestamp and ETag still to be set by the store).
    Put(Entity),
    /// Remove the stored entity.
    Remove,
}

fn check_condition(table: &str, if_match: &IfMatch, current: &Entity) -> Result<()> {
    let matched = match (&current.etag, if_match) {
        (_, IfMatch::Any) => true,
        (Some(stored), condition) => condition.matches(stored),
        (None, IfMatch::ETag(_)) => false,
    };
    if matched {
        Ok(())
    } else {
        Err(Error::precondition_failed(
            table,
            &current.partition_key,
            &current.row_key,
        ))
    }
}

fn merged(current: &Entity, update: Entity) -> Result<Entity> {
    let mut result = current.clone();
    result.properties.extend(update.properties);
    // Two valid entities can merge into one over the property or size limit.
    limits::check_entity(&result)?;
    Ok(result)
}

/// Decides the change `op` makes given the entity stored now (`current`, with its ETag).
///
/// # Errors
/// `NotFound`, `AlreadyExists`, `PreconditionFailed`, or a limit the merged entity breaks;
/// in each case nothing may be written.
pub fn plan(table: &str, op: WriteOp, current: Option<&Entity>) -> Result<Change> {
    match (op, current) {
        (WriteOp::Insert(_), Some(cur)) => Err(Error::already_exists(
            table,
            &cur.partition_key,
            &cur.row_key,
        )),
        (WriteOp::Insert(e) | WriteOp::InsertOrReplace(e) | WriteOp::InsertOrMerge(e), None) => {
            Ok(Change::Put(e))
        }
        (op @ (WriteOp::Replace(..) | WriteOp::Merge(..) | WriteOp::Delete { .. }), None) => {
            let (pk, rk) = op.key();
            Err(Error::not_found(table, pk, rk))
        }
        (WriteOp::Replace(e, if_match), Some(cur)) => {
            check_condition(table, &if_match, cur)?;
            Ok(Change::Put(e))
        }
        (WriteOp::Merge(e, if_match), Some(cur)) => {
            check_condition(table, &if_match, cur)?;
            Ok(Change::Put(merged(cur, e)?))
        }
        (WriteOp::InsertOrReplace(e), Some(_)) => Ok(Change::Put(e)),
        (WriteOp::InsertOrMerge(e), Some(cur)) => Ok(Change::Put(merged(cur, e)?)),
        (WriteOp::Delete { if_match, .. }, Some(cur)) => {
            check_condition(table, &if_match, cur)?;
            Ok(Change::Remove)
        }
    }
}

/// A fresh version for a write: the store's Timestamp (now, to the microsecond) and a new
/// ETag that differs from every earlier one, even for two writes in the same microsecond.
///
/// The ETag reads `W/"datetime'<RFC 3339, microseconds>'.<16 hex digits>"`. The hex part
/// is a bijective mix of a per-process random seed and a per-process counter: distinct
/// within a process by construction, and across processes sharing a file unless two
/// random 64-bit values meet in the same microsecond. It costs no system call, which
/// a random draw per write did (a `getrandom` call each, about a microsecond).
pub fn new_version() -> (DateTime<Utc>, ETag) {
    use std::fmt::Write as _;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    static SEED: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);

    let now = crate::clock::now();
    let ts = DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now);
    let seed = *SEED.get_or_init(|| uuid::Uuid::new_v4().as_u128() as u64);
    let unique = mix(seed.wrapping_add(COUNTER.fetch_add(1, Ordering::Relaxed)));
    let mut etag = String::with_capacity(64);
    etag.push_str("W/\"datetime'");
    push_rfc3339_micros(&mut etag, ts);
    let _ = write!(etag, "'.{unique:016x}\"");
    (ts, ETag::new(etag))
}

/// SplitMix64's finaliser: a bijection on `u64` that scatters consecutive inputs.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Appends `ts` as `to_rfc3339_opts(SecondsFormat::Micros, true)` writes it
/// (`2026-11-23T18:57:38.123456Z`), digit by digit: the general formatter costs more
/// than the rest of a version stamp. Years outside 0..=9999 take the general path.
fn push_rfc3339_micros(out: &mut String, ts: DateTime<Utc>) {
    use chrono::{Datelike, Timelike};

    fn digits(out: &mut String, value: u32, width: u32) {
        for place in (0..width).rev() {
            let digit = (value / 10u32.pow(place)) % 10;
            out.push(char::from(b'0' + digit as u8));
        }
    }

    let year = ts.year();
    if !(0..=9999).contains(&year) {
        out.push_str(&ts.to_rfc3339_opts(chrono::SecondsFormat::Micros, true));
        return;
    }
    digits(out, year as u32, 4);
    out.push('-');
    digits(out, ts.month(), 2);
    out.push('-');
    digits(out, ts.day(), 2);
    out.push('T');
    digits(out, ts.hour(), 2);
    out.push(':');
    digits(out, ts.minute(), 2);
    out.push(':');
    // A leap second shows as second 60, as chrono writes it.
    let nanos = ts.nanosecond();
    digits(out, ts.second() + nanos / 1_000_000_000, 2);
    out.push('.');
    digits(out, (nanos % 1_000_000_000) / 1_000, 6);
    out.push('Z');
}

/// Stamps an entity with a fresh version and returns its ETag.
pub fn stamp(entity: &mut Entity) -> ETag {
    let (ts, etag) = new_version();
    entity.timestamp = Some(ts);
    entity.etag = Some(etag.clone());
    etag
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamped_time_is_written_as_chrono_writes_it() {
        let instants = [
            DateTime::from_timestamp_micros(0),
            DateTime::from_timestamp_micros(1_763_924_258_000_001),
            DateTime::from_timestamp_micros(253_402_300_799_999_999), // 9999-12-31T23:59:59.999999
            DateTime::from_timestamp(1_483_228_799, 1_500_000_000),   // a leap second
            DateTime::from_timestamp(-62_167_219_200, 0),             // year 0
            DateTime::from_timestamp(-62_167_219_201, 0),             // year -1: general path
            DateTime::from_timestamp(253_402_300_800, 0),             // year 10000: general path
        ];
        for ts in instants.into_iter().map(|t| t.expect("a valid instant")) {
            let mut ours = String::new();
            push_rfc3339_micros(&mut ours, ts);
            assert_eq!(
                ours,
                ts.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
            );
        }
    }

    #[test]
    fn every_version_has_its_own_etag() {
        let etags: std::collections::HashSet<String> = (0..10_000)
            .map(|_| new_version().1.as_str().to_owned())
            .collect();
        assert_eq!(etags.len(), 10_000);
        let (ts, etag) = new_version();
        let expected = format!(
            "W/\"datetime'{}'.",
            ts.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
        );
        assert!(etag.as_str().starts_with(&expected), "{}", etag.as_str());
        assert_eq!(etag.as_str().len(), expected.len() + 16 + 1);
    }
}
