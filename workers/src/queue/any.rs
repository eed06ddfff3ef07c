//! [`AnyQueue`]: a queue backend chosen at run time from a connection string, for binaries
//! whose broker is a flag.
//!
//! Built without a queue backend (none of `rabbitmq`, `sqlite`, `azure`), the enums have
//! no variant: [`AnyQueue::connect`] says which feature a broker needs, and the methods'
//! arguments go unused.
#![cfg_attr(
    not(any(feature = "rabbitmq", feature = "sqlite", feature = "azure")),
    allow(unused_variables)
)]

use std::time::Duration;

use super::{
    ConsumeOptions, Consumer, Delivery, PeekQuery, PoisonAction, PoisonFilter, PoisonMessage,
    PoisonPage, PoisonQuery, Queue, QueueOptions, QueueStats, RawText, ReasonGroup, Received,
    WaitingAction, WaitingMessage,
};
use crate::error::{Error, Result};
use tablekit_core::any::forms::{self, Argument, Form};

/// A queue backend chosen by connection string: `amqp://…` (RabbitMQ), `sqlite:PATH` or
/// `azure:CONNECTION-STRING` (Azure Queue Storage).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AnyQueue {
    /// RabbitMQ.
    #[cfg(feature = "rabbitmq")]
    Rabbit(super::rabbit::RabbitQueue),
    /// The embedded SQLite queue.
    #[cfg(feature = "sqlite")]
    Sqlite(super::sqlite::SqliteQueue),
    /// Azure Queue Storage.
    #[cfg(feature = "azure")]
    Azure(super::azure::AzureQueue),
}

impl AnyQueue {
    /// The forms [`AnyQueue::connect`] accepts.
    pub const FORMS: &'static [Form] = &[
        Form::new(
            "amqp",
            Argument::Url,
            "amqp://user:password@host:port/vhost",
        ),
        Form::new(
            "amqps",
            Argument::Url,
            "amqps://user:password@host:port/vhost",
        ),
        Form::new("sqlite", Argument::Path, "sqlite:PATH"),
        Form::new(
            "azure",
            Argument::ConnectionString,
            "azure:CONNECTION-STRING",
        ),
    ];

    /// Connects to the queue backend a connection string names, in one of [`FORMS`](Self::FORMS):
    ///
    /// - `amqp://user:password@host:port/vhost` (feature `rabbitmq`) or `amqps://…`
    ///   (feature `amqps`): RabbitMQ;
    /// - `sqlite:PATH` (feature `sqlite`): the embedded queue file at PATH, relative
    ///   (`sqlite:queue.db`) or absolute (`sqlite:/var/lib/queue.db`);
    /// - `azure:CONNECTION-STRING` (feature `azure`): Azure Queue Storage.
    ///
    /// Any other string is refused before anything is opened or created: a bare path
    /// (write `sqlite:PATH`), `sqlite://queue.db` (which would be `/queue.db` at the
    /// root of the filesystem).
    ///
    /// # Errors
    /// [`Error::InvalidBroker`] for a string in none of the forms, with a hint and the
    /// forms accepted (never showing a password or an account key), or for a form whose
    /// backend is not compiled in; the backend's connect errors.
    pub async fn connect(broker: &str) -> Result<Self> {
        let refused = |reason: String| Error::InvalidBroker {
            broker: forms::shown(broker),
            reason,
        };
        let (form, rest) = forms::accept(broker, Self::FORMS).map_err(refused)?;
        match form.scheme {
            #[cfg(feature = "rabbitmq")]
            "amqp" | "amqps" => Ok(AnyQueue::Rabbit(
                super::rabbit::RabbitQueue::connect(broker).await?,
            )),
            #[cfg(feature = "sqlite")]
            "sqlite" => Ok(AnyQueue::Sqlite(
                super::sqlite::SqliteQueue::open(rest).await?,
            )),
            #[cfg(feature = "azure")]
            "azure" => Ok(AnyQueue::Azure(super::azure::AzureQueue::connect(rest)?)),
            scheme => {
                let _ = rest; // only read by the backends compiled in
                let (feature, what) = match scheme {
                    "amqp" => ("rabbitmq", "RabbitMQ"),
                    "amqps" => ("amqps", "RabbitMQ over TLS"),
                    "sqlite" => ("sqlite", "the SQLite queue"),
                    _ => ("azure", "Azure Queue Storage"),
                };
                Err(refused(format!(
                    "this build has no support for {what}: build it with the `{feature}` feature (`cargo build --features {feature}`)"
                )))
            }
        }
    }
}

/// A consumer of an [`AnyQueue`].
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyConsumer {
    /// RabbitMQ.
    #[cfg(feature = "rabbitmq")]
    Rabbit(Box<super::rabbit::RabbitConsumer>),
    /// SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(super::sqlite::SqliteConsumer),
    /// Azure Queue Storage.
    #[cfg(feature = "azure")]
    Azure(super::azure::AzureConsumer),
}

