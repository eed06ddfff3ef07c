//! The AMQP headers and properties tablekit writes on a message and reads back: its
//! attempts, the poison reason and time, and the broker's own delivery count and
//! dead-letter reason; and every property and header of a poison message shown as text.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};

pub(super) const ATTEMPTS_HEADER: &str = "x-tablekit-attempts";
pub(super) const REASON_HEADER: &str = "x-tablekit-reason";
/// When tablekit poisoned a message (Unix milliseconds).
pub(super) const POISONED_AT_HEADER: &str = "x-tablekit-poisoned-at";
/// A mark unique to one poisoning: it names the message in the poison queue even when
/// another message there has the same id (a duplicate delivery poisoned again).
pub(super) const POISON_MARK_HEADER: &str = "x-tablekit-poison-mark";

pub(super) fn string_arg(value: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(value.as_bytes().to_vec()))
}

pub(super) fn header_int(headers: Option<&FieldTable>, name: &str) -> Option<i64> {
    match headers?.inner().get(name)? {
        AMQPValue::ShortShortInt(v) => Some(i64::from(*v)),
        AMQPValue::ShortShortUInt(v) => Some(i64::from(*v)),
        AMQPValue::ShortInt(v) => Some(i64::from(*v)),
        AMQPValue::ShortUInt(v) => Some(i64::from(*v)),
        AMQPValue::LongInt(v) => Some(i64::from(*v)),
        AMQPValue::LongUInt(v) => Some(i64::from(*v)),
        AMQPValue::LongLongInt(v) => Some(*v),
        _ => None,
    }
}

pub(super) fn header_text(value: &AMQPValue) -> Option<String> {
    header_text_checked(value).map(|(text, _)| text)
}

/// A text header, with whether its bytes were not UTF-8 (a long string and a byte array
/// carry any bytes; they are shown as U+FFFD). A client that sends text as AMQP bytes
/// (a byte array) is read as text, as it meant.
pub(super) fn header_text_checked(value: &AMQPValue) -> Option<(String, bool)> {
    if let AMQPValue::ShortString(s) = value {
        return Some((s.as_str().to_owned(), false));
    }
    let bytes = header_bytes(value)?;
    Some(match std::str::from_utf8(bytes) {
        Ok(text) => (text.to_owned(), false),
        Err(_) => (String::from_utf8_lossy(bytes).into_owned(), true),
    })
}

/// The exact bytes of header values that are not UTF-8, by their place among the headers
/// shown ([`RawText::headers`](super::super::RawText::headers)).
pub(super) type RawHeaders = Vec<(usize, Vec<u8>)>;

/// The bytes of a header that carries any (a long string, a byte array).
pub(super) fn header_bytes(value: &AMQPValue) -> Option<&[u8]> {
    match value {
        AMQPValue::LongString(s) => Some(s.as_bytes()),
        AMQPValue::ByteArray(b) => Some(b.as_slice()),
        _ => None,
    }
}

/// The delivery count of a message: our attempts header plus the broker's count.
pub(super) fn delivery_count(properties: &BasicProperties) -> u32 {
    let headers = properties.headers().as_ref();
    let ours = header_int(headers, ATTEMPTS_HEADER).unwrap_or(0);
    let broker = header_int(headers, "x-delivery-count").unwrap_or(0);
    u32::try_from(ours.saturating_add(broker).saturating_add(1)).unwrap_or(u32::MAX)
}

/// Why the broker dead-lettered a message, from its `x-death` header, with whether its
/// bytes were not UTF-8.
pub(super) fn death_reason(headers: Option<&FieldTable>) -> Option<(String, bool)> {
    death_reason_value(headers).and_then(header_text_checked)
}

/// The `reason` of the first `x-death` entry, as the broker wrote it.
pub(super) fn death_reason_value(headers: Option<&FieldTable>) -> Option<&AMQPValue> {
    let AMQPValue::FieldArray(deaths) = headers?.inner().get("x-death")? else {
        return None;
    };
    let AMQPValue::FieldTable(first) = deaths.as_slice().first()? else {
        return None;
    };
    first.inner().get("reason")
}

/// An AMQP timestamp (Unix seconds) as the headers show times.
fn shown_timestamp(seconds: u64) -> String {
    i64::try_from(seconds)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map_or_else(|| seconds.to_string(), super::super::poison::shown_time)
}

/// The keys of an `x-death` entry shown first, in this order; the others follow by name.
const DEATH_KEYS: [&str; 4] = ["reason", "queue", "time", "count"];

