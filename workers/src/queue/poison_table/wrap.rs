//! [`WithPoisonTable`]: any queue, its poison messages kept in the store's poison table.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tablekit_core::TableStore;

use super::{PoisonRecord, PoisonTable, Retention};
use crate::error::Result;
use crate::queue::{
    ConsumeOptions, Consumer, Delivery, PeekQuery, PoisonAction, PoisonFilter, PoisonMessage,
    PoisonPage, PoisonQuery, Queue, QueueOptions, QueueStats, RawText, ReasonGroup, Received,
    WaitingAction, WaitingMessage,
};

/// The most messages one sweep moves from the broker's poison queue into the table (the
/// next sweep moves the rest).
const SWEEP_MOST: usize = 1_000;

/// A queue whose poison messages are kept in a [`PoisonTable`]: its deliveries' poisoning
/// records the message in the table and then acknowledges it on the broker; its poison
/// listing and actions read and act on the table; [`sweep`](Self::sweep) moves what the
/// broker's own poison queue holds into the table.
///
/// ```
/// # #[cfg(feature = "sqlite")]
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use tablekit_core::{AnyStore, MemoryStore};
/// use tablekit_workers::queue::poison_table::WithPoisonTable;
/// use tablekit_workers::queue::sqlite::SqliteQueue;
/// use tablekit_workers::queue::{Consumer, ConsumeOptions, Delivery, PoisonQuery, Queue, QueueOptions};
///
/// let dir = tempfile::tempdir().unwrap();
/// let broker = SqliteQueue::open(dir.path().join("q.db")).await?;
/// let queue = WithPoisonTable::new(broker, AnyStore::Memory(MemoryStore::new()));
/// queue.declare("work", &QueueOptions::default()).await?;
/// queue.send("work", "m1", b"{}").await?;
/// let mut consumer = queue.consume("work", ConsumeOptions::default()).await?;
/// consumer.next().await?.unwrap().poison("no handler").await?;
/// let page = queue.poison_page("work", &PoisonQuery::new(10, 100)).await?;
/// assert_eq!((page.messages[0].id.as_str(), page.messages[0].reason.as_str()), ("m1", "no handler"));
/// assert_eq!(queue.stats("work").await?.poisoned, 1);
/// # Ok::<_, tablekit_workers::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct WithPoisonTable<Q, S = tablekit_core::AnyStore> {
    inner: Q,
    /// `None`: the broker keeps the poison messages ([`broker_only`](Self::broker_only)).
    table: Option<PoisonTable<S>>,
    /// The retention cap of each queue named, and of the rest.
    retention: Arc<(HashMap<String, Retention>, Retention)>,
}

impl<Q: Queue> WithPoisonTable<Q, tablekit_core::AnyStore> {
    /// `inner` with its poison messages kept in `store`'s poison table, or by the broker
    /// when `store` lives in this process's memory (`memory:`): a poison table there
    /// could be read by no other process, and would go with this one. What the
    /// `tablekit-worker` commands and the console use.
    pub fn for_store(inner: Q, store: &tablekit_core::AnyStore) -> Self {
        if matches!(store, tablekit_core::AnyStore::Memory(_)) {
            Self::broker_only(inner)
        } else {
            Self::new(inner, store.clone())
        }
    }
}

impl<Q: Queue, S: TableStore> WithPoisonTable<Q, S> {
    /// `inner`, its poison messages kept in `store`'s poison table.
    pub fn new(inner: Q, store: S) -> Self {
        WithPoisonTable {
            inner,
            table: Some(PoisonTable::new(store)),
            retention: Arc::default(),
        }
    }

    /// `inner` as it is, its poison messages kept by the broker: what a worker whose
    /// store lives in its own memory (`memory:`) uses, since nobody else could read its
    /// poison table and it would be lost with the process.
    pub fn broker_only(inner: Q) -> Self {
        WithPoisonTable {
            inner,
            table: None,
            retention: Arc::default(),
        }
    }

