//! tablekit-workers: durable queues, idempotent operations and the worker runtime that keep
//! copies eventually consistent across partitions, tables and blob storage — the eventually
//! consistent transaction pattern as a reusable runtime.
//!
//! ```no_run
//! use tablekit_core::{AnyStore, TableStore};
//! use tablekit_workers::archive::ArchiveOperation;
//! use tablekit_workers::queue::{Queue, sqlite::SqliteQueue};
//! use tablekit_workers::{Envelope, Worker, WorkerConfig, cli};
//!
//! # async fn demo() -> tablekit_workers::Result<()> {
//! let store = AnyStore::create("sqlite:app.db").await?;
//! let queue = SqliteQueue::open("queue.db").await?;
//! let config = WorkerConfig::new("archive");
//! queue.declare("archive", &config.queue_options()).await?;
//!
//! // A client asks for an employee to be archived...
//! let envelope = Envelope::new(&ArchiveOperation {
//!     source_table: "Current".into(),
//!     target_table: "Archive".into(),
//!     partition_key: "Sales".into(),
//!     row_key: "empid_000123".into(),
//! })?;
//! queue.send("archive", &envelope.id.to_string(), &envelope.to_bytes()?).await?;
//!
//! // ...and a worker does it, until SIGINT or SIGTERM.
//! let report = Worker::new(queue, cli::registry(store), config)
//!     .run(tablekit_workers::runtime::shutdown_signal())
//!     .await?;
//! # Ok(()) }
//! ```

// Examples show the current API: a doctest that calls a deprecated item fails to
// compile. `allow(unused)` is rustdoc's default, which any `test(attr(..))` replaces.
#![doc(test(attr(allow(unused), deny(deprecated))))]

pub mod activity;
pub mod archive;
pub mod changes;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "console")]
pub mod console;
mod display;
mod error;
pub mod feed;
pub mod fence;
pub mod index;
pub mod migrate;
pub mod operation;
pub mod queue;
pub mod runtime;
pub mod status;

pub use error::{Error, Result};
pub use operation::{Envelope, Operation, OperationError, Registry};
pub use runtime::{Worker, WorkerConfig, WorkerOptions, WorkerReport, handle_delivery};
