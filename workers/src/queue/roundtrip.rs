//! The queue's share of the round-trip model (`tablekit_core::roundtrip`):
//! [`RoundTripQueue`] wraps any [`Queue`], counts every call — sends as publishes,
//! deliveries taken, deliveries settled, the rest as administration — and makes each wait
//! the latency of the [`RoundTrips`] it shares with a `RoundTripStore`, so a worker's
//! store calls and queue calls count in one place.
//!
//! ```
//! # #[cfg(feature = "sqlite")]
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use tablekit_core::roundtrip::{Latency, RoundTrips};
//! use tablekit_workers::queue::roundtrip::RoundTripQueue;
//! use tablekit_workers::queue::sqlite::SqliteQueue;
//! use tablekit_workers::queue::{Queue, QueueOptions};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let trips = RoundTrips::new(Latency::None);
//! let queue = RoundTripQueue::new(SqliteQueue::open(dir.path().join("q.db")).await?, trips.clone());
//! queue.declare("work", &QueueOptions::default()).await?;
//! queue.send("work", "m1", b"{}").await?;
//! assert_eq!((trips.counts().publishes, trips.counts().queue_admin), (1, 1));
//! # Ok::<_, tablekit_workers::Error>(())
//! # }).unwrap();
//! ```

use std::time::Duration;

use tablekit_core::roundtrip::{CallKind, RoundTrips};

use super::{
    ConsumeOptions, Consumer, Delivery, PeekQuery, PoisonAction, PoisonFilter, PoisonMessage,
    PoisonPage, PoisonQuery, Queue, QueueOptions, QueueStats, RawText, ReasonGroup, Received,
    WaitingAction, WaitingMessage,
};
use crate::error::Result;

/// A [`Queue`] whose every call is counted and waits a latency (see the module docs).
#[derive(Clone, Debug)]
pub struct RoundTripQueue<Q> {
    inner: Q,
    trips: RoundTrips,
}

impl<Q: Queue> RoundTripQueue<Q> {
    /// Wraps `inner`, counting into `trips`.
    pub fn new(inner: Q, trips: RoundTrips) -> Self {
        RoundTripQueue { inner, trips }
    }

    /// The counters and the latency.
    pub fn trips(&self) -> &RoundTrips {
        &self.trips
    }

    /// The wrapped queue.
    pub fn inner(&self) -> &Q {
        &self.inner
    }
}

/// A consumer of a [`RoundTripQueue`]: taking a delivery is a round trip.
#[derive(Debug)]
pub struct RoundTripConsumer<C> {
    inner: C,
    trips: RoundTrips,
}

/// A delivery of a [`RoundTripQueue`]: settling it is a round trip.
#[derive(Debug)]
pub struct RoundTripDelivery<D> {
    inner: D,
    trips: RoundTrips,
}

impl<Q: Queue> Queue for RoundTripQueue<Q> {
    type Consumer = RoundTripConsumer<Q::Consumer>;
    type Delivery = RoundTripDelivery<Q::Delivery>;

