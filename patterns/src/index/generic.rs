//! Index maintenance without the entity type: deleting a primary written through an
//! indexed table removes everything its record names — its same-partition copies, links
//! and id-list entries in the delete's entity group transaction, the rest through an
//! outbox entry. The archive operation of the worker uses it, so a moved entity leaves no
//! index entry behind.

use std::collections::HashSet;

use tablekit_core::{Batch, ErrorKind, IfMatch, TableStore};

use super::members::{plan_partition_change, read_partition_pages};
use super::operation::{IndexOperation, IndexOperations};
use super::outbox::{OutboxSink, outbox_entity, publish_entry};
use super::record::{EntityRef, IndexRecord, MemberStorage, Target};
use crate::error::{Error, Result};

const MAX_ATTEMPTS: usize = 64;

/// Deletes the primary at `at` if its ETag is still `if_match`, with its index entries
/// (see the module docs); `false` when it is not there. With a sink the outbox work is
/// published after the commit (and the entry removed); without one it waits for the
/// relay.
///
/// # Errors
/// `PreconditionFailed` when the primary changed; the store's errors; [`Error::Malformed`]
/// for a record that does not read; [`Error::Contention`].
pub async fn delete_indexed<S: TableStore>(
    store: &S,
    at: &EntityRef,
    if_match: IfMatch,
    sink: Option<&dyn OutboxSink>,
) -> Result<bool> {
    let mut missing: HashSet<EntityRef> = HashSet::new();
    for _ in 0..MAX_ATTEMPTS {
        let Some(primary) = store
            .get_if_table_exists(&at.table, &at.partition_key, &at.row_key)
            .await?
        else {
            return Ok(false);
        };
        if let IfMatch::ETag(expected) = &if_match
            && primary.etag.as_ref() != Some(expected)
        {
            return Err(tablekit_core::Error::PreconditionFailed {
                table: at.table.clone(),
                partition_key: at.partition_key.clone(),
                row_key: at.row_key.clone(),
            }
            .into());
        }
        let read = primary.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        let Some(record) = IndexRecord::read(&primary)? else {
            // Not written through an indexed table: a plain delete.
            return match store
                .delete(&at.table, &at.partition_key, &at.row_key, read)
                .await
            {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
                Err(e) if e.kind() == ErrorKind::PreconditionFailed && if_match == IfMatch::Any => {
                    continue;
                }
                Err(e) => Err(e.into()),
            };
        };
        let version = super::record::next_version(Some(record.version));
        let mut batch = Batch::new();
        batch.delete(&at.partition_key, &at.row_key, read);
        // Targets iterate copies, then links, then id lists (their order): the deletes
        // sit right after the primary, at positions 1 ..= deletes.len().
        let mut deletes: Vec<EntityRef> = Vec::new();
        let mut operations = Vec::new();
        for target in &record.targets {
            match target {
                Target::Copy { at: copy, .. } if target.is_atomic(at) => {
                    if !missing.contains(copy) {
                        batch.delete(&copy.partition_key, &copy.row_key, IfMatch::Any);
                        deletes.push(copy.clone());
                    }
                }
                Target::Denormalized {
                    property, source, ..
                } if target.is_atomic(at) => {
                    let link = super::links::link_ref(at, property, source);
                    if source != at && !missing.contains(&link) {
                        batch.delete(&link.partition_key, &link.row_key, IfMatch::Any);
                        deletes.push(link);
                    }
                }
                Target::Member {
                    index,
                    storage: MemberStorage::Partition,
                    value,
                    ..
                } => {
                    let pages =
                        read_partition_pages(store, &at.table, &at.partition_key, index, value)
                            .await?;
                    for op in plan_partition_change(
                        &pages,
                        &at.partition_key,
                        index,
                        value,
                        &at.row_key,
                        false,
                    ) {
                        batch.push(op);
                    }
                }
                _ => operations.push(IndexOperation::for_target(at, version, target, false, "")),
            }
        }
        let outbox = (!operations.is_empty()).then(|| IndexOperations {
            id: uuid::Uuid::new_v4().simple().to_string(),
            operations,
        });
        if let Some(entry) = &outbox {
            batch.insert(outbox_entity(&at.partition_key, entry));
        }
        match store.submit_batch(&at.table, batch).await {
            Ok(_) => {
                if let (Some(entry), Some(sink)) = (&outbox, sink) {
                    publish_entry(store, &at.table, &at.partition_key, sink, entry, None).await;
                }
                return Ok(true);
            }
            Err(e) => {
                let index = e.batch_index();
                match (index, e.kind()) {
                    (Some(0), ErrorKind::PreconditionFailed | ErrorKind::NotFound) => {
                        if if_match != IfMatch::Any {
                            return Err(e.into());
                        }
                    }
                    (Some(i), ErrorKind::NotFound) if i >= 1 && i <= deletes.len() => {
                        missing.insert(deletes[i - 1].clone());
                    }
                    (
                        Some(_),
                        ErrorKind::PreconditionFailed
                        | ErrorKind::AlreadyExists
                        | ErrorKind::NotFound,
                    ) => {}
                    _ => return Err(e.into()),
                }
            }
        }
    }
    Err(Error::Contention {
        what: format!("indexed delete of {at}"),
        attempts: MAX_ATTEMPTS,
    })
}