/// A delivery of an [`AnyQueue`].
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyDelivery {
    /// RabbitMQ.
    #[cfg(feature = "rabbitmq")]
    Rabbit(Box<super::rabbit::RabbitDelivery>),
    /// SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(super::sqlite::SqliteDelivery),
    /// Azure Queue Storage.
    #[cfg(feature = "azure")]
    Azure(Box<super::azure::AzureDelivery>),
}

macro_rules! dispatch {
    ($value:expr, $inner:ident => $body:expr) => {
        match $value {
            #[cfg(feature = "rabbitmq")]
            AnyQueue::Rabbit($inner) => $body,
            #[cfg(feature = "sqlite")]
            AnyQueue::Sqlite($inner) => $body,
            #[cfg(feature = "azure")]
            AnyQueue::Azure($inner) => $body,
            #[cfg(not(any(feature = "rabbitmq", feature = "sqlite", feature = "azure")))]
            _ => match *$value {},
        }
    };
}

impl Queue for AnyQueue {
    type Consumer = AnyConsumer;
    type Delivery = AnyDelivery;

    async fn declare(&self, queue: &str, options: &QueueOptions) -> Result<()> {
        dispatch!(self, q => q.declare(queue, options).await)
    }

    async fn send(&self, queue: &str, id: &str, body: &[u8]) -> Result<()> {
        dispatch!(self, q => q.send(queue, id, body).await)
    }

    async fn consume(&self, queue: &str, options: ConsumeOptions) -> Result<AnyConsumer> {
        match self {
            #[cfg(feature = "rabbitmq")]
            AnyQueue::Rabbit(q) => q
                .consume(queue, options)
                .await
                .map(|c| AnyConsumer::Rabbit(Box::new(c))),
            #[cfg(feature = "sqlite")]
            AnyQueue::Sqlite(q) => q.consume(queue, options).await.map(AnyConsumer::Sqlite),
            #[cfg(feature = "azure")]
            AnyQueue::Azure(q) => q.consume(queue, options).await.map(AnyConsumer::Azure),
            #[cfg(not(any(feature = "rabbitmq", feature = "sqlite", feature = "azure")))]
            _ => match *self {},
        }
    }

    async fn poison_list(&self, queue: &str, limit: usize) -> Result<Vec<PoisonMessage>> {
        dispatch!(self, q => q.poison_list(queue, limit).await)
    }

    async fn poison_replay(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        dispatch!(self, q => q.poison_replay(queue, id).await)
    }

    async fn poison_discard(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        dispatch!(self, q => q.poison_discard(queue, id).await)
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        dispatch!(self, q => q.stats(queue).await)
    }

    async fn poison_page(&self, queue: &str, query: &PoisonQuery) -> Result<PoisonPage> {
        dispatch!(self, q => q.poison_page(queue, query).await)
    }

