//! Durable queues with the semantics the eventually consistent transaction pattern needs:
//! a send that returns once the message is stored, deliveries leased to one consumer until
//! acknowledged, retries after a delay, a delivery count, and a `<queue>-poison` queue
//! holding the messages that could not be processed, each with its reason.
//!
//! Backends: [`RabbitQueue`](rabbit::RabbitQueue) (feature `rabbitmq`),
//! [`SqliteQueue`](sqlite::SqliteQueue) (feature `sqlite`) and
//! [`AzureQueue`](azure::AzureQueue) (feature `azure`); [`AnyQueue`] picks one from a
//! connection string (`amqp://…`, `sqlite:PATH` or `azure:CONNECTION-STRING`).
//!
//! The names tablekit derives from a queue's name (`<queue>-poison`, RabbitMQ's
//! `<queue>-retry-<ms>`) use a hyphen, valid on every backend: a queue name valid on Azure
//! gives derived names valid there too.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};

mod any;
#[cfg(feature = "azure")]
pub mod azure;
pub mod desk;
mod names;
mod peek;
mod poison;
pub mod poison_table;
#[cfg(feature = "rabbitmq")]
pub mod rabbit;
pub mod roundtrip;
#[cfg(feature = "sqlite")]
pub mod sqlite;

pub use any::{AnyConsumer, AnyDelivery, AnyQueue};
pub use names::{
    MAX_QUEUE_NAME_BYTES, POISON_SUFFIX, check_queue_name, is_derived_queue, is_poison_queue,
    poison_queue,
};
pub(crate) use names::{PAUSED_SUFFIX, RETRY_INFIX};
pub use peek::{MAX_PEEK, PeekQuery, WaitingAction, WaitingMessage};
pub use poison::{
    PoisonAction, PoisonFilter, PoisonMessage, PoisonPage, PoisonQuery, RawText, ReasonGroup,
    UNDECODABLE_REASON_GROUP, operation_of, reason_group,
};

/// How a queue is declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// After this many deliveries without success a message goes to the poison queue.
    pub max_deliveries: u32,
    /// The delays a retry can wait, shortest first (RabbitMQ makes one retry queue per
    /// delay; the SQLite queue waits the exact delay asked for).
    pub retry_delays: Vec<Duration>,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            max_deliveries: 5,
            retry_delays: [250, 1_000, 5_000, 30_000, 120_000]
                .into_iter()
                .map(Duration::from_millis)
                .collect(),
        }
    }
}

/// How a consumer receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsumeOptions {
    /// At most this many deliveries leased to the consumer and not yet settled.
    pub prefetch: u16,
    /// How long a delivery stays leased before another consumer may receive it (the SQLite
    /// queue's visibility timeout; RabbitMQ leases until the channel closes).
    pub lease: Duration,
}

impl Default for ConsumeOptions {
    fn default() -> Self {
        ConsumeOptions {
            prefetch: 8,
            lease: Duration::from_secs(60),
        }
    }
}

/// A message received from a queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// The message id (set by the sender, kept across retries).
    pub id: String,
    /// The body.
    pub body: Vec<u8>,
    /// The number of this delivery: 1 the first time.
    pub delivery_count: u32,
    /// When the message was first sent, if the queue knows.
    pub sent_at: Option<DateTime<Utc>>,
}

/// How many messages a queue holds, and what the backend can tell of its consumers.
///
/// Whether anything consumes a queue, by backend:
/// - **RabbitMQ** counts the consumers attached now ([`consumers`](Self::consumers)); it
///   cannot say since when a queue has had none, nor how long its messages waited.
/// - **SQLite** keeps no consumers, but a receive always takes the messages that became
///   deliverable first: the oldest deliverable message's time
///   ([`waiting_since`](Self::waiting_since)) is when a delivery was last possible and not
///   taken, so no consumer has received from the queue since (exactly).
/// - **Azure Queue Storage** keeps no consumers either; a peek shows the message at the
///   front, and when it was never delivered its insertion time is
///   [`waiting_since`](Self::waiting_since) (approximately: the service is about FIFO, and a
///   message sent with a delay counts from its sending).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Messages waiting, including those waiting out a retry delay.
    pub waiting: u64,
    /// Messages leased to a consumer and not yet settled (when the backend can tell).
    pub leased: u64,
    /// Messages in the poison queue.
    pub poisoned: u64,
    /// The consumers attached to the queue now, when the backend counts them (RabbitMQ).
    pub consumers: Option<u64>,
    /// Since when the message that waited longest among those a consumer could take now
    /// has waited, when the backend can tell (SQLite, Azure; `None` when none waits).
    pub waiting_since: Option<DateTime<Utc>>,
}

