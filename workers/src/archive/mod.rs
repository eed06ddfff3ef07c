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
//! (same data) and finishes step 3. Nothing is ever in neither table. The blobs a move
//! copies before step 2 are recorded first (`uploads`), so a crash between the copy of
//! the blobs and step 2 leaves a record the next delivery settles, not blobs no entity
//! references.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tablekit_core::{Entity, ErrorKind, IfMatch, TableStore};

use tablekit_core::blob::BlobStore;
use tablekit_patterns::changes::ChangeEvent;
use tablekit_patterns::consistency::{
    BoxFuture, Engine, Envelope, InlineSink, OutboxSink, RetryPolicy,
};
use tablekit_patterns::index::GenericDeleter;
use tablekit_patterns::index::record::{EntityRef, is_hidden};

use crate::operation::{Operation, OperationError};

mod uploads;

pub use uploads::is_upload_record;

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
    const QUEUE: &'static str = "archive";
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

/// What the archived copy's write did.
#[derive(Debug, PartialEq, Eq)]
enum Copied {
    Written,
    /// The target holds a copy of a newer source version.
    Newer,
    /// The round's upload record was settled by another delivery (its blobs deleted).
    Fenced,
}

/// Writes the archived copy unless the target holds a copy of a newer source version.
///
/// The first attempt takes the target's slot as empty (the slot is empty on every move
/// but a repeated one): an insert, which a taken slot refuses. The slot is then read,
/// with no backoff, and the copy written under its ETag.
async fn write_copy<S: TableStore>(
    store: &S,
    table: &str,
    copy: Entity,
    source_timestamp: Option<chrono::DateTime<chrono::Utc>>,
    upload: Option<(&str, &tablekit_core::ETag)>,
    blobs: Option<&BlobStore>,
) -> Result<Copied, OperationError> {
    let mut retry = RetryPolicy::default().attempts(MAX_RACES).start();
    let mut read_slot = false;
    // Off after the unread insert's refusal: no race was lost, the slot is only taken.
    let mut backoff = true;
    loop {
        if std::mem::replace(&mut backoff, true) {
            retry
                .next(|| {
                    format!(
                        "the archived copy {table}({}, {})",
                        copy.partition_key, copy.row_key
                    )
                })
                .await?;
        }
        let unread = !std::mem::replace(&mut read_slot, true);
        let existing = if unread {
            None
        } else {
            match store
                .get(table, &copy.partition_key, &copy.row_key, None)
                .await
            {
                Ok(found) => found,
                Err(e) if e.kind() == ErrorKind::TableNotFound => {
                    store.create_table_if_not_exists(table).await?;
                    None
                }
                Err(e) => return Err(e.into()),
            }
        };
        // The blobs of the copy this one replaces that it does not reference (another
        // round's, each round's names its own): recorded in the same transaction, to be
        // dropped after it.
        let mut replaced: Vec<String> = Vec::new();
        let op = match existing {
            Some(existing) => {
                let theirs = match existing.properties.get(SOURCE_TIMESTAMP_PROPERTY) {
                    Some(tablekit_core::Value::DateTime(t)) => Some(*t),
                    _ => None,
                };
                if theirs.is_some() && source_timestamp.is_some() && theirs > source_timestamp {
                    return Ok(Copied::Newer);
                }
                replaced = tablekit_patterns::large::addresses(&existing)
                    .into_iter()
                    .map(|(_, name, _)| name)
                    .filter(|name| !tablekit_patterns::large::references(&copy, name))
                    .collect();
                let if_match = existing.etag.map_or(IfMatch::Any, IfMatch::ETag);
                tablekit_core::WriteOp::Replace(copy.clone(), if_match)
            }
            None => tablekit_core::WriteOp::Insert(copy.clone()),
        };
        let mut ops = vec![op];
        // With the round's upload record: deleted in the same transaction, under its
        // ETag (a delivery that settled it meanwhile deleted the blobs: start over).
        if let Some((row_key, etag)) = upload {
            ops.push(tablekit_core::WriteOp::Delete {
                partition_key: copy.partition_key.clone(),
                row_key: row_key.to_owned(),
                if_match: IfMatch::ETag(etag.clone()),
            });
        }
        let dropping = (!replaced.is_empty()).then(|| {
            let round = uploads::Round::new(&copy.row_key);
            let record = uploads::entity(&copy.partition_key, &round, &replaced);
            ops.push(tablekit_core::WriteOp::Insert(record));
            round
        });
        let written = if ops.len() == 1 {
            let op = ops.pop().expect("one operation");
            store.execute(table, op).await.map(|_| Vec::new())
        } else {
            match store.submit_batch(table, ops.into_iter().collect()).await {
                Err(e)
                    if upload.is_some()
                        && e.batch_index() == Some(1)
                        && matches!(
                            e.kind(),
                            ErrorKind::NotFound | ErrorKind::PreconditionFailed
                        ) =>
                {
                    return Ok(Copied::Fenced);
                }
                other => other,
            }
        };
        if let (Ok(etags), Some(round)) = (&written, &dropping) {
            // The replaced copy's blobs, then their record (a crash between leaves the
            // record to the next delivery).
            if let Some(etag) = etags.last().cloned().flatten() {
                uploads::settle_own(
                    store,
                    blobs,
                    table,
                    &copy.partition_key,
                    &round.row_key,
                    &etag,
                    &replaced,
                )
                .await?;
            }
        }
        let written = written.map(|_| ());
        match written {
            Ok(()) => return Ok(Copied::Written),
            // The copy's insert is the unread attempt's only insert.
            Err(e) if unread && e.kind() == ErrorKind::AlreadyExists => backoff = false,
            Err(e) if e.kind() == ErrorKind::TableNotFound => {
                store.create_table_if_not_exists(table).await?;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::PreconditionFailed | ErrorKind::AlreadyExists | ErrorKind::NotFound
                ) => {}
            Err(e) => return Err(e.into()),
        }
    }
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
    archive_with_blobs(store, None, operation).await
}

