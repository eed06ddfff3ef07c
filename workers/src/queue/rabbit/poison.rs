//! The poison queue (`<queue>-poison`): reading its messages without taking them, and
//! taking them off to send back or discard.

use lapin::Channel;
use lapin::message::BasicGetMessage;
use lapin::options::{BasicAckOptions, BasicGetOptions};
use lapin::types::ShortString;

use super::super::{PoisonMessage, poison_queue};
use super::connection::{RabbitQueue, is_not_found, unavailable};
use super::headers::{
    ATTEMPTS_HEADER, POISONED_AT_HEADER, REASON_HEADER, death_reason, header_int, header_text,
    properties,
};
use crate::error::Result;

impl RabbitQueue {
    /// Gets up to `limit` messages of a queue without acknowledging them (closing the
    /// channel returns them); a queue that does not exist holds none.
    pub(super) async fn get_all(
        &self,
        channel: &Channel,
        queue: &str,
        limit: usize,
    ) -> Result<Vec<BasicGetMessage>> {
        let mut out = Vec::new();
        while out.len() < limit {
            match channel
                .basic_get(ShortString::from(queue), BasicGetOptions { no_ack: false })
                .await
            {
                Ok(Some(message)) => out.push(message),
                Ok(None) => break,
                // Never declared (or deleted): holds nothing. The broker closed the
                // channel, so nothing was got before.
                Err(e) if is_not_found(&e) => break,
                Err(e) => return Err(unavailable(e)),
            }
        }
        Ok(out)
    }
}

pub(super) fn poison_message(message: &BasicGetMessage) -> PoisonMessage {
    let properties = &message.delivery.properties;
    let headers = properties.headers().as_ref();
    let reason = headers
        .and_then(|h| h.inner().get(REASON_HEADER))
        .and_then(header_text)
        .or_else(|| death_reason(headers))
        .unwrap_or_else(|| "dead-lettered by the broker".to_owned());
    let attempts = header_int(headers, ATTEMPTS_HEADER).unwrap_or(0);
    let poisoned_at =
        header_int(headers, POISONED_AT_HEADER).and_then(chrono::DateTime::from_timestamp_millis);
    PoisonMessage::new(
        properties
            .message_id()
            .as_ref()
            .map(|s| s.as_str().to_owned())
            .unwrap_or_default(),
        message.delivery.data.clone(),
        reason,
        u32::try_from(attempts).unwrap_or(u32::MAX),
        poisoned_at,
    )
}

impl RabbitQueue {
    /// Takes the poison messages (all, or those with `id`) off the poison queue, each
    /// first sent back to the queue with a fresh delivery count when `replay`; returns
    /// how many. The others go back when the channel closes, on every path.
    pub(super) async fn take_poison(
        &self,
        queue: &str,
        id: Option<&str>,
        replay: bool,
    ) -> Result<usize> {
        let channel = self.channel().await?;
        let taken = async {
            let messages = self
                .get_all(&channel, &poison_queue(queue), usize::MAX)
                .await?;
            let mut taken = 0;
            for message in &messages {
                let poisoned = poison_message(message);
                if id.is_some_and(|id| id != poisoned.id) {
                    continue;
                }
                if replay {
                    self.publish_reliably(
                        queue,
                        &message.delivery.data,
                        properties(&poisoned.id, 0, None, None),
                    )
                    .await?;
                }
                message
                    .delivery
                    .acker
                    .ack(BasicAckOptions::default())
                    .await
                    .map_err(unavailable)?;
                taken += 1;
            }
            Ok(taken)
        }
        .await;
        let _ = channel.close(200, ShortString::from("poison taken")).await;
        taken
    }
}
