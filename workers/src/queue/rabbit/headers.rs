//! The AMQP headers and properties tablekit writes on a message and reads back: its
//! attempts, the poison reason and time, and the broker's own delivery count and
//! dead-letter reason.

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
    match value {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
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

/// Why the broker dead-lettered a message, from its `x-death` header.
pub(super) fn death_reason(headers: Option<&FieldTable>) -> Option<String> {
    let AMQPValue::FieldArray(deaths) = headers?.inner().get("x-death")? else {
        return None;
    };
    let AMQPValue::FieldTable(first) = deaths.as_slice().first()? else {
        return None;
    };
    first.inner().get("reason").and_then(header_text)
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
            death_reason(Some(&headers)).as_deref(),
            Some("delivery_limit")
        );
        assert_eq!(death_reason(None), None);
    }
}