/// The property of an archived copy holding the Timestamp of the source version it was
/// made from: a late delivery never replaces a newer archived version with an older one.
pub const SOURCE_TIMESTAMP_PROPERTY: &str = "TablekitSourceTimestamp";

/// Runs an archive operation; entities with blob-stored properties (large entities) have
/// their blobs copied under the target's name, so the archive does not depend on the
/// source's blobs, which are deleted after the move.
///
/// # Errors
/// As [`archive`]; [`OperationError::Permanent`] for a source and target that are one
/// table, or blob-stored properties without a blob store.
pub async fn archive_with_blobs<S: TableStore + Clone + 'static>(
    store: &S,
    blobs: Option<&tablekit_core::blob::BlobStore>,
    operation: &ArchiveOperation,
) -> Result<ArchiveOutcome, OperationError> {
    archive_with_events(store, blobs, None, operation).await
}

/// Runs an archive operation as [`archive_with_blobs`] does, handing the source's change
/// event (types declared with `#[entity(changes = "…")]`) to `events` — a queue sink, as
/// the worker process's — rather than leaving it to the relay. The source's index work
/// and the blobs it stops referencing are applied in this process.
///
/// # Errors
/// As [`archive_with_blobs`].
pub async fn archive_with_events<S: TableStore + Clone + 'static>(
    store: &S,
    blobs: Option<&tablekit_core::blob::BlobStore>,
    events: Option<Arc<dyn OutboxSink>>,
    operation: &ArchiveOperation,
) -> Result<ArchiveOutcome, OperationError> {
    let archiver = Archiver::for_worker(store.clone(), blobs.cloned(), events);
    let outcome = archiver.archive(operation).await;
    // The delete's outbox entries are removed before this returns.
    archiver.engine().flush().await;
    outcome
}

/// The archive worker's state, kept across deliveries: the engine its source deletes
/// commit through (the partitions whose pending marker it holds, its task removing
/// published outbox entries in batches), the registry's layouts, the blob store.
#[derive(Debug)]
pub struct Archiver<S> {
    deleter: GenericDeleter<S>,
    blobs: Option<BlobStore>,
}

impl<S: TableStore + Clone + 'static> Archiver<S> {
    /// An archiver whose source deletes commit through `engine` (its sink gets their
    /// follow-up work).
    pub fn new(engine: Engine<S>, blobs: Option<BlobStore>) -> Self {
        Archiver {
            deleter: GenericDeleter::new(engine),
            blobs,
        }
    }

    /// The worker process's archiver: a source delete's index work and the blobs it
    /// stops referencing applied in this process, its change event handed to `events`
    /// (the process's queue sink; without one the event waits for the relay).
    pub fn for_worker(
        store: S,
        blobs: Option<BlobStore>,
        events: Option<Arc<dyn OutboxSink>>,
    ) -> Self {
        let registry = tablekit_patterns::index::handlers(store.clone(), blobs.clone());
        let sink = EventsApart {
            inline: InlineSink::new(registry),
            events,
        };
        Archiver::new(Engine::options().sink(Arc::new(sink)).build(store), blobs)
    }

    /// The engine the source deletes commit through.
    pub fn engine(&self) -> &Engine<S> {
        self.deleter.engine()
    }

    /// Runs an archive operation (see the module docs).
    ///
    /// # Errors
    /// As [`archive_with_blobs`].
    pub async fn archive(
        &self,
        operation: &ArchiveOperation,
    ) -> Result<ArchiveOutcome, OperationError> {
        run(&self.deleter, self.blobs.as_ref(), operation).await
    }
}

