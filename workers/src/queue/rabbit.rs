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
//! - the broker refuses connections for a few seconds while booting: connecting retries
//!   for up to [`CONNECT_PATIENCE`]; a dropped connection is reopened the same way, and
//!   consumers resume (unacknowledged deliveries come back from the broker, so nothing is
//!   lost).

use std::sync::Arc;
use std::time::Duration;

use lapin::message::BasicGetMessage;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicGetOptions, BasicPublishOptions, BasicQosOptions,
    BasicRejectOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};
use tokio::sync::Mutex;

use super::{
    ConsumeOptions, Consumer, Delivery, PoisonMessage, Queue, QueueOptions, QueueStats, Received,
    check_queue_name, poison_queue,
};
use crate::error::{Error, Result};

/// How long connecting keeps trying while the broker is unreachable.
pub const CONNECT_PATIENCE: Duration = Duration::from_secs(30);

const ATTEMPTS_HEADER: &str = "x-tablekit-attempts";
const REASON_HEADER: &str = "x-tablekit-reason";
/// When tablekit poisoned a message (Unix milliseconds).
const POISONED_AT_HEADER: &str = "x-tablekit-poisoned-at";

/// The RabbitMQ queue backend. Cheap to clone; clones share one connection.
#[derive(Clone)]
pub struct RabbitQueue {
    inner: Arc<Inner>,
}

struct Inner {
    url: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    connection: Option<Arc<Connection>>,
    publisher: Option<Channel>,
    retry_delays: std::collections::HashMap<String, Vec<Duration>>,
    /// When this handle declared each queue: a quorum queue may refuse messages for a
    /// moment after it is declared.
    declared_at: std::collections::HashMap<String, std::time::Instant>,
}

/// How long after declaring a queue a refused publish is tried again.
const DECLARE_WARMUP: Duration = Duration::from_secs(3);

impl std::fmt::Debug for RabbitQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitQueue").finish_non_exhaustive()
    }
}

fn unavailable(e: lapin::Error) -> Error {
    Error::unavailable_because(format!("the broker failed: {e}"), e)
}

/// A channel-level error: the broker closed one channel, the connection stays.
fn is_soft(e: &lapin::Error) -> bool {
    matches!(e.kind(), lapin::ErrorKind::ProtocolError(amqp) if matches!(amqp.kind(), lapin::protocol::AMQPErrorKind::Soft(_)))
}

/// The broker's "no such queue" (404), a channel-level error.
fn is_not_found(e: &lapin::Error) -> bool {
    matches!(e.kind(), lapin::ErrorKind::ProtocolError(amqp)
        if matches!(amqp.kind(), lapin::protocol::AMQPErrorKind::Soft(lapin::protocol::AMQPSoftError::NOTFOUND)))
}

fn string_arg(value: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(value.as_bytes().to_vec()))
}

fn retry_queue(queue: &str, delay: Duration) -> String {
    format!("{queue}-retry-{}", delay.as_millis())
}

