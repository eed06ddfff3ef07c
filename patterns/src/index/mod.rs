//! Secondary indexes and index entities kept by the framework: the intra-partition index
//! (copies in the primary's entity group transaction), the inter-partition index (copies
//! in another partition or table, kept by the worker from the outbox), index entities (id
//! lists: in the partition, in a table, in blobs), the transactional outbox and its relay,
//! and the audit that finds and repairs drift.
//!
//! Composition: [`IndexedTable`] wraps a typed [`Table`](tablekit_core::typed::Table)
//! over any store; it writes the atomic parts itself and hands the rest to an
//! [`OutboxSink`] (a queue, or [`InlineSink`]); the worker applies the messages with an
//! [`IndexApplier`]; the [`Relay`] publishes what a crash left in the outbox; [`audit()`]
//! checks every primary against what it should have.

pub mod audit;
pub mod generic;
pub mod links;
pub mod members;
pub mod operation;
pub mod outbox;
pub mod record;
pub mod registry;
mod table;

pub use audit::{AuditOptions, AuditProgress, AuditReport, Drift, Finding, audit, backfill};
pub use operation::{Applied, IndexApplier, IndexOperation, IndexOperations};
pub use outbox::{InlineSink, OutboxSink, Relay, RelayReport};
pub use record::{EntityRef, IndexRecord, Layout, MemberStorage, Target};
pub use registry::SchemaRecord;
pub use table::{IndexedTable, WriteOutcome};