/// A table's entries as `key=value, …`, the keys in `first` first.
fn shown_table(table: &FieldTable, first: &[&str]) -> String {
    let entries = table.inner();
    let firsts = first
        .iter()
        .filter_map(|key| entries.get(*key).map(|value| (*key, value)));
    let others = entries
        .iter()
        .filter(|(key, _)| !first.contains(&key.as_str()))
        .map(|(key, value)| (key.as_str(), value));
    firsts
        .chain(others)
        .map(|(key, value)| format!("{key}={}", shown_value(value)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A header's value as text: strings as they read (bytes that are not UTF-8 as U+FFFD),
/// numbers, timestamps in RFC 3339, tables as `{key=value, …}`, arrays as `[…]`, byte
/// arrays in hexadecimal.
pub(super) fn shown_value(value: &AMQPValue) -> String {
    match value {
        AMQPValue::Boolean(v) => v.to_string(),
        AMQPValue::ShortShortInt(v) => v.to_string(),
        AMQPValue::ShortShortUInt(v) => v.to_string(),
        AMQPValue::ShortInt(v) => v.to_string(),
        AMQPValue::ShortUInt(v) => v.to_string(),
        AMQPValue::LongInt(v) => v.to_string(),
        AMQPValue::LongUInt(v) => v.to_string(),
        AMQPValue::LongLongInt(v) => v.to_string(),
        AMQPValue::Float(v) => v.to_string(),
        AMQPValue::Double(v) => v.to_string(),
        AMQPValue::DecimalValue(v) => format!("{}e-{}", v.value, v.scale),
        AMQPValue::ShortString(_) | AMQPValue::LongString(_) => {
            header_text(value).unwrap_or_default()
        }
        AMQPValue::FieldArray(items) => format!(
            "[{}]",
            items
                .as_slice()
                .iter()
                .map(shown_value)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        AMQPValue::Timestamp(seconds) => shown_timestamp(*seconds),
        AMQPValue::FieldTable(table) => format!("{{{}}}", shown_table(table, &[])),
        AMQPValue::ByteArray(bytes) => bytes
            .as_slice()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        AMQPValue::Void => String::new(),
    }
}

/// Every property and header of a message as (name, value): the properties set (message
/// id, timestamp, content type, …) by their AMQP names, then the headers by key — each
/// `x-death` entry on its own line (`x-death[0]`: `reason=…, queue=…, time=…, count=…,
/// …`), tablekit's poison time in RFC 3339; and beside them the exact bytes of the long
/// strings among them that are not UTF-8 (shown lossily).
pub(super) fn shown_headers(properties: &BasicProperties) -> (Vec<(String, String)>, RawHeaders) {
    let mut shown = Vec::new();
    let mut raw = Vec::new();
    let mut text = |name: &str, value: &Option<ShortString>| {
        if let Some(value) = value {
            shown.push((name.to_owned(), value.as_str().to_owned()));
        }
    };
    text("message-id", properties.message_id());
    text("correlation-id", properties.correlation_id());
    text("content-type", properties.content_type());
    text("content-encoding", properties.content_encoding());
    text("type", properties.kind());
    text("app-id", properties.app_id());
    text("user-id", properties.user_id());
    text("reply-to", properties.reply_to());
    text("expiration", properties.expiration());
    if let Some(seconds) = properties.timestamp() {
        shown.push(("timestamp".to_owned(), shown_timestamp(*seconds)));
    }
    if let Some(mode) = properties.delivery_mode() {
        shown.push(("delivery-mode".to_owned(), mode.to_string()));
    }
    if let Some(priority) = properties.priority() {
        shown.push(("priority".to_owned(), priority.to_string()));
    }
    let Some(headers) = properties.headers() else {
        return (shown, raw);
    };
    for (key, value) in headers.inner() {
        match (key.as_str(), value) {
            ("x-death", AMQPValue::FieldArray(deaths)) => {
                for (at, death) in deaths.as_slice().iter().enumerate() {
                    let entry = match death {
                        AMQPValue::FieldTable(table) => shown_table(table, &DEATH_KEYS),
                        other => shown_value(other),
                    };
                    shown.push((format!("x-death[{at}]"), entry));
                }
            }
            (POISONED_AT_HEADER, _) => {
                let at = header_int(Some(headers), POISONED_AT_HEADER)
                    .and_then(chrono::DateTime::from_timestamp_millis)
                    .map_or_else(|| shown_value(value), super::super::poison::shown_time);
                shown.push((key.to_string(), at));
            }
            (key, value) => {
                // A long string's bytes that are not UTF-8 are kept exactly beside.
                if let AMQPValue::LongString(text) = value
                    && std::str::from_utf8(text.as_bytes()).is_err()
                {
                    raw.push((shown.len(), text.as_bytes().to_vec()));
                }
                shown.push((key.to_owned(), shown_value(value)));
            }
        }
    }
    (shown, raw)
}

pub(super) fn properties(
    id: &str,
    attempts: u32,
    reason: Option<&str>,
    timestamp: Option<u64>,
) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert(
        ATTEMPTS_HEADER.into(),
        AMQPValue::LongLongInt(i64::from(attempts)),
    );
    if let Some(reason) = reason {
        headers.insert(REASON_HEADER.into(), string_arg(reason));
        headers.insert(
            POISONED_AT_HEADER.into(),
            AMQPValue::LongLongInt(chrono::Utc::now().timestamp_millis()),
        );
        headers.insert(
            POISON_MARK_HEADER.into(),
            string_arg(&uuid::Uuid::new_v4().simple().to_string()),
        );
    }
    BasicProperties::default()
        .with_delivery_mode(2)
        .with_message_id(ShortString::from(id))
        .with_timestamp(
            timestamp.unwrap_or_else(|| {
                u64::try_from(chrono::Utc::now().timestamp()).unwrap_or_default()
            }),
        )
        .with_headers(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delivery_count_adds_our_attempts_to_the_brokers_count() {
        let first = properties("m", 0, None, None);
        assert_eq!(
            delivery_count(&first),
            1,
            "x-delivery-count is absent on a first delivery"
        );
        let mut headers = FieldTable::default();
        headers.insert(ATTEMPTS_HEADER.into(), AMQPValue::LongLongInt(2));
        headers.insert("x-delivery-count".into(), AMQPValue::LongInt(1));
        let redelivered = BasicProperties::default().with_headers(headers);
        assert_eq!(delivery_count(&redelivered), 4);
    }

    #[test]
    fn the_brokers_dead_letter_reason_is_read_from_x_death() {
        let mut death = FieldTable::default();
        death.insert("reason".into(), string_arg("delivery_limit"));
        let mut headers = FieldTable::default();
        headers.insert(
            "x-death".into(),
            AMQPValue::FieldArray(vec![AMQPValue::FieldTable(death)].into()),
        );
        assert_eq!(
            death_reason(Some(&headers)),
            Some(("delivery_limit".to_owned(), false))
        );
        assert_eq!(death_reason(None), None);
    }

    #[test]
    fn a_reason_sent_as_amqp_bytes_is_read_as_text() {
        let mut headers = FieldTable::default();
        headers.insert(
            REASON_HEADER.into(),
            AMQPValue::ByteArray(b"timeout after 30 s".to_vec().into()),
        );
        let read = Some(&headers)
            .and_then(|h| h.inner().get(REASON_HEADER))
            .and_then(header_text_checked);
        assert_eq!(read, Some(("timeout after 30 s".to_owned(), false)));
        let odd = AMQPValue::ByteArray(b"oops\xfe".to_vec().into());
        assert_eq!(
            header_text_checked(&odd),
            Some(("oops\u{fffd}".to_owned(), true))
        );
    }

    #[test]
    fn a_reason_that_is_not_utf8_reads_lossily_and_says_so() {
        let bytes = AMQPValue::LongString(LongString::from(b"oops\xfe".to_vec()));
        assert_eq!(
            header_text_checked(&bytes),
            Some(("oops\u{FFFD}".to_owned(), true))
        );
        assert_eq!(
            header_text_checked(&string_arg("fine")),
            Some(("fine".to_owned(), false))
        );
    }

    #[test]
    fn every_property_and_header_shows_as_text_with_each_death_on_its_own_line() {
        let mut death = FieldTable::default();
        death.insert("count".into(), AMQPValue::LongLongInt(1));
        death.insert("reason".into(), string_arg("delivery_limit"));
        death.insert("queue".into(), string_arg("jobs"));
        death.insert("time".into(), AMQPValue::Timestamp(1_800_000_000));
        death.insert(
            "routing-keys".into(),
            AMQPValue::FieldArray(vec![string_arg("jobs")].into()),
        );
        let mut headers = FieldTable::default();
        headers.insert(
            "x-death".into(),
            AMQPValue::FieldArray(vec![AMQPValue::FieldTable(death)].into()),
        );
        headers.insert(
            POISONED_AT_HEADER.into(),
            AMQPValue::LongLongInt(1_800_000_000_123),
        );
        headers.insert("x-bytes".into(), AMQPValue::ByteArray(vec![1, 0xab].into()));
        let properties = BasicProperties::default()
            .with_message_id(ShortString::from("m-1"))
            .with_timestamp(1_800_000_000)
            .with_headers(headers);
        let (shown, _) = shown_headers(&properties);
        let get = |name: &str| {
            shown
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("message-id"), Some("m-1"));
        assert_eq!(get("timestamp"), Some("2027-01-15T08:00:00.000Z"));
        assert_eq!(
            get("x-death[0]"),
            Some(
                "reason=delivery_limit, queue=jobs, time=2027-01-15T08:00:00.000Z, count=1, routing-keys=[jobs]"
            )
        );
        assert_eq!(get(POISONED_AT_HEADER), Some("2027-01-15T08:00:00.123Z"));
        assert_eq!(get("x-bytes"), Some("01ab"));
    }
}
