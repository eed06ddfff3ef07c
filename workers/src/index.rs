//! The index worker: the operations an indexed table records in its outbox
//! ([`IndexOperations`], kind `index`) applied by [`IndexApplier`], and [`QueueSink`],
//! the [`OutboxSink`] that publishes them to a queue — from the writer right after its
//! commit, and from the [`Relay`](tablekit_patterns::index::Relay) for what a crash left
//! behind.
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
//! let store = AnyStore::connect("sqlite:app.db").await?;
//! let sink = QueueSink::open(SqliteQueue::open("queue.db").await?, "index").await?;
//! let employees = IndexedTable::<Employee, _>::new(store).with_sink(Arc::new(sink));
//! employees.open().await?;
//! // `tablekit-worker run --queue index --broker sqlite:queue.db --store sqlite:app.db`
//! // applies the copies in `EmployeesByEmail`.
//! # Ok(()) }
//! ```

use tablekit_core::TableStore;
use tablekit_core::blob::BlobStore;
use tablekit_patterns::index::outbox::BoxFuture;
use tablekit_patterns::index::{IndexApplier, IndexOperations, OutboxSink};
use uuid::Uuid;

use crate::error::Result;
use crate::operation::{Envelope, Operation, OperationError, Registry};
use crate::queue::Queue;
use crate::runtime::WorkerConfig;

/// The queue index work goes to unless configured otherwise.
pub const DEFAULT_INDEX_QUEUE: &str = "index";

impl Operation for IndexOperations {
    const KIND: &'static str = "index";
    const VERSION: u32 = 1;
}

/// The envelope of one write's index work. Its id comes from the outbox entry, so a
/// message the writer and the relay both publish carries one id.
///
/// # Errors
/// When the payload cannot be encoded.
pub fn envelope(operations: &IndexOperations) -> serde_json::Result<Envelope> {
    let mut envelope = Envelope::new(operations)?;
    if let Ok(id) = Uuid::parse_str(&operations.id) {
        envelope.id = id;
    }
    Ok(envelope)
}

/// Publishes index work to a queue.
#[derive(Debug)]
pub struct QueueSink<Q> {
    queue: Q,
    name: String,
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
            name: name.to_owned(),
        })
    }
}

impl<Q: Queue + Send + Sync> OutboxSink for QueueSink<Q> {
    fn publish<'a>(
        &'a self,
        operations: &'a IndexOperations,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        Box::pin(async move {
            let envelope = envelope(operations)
                .map_err(|e| tablekit_patterns::Error::Publish(e.to_string()))?;
            let body = envelope
                .to_bytes()
                .map_err(|e| tablekit_patterns::Error::Publish(e.to_string()))?;
            self.queue
                .send(&self.name, &envelope.id.to_string(), &body)
                .await
                .map_err(|e| tablekit_patterns::Error::Publish(e.to_string()))
        })
    }
}

/// Adds the index operations' handler to a registry.
pub fn register<S: TableStore + Clone + 'static>(
    registry: Registry,
    store: S,
    blobs: Option<BlobStore>,
) -> Registry {
    let mut applier = IndexApplier::new(store);
    if let Some(blobs) = blobs {
        applier = applier.with_blobs(blobs);
    }
    registry.register(move |operations: IndexOperations| {
        let applier = applier.clone();
        async move {
            applier
                .apply_all(&operations)
                .await
                .map_err(OperationError::from)
        }
    })
}
