//! The RabbitMQ queue, on `lapin`.
//!
//! Each queue is a durable quorum queue with a delivery limit that dead-letters (at least
//! once, with `x-overflow=reject-publish`) into `<queue>-poison`; a delayed retry goes
//! through one retry queue per delay (`<queue>-retry-<ms>`, a fixed `x-message-ttl` that
//! dead-letters back to the queue). Facts about RabbitMQ 3.10 to 4.x this module is built
//! on:
//! - `x-delivery-count` is absent on a first delivery and restarts after a trip through a
//!   retry queue, so the attempts are also counted in our own header
//!   (`x-tablekit-attempts`): delivery count = our attempts + `x-delivery-count` + 1;
//! - only `basic.reject` counts toward the delivery limit from 4.3 on, so an immediate
//!   retry is `reject(requeue = true)`;
//! - a poison with a reason is a confirmed publish to the poison queue (the reason in
//!   `x-tablekit-reason`), then an ack; the broker's own dead-lettering (delivery limit
//!   reached by a crashing consumer) arrives with an `x-death` header instead;
//! - `wait_for_confirms` reports success even for nacked messages, so every publish awaits
//!   its own confirm, and is mandatory so that a missing queue is an error, not a loss;
//! - prefetch is per consumer (`basic.qos` with `global = false`; a global prefetch on a
//!   quorum queue closes the connection), set before consuming;
//! - a late ack on a closed channel returns `Ok(false)`: the message will be redelivered;
//! - a paused queue has an empty durable queue `<queue>-paused` beside it: declaring it
//!   pauses, deleting it resumes, and a passive declare reads it;
//! - the broker refuses connections for a few seconds while booting: connecting retries
//!   for up to [`CONNECT_PATIENCE`]; a dropped connection is reopened the same way, and
//!   consumers resume (unacknowledged deliveries come back from the broker, so nothing is
//!   lost).
//!
//! What AMQP cannot do, and so this backend does not: list the queues
//! ([`Queue::declared_queues`] is `None`); show waiting messages without taking them
//! ([`Queue::peek`]: a get leaves no message in place — a get and requeue marks the message
//! redelivered and moves it to the back); read a poison queue newest first
//! ([`Queue::poison_page`]: a queue is read from its front only, so the newest messages are
//! reached only by reading and holding every message before them).
//!
//! The backend's parts, each a module of this folder: the connection with its channels
//! and confirmed publishes, the declared queues (quorum, retry and poison), the poison
//! queue's listing and replay, the consumer with its deliveries, and the AMQP headers
//! tablekit writes and reads.

mod connection;
mod consumer;
mod declare;
mod headers;
mod poison;

use std::collections::HashSet;

use lapin::types::{AMQPValue, FieldTable, ShortString};

pub use connection::{CONNECT_PATIENCE, RabbitQueue};
pub use consumer::{RabbitConsumer, RabbitDelivery};

use super::poison::{Groups, Paging, Reasons};
use super::{
    ConsumeOptions, PeekQuery, PoisonAction, PoisonFilter, PoisonMessage, PoisonPage, PoisonQuery,
    Queue, QueueOptions, QueueStats, ReasonGroup, WaitingAction, WaitingMessage, check_queue_name,
    is_poison_queue, poison_queue,
};
use crate::error::{Error, Result};
use connection::unavailable;
use declare::{paused_marker, quorum_arguments, retry_queue};
use headers::{properties, string_arg};

impl Queue for RabbitQueue {
    type Consumer = RabbitConsumer;
    type Delivery = RabbitDelivery;

