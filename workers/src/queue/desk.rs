//! The operator's desk over the poison queues: what a role may do with them. The
//! console's pages and JSON API act through it, and so does the simulation's operator.
//!
//! - A [`Role::Viewer`] reads: pages, messages, and the export of a set.
//! - A [`Role::Operator`] also takes messages off a poison queue — replays or discards
//!   them ([`Desk::take`]); a viewer asking is refused with
//!   [`Error::QueuePermissionDenied`] and nothing changes.
//! - **Export** ([`Desk::export`]): the messages of a set, each as one JSON line — id,
//!   handle, operation kind and version, reason, delivery count, times, headers and the
//!   whole body (text when it is UTF-8, else base64) — so that what a discard deletes can
//!   be kept first. [`ExportedMessage`] reads a line back.

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{PoisonAction, PoisonMessage, Queue, RawText};
use crate::error::{Error, Result};

/// What one may do at the desk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Role {
    /// Reads and acts.
    Operator,
    /// Reads only.
    Viewer,
}

impl Role {
    /// Its name as pages and records show it: `operator` or `viewer`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Operator => "operator",
            Role::Viewer => "viewer",
        }
    }

    /// Whether it may take messages off a poison queue (or run any other action).
    pub fn may_act(self) -> bool {
        self == Role::Operator
    }
}

/// One exported poison message: a line of an export, written by [`export_line`] and read
/// back with `serde_json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportedMessage {
    /// The message id.
    pub id: String,
    /// Its handle on the backend that listed it.
    pub handle: String,
    /// The operation's kind, when the body is an envelope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The operation's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    /// Why it was poisoned.
    pub reason: String,
    /// How many times it was delivered.
    pub delivery_count: u32,
    /// When it was poisoned, if the queue knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poisoned_at: Option<DateTime<Utc>>,
    /// When it was first sent, if the queue knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<DateTime<Utc>>,
    /// What the backend records beside the body.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The body, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body in base64, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// The exact bytes of the id, the reason and header values that were not UTF-8
    /// (`id`, `reason` and `headers` show them lossily): `{"id": base64, "reason":
    /// base64, "headers": [[place, base64], …]}`, absent when every text was UTF-8.
    #[serde(default, skip_serializing_if = "RawText::is_empty")]
    pub raw: RawText,
}

impl ExportedMessage {
    /// The body's bytes, as the queue held them.
    ///
    /// # Errors
    /// [`Error::Config`] when `body_base64` is not base64.
    pub fn body_bytes(&self) -> Result<Vec<u8>> {
        match (&self.body, &self.body_base64) {
            (Some(text), _) => Ok(text.as_bytes().to_vec()),
            (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| Error::Config(format!("an exported body is not base64: {e}"))),
            (None, None) => Ok(Vec::new()),
        }
    }
}

impl From<&PoisonMessage> for ExportedMessage {
    fn from(m: &PoisonMessage) -> Self {
        let text = std::str::from_utf8(&m.body).ok();
        ExportedMessage {
            id: m.id.clone(),
            handle: m.handle.clone(),
            kind: m.operation.as_ref().map(|(k, _)| k.clone()),
            version: m.operation.as_ref().map(|(_, v)| *v),
            reason: m.reason.clone(),
            delivery_count: m.delivery_count,
            poisoned_at: m.poisoned_at,
            sent_at: m.sent_at,
            headers: m.headers.clone(),
            body: text.map(str::to_owned),
            body_base64: text
                .is_none()
                .then(|| base64::engine::general_purpose::STANDARD.encode(&m.body)),
            raw: m.raw.clone(),
        }
    }
}

/// The export line of one message (listed whole), newline included.
pub fn export_line(message: &PoisonMessage) -> Vec<u8> {
    let mut out = serde_json::to_vec(&ExportedMessage::from(message)).unwrap_or_default();
    out.push(b'\n');
    out
}

/// A role at the poison queues of one backend.
#[derive(Clone, Debug)]
pub struct Desk<Q> {
    queue: Q,
    role: Role,
}

impl<Q: Queue> Desk<Q> {
    /// The desk of `role` over `queue`.
    pub fn new(queue: Q, role: Role) -> Self {
        Desk { queue, role }
    }

    /// Its role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Appends to `out` the export lines of the messages of `queue`'s poison queue named
    /// by `handles` that are still there (each read whole); returns how many. Any role.
    ///
    /// # Errors
    /// The backend's errors.
    pub async fn export(
        &self,
        queue: &str,
        handles: &[String],
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        let mut exported = 0;
        for handle in handles {
            if let Some(message) = self.queue.poison_body(queue, handle).await? {
                out.extend(export_line(&message));
                exported += 1;
            }
        }
        Ok(exported)
    }

    /// Takes the messages named by `handles` off `queue`'s poison queue, doing `action`
    /// with each; returns the handles taken. An operator's only.
    ///
    /// # Errors
    /// [`Error::QueuePermissionDenied`] for a viewer (nothing is taken); the backend's
    /// errors, as [`Queue::poison_take`].
    pub async fn take(
        &self,
        queue: &str,
        handles: &[String],
        action: &PoisonAction,
    ) -> Result<Vec<String>> {
        if !self.role.may_act() {
            return Err(Error::QueuePermissionDenied {
                queue: queue.to_owned(),
                reason: format!(
                    "signed in as {}, who reads the poison queue and may not act on it",
                    self.role.name()
                ),
            });
        }
        self.queue.poison_take(queue, handles, action).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exported_line_reads_back_byte_for_byte() {
        for body in [b"{\"b\":1,\"a\":2}".to_vec(), vec![0xff, 0x00, b'x']] {
            let mut message = PoisonMessage::new("id\n1", body.clone(), "reason", 3, None);
            message.headers = vec![("x-death".into(), "1 × rejected".into())];
            let line = export_line(&message);
            assert_eq!(line.last(), Some(&b'\n'));
            assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1, "one line");
            let read: ExportedMessage = serde_json::from_slice(&line).expect("JSON");
            assert_eq!(read.body_bytes().expect("a body"), body);
            assert_eq!(read.id, "id\n1");
            assert_eq!(read.headers.len(), 1);
        }
    }

    #[test]
    fn only_an_operator_acts() {
        assert!(Role::Operator.may_act());
        assert!(!Role::Viewer.may_act());
        assert_eq!(Role::Viewer.name(), "viewer");
    }
}
