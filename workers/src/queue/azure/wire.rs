//! The wire form of the queue backend: tablekit's message text, the service's message
//! lists, and the service's error answers mapped onto the workers' errors.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};

use super::super::Received;
use crate::error::{Error, Result};

/// A message as tablekit writes it into the message text.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Wire {
    /// The wire form's version (1): tells tablekit's messages from other producers' JSON.
    pub(super) tk: u32,
    pub(super) id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) sent: Option<DateTime<Utc>>,
    /// The body, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) body: Option<String>,
    /// The blob holding the body (claim check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) claim: Option<String>,
    /// Why a poisoned message was poisoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) reason: Option<String>,
    /// The deliveries a poisoned message had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) count: Option<u32>,
    /// When a poisoned message was poisoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) poisoned: Option<DateTime<Utc>>,
}

/// One message of a Get Messages or Peek Messages answer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct ServiceMessage {
    pub(super) message_id: String,
    #[serde(default)]
    pub(super) pop_receipt: Option<String>,
    #[serde(default)]
    pub(super) dequeue_count: Option<u32>,
    #[serde(default)]
    pub(super) insertion_time: Option<String>,
    #[serde(default)]
    pub(super) message_text: String,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ServiceMessages {
    #[serde(rename = "QueueMessage", default)]
    pub(super) messages: Vec<ServiceMessage>,
}

/// A message received, not yet handed out.
#[derive(Debug)]
pub(super) struct Leased {
    pub(super) message_id: String,
    pub(super) receipt: String,
    pub(super) received: Received,
    pub(super) claim: Option<String>,
    /// The message text as received (a poisoned copy keeps it).
    pub(super) wire: Wire,
    /// When the lease taken by the receive runs out.
    pub(super) lease_ends: Instant,
    /// When the service stored the message (its insertion time).
    pub(super) inserted: Option<DateTime<Utc>>,
}

/// The length of a text once XML-escaped in a message body.
pub(super) fn escaped_len(text: &str) -> usize {
    quick_xml::escape::escape(text).len()
}

/// A lease in the service's whole seconds, at least one.
pub(super) fn lease_secs(lease: Duration) -> u64 {
    (lease.as_secs() + u64::from(lease.subsec_nanos() > 0)).max(1)
}

pub(super) fn lease_duration(lease: Duration) -> Duration {
    Duration::from_secs(lease_secs(lease))
}

pub(super) fn parse_http_date(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc2822(text)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

pub(super) fn error_code(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("x-ms-error-code")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Maps an unsuccessful answer about a queue.
pub(super) async fn service_error(response: reqwest::Response, queue: &str) -> Error {
    let status = response.status();
    let code = error_code(&response);
    let text = response.text().await.unwrap_or_default();
    let message = format!(
        "queue `{queue}`: HTTP {} {code} {}",
        status.as_u16(),
        text.chars().take(300).collect::<String>()
    );
    match (status, code.as_str()) {
        (_, "QueueNotFound") => Error::refused(format!("{message} (declare the queue first)")),
        (StatusCode::PAYLOAD_TOO_LARGE, _) | (_, "RequestBodyTooLarge") => Error::refused(message),
        (s, _) if s.is_server_error() || s == StatusCode::REQUEST_TIMEOUT => {
            Error::unavailable(message)
        }
        (StatusCode::FORBIDDEN, _) => Error::QueuePermissionDenied {
            queue: queue.to_owned(),
            reason: format!("{code}: the service refused the credential"),
        },
        _ => Error::storage(message),
    }
}

/// Maps an unsuccessful answer about a leased message: a stale pop receipt or a message
/// gone means the lease was lost (the message is delivered again, or was settled).
pub(super) async fn lease_error(response: reqwest::Response, queue: &str) -> Error {
    let code = error_code(&response);
    if matches!(code.as_str(), "PopReceiptMismatch" | "MessageNotFound") {
        return Error::unavailable(format!(
            "queue `{queue}`: the lease was lost ({code}); the message is delivered again"
        ));
    }
    service_error(response, queue).await
}

pub(super) async fn messages(
    response: reqwest::Response,
    queue: &str,
) -> Result<Vec<ServiceMessage>> {
    if !response.status().is_success() {
        return Err(service_error(response, queue).await);
    }
    let text = response
        .text()
        .await
        .map_err(|e| Error::unavailable_because(format!("reading messages of `{queue}`"), e))?;
    let list: ServiceMessages = quick_xml::de::from_str(&text)
        .map_err(|e| Error::storage_because(format!("unreadable messages of `{queue}`"), e))?;
    Ok(list.messages)
}

/// The wire form of a poison queue's message text (another producer's text as its body).
pub(super) fn poison_wire(message_id: &str, text: &str) -> Wire {
    serde_json::from_str::<Wire>(text).unwrap_or_else(|_| Wire {
        tk: 1,
        id: message_id.to_owned(),
        body: Some(STANDARD.encode(text.as_bytes())),
        ..Wire::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_whole_seconds_and_never_zero() {
        assert_eq!(lease_secs(Duration::from_millis(200)), 1);
        assert_eq!(lease_secs(Duration::from_secs(1)), 1);
        assert_eq!(lease_secs(Duration::from_millis(1500)), 2);
        assert_eq!(lease_secs(Duration::ZERO), 1);
        assert_eq!(lease_secs(Duration::from_secs(60)), 60);
    }

    #[test]
    fn message_lists_parse_and_foreign_text_is_kept() {
        let xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?><QueueMessagesList><QueueMessage><MessageId>m1</MessageId><InsertionTime>Mon, 23 Nov 2026 10:00:00 GMT</InsertionTime><ExpirationTime>Fri, 31 Dec 9999 23:59:59 GMT</ExpirationTime><PopReceipt>AgAA+/=</PopReceipt><TimeNextVisible>Mon, 23 Nov 2026 10:01:00 GMT</TimeNextVisible><DequeueCount>3</DequeueCount><MessageText>{&quot;id&quot;:&quot;a&amp;b&quot;}</MessageText></QueueMessage></QueueMessagesList>";
        let list: ServiceMessages = quick_xml::de::from_str(xml).expect("parses");
        assert_eq!(list.messages.len(), 1);
        let message = &list.messages[0];
        assert_eq!(message.dequeue_count, Some(3));
        assert_eq!(message.pop_receipt.as_deref(), Some("AgAA+/="));
        assert_eq!(message.message_text, "{\"id\":\"a&b\"}");
        let empty: ServiceMessages =
            quick_xml::de::from_str("<QueueMessagesList />").expect("parses");
        assert!(empty.messages.is_empty());
        let wire = poison_wire("m9", "not json");
        // An operation envelope put as plain text is not mistaken for the wire form.
        assert!(
            serde_json::from_str::<Wire>(r#"{"id":"e1","kind":"archive","payload":{}}"#).is_err()
        );
        assert_eq!(wire.id, "m9");
        assert_eq!(
            wire.body.as_deref(),
            Some(STANDARD.encode("not json").as_str())
        );
    }
}