    /// Keeps `queue`'s poison messages within `retention` (the default: [`Retention`]'s).
    #[must_use]
    pub fn retain(mut self, queue: impl Into<String>, retention: Retention) -> Self {
        Arc::make_mut(&mut self.retention)
            .0
            .insert(queue.into(), retention);
        self
    }

    /// Keeps the poison messages of the queues not named by [`retain`](Self::retain)
    /// within `retention`.
    #[must_use]
    pub fn retain_others(mut self, retention: Retention) -> Self {
        Arc::make_mut(&mut self.retention).1 = retention;
        self
    }

    /// The retention cap of `queue`.
    pub fn retention(&self, queue: &str) -> Retention {
        self.retention
            .0
            .get(queue)
            .copied()
            .unwrap_or(self.retention.1)
    }

    /// The broker.
    pub fn inner(&self) -> &Q {
        &self.inner
    }

    /// The reason groups and the kinds of `queue`'s poison messages `filter` passes, as
    /// [`Queue::poison_reason_groups`] and [`Queue::poison_kinds`] answer them: from the
    /// table in one read ([`PoisonTable::facets`]), else from the broker.
    ///
    /// # Errors
    /// The store's or the broker's.
    pub async fn poison_facets(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<(Vec<ReasonGroup>, Vec<(Option<String>, u64)>)> {
        match &self.table {
            Some(table) => table.facets(queue, filter).await,
            None => Ok((
                self.inner.poison_reason_groups(queue, filter).await?,
                self.inner.poison_kinds(queue, filter).await?,
            )),
        }
    }

    /// The poison table; `None` for a [`broker_only`](Self::broker_only) queue, which
    /// has none.
    pub fn table(&self) -> Option<&PoisonTable<S>> {
        self.table.as_ref()
    }

    /// Moves up to 1,000 messages from the broker's own poison queue of `queue` (what the
    /// broker dead-lettered by itself, what a store failure left there) into the table:
    /// each recorded first, then taken off the broker. Returns how many moved.
    ///
    /// # Errors
    /// The broker's and the store's errors; what moved before stays moved, and a message
    /// recorded and not yet taken off is recorded once only by the next sweep.
    pub async fn sweep(&self, queue: &str) -> Result<usize> {
        let Some(table) = &self.table else {
            return Ok(0);
        };
        let mut swept = 0;
        while swept < SWEEP_MOST {
            let page = self
                .inner
                .poison_page(queue, &PoisonQuery::new(100, usize::MAX))
                .await?;
            if page.messages.is_empty() {
                break;
            }
            let mut handles = Vec::with_capacity(page.messages.len());
            for message in page.messages {
                table.record(queue, &swept_record(&message)).await?;
                handles.push(message.handle);
            }
            let taken = self
                .inner
                .poison_take(queue, &handles, &PoisonAction::Discard)
                .await?;
            if taken.is_empty() {
                break;
            }
            swept += taken.len();
        }
        if swept > 0 {
            tracing::info!(queue = %queue, swept, "moved the broker's poison messages into the poison table");
        }
        Ok(swept)
    }

    /// Every message of the table's listing `filter` passes, oldest first, up to `limit`.
    async fn listed(
        &self,
        table: &PoisonTable<S>,
        queue: &str,
        filter: PoisonFilter,
        limit: usize,
    ) -> Result<Vec<PoisonMessage>> {
        let mut all = Vec::new();
        let mut query = PoisonQuery::new(limit.clamp(1, 1_000), usize::MAX).filter(filter);
        loop {
            let page = table.page(queue, &query).await?;
            all.extend(page.messages);
            match page.next {
                Some(next) if all.len() < limit => query = query.after(Some(next)),
                _ => break,
            }
        }
        all.truncate(limit);
        Ok(all)
    }

    /// The handles of the messages with id `id` (all when `None`).
    async fn handles_of(
        &self,
        table: &PoisonTable<S>,
        queue: &str,
        id: Option<&str>,
    ) -> Result<Vec<String>> {
        let filter = id.map_or_else(PoisonFilter::new, |id| PoisonFilter::new().id(id));
        Ok(self
            .listed(table, queue, filter, usize::MAX)
            .await?
            .into_iter()
            .filter(|m| id.is_none_or(|id| m.id == id))
            .map(|m| m.handle)
            .collect())
    }
}

/// A message swept from a broker's poison queue, as the table records it.
fn swept_record(message: &PoisonMessage) -> PoisonRecord {
    PoisonRecord {
        id: message.id.clone(),
        body: message.body.clone(),
        reason: message.reason.clone(),
        reason_undecodable: message.reason_undecodable,
        delivery_count: message.delivery_count,
        poisoned_at: message
            .poisoned_at
            .unwrap_or_else(tablekit_core::clock::now),
        sent_at: message.sent_at,
        headers: message.headers.clone(),
        origin: "broker",
        raw: message.raw.clone(),
    }
}

/// A consumer of a [`WithPoisonTable`].
#[derive(Debug)]
pub struct PoisonTableConsumer<C, S = tablekit_core::AnyStore> {
    inner: C,
    table: Option<PoisonTable<S>>,
    queue: String,
}

/// A delivery of a [`WithPoisonTable`]: poisoning it records it in the table, then
/// acknowledges it on the broker.
#[derive(Debug)]
pub struct PoisonTableDelivery<D, S = tablekit_core::AnyStore> {
    inner: D,
    table: Option<PoisonTable<S>>,
    queue: String,
}

impl<Q, S> Queue for WithPoisonTable<Q, S>
where
    Q: Queue,
    S: TableStore + Clone + Send + Sync + std::fmt::Debug + 'static,
{
    type Consumer = PoisonTableConsumer<Q::Consumer, S>;
    type Delivery = PoisonTableDelivery<Q::Delivery, S>;

    async fn declare(&self, queue: &str, options: &QueueOptions) -> Result<()> {
        self.inner.declare(queue, options).await
    }

    async fn send(&self, queue: &str, id: &str, body: &[u8]) -> Result<()> {
        self.inner.send(queue, id, body).await
    }

    async fn consume(&self, queue: &str, options: ConsumeOptions) -> Result<Self::Consumer> {
        Ok(PoisonTableConsumer {
            inner: self.inner.consume(queue, options).await?,
            table: self.table.clone(),
            queue: queue.to_owned(),
        })
    }

    async fn poison_list(&self, queue: &str, limit: usize) -> Result<Vec<PoisonMessage>> {
        match &self.table {
            Some(table) => self.listed(table, queue, PoisonFilter::new(), limit).await,
            None => self.inner.poison_list(queue, limit).await,
        }
    }

    async fn poison_replay(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        let Some(table) = &self.table else {
            return self.inner.poison_replay(queue, id).await;
        };
        let handles = self.handles_of(table, queue, id).await?;
        Ok(table
            .take(&self.inner, queue, &handles, &PoisonAction::Replay)
            .await?
            .len())
    }

    async fn poison_discard(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        let Some(table) = &self.table else {
            return self.inner.poison_discard(queue, id).await;
        };
        let handles = self.handles_of(table, queue, id).await?;
        Ok(table
            .take(&self.inner, queue, &handles, &PoisonAction::Discard)
            .await?
            .len())
    }

    /// The broker's counts, its poison count being what the table keeps and what the
    /// broker's poison queue holds still (until the next sweep).
    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        let mut stats = self.inner.stats(queue).await?;
        if let Some(table) = &self.table {
            stats.poisoned += table.count(queue).await?;
        }
        Ok(stats)
    }