    async fn poison_reasons(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<(String, u64)>> {
        dispatch!(self, q => q.poison_reasons(queue, filter).await)
    }

    async fn poison_body(&self, queue: &str, handle: &str) -> Result<Option<PoisonMessage>> {
        dispatch!(self, q => q.poison_body(queue, handle).await)
    }

    async fn poison_take(
        &self,
        queue: &str,
        handles: &[String],
        action: &PoisonAction,
    ) -> Result<Vec<String>> {
        dispatch!(self, q => q.poison_take(queue, handles, action).await)
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<()> {
        dispatch!(self, q => q.set_paused(queue, paused).await)
    }

    async fn paused(&self, queue: &str) -> Result<bool> {
        dispatch!(self, q => q.paused(queue).await)
    }

    async fn exists(&self, queue: &str) -> Result<bool> {
        dispatch!(self, q => q.exists(queue).await)
    }

    async fn declared_queues(&self) -> Result<Option<Vec<String>>> {
        dispatch!(self, q => q.declared_queues().await)
    }

    async fn peek(&self, queue: &str, query: &PeekQuery) -> Result<Vec<WaitingMessage>> {
        dispatch!(self, q => q.peek(queue, query).await)
    }

    fn names_waiting_messages(&self) -> bool {
        dispatch!(self, q => q.names_waiting_messages())
    }

    async fn act_on_waiting(&self, queue: &str, action: &WaitingAction) -> Result<Option<u64>> {
        dispatch!(self, q => q.act_on_waiting(queue, action).await)
    }

    async fn poison_reason_groups(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<ReasonGroup>> {
        dispatch!(self, q => q.poison_reason_groups(queue, filter).await)
    }

    async fn poison_last_page(&self, queue: &str, query: &PoisonQuery) -> Result<PoisonPage> {
        dispatch!(self, q => q.poison_last_page(queue, query).await)
    }

    async fn poison_kinds(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<(Option<String>, u64)>> {
        dispatch!(self, q => q.poison_kinds(queue, filter).await)
    }
}

impl Consumer for AnyConsumer {
    type Delivery = AnyDelivery;

    async fn next(&mut self) -> Result<Option<AnyDelivery>> {
        match self {
            #[cfg(feature = "rabbitmq")]
            AnyConsumer::Rabbit(c) => c
                .next()
                .await
                .map(|d| d.map(|d| AnyDelivery::Rabbit(Box::new(d)))),
            #[cfg(feature = "sqlite")]
            AnyConsumer::Sqlite(c) => c.next().await.map(|d| d.map(AnyDelivery::Sqlite)),
            #[cfg(feature = "azure")]
            AnyConsumer::Azure(c) => c
                .next()
                .await
                .map(|d| d.map(|d| AnyDelivery::Azure(Box::new(d)))),
            #[cfg(not(any(feature = "rabbitmq", feature = "sqlite", feature = "azure")))]
            _ => match *self {},
        }
    }

    async fn close(self) {
        match self {
            #[cfg(feature = "rabbitmq")]
            AnyConsumer::Rabbit(c) => (*c).close().await,
            #[cfg(feature = "sqlite")]
            AnyConsumer::Sqlite(c) => c.close().await,
            #[cfg(feature = "azure")]
            AnyConsumer::Azure(c) => c.close().await,
        }
    }
}

impl Delivery for AnyDelivery {
    fn lease_ends(&self) -> Option<tokio::time::Instant> {
        match self {
            #[cfg(feature = "rabbitmq")]
            AnyDelivery::Rabbit(d) => d.lease_ends(),
            #[cfg(feature = "sqlite")]
            AnyDelivery::Sqlite(d) => d.lease_ends(),
            #[cfg(feature = "azure")]
            AnyDelivery::Azure(d) => d.lease_ends(),
            #[cfg(not(any(feature = "rabbitmq", feature = "sqlite", feature = "azure")))]
            _ => match *self {},
        }
    }

    fn headers(&self) -> Vec<(String, String)> {
        match self {
            #[cfg(feature = "rabbitmq")]
            AnyDelivery::Rabbit(d) => d.headers(),
            #[cfg(feature = "sqlite")]
            AnyDelivery::Sqlite(d) => d.headers(),
            #[cfg(feature = "azure")]
            AnyDelivery::Azure(d) => d.headers(),
            #[cfg(not(any(feature = "rabbitmq", feature = "sqlite", feature = "azure")))]
            _ => match *self {},
        }
    }

    fn raw(&self) -> RawText {
        match self {
            #[cfg(feature = "rabbitmq")]
            AnyDelivery::Rabbit(d) => d.raw(),
            #[cfg(feature = "sqlite")]
            AnyDelivery::Sqlite(d) => d.raw(),
            #[cfg(feature = "azure")]
            AnyDelivery::Azure(d) => d.raw(),
            #[cfg(not(any(feature = "rabbitmq", feature = "sqlite", feature = "azure")))]
            _ => match *self {},
        }
    }

    fn received(&self) -> &Received {
        match self {
            #[cfg(feature = "rabbitmq")]
            AnyDelivery::Rabbit(d) => d.received(),
            #[cfg(feature = "sqlite")]
            AnyDelivery::Sqlite(d) => d.received(),
            #[cfg(feature = "azure")]
            AnyDelivery::Azure(d) => d.received(),
            #[cfg(not(any(feature = "rabbitmq", feature = "sqlite", feature = "azure")))]
            _ => match *self {},
        }
    }

    async fn ack(self) -> Result<()> {
        match self {
            #[cfg(feature = "rabbitmq")]
            AnyDelivery::Rabbit(d) => (*d).ack().await,
            #[cfg(feature = "sqlite")]
            AnyDelivery::Sqlite(d) => d.ack().await,
            #[cfg(feature = "azure")]
            AnyDelivery::Azure(d) => (*d).ack().await,
        }
    }

    async fn retry(self, delay: Duration) -> Result<()> {
        match self {
            #[cfg(feature = "rabbitmq")]
            AnyDelivery::Rabbit(d) => (*d).retry(delay).await,
            #[cfg(feature = "sqlite")]
            AnyDelivery::Sqlite(d) => d.retry(delay).await,
            #[cfg(feature = "azure")]
            AnyDelivery::Azure(d) => (*d).retry(delay).await,
        }
    }

    async fn poison(self, reason: &str) -> Result<()> {
        match self {
            #[cfg(feature = "rabbitmq")]
            AnyDelivery::Rabbit(d) => (*d).poison(reason).await,
            #[cfg(feature = "sqlite")]
            AnyDelivery::Sqlite(d) => d.poison(reason).await,
            #[cfg(feature = "azure")]
            AnyDelivery::Azure(d) => (*d).poison(reason).await,
        }
    }
}
