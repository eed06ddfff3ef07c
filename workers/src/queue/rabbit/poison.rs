//! The poison queue (`<queue>-poison`): reading its messages without taking them (a
//! page, the reasons, one message: each read one message at a time), and taking them off
//! by id to send back, send to another queue, or discard.

use std::collections::HashSet;

use lapin::message::BasicGetMessage;
use lapin::options::{BasicAckOptions, BasicGetOptions};
use lapin::types::ShortString;

use super::super::{PoisonMessage, poison_queue};
use super::connection::{RabbitQueue, is_not_found, unavailable};
use super::headers::{
    ATTEMPTS_HEADER, POISON_MARK_HEADER, POISONED_AT_HEADER, REASON_HEADER, death_reason,
    death_reason_value, header_bytes, header_int, header_text, header_text_checked, properties,
    shown_headers,
};
use crate::error::Result;

/// A poison message's id.
fn id_of(message: &BasicGetMessage) -> String {
    message
        .delivery
        .properties
        .message_id()
        .as_ref()
        .map(|s| s.as_str().to_owned())
        .unwrap_or_default()
}

/// What names a poison message: the mark tablekit gave it when it poisoned it, else (a
/// message the broker dead-lettered, or one poisoned by an older tablekit) its id.
fn handle_of(message: &BasicGetMessage) -> String {
    message
        .delivery
        .properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(POISON_MARK_HEADER))
        .and_then(header_text)
        .unwrap_or_else(|| id_of(message))
}

pub(super) fn poison_message(message: &BasicGetMessage) -> PoisonMessage {
    let properties = &message.delivery.properties;
    let headers = properties.headers().as_ref();
    let (reason, reason_undecodable) = headers
        .and_then(|h| h.inner().get(REASON_HEADER))
        .and_then(header_text_checked)
        .or_else(|| death_reason(headers))
        .unwrap_or_else(|| ("dead-lettered by the broker".to_owned(), false));
    let attempts = header_int(headers, ATTEMPTS_HEADER).unwrap_or(0);
    let poisoned_at =
        header_int(headers, POISONED_AT_HEADER).and_then(chrono::DateTime::from_timestamp_millis);
    let mut listed = PoisonMessage::new(
        id_of(message),
        message.delivery.data.clone(),
        reason,
        u32::try_from(attempts).unwrap_or(u32::MAX),
        poisoned_at,
    );
    listed.handle = handle_of(message);
    listed.reason_undecodable = reason_undecodable;
    // The time tablekit sent it (kept across retries and the poisoning), in seconds.
    listed.sent_at = properties
        .timestamp()
        .and_then(|t| i64::try_from(t).ok())
        .and_then(|t| chrono::DateTime::from_timestamp(t, 0));
    (listed.headers, listed.raw.headers) = shown_headers(properties);
    if reason_undecodable {
        listed.raw.reason = headers
            .and_then(|h| h.inner().get(REASON_HEADER))
            .or_else(|| death_reason_value(headers))
            .and_then(header_bytes)
            .map(<[u8]>::to_vec);
    }
    listed
}

impl RabbitQueue {
    /// Reads the poison queue's messages in order, one at a time, handing each with its
    /// place to `visit` until it returns `false`: only the message in hand is held, and
    /// closing the channel returns them all.
    pub(super) async fn scan_poison(
        &self,
        queue: &str,
        mut visit: impl FnMut(usize, PoisonMessage) -> bool,
    ) -> Result<()> {
        let channel = self.channel().await?;
        let poison = poison_queue(queue);
        let scanned = async {
            let mut at = 0;
            loop {
                match channel
                    .basic_get(
                        ShortString::from(poison.as_str()),
                        BasicGetOptions { no_ack: false },
                    )
                    .await
                {
                    Ok(Some(message)) => {
                        if !visit(at, poison_message(&message)) {
                            return Ok(());
                        }
                        at += 1;
                    }
                    Ok(None) => return Ok(()),
                    // Never declared (or deleted): holds nothing.
                    Err(e) if is_not_found(&e) => return Ok(()),
                    Err(e) => return Err(unavailable(e)),
                }
            }
        }
        .await;
        let _ = channel.close(200, ShortString::from("listed")).await;
        scanned
    }

    /// Takes the poison messages (all, or those whose id — or handle, `by_handle` —
    /// `wanted` holds) off the poison
    /// queue, each first sent to `replay_to` with a fresh delivery count when given;
    /// returns the ids taken, once each. The others go back when the channel closes, on
    /// every path; only the message in hand is held.
    pub(super) async fn take_poison(
        &self,
        queue: &str,
        wanted: Option<&HashSet<&str>>,
        by_handle: bool,
        replay_to: Option<&str>,
    ) -> Result<Vec<String>> {
        let channel = self.channel().await?;
        let poison = poison_queue(queue);
        let taken = async {
            let mut taken = Vec::new();
            let mut seen = HashSet::new();
            loop {
                let message = match channel
                    .basic_get(
                        ShortString::from(poison.as_str()),
                        BasicGetOptions { no_ack: false },
                    )
                    .await
                {
                    Ok(Some(message)) => message,
                    Ok(None) => break,
                    Err(e) if is_not_found(&e) => break,
                    Err(e) => return Err(unavailable(e)),
                };
                let id = id_of(&message);
                let key = if by_handle {
                    handle_of(&message)
                } else {
                    id.clone()
                };
                if wanted.is_some_and(|wanted| !wanted.contains(key.as_str())) {
                    continue;
                }
                if let Some(target) = replay_to {
                    self.publish_reliably(
                        target,
                        &message.delivery.data,
                        properties(&id, 0, None, None),
                    )
                    .await?;
                }
                message
                    .delivery
                    .acker
                    .ack(BasicAckOptions::default())
                    .await
                    .map_err(unavailable)?;
                if seen.insert(key.clone()) {
                    taken.push(key);
                }
            }
            Ok(taken)
        }
        .await;
        let _ = channel.close(200, ShortString::from("poison taken")).await;
        taken
    }
}
