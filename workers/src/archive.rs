//! The archive operation: moves an entity from a source table to a target table, the
//! sequence of the eventually consistent transaction pattern. Each step is idempotent and
//! the order makes every crash point safe:
//!
//! 1. read the entity from the source; if it is gone, it was archived (or never existed):
//!    check the target and finish;
//! 2. insert-or-replace the copy into the target (creating the table if needed);
//! 3. delete the source under the ETag read in step 1 — with its index entries when it
//!    was written through an indexed table (its same-partition copies and id-list entries
//!    in the same transaction, the others applied right after) — if the source changed
//!    meanwhile, start over so that the newer version is the one archived; if it is
//!    already gone, another delivery finished the move.
//!
//! The copy in the target leaves tablekit's index record behind: the archived entity
//! has no index entries of its own.
//!
//! A crash after step 2 leaves the entity in both tables; the redelivery repeats step 2
//! (same data) and finishes step 3. Nothing is ever in neither table.

use serde::{Deserialize, Serialize};
use tablekit_core::{Entity, ErrorKind, IfMatch, TableStore};
use tablekit_patterns::index::generic::delete_indexed;
use tablekit_patterns::index::record::{EntityRef, is_hidden};
use tablekit_patterns::index::{IndexApplier, InlineSink};

use crate::operation::{Operation, OperationError};

/// Move one entity from `source_table` to `target_table`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveOperation {
    /// The table the entity leaves.
    pub source_table: String,
    /// The table it moves to.
    pub target_table: String,
    /// Its PartitionKey.
    pub partition_key: String,
    /// Its RowKey.
    pub row_key: String,
}

impl Operation for ArchiveOperation {
    const KIND: &'static str = "archive";
    const VERSION: u32 = 1;
}

/// What an archive operation found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchiveOutcome {
    /// The entity was moved.
    Archived,
    /// The entity was already in the target only (a repeated delivery).
    AlreadyArchived,
    /// The entity is in neither table.
    Missing,
}

/// How many times the source may change under the move before the operation gives up
/// (and retries later).
const MAX_RACES: usize = 16;

/// Runs an archive operation against a store.
///
/// # Errors
/// The store's errors, retryable or not; [`OperationError::Retryable`] when the source
/// keeps changing.
pub async fn archive<S: TableStore + Clone + 'static>(
    store: &S,
    operation: &ArchiveOperation,
) -> Result<ArchiveOutcome, OperationError> {
    let ArchiveOperation {
        source_table,
        target_table,
        partition_key,
        row_key,
    } = operation;
    for _ in 0..MAX_RACES {
        let current = match store.get(source_table, partition_key, row_key, None).await {
            Ok(current) => current,
            Err(e) if e.kind() == ErrorKind::TableNotFound => None,
            Err(e) => return Err(e.into()),
        };
        let Some(current) = current else {
            let archived = match store.get(target_table, partition_key, row_key, None).await {
                Ok(found) => found.is_some(),
                Err(e) if e.kind() == ErrorKind::TableNotFound => false,
                Err(e) => return Err(e.into()),
            };
            return Ok(if archived {
                ArchiveOutcome::AlreadyArchived
            } else {
                ArchiveOutcome::Missing
            });
        };
        let Some(etag) = current.etag.clone() else {
            return Err(OperationError::Permanent(
                "the store returned an entity without an ETag".to_owned(),
            ));
        };
        let mut copy = Entity::new(current.partition_key, current.row_key);
        copy.properties = current.properties;
        copy.properties.retain(|name, _| !is_hidden(name));
        match store.insert_or_replace(target_table, copy.clone()).await {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::TableNotFound => {
                store.create_table_if_not_exists(target_table).await?;
                store.insert_or_replace(target_table, copy).await?;
            }
            Err(e) => return Err(e.into()),
        }
        let sink = InlineSink::new(IndexApplier::new(store.clone()));
        let at = EntityRef::new(source_table, partition_key, row_key);
        match delete_indexed(store, &at, IfMatch::ETag(etag), Some(&sink)).await {
            Ok(true) => return Ok(ArchiveOutcome::Archived),
            // Another delivery of this operation finished the move.
            Ok(false) => return Ok(ArchiveOutcome::Archived),
            // Changed since the read: archive the newer version.
            Err(e) if e.kind() == ErrorKind::PreconditionFailed => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(OperationError::Retryable(format!(
        "the source entity kept changing during {MAX_RACES} attempts to archive it"
    )))
}