    async fn poison_page(&self, queue: &str, query: &PoisonQuery) -> Result<PoisonPage> {
        match &self.table {
            Some(table) => table.page(queue, query).await,
            None => self.inner.poison_page(queue, query).await,
        }
    }

    async fn poison_reasons(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<(String, u64)>> {
        match &self.table {
            Some(table) => table.reasons(queue, filter).await,
            None => self.inner.poison_reasons(queue, filter).await,
        }
    }

    async fn poison_body(&self, queue: &str, handle: &str) -> Result<Option<PoisonMessage>> {
        match &self.table {
            Some(table) => table.message(queue, handle).await,
            None => self.inner.poison_body(queue, handle).await,
        }
    }

    async fn poison_take(
        &self,
        queue: &str,
        handles: &[String],
        action: &PoisonAction,
    ) -> Result<Vec<String>> {
        match &self.table {
            Some(table) => table.take(&self.inner, queue, handles, action).await,
            None => self.inner.poison_take(queue, handles, action).await,
        }
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<()> {
        self.inner.set_paused(queue, paused).await
    }

    async fn paused(&self, queue: &str) -> Result<bool> {
        self.inner.paused(queue).await
    }

    async fn exists(&self, queue: &str) -> Result<bool> {
        self.inner.exists(queue).await
    }

    async fn declared_queues(&self) -> Result<Option<Vec<String>>> {
        self.inner.declared_queues().await
    }

    async fn peek(&self, queue: &str, query: &PeekQuery) -> Result<Vec<WaitingMessage>> {
        self.inner.peek(queue, query).await
    }

    fn names_waiting_messages(&self) -> bool {
        self.inner.names_waiting_messages()
    }

    async fn act_on_waiting(&self, queue: &str, action: &WaitingAction) -> Result<Option<u64>> {
        self.inner.act_on_waiting(queue, action).await
    }

    async fn poison_reason_groups(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<ReasonGroup>> {
        match &self.table {
            Some(table) => table.reason_groups(queue, filter).await,
            None => self.inner.poison_reason_groups(queue, filter).await,
        }
    }

    async fn poison_kinds(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<(Option<String>, u64)>> {
        match &self.table {
            Some(table) => table.kinds(queue, filter).await,
            None => self.inner.poison_kinds(queue, filter).await,
        }
    }

    /// Sweeps the broker's poison queue into the table, then trims the table to the
    /// queue's retention cap.
    async fn sweep_poison(&self, queue: &str) -> Result<usize> {
        let swept = self.sweep(queue).await?;
        if let Some(table) = &self.table {
            table.trim(queue, self.retention(queue)).await?;
        }
        Ok(swept)
    }
}

impl<C, S> Consumer for PoisonTableConsumer<C, S>
where
    C: Consumer,
    S: TableStore + Clone + Send + Sync + std::fmt::Debug + 'static,
{
    type Delivery = PoisonTableDelivery<C::Delivery, S>;

    async fn next(&mut self) -> Result<Option<Self::Delivery>> {
        Ok(self.inner.next().await?.map(|inner| PoisonTableDelivery {
            inner,
            table: self.table.clone(),
            queue: self.queue.clone(),
        }))
    }

    async fn close(self) {
        self.inner.close().await;
    }
}

impl<D, S> PoisonTableDelivery<D, S> {
    /// The broker's delivery.
    pub fn inner(&self) -> &D {
        &self.inner
    }
}

impl<D, S> Delivery for PoisonTableDelivery<D, S>
where
    D: Delivery,
    S: TableStore + Clone + Send + Sync + std::fmt::Debug + 'static,
{
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
        self.inner.ack().await
    }

    async fn retry(self, delay: Duration) -> Result<()> {
        self.inner.retry(delay).await
    }

    /// Records the message in the poison table, then acknowledges it; when the store
    /// refuses, moves it to the broker's poison queue instead (the next sweep brings it
    /// into the table).
    async fn poison(self, reason: &str) -> Result<()> {
        let Some(table) = &self.table else {
            return self.inner.poison(reason).await;
        };
        let received = self.inner.received();
        let record = PoisonRecord {
            id: received.id.clone(),
            body: received.body.clone(),
            reason: reason.to_owned(),
            reason_undecodable: false,
            delivery_count: received.delivery_count,
            poisoned_at: tablekit_core::clock::now(),
            sent_at: received.sent_at,
            headers: self.inner.headers(),
            origin: "worker",
            raw: self.inner.raw(),
        };
        match table.record(&self.queue, &record).await {
            Ok(_) => self.inner.ack().await,
            Err(e) => {
                tracing::warn!(queue = %self.queue, error = %e, "recording a poison message in the store failed; it goes to the broker's poison queue until a sweep");
                self.inner.poison(reason).await
            }
        }
    }
}