    async fn declare(&self, queue: &str, options: &QueueOptions) -> Result<()> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.declare(queue, options))
            .await
    }

    async fn send(&self, queue: &str, id: &str, body: &[u8]) -> Result<()> {
        self.trips
            .call(CallKind::Publish, self.inner.send(queue, id, body))
            .await
    }

    async fn consume(&self, queue: &str, options: ConsumeOptions) -> Result<Self::Consumer> {
        let inner = self
            .trips
            .call(CallKind::QueueAdmin, self.inner.consume(queue, options))
            .await?;
        Ok(RoundTripConsumer {
            inner,
            trips: self.trips.clone(),
        })
    }

    async fn poison_list(&self, queue: &str, limit: usize) -> Result<Vec<PoisonMessage>> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.poison_list(queue, limit))
            .await
    }

    async fn poison_replay(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.poison_replay(queue, id))
            .await
    }

    async fn poison_discard(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.poison_discard(queue, id))
            .await
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.stats(queue))
            .await
    }

    async fn poison_page(&self, queue: &str, query: &PoisonQuery) -> Result<PoisonPage> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.poison_page(queue, query))
            .await
    }

    async fn poison_reasons(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<(String, u64)>> {
        self.trips
            .call(
                CallKind::QueueAdmin,
                self.inner.poison_reasons(queue, filter),
            )
            .await
    }

    async fn poison_body(&self, queue: &str, handle: &str) -> Result<Option<PoisonMessage>> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.poison_body(queue, handle))
            .await
    }

    async fn poison_take(
        &self,
        queue: &str,
        handles: &[String],
        action: &PoisonAction,
    ) -> Result<Vec<String>> {
        self.trips
            .call(
                CallKind::QueueAdmin,
                self.inner.poison_take(queue, handles, action),
            )
            .await
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<()> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.set_paused(queue, paused))
            .await
    }

    async fn paused(&self, queue: &str) -> Result<bool> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.paused(queue))
            .await
    }

    async fn exists(&self, queue: &str) -> Result<bool> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.exists(queue))
            .await
    }

    async fn declared_queues(&self) -> Result<Option<Vec<String>>> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.declared_queues())
            .await
    }

    async fn peek(&self, queue: &str, query: &PeekQuery) -> Result<Vec<WaitingMessage>> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.peek(queue, query))
            .await
    }

    fn names_waiting_messages(&self) -> bool {
        self.inner.names_waiting_messages()
    }

    async fn act_on_waiting(&self, queue: &str, action: &WaitingAction) -> Result<Option<u64>> {
        self.trips
            .call(
                CallKind::QueueAdmin,
                self.inner.act_on_waiting(queue, action),
            )
            .await
    }

    async fn poison_kinds(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<(Option<String>, u64)>> {
        self.trips
            .call(CallKind::QueueAdmin, self.inner.poison_kinds(queue, filter))
            .await
    }

    async fn poison_reason_groups(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<ReasonGroup>> {
        self.trips
            .call(
                CallKind::QueueAdmin,
                self.inner.poison_reason_groups(queue, filter),
            )
            .await
    }

    /// Not a call of its own: a broker without a poison table sweeps nothing (no round
    /// trip), and a [`WithPoisonTable`](super::poison_table::WithPoisonTable) over this
    /// queue counts the broker calls its sweep makes.
    async fn sweep_poison(&self, queue: &str) -> Result<usize> {
        self.inner.sweep_poison(queue).await
    }

    async fn poison_last_page(&self, queue: &str, query: &PoisonQuery) -> Result<PoisonPage> {
        self.trips
            .call(
                CallKind::QueueAdmin,
                self.inner.poison_last_page(queue, query),
            )
            .await
    }
}

impl<C: Consumer> Consumer for RoundTripConsumer<C> {
    type Delivery = RoundTripDelivery<C::Delivery>;

    async fn next(&mut self) -> Result<Option<Self::Delivery>> {
        // The wait for a message is the queue's, not a round trip; the latency is paid
        // once one arrives (its transfer).
        let delivery = self.inner.next().await?;
        match delivery {
            Some(inner) => {
                self.trips.call(CallKind::Receive, async {}).await;
                Ok(Some(RoundTripDelivery {
                    inner,
                    trips: self.trips.clone(),
                }))
            }
            None => Ok(None),
        }
    }

    async fn close(self) {
        self.inner.close().await;
    }
}

impl<D: Delivery> Delivery for RoundTripDelivery<D> {
    fn received(&self) -> &Received {
        self.inner.received()
    }

    fn lease_ends(&self) -> Option<tokio::time::Instant> {
        self.inner.lease_ends()
    }

    fn headers(&self) -> Vec<(String, String)> {
        self.inner.headers()
    }

    fn raw(&self) -> RawText {
        self.inner.raw()
    }

    async fn ack(self) -> Result<()> {
        self.trips.call(CallKind::Settle, self.inner.ack()).await
    }

    async fn retry(self, delay: Duration) -> Result<()> {
        self.trips
            .call(CallKind::Settle, self.inner.retry(delay))
            .await
    }

    async fn poison(self, reason: &str) -> Result<()> {
        self.trips
            .call(CallKind::Settle, self.inner.poison(reason))
            .await
    }
}