    async fn declare(&self, queue: &str, options: &QueueOptions) -> Result<()> {
        check_queue_name(queue)?;
        if options.max_deliveries == 0 {
            return Err(Error::Config("max_deliveries must be at least 1".into()));
        }
        let channel = self.channel().await?;
        let poison = poison_queue(queue);
        // A classic durable queue: a quorum queue would apply a delivery limit of its own
        // (20 by default on RabbitMQ 4) to the returns of `poison_list`, and drop.
        let mut poison_arguments = FieldTable::default();
        poison_arguments.insert("x-queue-type".into(), string_arg("classic"));
        Self::declare_one(&channel, &poison, poison_arguments).await?;
        for delay in &options.retry_delays {
            let mut arguments = quorum_arguments(queue);
            let ttl = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
            arguments.insert("x-message-ttl".into(), AMQPValue::LongLongInt(ttl));
            Self::declare_one(&channel, &retry_queue(queue, *delay), arguments).await?;
        }
        let mut arguments = quorum_arguments(&poison);
        // N allows N + 1 deliveries; the worker poisons after `max_deliveries` itself, and
        // the broker's limit catches consumers that die before settling.
        arguments.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongLongInt(i64::from(options.max_deliveries)),
        );
        if let Err(e) = Self::declare_one(&channel, queue, arguments).await {
            // Declared before with other arguments (another delivery limit): a queue's
            // arguments cannot change, so keep the existing queue if it is there.
            if self.ready_checked(queue).await.is_err() {
                return Err(e);
            }
            tracing::warn!(queue, error = %e, "the queue exists with other arguments; using it as it is");
        } else {
            let _ = channel.close(200, ShortString::from("declared")).await;
        }
        let mut delays = options.retry_delays.clone();
        delays.sort();
        let mut state = self.inner.state.lock().await;
        state.retry_delays.insert(queue.to_owned(), delays);
        state
            .declared_at
            .entry(queue.to_owned())
            .or_insert_with(std::time::Instant::now);
        Ok(())
    }

    async fn send(&self, queue: &str, id: &str, body: &[u8]) -> Result<()> {
        check_queue_name(queue)?;
        if id.len() > 255 {
            return Err(Error::Config(format!(
                "a message id has at most 255 bytes (AMQP), got {}",
                id.len()
            )));
        }
        self.publish_reliably(queue, body, properties(id, 0, None, None))
            .await
    }

    async fn consume(&self, queue: &str, options: ConsumeOptions) -> Result<RabbitConsumer> {
        check_queue_name(queue)?;
        let mut consumer = RabbitConsumer {
            queue: self.clone(),
            name: queue.to_owned(),
            options,
            stream: None,
        };
        consumer.subscribe().await?;
        Ok(consumer)
    }

    async fn poison_list(&self, queue: &str, limit: usize) -> Result<Vec<PoisonMessage>> {
        let mut messages = Vec::new();
        if limit > 0 {
            self.scan_poison(queue, |_, message| {
                messages.push(message);
                messages.len() < limit
            })
            .await?;
        }
        Ok(messages)
    }

    async fn poison_replay(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        let wanted = id.map(|id| HashSet::from([id]));
        self.take_poison(queue, wanted.as_ref(), false, Some(queue))
            .await
            .map(|taken| taken.len())
    }

    async fn poison_discard(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        let wanted = id.map(|id| HashSet::from([id]));
        self.take_poison(queue, wanted.as_ref(), false, None)
            .await
            .map(|taken| taken.len())
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        // One passive declare tells a queue not declared yet; its retry and poison
        // queues are not asked then.
        let (mut waiting, consumers) = match self.counts_checked(queue).await {
            Err(Error::Refused { .. }) => {
                return Err(Error::NotDeclared {
                    queue: queue.to_owned(),
                });
            }
            other => other?,
        };
        for delay in self.retry_delays(queue).await {
            waiting += self.ready(&retry_queue(queue, delay)).await?;
        }
        Ok(QueueStats {
            waiting,
            leased: 0,
            poisoned: self.ready(&poison_queue(queue)).await?,
            // The broker counts the consumers attached now; how long its messages waited
            // it does not tell.
            consumers: Some(consumers),
            waiting_since: None,
        })
    }

    async fn poison_page(&self, queue: &str, query: &PoisonQuery) -> Result<PoisonPage> {
        if query.newest_first {
            return Err(Error::Unsupported(
                "RabbitMQ reads a poison queue from its front only: its newest messages are reached by reading and holding every message before them, so pages run oldest first"
                    .into(),
            ));
        }
        // The cursor is the place of the next message to read; only the page is kept.
        let mut paging = Paging::new(query);
        self.scan_poison(queue, |at, message| paging.offer(at, message))
            .await?;
        Ok(paging.finish())
    }

    async fn poison_reasons(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<(String, u64)>> {
        let mut reasons = Reasons::new(filter);
        self.scan_poison(queue, |_, message| {
            reasons.offer(message);
            true
        })
        .await?;
        Ok(reasons.finish())
    }

    async fn poison_reason_groups(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<ReasonGroup>> {
        let mut groups = Groups::new(filter);
        self.scan_poison(queue, |_, message| {
            groups.offer(message);
            true
        })
        .await?;
        Ok(groups.finish())
    }

    async fn poison_body(&self, queue: &str, handle: &str) -> Result<Option<PoisonMessage>> {
        let mut found = None;
        self.scan_poison(queue, |_, message| {
            if message.handle == handle {
                found = Some(message);
                return false;
            }
            true
        })
        .await?;
        Ok(found)
    }

    async fn poison_take(
        &self,
        queue: &str,
        handles: &[String],
        action: &PoisonAction,
    ) -> Result<Vec<String>> {
        let target = match action {
            PoisonAction::Replay => Some(queue),
            PoisonAction::ReplayTo(target) => {
                check_queue_name(target)?;
                Some(target.as_str())
            }
            PoisonAction::Discard => None,
        };
        if handles.is_empty() {
            return Ok(Vec::new());
        }
        // A message's handle is the mark of its poisoning (its id for a message the broker
        // dead-lettered itself).
        let wanted: HashSet<&str> = handles.iter().map(String::as_str).collect();
        let taken = self.take_poison(queue, Some(&wanted), true, target).await?;
        Ok(super::poison::taken_in_order(handles, taken))
    }

    /// A purge empties the queue's ready messages and its retry queues' (a delayed retry
    /// waits there); the messages its consumers hold stay. AMQP names no message in a
    /// queue, so one message cannot be retried now or deleted, and a purge cannot stop
    /// at the newest one the operator saw.
    async fn act_on_waiting(&self, queue: &str, action: &WaitingAction) -> Result<Option<u64>> {
        check_queue_name(queue)?;
        if !matches!(action, WaitingAction::Purge { .. }) {
            return Err(Error::Unsupported(format!(
                "RabbitMQ cannot {} one waiting message: AMQP names no message in a queue",
                action.name()
            )));
        }
        if let Err(Error::Refused { .. }) = self.counts_checked(queue).await {
            return Err(Error::NotDeclared {
                queue: queue.to_owned(),
            });
        }
        let mut removed = self.purge_ready(queue).await?;
        for delay in self.retry_delays(queue).await {
            removed += self.purge_ready(&retry_queue(queue, delay)).await?;
        }
        Ok(Some(removed))
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<()> {
        check_queue_name(queue)?;
        let marker = paused_marker(queue);
        let channel = self.channel().await?;
        let outcome = if paused {
            let mut arguments = FieldTable::default();
            arguments.insert("x-queue-type".into(), string_arg("classic"));
            Self::declare_one(&channel, &marker, arguments)
                .await
                .map(|_| ())
        } else {
            channel
                .queue_delete(
                    ShortString::from(marker.as_str()),
                    lapin::options::QueueDeleteOptions::default(),
                )
                .await
                .map(|_| ())
                .or_else(|e| {
                    // Not paused: nothing to resume.
                    if connection::is_not_found(&e) {
                        Ok(())
                    } else {
                        Err(unavailable(e))
                    }
                })
        };
        let _ = channel.close(200, ShortString::from("paused")).await;
        outcome
    }

    async fn paused(&self, queue: &str) -> Result<bool> {
        check_queue_name(queue)?;
        match self.ready_checked(&paused_marker(queue)).await {
            Ok(_) => Ok(true),
            Err(Error::Refused { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// One passive declare.
    async fn exists(&self, queue: &str) -> Result<bool> {
        check_queue_name(queue)?;
        if is_poison_queue(queue) {
            return Ok(false);
        }
        match self.counts_checked(queue).await {
            Ok(_) => Ok(true),
            Err(Error::Refused { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `None`: AMQP has no call that lists queues (only the management plugin's HTTP API,
    /// which this backend does not use, does).
    async fn declared_queues(&self) -> Result<Option<Vec<String>>> {
        Ok(None)
    }

    /// Unsupported: AMQP has no read that leaves a message in place. A `basic.get` takes
    /// the message; requeueing it marks it redelivered and puts it at the back of the
    /// queue, which a look must not do.
    async fn peek(&self, queue: &str, _query: &PeekQuery) -> Result<Vec<WaitingMessage>> {
        check_queue_name(queue)?;
        Err(Error::Unsupported(
            "RabbitMQ cannot show waiting messages: AMQP has no read that leaves a message in place (a get and requeue marks it redelivered and moves it to the back of the queue)"
                .into(),
        ))
    }
}
