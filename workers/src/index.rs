//! The index worker: the follow-up work the pattern modules record through the
//! consistency engine (index work, kind `index`, applied by [`IndexApplier`](tablekit_patterns::index::IndexApplier); blob
//! deletions, kind `delete_blobs`) and [`QueueSink`], the [`OutboxSink`] that publishes
//! any operation to a queue — from the writer right after its commit, and from the
//! [`Relay`](tablekit_patterns::consistency::Relay) for what a crash left behind.
//!
//! ```no_run
//! use std::sync::Arc;
//! use tablekit_core::AnyStore;
//! use tablekit_patterns::index::IndexedTable;
//! use tablekit_workers::index::QueueSink;
//! use tablekit_workers::queue::sqlite::SqliteQueue;
//! # #[derive(tablekit_derive::Entity, Clone, Debug, PartialEq)]
//! # #[entity(table = "Employees", partition_key = "{department}", row_key = "{id:06}", crate = "tablekit_core")]
//! # #[index(name = "by_email", table = "EmployeesByEmail", partition_key = "{department}", row_key = "{email}")]
//! # struct Employee { department: String, id: u32, email: String }
//!
//! # async fn demo() -> tablekit_workers::Result<()> {
//! let store = AnyStore::create("sqlite:app.db").await?;
//! let sink = QueueSink::open(SqliteQueue::open("queue.db").await?, "index").await?;
//! let employees = IndexedTable::<Employee, _>::options()
//!     .sink(Arc::new(sink))
//!     .open(store)
//!     .await?;
//! // `tablekit-worker run --queue index --broker sqlite:queue.db --store sqlite:app.db`
//! // applies the copies in `EmployeesByEmail`.
//! # Ok(()) }
//! ```

use tablekit_core::TableStore;
use tablekit_core::blob::BlobStore;
use tablekit_core::coalesce::CoalescingStore;
use tablekit_patterns::changes::ChangeEvent;
use tablekit_patterns::consistency::{BoxFuture, Envelope, OutboxSink, Unapplied};

use crate::error::Result;
use crate::operation::Registry;
use crate::queue::Queue;
use crate::runtime::WorkerConfig;

/// The queue index work goes to unless configured otherwise: the queue of every operation
/// that names no other ([`DEFAULT_QUEUE`](tablekit_patterns::consistency::operation::DEFAULT_QUEUE)).
pub const DEFAULT_INDEX_QUEUE: &str = tablekit_patterns::consistency::operation::DEFAULT_QUEUE;

/// Publishes follow-up work to a queue, and the change events of types declared with
/// `#[entity(changes = "queue")]` to the queue they name (declared on first use).
#[derive(Debug)]
pub struct QueueSink<Q> {
    queue: Q,
    /// The queue of the work that is not a change event; `None` for a sink of change
    /// events only.
    name: Option<String>,
    /// The change queues declared so far.
    declared: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl<Q: Queue> QueueSink<Q> {
    /// A sink publishing to the queue `name`, declared with the worker's defaults.
    ///
    /// # Errors
    /// The queue's errors.
    pub async fn open(queue: Q, name: &str) -> Result<Self> {
        queue
            .declare(name, &WorkerConfig::new(name).queue_options())
            .await?;
        Ok(QueueSink {
            queue,
            name: Some(name.to_owned()),
            declared: std::sync::Mutex::default(),
        })
    }

    /// A sink of change events only, each to the queue it names (declared on first use);
    /// it declares nothing until then, and refuses other work.
    pub fn changes(queue: Q) -> Self {
        QueueSink {
            queue,
            name: None,
            declared: std::sync::Mutex::default(),
        }
    }

    /// The queue `envelope` goes to, declared.
    async fn destination<'a>(&'a self, envelope: &'a Envelope) -> Result<&'a str> {
        let Some(queue) = ChangeEvent::queue_of(envelope) else {
            return self.name.as_deref().ok_or_else(|| {
                crate::Error::Unsupported(format!(
                    "a sink of change events got an operation of kind `{}`",
                    envelope.kind
                ))
            });
        };
        let known = self.declared.lock().is_ok_and(|d| d.contains(queue));
        if self.name.as_deref() != Some(queue) && !known {
            crate::queue::check_queue_name(queue)?;
            self.queue
                .declare(queue, &WorkerConfig::new(queue).queue_options())
                .await?;
            if let Ok(mut declared) = self.declared.lock() {
                declared.insert(queue.to_owned());
            }
        }
        Ok(queue)
    }
}

impl<Q: Queue + Send + Sync> OutboxSink for QueueSink<Q> {
    fn publish<'a>(
        &'a self,
        envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        Box::pin(async move {
            let publish = |e: crate::Error| crate::Error::Publish(Box::new(e));
            let body = envelope.to_bytes().map_err(publish)?;
            let queue = self.destination(envelope).await.map_err(publish)?;
            self.queue
                .send(queue, &envelope.id.to_string(), &body)
                .await
                .map_err(publish)
        })
    }

    /// The messages of its queue no worker has settled yet (waiting, leased or delayed
    /// for a retry): one stats call.
    fn unapplied(&self) -> BoxFuture<'_, tablekit_patterns::Result<Unapplied>> {
        Box::pin(async move {
            let Some(name) = &self.name else {
                return Ok(Unapplied::Unknown);
            };
            let stats = self.queue.stats(name).await?;
            Ok(Unapplied::Queued {
                queue: name.clone(),
                messages: stats.waiting + stats.leased,
            })
        })
    }
}

/// Adds the handlers of the follow-up work the pattern modules record to a registry:
/// index work and, with a blob store, the deletion of blobs writes stopped referencing.
/// Their single writes go through a [`CoalescingStore`]: the deliveries in flight that
/// write one partition (copies sharing an index partition) share entity group
/// transactions. Before that, a [`FencedStore`](crate::fence::FencedStore) refuses the
/// writes of a delivery whose lease is about to run out.
pub fn register<S: TableStore + Clone + 'static>(
    registry: Registry,
    store: S,
    blobs: Option<BlobStore>,
) -> Registry {
    registry.merge(tablekit_patterns::index::handlers(
        crate::fence::FencedStore::new(CoalescingStore::new(store)),
        blobs,
    ))
}
