//! Secondary indexes and index entities kept by the framework: the intra-partition index
//! (copies in the primary's entity group transaction), the inter-partition index (copies
//! in another partition or table, kept by the worker as follow-up work of the consistency
//! engine), index entities (id lists: in the partition, in a table, in blobs), unique
//! values across partitions ([`unique`]), expiry and its sweeper ([`expiry`]), and the
//! audit that finds and repairs drift.
//!
//! Composition: [`IndexedTable`] wraps a typed [`Table`](tablekit_core::typed::Table)
//! over any store; it writes the atomic parts itself and hands the rest to an
//! [`OutboxSink`] (a queue, or [`InlineSink`]); the worker applies the messages with an
//! [`IndexApplier`]; the [`Relay`] publishes what a crash left behind; [`audit()`]
//! checks every primary against what it should have.

mod apply;
pub mod audit;
pub mod decl;
pub mod generic;
pub mod operation;
pub mod reclaim;
pub mod record;
pub(crate) mod registry;
mod stored;
mod table;
mod upkeep;
pub(crate) mod write;

pub use decl::{denormalized, expiry, index_entity, series, unique, wide};

pub use crate::consistency::{InlineSink, OutboxSink, Relay, RelayOptions, RelayReport};
pub use audit::{
    AuditOptions, AuditProgress, AuditReport, AuditResult, Drift, Finding, MigrateReport, audit,
    backfill, migrate,
};
pub use expiry::{SweepReport, Sweeper, SweeperOptions};
pub use operation::{Applied, IndexApplier, IndexOperation, IndexOperations};
pub use record::{EntityRef, IndexRecord, Layout, MemberStorage, Target};
pub use registry::schema::{
    DeclaredDecl, DenormalizedDecl, IndexDecl, MemberDecl, SCHEMA_TABLE, SchemaRecord, UniqueDecl,
};
pub use table::{IndexedTable, IndexedTableOptions, ListLookup, Lookup, Ranged, Readable, Whole};
pub use write::{IndexedWriteReport, WriteOutcome};

/// The handlers of the follow-up work indexed tables record: index work (kind `index`)
/// and, with a blob store, the deletion of blobs a write stopped referencing (kind
/// `delete_blobs`). For an [`InlineSink`] or a worker's registry.
pub fn handlers<S>(
    store: S,
    blobs: Option<tablekit_core::blob::BlobStore>,
) -> crate::consistency::Registry
where
    S: tablekit_core::TableStore + Clone + 'static,
{
    let mut applier = IndexApplier::new(store.clone());
    if let Some(blobs) = &blobs {
        applier = applier.with_blobs(blobs.clone());
    }
    let registry = applier.register(crate::consistency::Registry::new());
    match blobs {
        Some(blobs) => crate::large::blobs::DeleteBlobs::register(registry, store, blobs),
        None => registry,
    }
}
