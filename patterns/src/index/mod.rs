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
pub(crate) mod audit;
pub(crate) mod decl;
pub(crate) mod generic;
// Hidden, not part of the API: reached by tablekit's own tests and worker crate (see
// `internals`).
#[doc(hidden)]
pub mod operation;
#[doc(hidden)]
pub mod reclaim;
#[doc(hidden)]
pub mod record;
pub(crate) mod registry;
mod stored;
mod table;
mod upkeep;
pub(crate) mod write;

/// Unique values across partitions (`#[unique]`): a value's reservation, as stored.
pub mod unique {
    pub use super::decl::unique::{DEFAULT_LEASE, RESERVATION_KIND, Reservation, read};
}

/// Entities that expire (`ttl`, `expires`): the sweeper that deletes them, and where
/// their expiry entries live.
pub mod expiry {
    pub use super::decl::expiry::{
        EXPIRY_TABLE_SUFFIX, SweepReport, Sweeper, SweeperOptions, expiry_table,
    };
}

/// Entities stored in chunks (`#[wide]`): the properties a stored chunk carries.
pub mod wide {
    pub use super::decl::wide::{CHUNK_OF_PROPERTY, CHUNKS_PROPERTY};
}

/// Denormalised properties (`denormalized(..)`): the link entities that record which
/// dependents copy a source.
pub mod denormalized {
    pub use super::decl::denormalized::{LINK_KIND, is_link};
}

/// Index entities (`#[index_entity]`): where an id list is kept, and its pages.
pub mod index_entity {
    pub use super::decl::index_entity::{Member, PAGE_CAPACITY};
    pub use super::record::MemberStorage;
}

/// Counts kept without a scan (`#[count]`): a count as read, and how it is stored.
pub mod count {
    pub use super::decl::count::{
        COUNT_PROPERTY, COUNT_TABLE_SUFFIX, COUNTER_ROW_KEY, Count, Counting,
    };
}

/// Not part of the API: the declarations' mechanisms and stored types, which tablekit's
/// own tests, benches and simulation reach below the public types (a stored format
/// pinned byte for byte, an operation built by hand), as they do the hidden modules
/// `operation`, `record` and `reclaim`. They change without notice.
#[doc(hidden)]
pub mod internals {
    pub use super::decl::{count, denormalized, expiry, index_entity, unique, wide};
}

pub use generic::{GenericDeleter, LAYOUTS_RECHECK, delete_indexed};
pub use record::{
    INDEX_ENTITY_KIND, SOURCE_PROPERTY, TARGETS_PROPERTY, TOMBSTONE_KIND, VERSION_PROPERTY,
    is_hidden, is_tombstone, version_of,
};

pub use crate::consistency::{InlineSink, OutboxSink, Relay, RelayOptions, RelayReport};
pub use audit::{
    AuditOptions, AuditProgress, AuditReport, AuditResult, Drift, Finding, MigrateReport,
    ProgressFn, audit, backfill, migrate,
};
pub use expiry::{SweepReport, Sweeper, SweeperOptions};
pub use operation::{Applied, IndexApplier, IndexOperation, IndexOperations};
pub use record::{EntityRef, IndexRecord, Layout, MemberStorage, Target};
pub use registry::schema::{DeclaredDecl, SCHEMA_TABLE, SchemaRecord};
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
