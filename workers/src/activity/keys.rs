//! The keys of the activity table: partitions by kind and queue, RowKeys by UTC minute or
//! hour (fixed width, so string order is time order) then process.

use chrono::{DateTime, NaiveDateTime, Timelike, Utc};

/// The partition of the worker records.
pub(super) const WORKERS_PARTITION: &str = "w";
/// The partition of the queue markers.
pub(super) const QUEUES_PARTITION: &str = "q";
/// The partition of the queues tablekit declared (a marker each, by its encoded name).
pub(super) const DECLARED_PARTITION: &str = "declared";

const MINUTE_FORMAT: &str = "%Y%m%dT%H%M";
const HOUR_FORMAT: &str = "%Y%m%dT%H";
/// The longest process id kept.
const MAX_PROCESS_ID: usize = 128;

/// `at` moved by `by`, held at the ends of the time chrono can hold.
pub(super) fn shift(at: DateTime<Utc>, by: chrono::Duration) -> DateTime<Utc> {
    at.checked_add_signed(by)
        .unwrap_or(if by < chrono::Duration::zero() {
            DateTime::<Utc>::MIN_UTC
        } else {
            DateTime::<Utc>::MAX_UTC
        })
}

/// The start of the minute `at` falls in.
pub(super) fn minute_of(at: DateTime<Utc>) -> DateTime<Utc> {
    at.with_second(0)
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(at)
}

/// The start of the hour `at` falls in.
pub(super) fn hour_of(at: DateTime<Utc>) -> DateTime<Utc> {
    minute_of(at).with_minute(0).unwrap_or(at)
}

/// `<YYYYMMDDTHHMM>`: a minute as a key prefix (everything of that minute and later sorts
/// at or after it).
pub(super) fn minute_key(minute: DateTime<Utc>) -> String {
    minute.format(MINUTE_FORMAT).to_string()
}

/// `<YYYYMMDDTHH>`: an hour as a key prefix.
pub(super) fn hour_key(hour: DateTime<Utc>) -> String {
    hour.format(HOUR_FORMAT).to_string()
}

/// A minute row's RowKey.
pub(super) fn minute_row(minute: DateTime<Utc>, process: &str) -> String {
    format!("{},{process}", minute_key(minute))
}

/// An hour row's RowKey.
pub(super) fn hour_row(hour: DateTime<Utc>, process: &str) -> String {
    format!("{},{process}", hour_key(hour))
}

/// The minute and process of a minute row's RowKey.
pub(super) fn parse_minute_row(row_key: &str) -> Option<(DateTime<Utc>, &str)> {
    let (time, process) = row_key.split_once(',')?;
    let at = NaiveDateTime::parse_from_str(time, MINUTE_FORMAT).ok()?;
    Some((at.and_utc(), process))
}

/// The hour and process of an hour row's RowKey.
pub(super) fn parse_hour_row(row_key: &str) -> Option<(DateTime<Utc>, &str)> {
    let (time, process) = row_key.split_once(',')?;
    if time.len() != 11 {
        return None;
    }
    let at = NaiveDateTime::parse_from_str(&format!("{time}00"), MINUTE_FORMAT).ok()?;
    Some((at.and_utc(), process))
}

/// The partition of a queue's minute rows.
pub(super) fn minute_partition(queue: &str) -> String {
    format!("m,{}", encode_queue(queue))
}

/// The partition of a queue's hour rows.
pub(super) fn hour_partition(queue: &str) -> String {
    format!("h,{}", encode_queue(queue))
}

fn escaped(c: char) -> bool {
    matches!(c, '%' | '/' | '\\' | '#' | '?') || c.is_control()
}

/// A queue name as a key part: `%`, the characters keys cannot hold and control
/// characters percent-encoded (their UTF-8 bytes).
pub(crate) fn encode_queue(queue: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(queue.len());
    for c in queue.chars() {
        if escaped(c) {
            let mut bytes = [0u8; 4];
            for b in c.encode_utf8(&mut bytes).bytes() {
                let _ = write!(out, "%{b:02X}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The queue name an [`encode_queue`] key part holds; `None` for one it cannot have
/// written.
pub(super) fn decode_queue(part: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(part.len());
    let mut rest = part.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = tail.get(..2)?;
            let text = std::str::from_utf8(hex).ok()?;
            bytes.push(u8::from_str_radix(text, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// A process id a key can hold: the characters keys cannot hold (and `,`) become `_`, at
/// most 128 characters, `process` when empty.
pub(super) fn process_id(id: &str) -> String {
    let id: String = id
        .chars()
        .map(|c| if escaped(c) || c == ',' { '_' } else { c })
        .take(MAX_PROCESS_ID)
        .collect();
    if id.is_empty() {
        "process".to_owned()
    } else {
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_round_trip_through_their_key_part() {
        for name in ["archive", "a/b#c?d\\e", "100%", "tab\there", "ünï,code", ""] {
            let part = encode_queue(name);
            assert!(
                !part.chars().any(tablekit_core::limits::forbidden_in_key),
                "{part}"
            );
            assert_eq!(decode_queue(&part).as_deref(), Some(name));
        }
        assert_eq!(decode_queue("%G1"), None);
        assert_eq!(decode_queue("%4"), None);
    }

    #[test]
    fn minute_and_hour_keys_sort_as_time_and_parse_back() {
        let at: DateTime<Utc> = "2024-05-01T13:07:42.5Z".parse().unwrap_or_default();
        let minute = minute_of(at);
        let row = minute_row(minute, "host-1");
        assert_eq!(row, "20240501T1307,host-1");
        assert_eq!(parse_minute_row(&row), Some((minute, "host-1")));
        let hour = hour_of(at);
        assert_eq!(hour_row(hour, "p"), "20240501T13,p");
        assert_eq!(parse_hour_row("20240501T13,p"), Some((hour, "p")));
        // Every row of an earlier minute sorts below a later minute's prefix.
        assert!(minute_row(minute, "zzzz") < minute_key(minute + chrono::Duration::minutes(1)));
        assert!(minute_key(minute) < minute_row(minute, "a"));
    }

    #[test]
    fn process_ids_lose_what_a_key_cannot_hold() {
        assert_eq!(process_id("a/b,c"), "a_b_c");
        assert_eq!(process_id(""), "process");
        assert_eq!(process_id(&"x".repeat(500)).len(), 128);
    }
}
