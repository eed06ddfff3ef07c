//! The poison queue of the queue backend (`<queue>-poison`): listing its messages, sending
//! them back (to their queue or another) and discarding them, all or by id.

use std::collections::HashSet;
use std::time::Duration;

use reqwest::{Method, StatusCode};

use chrono::{DateTime, Utc};

use super::super::poison::shown_time;
use super::super::{PoisonMessage, poison_queue};
use super::wire::{Leased, Wire, messages, parse_http_date, poison_wire};
use super::{AzureQueue, MAX_BATCH};
use crate::error::{Error, Result};

impl AzureQueue {
    /// Receives every message of a poison queue in turn, handing each to `keep`; a message
    /// `keep` returns is made visible again once the pass ends (so the pass sees each once).
    pub(super) async fn drain_poison(
        &self,
        poison: &str,
        limit: usize,
        mut take: impl FnMut(&Leased) -> bool,
        mut on_taken: impl AsyncFnMut(&Leased) -> Result<()>,
    ) -> Result<usize> {
        let mut restore = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut taken = 0;
        let lease = Duration::from_secs(60);
        let outcome = async {
            while taken + restore.len() < limit {
                let received = self
                    .receive(
                        poison,
                        (limit - taken - restore.len()).min(MAX_BATCH),
                        lease,
                    )
                    .await;
                if matches!(received, Err(Error::Refused { .. }))
                    && self.count_if_declared(poison).await?.is_none()
                {
                    // A poison queue never declared (or deleted) holds nothing.
                    break;
                }
                let batch = received?;
                if batch.is_empty() {
                    break;
                }
                // A pass longer than the lease sees its first messages again: it ends
                // there rather than going round.
                if batch.iter().any(|m| seen.contains(&m.message_id)) {
                    restore.extend(batch);
                    break;
                }
                seen.extend(batch.iter().map(|m| m.message_id.clone()));
                for message in batch {
                    if take(&message) {
                        on_taken(&message).await?;
                        taken += 1;
                    } else {
                        restore.push(message);
                    }
                }
            }
            Ok::<_, Error>(())
        }
        .await;
        for message in restore {
            if let Err(e) = self
                .set_visibility(
                    poison,
                    &message.message_id,
                    &message.receipt,
                    Duration::ZERO,
                )
                .await
            {
                tracing::warn!(error = %e, poison, "a poison message stays hidden until its lease ends");
            }
        }
        outcome.map(|()| taken)
    }

    /// Up to `limit` messages of the queue's poison queue: peeked, or received in turn
    /// and made visible again when more than one peek shows.
    pub(super) async fn list_poison(
        &self,
        queue: &str,
        limit: usize,
    ) -> Result<Vec<PoisonMessage>> {
        let poison = poison_queue(queue);
        let mut wires: Vec<Listed> = Vec::new();
        if limit <= MAX_BATCH {
            self.allowed(&poison, "r", "peeking messages")?;
            // Peek: nothing is leased, nothing is counted.
            let response = self
                .request(
                    Method::GET,
                    &format!("/{poison}/messages"),
                    &[
                        ("peekonly", "true".to_owned()),
                        ("numofmessages", limit.max(1).to_string()),
                    ],
                    None,
                )
                .await?;
            if response.status() == StatusCode::NOT_FOUND {
                return Ok(Vec::new());
            }
            for message in messages(response, &poison).await? {
                wires.push(Listed {
                    wire: poison_wire(&message.message_id, &message.message_text),
                    inserted: message.insertion_time.as_deref().and_then(parse_http_date),
                    dequeue_count: message.dequeue_count.unwrap_or(0),
                    message_id: message.message_id,
                });
            }
        } else {
            // More than one peek shows: receive each in turn, then make them visible again.
            self.drain_poison(
                &poison,
                limit,
                |message| {
                    wires.push(Listed {
                        message_id: message.message_id.clone(),
                        wire: message.wire.clone(),
                        inserted: message.inserted,
                        dequeue_count: message.received.delivery_count,
                    });
                    false
                },
                async |_| Ok(()),
            )
            .await?;
        }
        let mut listed = Vec::with_capacity(wires.len());
        for entry in wires.into_iter().take(limit) {
            let body = match self.body_of(&entry.wire).await {
                Ok(body) => body,
                Err(e) => e.to_string().into_bytes(),
            };
            let wire = entry.wire;
            let mut message = PoisonMessage::new(
                wire.id,
                body,
                wire.reason.unwrap_or_default(),
                wire.count.unwrap_or(0),
                wire.poisoned,
            );
            // The service's own id names this one message, whatever its id repeats.
            message.handle = entry.message_id.clone();
            message.sent_at = wire.sent;
            // What the service records; never the pop receipt, which would let a reader
            // delete or hide the message.
            message
                .headers
                .push(("message-id".to_owned(), entry.message_id));
            if let Some(at) = entry.inserted {
                message
                    .headers
                    .push(("insertion-time".to_owned(), shown_time(at)));
            }
            message
                .headers
                .push(("dequeue-count".to_owned(), entry.dequeue_count.to_string()));
            listed.push(message);
        }
        Ok(listed)
    }