/// A queue backend.
pub trait Queue: Send + Sync + 'static {
    /// A consumer of one queue.
    type Consumer: Consumer<Delivery = Self::Delivery>;
    /// A delivery, settled by ack, retry or poison.
    type Delivery: Delivery;

    /// Creates the queue, its poison queue and what retries need, if they do not exist.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`], [`Error::Unavailable`], or a broker refusal (a queue
    /// declared before with other arguments).
    fn declare(
        &self,
        queue: &str,
        options: &QueueOptions,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Sends a message; returns once the queue has stored it durably.
    ///
    /// # Errors
    /// [`Error::Unavailable`] (nothing is known to be stored: send again),
    /// [`Error::Refused`].
    fn send(&self, queue: &str, id: &str, body: &[u8]) -> impl Future<Output = Result<()>> + Send;

    /// Starts consuming a queue.
    ///
    /// # Errors
    /// As [`declare`](Self::declare).
    fn consume(
        &self,
        queue: &str,
        options: ConsumeOptions,
    ) -> impl Future<Output = Result<Self::Consumer>> + Send;

    /// The messages of the queue's poison queue, oldest first, up to `limit`.
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`].
    fn poison_list(
        &self,
        queue: &str,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<PoisonMessage>>> + Send;

    /// Moves poison messages (all, or the one with `id`) back to the queue with a fresh
    /// delivery count; returns how many moved.
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`].
    fn poison_replay(
        &self,
        queue: &str,
        id: Option<&str>,
    ) -> impl Future<Output = Result<usize>> + Send;

    /// Deletes poison messages (all, or those with `id`) for good; returns how many went.
    /// Discarding a message already gone deletes nothing: a repeated discard is harmless.
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`].
    fn poison_discard(
        &self,
        queue: &str,
        id: Option<&str>,
    ) -> impl Future<Output = Result<usize>> + Send;

    /// How many messages the queue and its poison queue hold.
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`].
    fn stats(&self, queue: &str) -> impl Future<Output = Result<QueueStats>> + Send;

    /// One page of the poison queue, oldest or newest first as `query` asks: the messages
    /// `query` filters, each body cut to its preview. A backend that cannot read a page
    /// lists the whole poison queue for each page (the default).
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`]; [`Error::Unsupported`] for newest first
    /// on a backend that reads its poison queue from the front only (RabbitMQ).
    fn poison_page(
        &self,
        queue: &str,
        query: &PoisonQuery,
    ) -> impl Future<Output = Result<PoisonPage>> + Send {
        async move {
            let all = self.poison_list(queue, usize::MAX).await?;
            Ok(poison::page_of(all, query))
        }
    }

    /// The reasons of the poison messages `filter` passes, with how many give each, most
    /// first.
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`].
    fn poison_reasons(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> impl Future<Output = Result<Vec<(String, u64)>>> + Send {
        async move {
            let all = self.poison_list(queue, usize::MAX).await?;
            Ok(poison::reasons_of(all, filter))
        }
    }

    /// One poison message whole, by its handle; `None` once it left the poison queue.
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`].
    fn poison_body(
        &self,
        queue: &str,
        handle: &str,
    ) -> impl Future<Output = Result<Option<PoisonMessage>>> + Send {
        async move {
            let all = self.poison_list(queue, usize::MAX).await?;
            Ok(all.into_iter().find(|m| m.handle == handle))
        }
    }

    /// Takes the poison messages named by `handles` off the poison queue, doing `action`
    /// with each; returns the handles taken (those gone already are left out).
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`]; [`Error::Unsupported`] for
    /// [`PoisonAction::ReplayTo`] on a backend that cannot (the default); the messages
    /// taken before the failure stay taken.
    fn poison_take(
        &self,
        queue: &str,
        handles: &[String],
        action: &PoisonAction,
    ) -> impl Future<Output = Result<Vec<String>>> + Send {
        async move {
            let mut taken = Vec::new();
            for handle in handles {
                let moved = match action {
                    PoisonAction::Replay => self.poison_replay(queue, Some(handle)).await?,
                    PoisonAction::Discard => self.poison_discard(queue, Some(handle)).await?,
                    PoisonAction::ReplayTo(_) => {
                        return Err(Error::Unsupported(
                            "this queue backend replays poison messages only to their own queue"
                                .into(),
                        ));
                    }
                };
                if moved > 0 {
                    taken.push(handle.clone());
                }
            }
            Ok(taken)
        }
    }

    /// Pauses (or resumes) the queue's consumers: while paused, the workers of the queue
    /// take no new deliveries; messages keep arriving and wait.
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`]; [`Error::Unsupported`] on a backend
    /// that cannot (the default).
    fn set_paused(&self, queue: &str, paused: bool) -> impl Future<Output = Result<()>> + Send {
        let _ = (queue, paused);
        async {
            Err(Error::Unsupported(
                "this queue backend cannot pause its consumers".into(),
            ))
        }
    }

    /// Whether the queue's consumers are paused ([`set_paused`](Self::set_paused)).
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`].
    fn paused(&self, queue: &str) -> impl Future<Output = Result<bool>> + Send {
        let _ = queue;
        async { Ok(false) }
    }

    /// Whether `queue` is declared (by a worker at its start, or by `tablekit-worker
    /// declare`): a queue to send or replay to. A poison queue ([`is_poison_queue`]) never
    /// is. The default asks [`stats`](Self::stats): [`Error::NotDeclared`] is `false`.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`] for a name the backend refuses, [`Error::Unavailable`],
    /// [`Error::Storage`].
    fn exists(&self, queue: &str) -> impl Future<Output = Result<bool>> + Send {
        async move {
            if is_poison_queue(queue) {
                return Ok(false);
            }
            match self.stats(queue).await {
                Ok(_) => Ok(true),
                Err(Error::NotDeclared { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        }
    }

    /// The declared queues (poison queues and the other names derived from a queue left
    /// out), by name, when the backend can list them; `None` when it cannot (the default).
    /// The SQLite queue lists its registry; Azure lists the account's queues (all of them,
    /// tablekit's or not, but for poison queues). RabbitMQ answers `None`: AMQP has no
    /// call that lists queues (only the management plugin's HTTP API does).
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`], [`Error::QueuePermissionDenied`].
    fn declared_queues(&self) -> impl Future<Output = Result<Option<Vec<String>>>> + Send {
        async { Ok(None) }
    }

    /// Up to [`PeekQuery::limit`] of the messages waiting in `queue` (leased and delayed
    /// ones included where the backend shows them), oldest or newest first, without taking
    /// them: nothing is leased or counted. An undeclared queue holds none.
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`]; [`Error::Unsupported`] on a backend that
    /// cannot read a message and leave it in place (the default), or for an order it cannot
    /// read.
    fn peek(
        &self,
        queue: &str,
        query: &PeekQuery,
    ) -> impl Future<Output = Result<Vec<WaitingMessage>>> + Send {
        let _ = (queue, query);
        async {
            Err(Error::Unsupported(
                "this queue backend cannot show waiting messages without taking them".into(),
            ))
        }
    }

    /// Whether [`act_on_waiting`](Self::act_on_waiting) can retry now or delete one
    /// message named by the handle [`peek`](Self::peek) gives (the SQLite queue); a purge
    /// is asked of any backend. No call to the backend.
    fn names_waiting_messages(&self) -> bool {
        false
    }

    /// Does `action` to the messages waiting in `queue`, and answers how many it removed
    /// or made deliverable (`None` when the backend does not say): 0 when the message
    /// named is no longer waiting (taken by a consumer, settled, or gone).
    ///
    /// By backend: the SQLite queue does all three, a purge only up to the message the
    /// operator saw; RabbitMQ purges the queue's ready messages and its retry queues'
    /// (those its consumers hold stay) and cannot address one message; Azure Queue
    /// Storage clears every message, those leased included (the service has no other
    /// purge), and cannot address a message it has not just delivered.
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`]; [`Error::Unsupported`] for an action the
    /// backend cannot do (the default, for all three); [`Error::InvalidQueueName`].
    fn act_on_waiting(
        &self,
        queue: &str,
        action: &WaitingAction,
    ) -> impl Future<Output = Result<Option<u64>>> + Send {
        let _ = queue;
        let what = action.name();
        async move {
            Err(Error::Unsupported(format!(
                "this queue backend cannot {what} waiting messages"
            )))
        }
    }

    /// The poison messages `filter` passes grouped by their reasons'
    /// [group](PoisonMessage::reason_group), with how many fall in each and one reason of
    /// each: every group, most first, then by group. The default reads the whole poison
    /// queue.
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`].
    fn poison_reason_groups(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> impl Future<Output = Result<Vec<ReasonGroup>>> + Send {
        async move {
            let all = self.poison_list(queue, usize::MAX).await?;
            Ok(poison::groups_of(all, filter))
        }
    }

    /// The operation kinds of the poison messages `filter` passes — its own kind left out,
    /// so that a list of kinds offers every other — with how many have each, most first
    /// (`None`: messages that are not an operation). The default reads the whole poison
    /// queue.
    ///
    /// # Errors
    /// [`Error::Unavailable`], [`Error::Storage`].
    fn poison_kinds(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> impl Future<Output = Result<Vec<(Option<String>, u64)>>> + Send {
        async move {
            let all = self.poison_list(queue, usize::MAX).await?;
            let others = PoisonFilter {
                kind: None,
                ..filter.clone()
            };
            Ok(poison::kinds_of(all, &others))
        }
    }

    /// Moves what the broker's own poison queue of `queue` holds into the store's poison
    /// table, where the queue keeps its poison messages there
    /// ([`WithPoisonTable`](poison_table::WithPoisonTable)); returns how many moved. The
    /// default keeps poison messages in the broker and moves nothing.
    ///
    /// # Errors
    /// The broker's and the store's errors.
    fn sweep_poison(&self, queue: &str) -> impl Future<Output = Result<usize>> + Send {
        let _ = queue;
        async { Ok(0) }
    }

    /// The last page of `query`'s order (its cursor ignored): the last `limit` messages
    /// `query` passes, in `query`'s order — the first page of the other order, reversed,
    /// one read whatever the poison queue holds where that order reads in pages. Its
    /// [`next`](PoisonPage::next) continues backwards: the page before it is the page of
    /// `query.reversed().after(next)`, reversed.
    ///
    /// # Errors
    /// As [`poison_page`](Self::poison_page) for [`PoisonQuery::reversed`].
    fn poison_last_page(
        &self,
        queue: &str,
        query: &PoisonQuery,
    ) -> impl Future<Output = Result<PoisonPage>> + Send {
        async move {
            let page = self.poison_page(queue, &query.clone().reversed()).await?;
            Ok(page.reversed())
        }
    }
}

/// Receives the deliveries of one queue.
pub trait Consumer: Send + 'static {
    /// The deliveries.
    type Delivery: Delivery;

    /// The next delivery, waiting for one; `None` once the consumer is closed.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the broker is gone and reconnecting failed.
    fn next(&mut self) -> impl Future<Output = Result<Option<Self::Delivery>>> + Send;

    /// Stops consuming; deliveries received but not handed out go back to the queue at
    /// once. Deliveries already handed out stay valid until settled.
    fn close(self) -> impl Future<Output = ()> + Send;
}

/// One delivery, to settle exactly once.
pub trait Delivery: Send + Sync + 'static {
    /// The message.
    fn received(&self) -> &Received;

    /// When, by this process's clock, the queue hands the message to another consumer
    /// unless this delivery settles it first, where the queue leases deliveries for a
    /// fixed time (the SQLite queue; a simulated one); `None` where nothing takes a
    /// delivery away from a live consumer (RabbitMQ holds it until its channel closes;
    /// Azure Queue Storage deliveries have their leases renewed while they are held). The
    /// worker refuses a delivery's writes past a fence before it (see
    /// [`fence`](crate::fence)).
    fn lease_ends(&self) -> Option<tokio::time::Instant> {
        None
    }

    /// What the backend records beside the body, as name and value (RabbitMQ: the
    /// message's properties and headers), for the poison table; none by default.
    fn headers(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// The exact bytes of its id and of the values of [`headers`](Self::headers) that
    /// are not UTF-8 (shown lossily there), for the poison table; none by default.
    fn raw(&self) -> RawText {
        RawText::default()
    }

    /// Removes the message: it was processed.
    ///
    /// # Errors
    /// [`Error::Unavailable`]: the lease was lost and the message will be delivered again
    /// (operations are idempotent, so that is safe).
    fn ack(self) -> impl Future<Output = Result<()>> + Send;

    /// Delivers the message again after `delay`, counting this delivery.
    ///
    /// A retry is a failed attempt, and its work must be applied again even when this
    /// delivery's lease ran out and another delivery settled the message meanwhile (that
    /// delivery may have run before this one's half-done writes): where a lease can run
    /// out under a live delivery (the SQLite queue, Azure Queue Storage), the message is
    /// then sent again with its id and body. On RabbitMQ a delivery holds its message
    /// until its channel closes, and the broker delivers it again after that.
    ///
    /// # Errors
    /// As [`ack`](Self::ack).
    fn retry(self, delay: Duration) -> impl Future<Output = Result<()>> + Send;

    /// Moves the message to the poison queue with a reason.
    ///
    /// # Errors
    /// As [`ack`](Self::ack).
    fn poison(self, reason: &str) -> impl Future<Output = Result<()>> + Send;
}
