//! The message calls of the queue backend: receive (with the claim-checked body read
//! back), change a leased message's visibility, delete it, and count a queue.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::{Method, StatusCode};

use super::super::Received;
use super::wire::{
    Leased, Wire, lease_duration, lease_error, lease_secs, messages, parse_http_date, service_error,
};
use super::{AzureQueue, MAX_BATCH};
use crate::error::{Error, Result};

impl AzureQueue {
    /// Receives up to `count` messages, each leased for `lease`.
    pub(super) async fn receive(
        &self,
        queue: &str,
        count: usize,
        lease: Duration,
    ) -> Result<Vec<Leased>> {
        self.allowed(queue, "p", "receiving messages")?;
        let response = self
            .request(
                Method::GET,
                &format!("/{queue}/messages"),
                &[
                    ("numofmessages", count.clamp(1, MAX_BATCH).to_string()),
                    ("visibilitytimeout", lease_secs(lease).to_string()),
                ],
                None,
            )
            .await?;
        let started = Instant::now();
        let list = messages(response, queue).await?;
        let mut leased = Vec::with_capacity(list.len());
        for message in list {
            let Some(receipt) = message.pop_receipt.clone() else {
                continue;
            };
            let dequeue = message.dequeue_count.unwrap_or(1);
            let inserted = message.insertion_time.as_deref().and_then(parse_http_date);
            let (wire, received) = match serde_json::from_str::<Wire>(&message.message_text) {
                Ok(wire) => {
                    let body = match self.body_of(&wire).await {
                        Ok(body) => body,
                        Err(e) => {
                            tracing::warn!(error = %e, queue, "a message's body is unreadable; it is delivered empty");
                            Vec::new()
                        }
                    };
                    let received = Received {
                        id: wire.id.clone(),
                        body,
                        delivery_count: dequeue,
                        sent_at: wire.sent,
                    };
                    (wire, received)
                }
                // Another producer's message: its text is the body (kept in this wire form
                // if the message is poisoned).
                Err(_) => {
                    let wire = Wire {
                        tk: 1,
                        id: message.message_id.clone(),
                        body: Some(STANDARD.encode(message.message_text.as_bytes())),
                        ..Wire::default()
                    };
                    let received = Received {
                        id: message.message_id.clone(),
                        body: message.message_text.clone().into_bytes(),
                        delivery_count: dequeue,
                        sent_at: message.insertion_time.as_deref().and_then(parse_http_date),
                    };
                    (wire, received)
                }
            };
            leased.push(Leased {
                message_id: message.message_id,
                receipt,
                claim: wire.claim.clone(),
                received,
                wire,
                lease_ends: started + lease_duration(lease),
                inserted,
            });
        }
        Ok(leased)
    }

    /// Sets a leased message's visibility; returns the new pop receipt.
    pub(super) async fn set_visibility(
        &self,
        queue: &str,
        message_id: &str,
        receipt: &str,
        after: Duration,
    ) -> Result<String> {
        self.set_visibility_unless_lost(queue, message_id, receipt, after)
            .await?
            .ok_or_else(|| {
                Error::unavailable(format!(
                    "queue `{queue}`: the lease was lost; the message is delivered again"
                ))
            })
    }

    /// Sets a leased message's visibility as [`set_visibility`](Self::set_visibility)
    /// does; `None` when the lease was lost (a stale pop receipt, or the message gone).
    pub(super) async fn set_visibility_unless_lost(
        &self,
        queue: &str,
        message_id: &str,
        receipt: &str,
        after: Duration,
    ) -> Result<Option<String>> {
        self.allowed(queue, "u", "changing a message's visibility")?;
        let response = self
            .request(
                Method::PUT,
                &format!("/{queue}/messages/{message_id}"),
                &[
                    ("popreceipt", receipt.to_owned()),
                    ("visibilitytimeout", after.as_secs().to_string()),
                ],
                None,
            )
            .await?;
        if !response.status().is_success() {
            if matches!(
                super::wire::error_code(&response).as_str(),
                "PopReceiptMismatch" | "MessageNotFound"
            ) {
                return Ok(None);
            }
            return Err(lease_error(response, queue).await);
        }
        response
            .headers()
            .get("x-ms-popreceipt")
            .and_then(|v| v.to_str().ok())
            .map(|receipt| Some(receipt.to_owned()))
            .ok_or_else(|| Error::unavailable("the service returned no pop receipt"))
    }