fn header_int(headers: Option<&FieldTable>, name: &str) -> Option<i64> {
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

fn header_text(value: &AMQPValue) -> Option<String> {
    match value {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}

/// The delivery count of a message: our attempts header plus the broker's count.
fn delivery_count(properties: &BasicProperties) -> u32 {
    let headers = properties.headers().as_ref();
    let ours = header_int(headers, ATTEMPTS_HEADER).unwrap_or(0);
    let broker = header_int(headers, "x-delivery-count").unwrap_or(0);
    u32::try_from(ours.saturating_add(broker).saturating_add(1)).unwrap_or(u32::MAX)
}

/// Why the broker dead-lettered a message, from its `x-death` header.
fn death_reason(headers: Option<&FieldTable>) -> Option<String> {
    let AMQPValue::FieldArray(deaths) = headers?.inner().get("x-death")? else {
        return None;
    };
    let AMQPValue::FieldTable(first) = deaths.as_slice().first()? else {
        return None;
    };
    first.inner().get("reason").and_then(header_text)
}

fn properties(
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

impl RabbitQueue {
    /// Connects to the broker at `url` (`amqp://user:password@host:port/vhost`), retrying
    /// for up to [`CONNECT_PATIENCE`] while it refuses connections (booting).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the broker stays unreachable.
    pub async fn connect(url: &str) -> Result<Self> {
        let queue = RabbitQueue {
            inner: Arc::new(Inner {
                url: url.to_owned(),
                state: Mutex::new(State::default()),
            }),
        };
        queue.connection().await?;
        Ok(queue)
    }

    async fn open(url: &str) -> Result<Connection> {
        let deadline = tokio::time::Instant::now() + CONNECT_PATIENCE;
        let mut pause = Duration::from_millis(100);
        loop {
            match Connection::connect(url, ConnectionProperties::default()).await {
                Ok(connection) => return Ok(connection),
                Err(e) if tokio::time::Instant::now() + pause < deadline => {
                    tracing::warn!(error = %e, "broker unreachable, retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(unavailable(e)),
            }
        }
    }

    /// The live connection, reopened if it dropped.
    async fn connection(&self) -> Result<Arc<Connection>> {
        let mut state = self.inner.state.lock().await;
        if let Some(connection) = &state.connection {
            if connection.status().connected() {
                return Ok(connection.clone());
            }
            tracing::warn!("broker connection lost, reconnecting");
        }
        let connection = Arc::new(Self::open(&self.inner.url).await?);
        state.connection = Some(connection.clone());
        state.publisher = None;
        Ok(connection)
    }

    async fn channel(&self) -> Result<Channel> {
        let connection = self.connection().await?;
        let mut attempts = 0;
        loop {
            match connection.create_channel().await {
                Ok(channel) => return Ok(channel),
                // A channel-level (soft) error belongs to a channel the broker closed
                // before, such as a passive declare of a missing queue; the client can
                // report it on the next channel it opens under the same number. It says
                // nothing about a new channel: open another.
                Err(e) if is_soft(&e) && attempts < 5 => {
                    attempts += 1;
                    tracing::debug!(error = %e, "a closed channel's error on opening a channel; opening another");
                }
                Err(e) => return Err(unavailable(e)),
            }
        }
    }

    /// The shared channel in confirm mode that every publish goes through.
    async fn publisher(&self) -> Result<Channel> {
        {
            let state = self.inner.state.lock().await;
            if let Some(channel) = &state.publisher
                && channel.status().connected()
            {
                return Ok(channel.clone());
            }
        }
        let channel = self.channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(unavailable)?;
        self.inner.state.lock().await.publisher = Some(channel.clone());
        Ok(channel)
    }

    /// Publishes one message to a queue and waits for the broker's confirm.
    async fn publish(&self, queue: &str, body: &[u8], properties: BasicProperties) -> Result<()> {
        let channel = self.publisher().await?;
        let confirm = channel
            .basic_publish(
                ShortString::from(""),
                ShortString::from(queue),
                BasicPublishOptions {
                    mandatory: true,
                    ..BasicPublishOptions::default()
                },
                body,
                properties,
            )
            .await
            .map_err(unavailable)?
            .await
            .map_err(unavailable)?;
        match confirm {
            Confirmation::Ack(None) => Ok(()),
            Confirmation::Ack(Some(_)) => Err(Error::refused(format!(
                "no queue `{queue}` (declare it before sending)"
            ))),
            Confirmation::Nack(_) => Err(Error::refused(format!(
                "queue `{queue}` refused the message (is it full?)"
            ))),
            Confirmation::NotRequested => Err(Error::refused("publisher confirms are off")),
        }
    }

    /// Publishes, reconnecting and trying again while the broker is unreachable.
    async fn publish_reliably(
        &self,
        queue: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<()> {
        let deadline = tokio::time::Instant::now() + CONNECT_PATIENCE;
        loop {
            match self.publish(queue, body, properties.clone()).await {
                Err(e) if e.is_retryable() && tokio::time::Instant::now() < deadline => {
                    tracing::warn!(error = %e, queue, "publish failed, retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(Error::Refused { .. }) if self.just_declared(queue).await => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => return other,
            }
        }
    }

    /// Whether this handle declared `queue` less than `DECLARE_WARMUP` ago.
    async fn just_declared(&self, queue: &str) -> bool {
        self.inner
            .state
            .lock()
            .await
            .declared_at
            .get(queue)
            .is_some_and(|at| at.elapsed() < DECLARE_WARMUP)
    }

    async fn declare_one(
        channel: &Channel,
        name: &str,
        arguments: FieldTable,
    ) -> Result<lapin::Queue> {
        channel
            .queue_declare(
                ShortString::from(name),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                arguments,
            )
            .await
            .map_err(|e| Error::refused_because(format!("declaring `{name}`: {e}"), e))
    }

    /// The number of ready messages in a queue, or an error if it does not exist.
    async fn ready_checked(&self, name: &str) -> Result<u64> {
        let channel = self.channel().await?;
        let result = channel
            .queue_declare(
                ShortString::from(name),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await;
        let _ = channel.close(200, ShortString::from("done")).await;
        result.map(|q| u64::from(q.message_count())).map_err(|e| {
            if is_not_found(&e) {
                Error::refused_because(format!("queue `{name}`: {e}"), e)
            } else {
                unavailable(e)
            }
        })
    }

    /// The number of ready messages in a queue (0 if it does not exist).
    async fn ready(&self, name: &str) -> Result<u64> {
        match self.ready_checked(name).await {
            Err(Error::Refused { .. }) => Ok(0),
            other => other,
        }
    }

    async fn retry_delays(&self, queue: &str) -> Vec<Duration> {
        self.inner
            .state
            .lock()
            .await
            .retry_delays
            .get(queue)
            .cloned()
            .unwrap_or_else(|| QueueOptions::default().retry_delays)
    }

    /// Deletes a queue with its poison queue and retry queues (and the messages in them).
    ///
    /// # Errors
    /// [`Error::Unavailable`].
    pub async fn delete_queue(&self, queue: &str, options: &QueueOptions) -> Result<()> {
        check_queue_name(queue)?;
        let mut names = vec![queue.to_owned(), poison_queue(queue)];
        names.extend(options.retry_delays.iter().map(|d| retry_queue(queue, *d)));
        for name in names {
            let channel = self.channel().await?;
            // A queue that does not exist closes the channel; that is fine.
            let _ = channel
                .queue_delete(
                    ShortString::from(name.as_str()),
                    lapin::options::QueueDeleteOptions::default(),
                )
                .await;
            let _ = channel.close(200, ShortString::from("deleted")).await;
        }
        Ok(())
    }

    /// Gets up to `limit` messages of a queue without acknowledging them (closing the
    /// channel returns them); a queue that does not exist holds none.
    async fn get_all(
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

fn quorum_arguments(dead_letter_to: &str) -> FieldTable {
    let mut arguments = FieldTable::default();
    arguments.insert("x-queue-type".into(), string_arg("quorum"));
    arguments.insert("x-dead-letter-exchange".into(), string_arg(""));
    arguments.insert(
        "x-dead-letter-routing-key".into(),
        string_arg(dead_letter_to),
    );
    arguments.insert("x-dead-letter-strategy".into(), string_arg("at-least-once"));
    arguments.insert("x-overflow".into(), string_arg("reject-publish"));
    arguments
}

fn poison_message(message: &BasicGetMessage) -> PoisonMessage {
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
    PoisonMessage {
        id: properties
            .message_id()
            .as_ref()
            .map(|s| s.as_str().to_owned())
            .unwrap_or_default(),
        body: message.delivery.data.clone(),
        reason,
        delivery_count: u32::try_from(attempts).unwrap_or(u32::MAX),
        poisoned_at,
    }
}

impl RabbitQueue {
    /// Takes the poison messages (all, or those with `id`) off the poison queue, each
    /// first sent back to the queue with a fresh delivery count when `replay`; returns
    /// how many. The others go back when the channel closes, on every path.
    async fn take_poison(&self, queue: &str, id: Option<&str>, replay: bool) -> Result<usize> {
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
        let channel = self.channel().await?;
        let messages = self.get_all(&channel, &poison_queue(queue), limit).await;
        // Closing the channel returns every message got without an ack, on every path.
        let _ = channel.close(200, ShortString::from("listed")).await;
        Ok(messages?.iter().map(poison_message).collect())
    }

    async fn poison_replay(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        self.take_poison(queue, id, true).await
    }

    async fn poison_discard(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        self.take_poison(queue, id, false).await
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        // One passive declare tells a queue not declared yet; its retry and poison
        // queues are not asked then.
        let mut waiting = match self.ready_checked(queue).await {
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
        })
    }
}

/// A consumer of a RabbitMQ queue; resubscribes after a dropped connection.
pub struct RabbitConsumer {
    queue: RabbitQueue,
    name: String,
    options: ConsumeOptions,
    stream: Option<(Channel, lapin::Consumer)>,
}

impl std::fmt::Debug for RabbitConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitConsumer")
            .field("queue", &self.name)
            .finish()
    }
}

impl RabbitConsumer {
    async fn subscribe(&mut self) -> Result<()> {
        let channel = self.queue.channel().await?;
        channel
            .basic_qos(
                self.options.prefetch.max(1),
                BasicQosOptions { global: false },
            )
            .await
            .map_err(unavailable)?;
        let consumer = channel
            .basic_consume(
                ShortString::from(self.name.as_str()),
                ShortString::from(""),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| Error::refused_because(format!("consuming `{}`: {e}", self.name), e))?;
        self.stream = Some((channel, consumer));
        Ok(())
    }
}

impl Consumer for RabbitConsumer {
    type Delivery = RabbitDelivery;

    async fn next(&mut self) -> Result<Option<RabbitDelivery>> {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + CONNECT_PATIENCE;
        loop {
            if let Some((_, stream)) = &mut self.stream {
                match stream.next().await {
                    Some(Ok(delivery)) => {
                        let received = Received {
                            id: delivery
                                .properties
                                .message_id()
                                .as_ref()
                                .map(|s| s.as_str().to_owned())
                                .unwrap_or_default(),
                            body: delivery.data.clone(),
                            delivery_count: delivery_count(&delivery.properties),
                            sent_at: delivery
                                .properties
                                .timestamp()
                                .and_then(|t| i64::try_from(t).ok())
                                .and_then(|t| chrono::DateTime::from_timestamp(t, 0)),
                        };
                        return Ok(Some(RabbitDelivery {
                            queue: self.queue.clone(),
                            name: self.name.clone(),
                            properties: delivery.properties.clone(),
                            acker: delivery.acker,
                            received,
                        }));
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, queue = %self.name, "consumer failed, resubscribing")
                    }
                    None => tracing::warn!(queue = %self.name, "consumer closed, resubscribing"),
                }
                self.stream = None;
            }
            match self.subscribe().await {
                Ok(()) => {}
                Err(e) if e.is_retryable() && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn close(self) {
        if let Some((channel, _)) = self.stream {
            // Unacknowledged deliveries of this channel go back to the queue.
            let _ = channel
                .close(200, ShortString::from("consumer closed"))
                .await;
        }
    }
}

/// A delivery from RabbitMQ.
pub struct RabbitDelivery {
    queue: RabbitQueue,
    name: String,
    properties: BasicProperties,
    acker: lapin::Acker,
    received: Received,
}

impl std::fmt::Debug for RabbitDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitDelivery")
            .field("queue", &self.name)
            .field("id", &self.received.id)
            .field("delivery_count", &self.received.delivery_count)
            .finish()
    }
}

impl RabbitDelivery {
    /// Acks once the copy is published; when publishing failed, hands the delivery back
    /// to the broker (a dropped delivery would hold its prefetch slot until the channel
    /// closes).
    async fn settle_after(self, published: Result<()>) -> Result<()> {
        match published {
            Ok(()) => settled(self.acker.ack(BasicAckOptions::default()).await),
            Err(e) => {
                let _ = self
                    .acker
                    .reject(BasicRejectOptions { requeue: true })
                    .await;
                Err(e)
            }
        }
    }
}

fn settled(done: std::result::Result<bool, lapin::Error>) -> Result<()> {
    match done {
        Ok(true) => Ok(()),
        Ok(false) => Err(Error::unavailable(
            "the channel closed before the settlement; the message will be delivered again",
        )),
        Err(e) => Err(unavailable(e)),
    }
}

impl Delivery for RabbitDelivery {
    fn received(&self) -> &Received {
        &self.received
    }

    async fn ack(self) -> Result<()> {
        settled(self.acker.ack(BasicAckOptions::default()).await)
    }

    async fn retry(self, delay: Duration) -> Result<()> {
        if delay.is_zero() {
            return settled(
                self.acker
                    .reject(BasicRejectOptions { requeue: true })
                    .await,
            );
        }
        let delays = self.queue.retry_delays(&self.name).await;
        let tier = delays
            .iter()
            .copied()
            .find(|d| *d >= delay)
            .or_else(|| delays.last().copied());
        let Some(tier) = tier else {
            return settled(
                self.acker
                    .reject(BasicRejectOptions { requeue: true })
                    .await,
            );
        };
        let timestamp = *self.properties.timestamp();
        let published = self
            .queue
            .publish_reliably(
                &retry_queue(&self.name, tier),
                &self.received.body,
                properties(
                    &self.received.id,
                    self.received.delivery_count,
                    None,
                    timestamp,
                ),
            )
            .await;
        self.settle_after(published).await
    }

    async fn poison(self, reason: &str) -> Result<()> {
        let timestamp = *self.properties.timestamp();
        let published = self
            .queue
            .publish_reliably(
                &poison_queue(&self.name),
                &self.received.body,
                properties(
                    &self.received.id,
                    self.received.delivery_count,
                    Some(reason),
                    timestamp,
                ),
            )
            .await;
        self.settle_after(published).await
    }
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