/// The archive's sink: change events to their queue (when the process has one), the
/// rest applied in this process. Without an events sink a change event fails here and
/// waits for the relay.
struct EventsApart {
    inline: InlineSink,
    events: Option<Arc<dyn OutboxSink>>,
}

impl OutboxSink for EventsApart {
    fn publish<'a>(
        &'a self,
        envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        match &self.events {
            Some(events) if ChangeEvent::queue_of(envelope).is_some() => events.publish(envelope),
            _ => self.inline.publish(envelope),
        }
    }
}

/// Runs an archive operation whose source delete commits through `engine` (its sink
/// gets the delete's follow-up work: index work, blob deletions, the change event).
///
/// # Errors
/// As [`archive_with_blobs`].
pub async fn archive_with_engine<S: TableStore + Clone + 'static>(
    engine: &Engine<S>,
    blobs: Option<&tablekit_core::blob::BlobStore>,
    operation: &ArchiveOperation,
) -> Result<ArchiveOutcome, OperationError> {
    run(&GenericDeleter::new(engine.clone()), blobs, operation).await
}

async fn run<S: TableStore + Clone + 'static>(
    deleter: &GenericDeleter<S>,
    blobs: Option<&tablekit_core::blob::BlobStore>,
    operation: &ArchiveOperation,
) -> Result<ArchiveOutcome, OperationError> {
    let store = deleter.engine().store();
    let ArchiveOperation {
        source_table,
        target_table,
        partition_key,
        row_key,
    } = operation;
    if source_table.eq_ignore_ascii_case(target_table) {
        return Err(OperationError::Permanent(format!(
            "cannot archive `{source_table}` into itself"
        )));
    }
    let mut retry = RetryPolicy::default().attempts(MAX_RACES).start();
    // The archive blobs of versions this delivery copied and then found superseded.
    let mut superseded: Vec<String> = Vec::new();
    'round: loop {
        retry
            .next(|| {
                format!(
                    "archiving {source_table}({partition_key}, {row_key}): the source kept changing"
                )
            })
            .await?;
        // The source. The target's slot is not read with it: the copy's first write
        // inserts, which a taken slot refuses (see `write_copy`), and the source's delete
        // is conditional on the source's ETag.
        // The records of uploads left by a delivery that died (or stalled) read beside
        // it, and settled — by a worker with a blob store: one without uploads nothing
        // and could settle nothing, so it spares the read.
        let records = async {
            match blobs {
                Some(_) => uploads::read(store, target_table, partition_key, row_key).await,
                None => Ok(Vec::new()),
            }
        };
        let (current, records) = tokio::join!(
            store.get_if_table_exists(source_table, partition_key, row_key),
            records
        );
        let (current, records) = (current?, records?);
        if !records.is_empty() {
            uploads::settle(store, blobs, target_table, records).await?;
        }
        // A delete's tombstone is no entity to archive.
        let current = current.filter(|e| !tablekit_patterns::index::record::is_tombstone(e));
        let Some(current) = current else {
            // The target read after the source: a move another delivery finished since
            // this read shows there.
            let slot = store
                .get_if_table_exists(target_table, partition_key, row_key)
                .await?;
            let archived = slot
                .as_ref()
                .is_some_and(|e| !tablekit_patterns::index::record::is_tombstone(e));
            // An earlier round of this delivery may have copied blobs for a version that
            // changed, and another delivery finished the move meanwhile.
            if let Some(blobs) = blobs {
                drop_superseded(
                    store,
                    blobs,
                    target_table,
                    partition_key,
                    row_key,
                    &superseded,
                )
                .await?;
            }
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
        let source_blobs = tablekit_patterns::large::addresses(&current);
        let mut uploaded: Vec<String> = Vec::new();
        let mut copy = Entity::new(current.partition_key.clone(), current.row_key.clone());
        copy.properties = current.properties.clone();
        copy.properties.retain(|name, _| !is_hidden(name));
        if let Some(stamp) = current.timestamp {
            copy.properties.insert(
                SOURCE_TIMESTAMP_PROPERTY.to_owned(),
                tablekit_core::Value::DateTime(stamp),
            );
        }
        let mut upload = None;
        if !source_blobs.is_empty() {
            let Some(blobs) = blobs else {
                return Err(OperationError::Permanent(
                    "the entity has blob-stored properties: archiving it needs a blob store (--blobs)".to_owned(),
                ));
            };
            let target = EntityRef::new(target_table, partition_key, row_key);
            // The round's blobs recorded before they are copied.
            let round = uploads::Round::new(row_key);
            let prefixes: Vec<String> = source_blobs
                .iter()
                .map(|(property, _, _)| {
                    round.blob_prefix(&tablekit_patterns::large::blob_folder(&target, property))
                })
                .collect();
            let recorded =
                uploads::record(store, target_table, partition_key, &round, &prefixes).await?;
            for ((property, name, text), prefix) in source_blobs.iter().zip(&prefixes) {
                let Some(bytes) = blobs.get(name).await? else {
                    // A newer write of the source (or its delete) may have dropped the
                    // blob since the source was read: then the newer state is moved.
                    let now = store
                        .get_if_table_exists(source_table, partition_key, row_key)
                        .await?;
                    uploads::settle_own(
                        store,
                        Some(blobs),
                        target_table,
                        partition_key,
                        &round.row_key,
                        &recorded,
                        &prefixes,
                    )
                    .await?;
                    uploaded.clear();
                    if now.and_then(|e| e.etag).as_ref() != Some(&etag) {
                        continue 'round;
                    }
                    drop_superseded(
                        store,
                        blobs,
                        target_table,
                        partition_key,
                        row_key,
                        &superseded,
                    )
                    .await?;
                    return Err(OperationError::Permanent(format!(
                        "the blob `{name}` of `{property}` is missing"
                    )));
                };
                let moved = blobs.put_content_addressed(prefix, bytes).await?;
                superseded.retain(|n| *n != moved);
                uploaded.push(moved.clone());
                let kind = if *text { "s" } else { "b" };
                copy.properties.insert(
                    format!("{}{property}", tablekit_patterns::large::ADDRESS_PREFIX),
                    tablekit_core::Value::String(format!("{kind}:{moved}")),
                );
            }
            upload = Some((round, recorded));
        }
        let record = upload.as_ref().map(|(r, e)| (r.row_key.as_str(), e));
        match write_copy(store, target_table, copy, current.timestamp, record, blobs).await? {
            Copied::Written => {}
            // A newer version is archived already (this delivery is late): the blobs
            // copied for this one are not its; the source delete below then finds the
            // source gone or changed.
            Copied::Newer => {
                if let Some((round, recorded)) = &upload {
                    uploads::settle_own(
                        store,
                        blobs,
                        target_table,
                        partition_key,
                        &round.row_key,
                        recorded,
                        &uploaded,
                    )
                    .await?;
                }
                uploaded.clear();
            }
            // Another delivery settled this round's upload and deleted its blobs.
            Copied::Fenced => continue,
        }
        let at = EntityRef::new(source_table, partition_key, row_key);
        // The source as read above: its delete is conditional on the ETag read.
        let outcome = match deleter.delete_read(&at, IfMatch::ETag(etag), current).await {
            Ok(true) => {
                // The source is gone: so are its blobs (the archive has its own).
                if let Some(blobs) = blobs {
                    for (_, name, _) in &source_blobs {
                        let _ = blobs.delete(name).await;
                    }
                }
                ArchiveOutcome::Archived
            }
            // Another delivery of this operation finished the move.
            Ok(false) => ArchiveOutcome::Archived,
            // Changed since the read: archive the newer version.
            Err(e) if e.kind() == ErrorKind::PreconditionFailed => {
                superseded.append(&mut uploaded);
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(blobs) = blobs {
            drop_superseded(
                store,
                blobs,
                target_table,
                partition_key,
                row_key,
                &superseded,
            )
            .await?;
        }
        return Ok(outcome);
    }
}

/// Deletes the archive blobs an earlier round of one delivery copied for a version that
/// changed (or lost to a newer archived one) before it could be moved, unless the
/// archived entity references them (the same content copied again). A crash between the
/// rounds leaves them to the blob sweep.
async fn drop_superseded<S: TableStore>(
    store: &S,
    blobs: &tablekit_core::blob::BlobStore,
    target_table: &str,
    partition_key: &str,
    row_key: &str,
    superseded: &[String],
) -> Result<(), OperationError> {
    if superseded.is_empty() {
        return Ok(());
    }
    let archived = store
        .get_if_table_exists(target_table, partition_key, row_key)
        .await?;
    for name in superseded {
        let referenced = archived
            .as_ref()
            .is_some_and(|a| tablekit_patterns::large::references(a, name));
        if !referenced {
            blobs.delete(name).await?;
        }
    }
    Ok(())
}