    pub(super) async fn delete_message(
        &self,
        queue: &str,
        message_id: &str,
        receipt: &str,
    ) -> Result<()> {
        self.allowed(queue, "p", "deleting a message")?;
        let response = self
            .request(
                Method::DELETE,
                &format!("/{queue}/messages/{message_id}"),
                &[("popreceipt", receipt.to_owned())],
                None,
            )
            .await?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(lease_error(response, queue).await)
        }
    }

    /// When the message at the front of a queue was sent, if it was never delivered: one
    /// peek, which leases and counts nothing. A consumer takes from the front, so it has
    /// waited since then with no consumer taking it (approximately: the service keeps
    /// about FIFO order, and a message sent with a delay counts from its sending). `None`
    /// when the queue is empty or does not exist, or its front message was delivered
    /// before (it waited out a lease or a retry: since when, the service does not say).
    pub(super) async fn front_waiting_since(
        &self,
        queue: &str,
    ) -> Result<Option<chrono::DateTime<chrono::Utc>>> {
        self.allowed(queue, "r", "peeking messages")?;
        let response = self
            .request(
                Method::GET,
                &format!("/{queue}/messages"),
                &[
                    ("peekonly", "true".to_owned()),
                    ("numofmessages", "1".to_owned()),
                ],
                None,
            )
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        Ok(messages(response, queue)
            .await?
            .first()
            .and_then(never_delivered_since))
    }

    /// The service's approximate message count of a queue, 0 if it does not exist.
    pub(super) async fn approximate_count(&self, queue: &str) -> Result<u64> {
        Ok(self.count_if_declared(queue).await?.unwrap_or(0))
    }

    /// The service's approximate message count of a queue, `None` if it does not exist.
    pub(super) async fn count_if_declared(&self, queue: &str) -> Result<Option<u64>> {
        Ok(self
            .metadata(queue, "reading a queue's count")
            .await?
            .map(|headers| {
                headers
                    .get("x-ms-approximate-messages-count")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            }))
    }

    /// A queue's metadata and count headers (one Get Queue Metadata), `None` if it does not
    /// exist; `doing` names the read for a token that does not allow it.
    pub(super) async fn metadata(
        &self,
        queue: &str,
        doing: &str,
    ) -> Result<Option<reqwest::header::HeaderMap>> {
        self.allowed(queue, "r", doing)?;
        let response = self
            .request(
                Method::GET,
                &format!("/{queue}"),
                &[("comp", "metadata".to_owned())],
                None,
            )
            .await?;
        match response.status() {
            status if status.is_success() => Ok(Some(response.headers().clone())),
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(service_error(response, queue).await),
        }
    }
}

/// When a peeked message was sent, if it was never delivered.
fn never_delivered_since(
    message: &super::wire::ServiceMessage,
) -> Option<chrono::DateTime<chrono::Utc>> {
    if message.dequeue_count.unwrap_or(0) > 0 {
        return None;
    }
    message.insertion_time.as_deref().and_then(parse_http_date)
}

#[cfg(test)]
mod tests {
    use super::super::wire::ServiceMessage;
    use super::*;

    fn peeked(dequeue_count: u32) -> ServiceMessage {
        ServiceMessage {
            message_id: "m1".into(),
            pop_receipt: None,
            dequeue_count: Some(dequeue_count),
            insertion_time: Some("Mon, 23 Nov 2026 10:00:00 GMT".into()),
            message_text: String::new(),
        }
    }

    #[test]
    fn a_front_message_never_delivered_has_waited_since_it_was_sent() {
        let since = never_delivered_since(&peeked(0)).expect("a time");
        assert_eq!(since.to_rfc3339(), "2026-11-23T10:00:00+00:00");
        // Delivered before: it came back after a lease or a retry, at a time unknown.
        assert_eq!(never_delivered_since(&peeked(2)), None);
    }
}
