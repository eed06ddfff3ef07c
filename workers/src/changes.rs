//! Typed change subscriptions: [`Changes`] consumes the change events a type declared
//! with `#[entity(changes = "queue")]` publishes (see [`tablekit_patterns::changes`]),
//! with the worker runtime's retries, poison queue and graceful shutdown.
//!
//! ```no_run
//! use tablekit_workers::changes::{Change, Changes};
//! use tablekit_workers::queue::sqlite::SqliteQueue;
//! # #[derive(tablekit_derive::Entity, Clone, Debug, PartialEq)]
//! # #[entity(table = "Employees", partition_key = "{department}", row_key = "{id:06}",
//! #          changes = "employee-changes", crate = "tablekit_core")]
//! # struct Employee { department: String, id: u32, email: String }
//!
//! # async fn demo() -> tablekit_workers::Result<()> {
//! let queue = SqliteQueue::open("queue.db").await?;
//! let worker = Changes::<Employee>::consume(queue, |change: Change<Employee>| async move {
//!     println!("{:?} {} v{}", change.change, change.value.email, change.version);
//!     Ok(())
//! })?;
//! worker.run(tablekit_workers::runtime::shutdown_signal()).await?;
//! # Ok(()) }
//! ```
//!
//! Delivery is at least once and per-primary order is not guaranteed: a handler keeps
//! the newest [`Change::version`] it has seen per entity and drops older or repeated
//! events.

use std::future::Future;
use std::marker::PhantomData;

use tablekit_core::typed::EntityType;
use tablekit_patterns::changes::{ChangeEvent, ChangeKind};

use crate::error::{Error, Result};
use crate::operation::{OperationError, Registry};
use crate::queue::Queue;
use crate::runtime::{Worker, WorkerConfig};

/// One committed change of an entity of type `E`.
#[derive(Clone, Debug, PartialEq)]
pub struct Change<E> {
    /// What the write did.
    pub change: ChangeKind,
    /// The entity's PartitionKey.
    pub partition_key: String,
    /// The entity's RowKey.
    pub row_key: String,
    /// The version of the write: it grows with every write of the entity.
    pub version: i64,
    /// The entity as written; for a delete, as it was last stored.
    pub value: E,
}

impl<E: EntityType> Change<E> {
    /// Reads a change event as a change of `E`.
    ///
    /// # Errors
    /// [`OperationError::Permanent`] for an event of another kind, or an entity that
    /// does not read as `E`: it goes to the poison queue with that reason.
    pub fn from_event(event: ChangeEvent) -> std::result::Result<Self, OperationError> {
        if event.kind != E::KIND {
            return Err(OperationError::Permanent(format!(
                "a change of kind `{}` reached the consumer of `{}`",
                event.kind,
                E::KIND
            )));
        }
        let value = E::from_entity(event.entity)
            .map_err(|e| {
                OperationError::Permanent(format!(
                    "the change of {}/{} does not read as `{}`: {e}",
                    event.partition_key,
                    event.row_key,
                    E::schema().type_name
                ))
            })?
            .value;
        Ok(Change {
            change: event.change,
            partition_key: event.partition_key,
            row_key: event.row_key,
            version: event.version,
            value,
        })
    }
}

/// The consumer of `E`'s change events.
#[derive(Debug)]
pub struct Changes<E>(PhantomData<fn() -> E>);

impl<E: EntityType> Changes<E> {
    /// A registry running `handler` on each change of `E` (to merge into a worker that
    /// handles other work on the same queue), on `E`'s change queue.
    pub fn registry<F, Fut>(handler: F) -> Registry
    where
        F: Fn(Change<E>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), OperationError>> + Send + 'static,
    {
        let handler = std::sync::Arc::new(handler);
        let queue = E::schema()
            .changes()
            .unwrap_or(tablekit_patterns::consistency::operation::DEFAULT_QUEUE);
        Registry::new().register_on(queue, move |event: ChangeEvent| {
            let handler = handler.clone();
            async move { handler(Change::<E>::from_event(event)?).await }
        })
    }

    /// A worker of the queue `E` declares (`#[entity(changes = "…")]`) with the default
    /// settings, running `handler` on each change; run it with [`Worker::run`].
    ///
    /// # Errors
    /// [`Error::Config`] when `E` declares no change queue.
    pub fn consume<Q, F, Fut>(queue: Q, handler: F) -> Result<Worker<Q>>
    where
        Q: Queue + Clone,
        F: Fn(Change<E>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), OperationError>> + Send + 'static,
    {
        let name = E::schema().changes().ok_or_else(|| {
            Error::Config(format!(
                "`{}` declares no change queue: add #[entity(changes = \"…\")]",
                E::schema().type_name
            ))
        })?;
        Ok(Self::consume_with(queue, WorkerConfig::new(name), handler))
    }

    /// As [`consume`](Self::consume), with explicit settings (queue name, concurrency,
    /// retries).
    pub fn consume_with<Q, F, Fut>(queue: Q, config: WorkerConfig, handler: F) -> Worker<Q>
    where
        Q: Queue + Clone,
        F: Fn(Change<E>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), OperationError>> + Send + 'static,
    {
        Worker::new(queue, Self::registry(handler), config)
    }
}
