//! The connection to the broker: one shared handle that reopens a dropped connection,
//! opens channels, and publishes each message with its own confirm.

use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};
use tokio::sync::Mutex;

use crate::error::{Error, Result};

/// How long connecting keeps trying while the broker is unreachable.
pub const CONNECT_PATIENCE: Duration = Duration::from_secs(30);

/// The RabbitMQ queue backend. Cheap to clone; clones share one connection.
#[derive(Clone)]
pub struct RabbitQueue {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    url: String,
    pub(super) state: Mutex<State>,
}

#[derive(Default)]
pub(super) struct State {
    connection: Option<Arc<Connection>>,
    publisher: Option<Channel>,
    pub(super) retry_delays: std::collections::HashMap<String, Vec<Duration>>,
    /// When this handle declared each queue: a quorum queue may refuse messages for a
    /// moment after it is declared.
    pub(super) declared_at: std::collections::HashMap<String, std::time::Instant>,
}

/// How long after declaring a queue a refused publish is tried again.
const DECLARE_WARMUP: Duration = Duration::from_secs(3);

impl std::fmt::Debug for RabbitQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitQueue").finish_non_exhaustive()
    }
}

pub(super) fn unavailable(e: lapin::Error) -> Error {
    Error::unavailable_because(format!("the broker failed: {e}"), e)
}

/// A channel-level error: the broker closed one channel, the connection stays.
fn is_soft(e: &lapin::Error) -> bool {
    matches!(e.kind(), lapin::ErrorKind::ProtocolError(amqp) if matches!(amqp.kind(), lapin::protocol::AMQPErrorKind::Soft(_)))
}

/// The broker's "no such queue" (404), a channel-level error.
pub(super) fn is_not_found(e: &lapin::Error) -> bool {
    matches!(e.kind(), lapin::ErrorKind::ProtocolError(amqp)
        if matches!(amqp.kind(), lapin::protocol::AMQPErrorKind::Soft(lapin::protocol::AMQPSoftError::NOTFOUND)))
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

    pub(super) async fn channel(&self) -> Result<Channel> {
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
    pub(super) async fn publish_reliably(
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
}
