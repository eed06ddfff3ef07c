//! The consumer of a queue and its deliveries: subscribes with the prefetch set first,
//! resubscribes after a dropped connection, and settles a delivery by an ack, a reject
//! (an immediate retry), or a confirmed publish to a retry or the poison queue then an ack.

use std::time::Duration;

use lapin::BasicProperties;
use lapin::Channel;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, BasicRejectOptions};
use lapin::types::{FieldTable, ShortString};

use super::super::{ConsumeOptions, Consumer, Delivery, Received, poison_queue};
use super::connection::{CONNECT_PATIENCE, RabbitQueue, unavailable};
use super::declare::retry_queue;
use super::headers::{delivery_count, properties};
use crate::error::{Error, Result};

/// A consumer of a RabbitMQ queue; resubscribes after a dropped connection.
pub struct RabbitConsumer {
    pub(super) queue: RabbitQueue,
    pub(super) name: String,
    pub(super) options: ConsumeOptions,
    pub(super) stream: Option<(Channel, lapin::Consumer)>,
}

impl std::fmt::Debug for RabbitConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitConsumer")
            .field("queue", &self.name)
            .finish()
    }
}

impl RabbitConsumer {
    pub(super) async fn subscribe(&mut self) -> Result<()> {
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

    fn headers(&self) -> Vec<(String, String)> {
        super::headers::shown_headers(&self.properties).0
    }

    fn raw(&self) -> super::super::RawText {
        super::super::RawText {
            headers: super::headers::shown_headers(&self.properties).1,
            ..super::super::RawText::default()
        }
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