    /// Sends the poison queue's messages (all, or those whose id — or handle, the service's message id, when `by_handle` — `wanted` holds) to
    /// `target` as new messages; returns the ids taken, once each.
    pub(super) async fn replay_poison(
        &self,
        queue: &str,
        wanted: Option<&HashSet<&str>>,
        by_handle: bool,
        target: &str,
    ) -> Result<Vec<String>> {
        let poison = poison_queue(queue);
        if self.approximate_count(&poison).await? == 0 {
            return Ok(Vec::new());
        }
        let (mut taken, mut seen) = (Vec::new(), HashSet::new());
        let this = self.clone();
        let poison_name = poison.clone();
        // The closure owns what it reads (the trait's futures are `Send` for any lifetime).
        let target = target.to_owned();
        self.drain_poison(
            &poison,
            usize::MAX,
            |message| {
                let key = if by_handle {
                    &message.message_id
                } else {
                    &message.wire.id
                };
                let take = wanted.is_none_or(|wanted| wanted.contains(key.as_str()));
                if take && seen.insert(key.clone()) {
                    taken.push(key.clone());
                }
                take
            },
            async move |message| {
                // A new message with a fresh delivery count; then the poisoned copy goes.
                let wire = Wire {
                    reason: None,
                    count: None,
                    poisoned: None,
                    ..message.wire.clone()
                };
                let text = serde_json::to_string(&wire)
                    .map_err(|e| Error::encode("a queue message", e))?;
                this.put(&target, &text, Duration::ZERO).await?;
                this.delete_message(&poison_name, &message.message_id, &message.receipt)
                    .await
            },
        )
        .await?;
        Ok(taken)
    }

    /// Deletes the poison queue's messages (all, or those whose id — or handle, the service's message id, when `by_handle` — `wanted` holds) for
    /// good; returns the ids taken, once each.
    pub(super) async fn discard_poison(
        &self,
        queue: &str,
        wanted: Option<&HashSet<&str>>,
        by_handle: bool,
    ) -> Result<Vec<String>> {
        let poison = poison_queue(queue);
        if self.approximate_count(&poison).await? == 0 {
            return Ok(Vec::new());
        }
        let (mut taken, mut seen) = (Vec::new(), HashSet::new());
        let this = self.clone();
        let poison_name = poison.clone();
        self.drain_poison(
            &poison,
            usize::MAX,
            |message| {
                let key = if by_handle {
                    &message.message_id
                } else {
                    &message.wire.id
                };
                let take = wanted.is_none_or(|wanted| wanted.contains(key.as_str()));
                if take && seen.insert(key.clone()) {
                    taken.push(key.clone());
                }
                take
            },
            async move |message| {
                this.delete_message(&poison_name, &message.message_id, &message.receipt)
                    .await?;
                // A claim-checked body goes with its message.
                if let Some(claim) = &message.wire.claim
                    && let Ok(store) = this.claims().await
                    && let Err(e) = store.delete(claim).await
                {
                    tracing::warn!(error = %e, claim, "a discarded message's claim-checked body was not deleted");
                }
                Ok(())
            },
        )
        .await?;
        Ok(taken)
    }
}

/// A poison message as the service listed it.
struct Listed {
    message_id: String,
    wire: Wire,
    inserted: Option<DateTime<Utc>>,
    dequeue_count: u32,
}
