//! The archive's record of the blobs it copies into the archive's folders before the
//! archived copy references them. Without it, a worker that dies between its upload and
//! the copy's write leaves blobs no entity references; its redelivery uploads the same
//! content again and references it — unless the source is gone by then (deleted,
//! expired), when nothing ever references or deletes them.
//!
//! So each round of a move that copies blobs first writes a record in the archive's
//! partition of the entity (RowKey `~archive-upload~<RowKey>~<round>`) naming the blob
//! prefix it uploads under (unique to the round: `<folder><round>-<content hash>`); the
//! archived copy's write deletes the record in the same entity group transaction,
//! conditional on its ETag. Any delivery of a move of that entity reads the records beside
//! the source and settles each it finds: the record claimed first under its ETag (its
//! writer can then no longer reference the blobs: its copy's transaction fails), then
//! the blobs under its prefixes deleted, then the record (a crash on the way leaves the
//! claimed record to the next delivery). A record whose claim fails was settled by
//! another delivery, or its writer committed: its blobs are left alone.
//!
//! A round's blob names are its own, so two deliveries never share a blob. A copy that
//! replaces another (an earlier round's, or another delivery's) records, in the same
//! transaction, the replaced copy's blobs it does not reference, and drops them right
//! after; a delivery that dies in between leaves that record to the next one.

use tablekit_core::blob::BlobStore;
use tablekit_core::{ETag, Entity, ErrorKind, IfMatch, Query, TableStore, Value, filter};

use crate::operation::OperationError;

/// The RowKey prefix of upload records.
pub(super) const UPLOAD_PREFIX: &str = "~archive-upload~";
/// The property listing a record's blob prefixes (JSON).
const PREFIXES_PROPERTY: &str = "Prefixes";
/// The property a delivery settling a record claims it with.
const SETTLING_PROPERTY: &str = "Settling";

/// The RowKey prefix of the records of the entity at `row_key`.
fn prefix_of(row_key: &str) -> String {
    format!("{UPLOAD_PREFIX}{}~", row_key.replace('~', "~~"))
}

/// Whether an archived table's row is an upload record, not an archived entity.
pub fn is_upload_record(entity: &Entity) -> bool {
    entity.row_key.starts_with(UPLOAD_PREFIX)
}

/// One round's upload: its record's RowKey and the part its blobs' names share.
pub(super) struct Round {
    pub row_key: String,
    pub nonce: String,
}

impl Round {
    /// A new round of the move of the entity at `row_key`.
    pub(super) fn new(row_key: &str) -> Self {
        let nonce = tablekit_core::random::uuid().simple().to_string()[..12].to_owned();
        Round {
            row_key: format!("{}{nonce}", prefix_of(row_key)),
            nonce,
        }
    }

    /// The prefix of this round's blobs in `folder`.
    pub(super) fn blob_prefix(&self, folder: &str) -> String {
        format!("{folder}{}-", self.nonce)
    }
}

/// The upload records of the entity at (`partition_key`, `row_key`) in `table` (one
/// range query in its partition).
pub(super) async fn read<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    row_key: &str,
) -> Result<Vec<Entity>, OperationError> {
    let start = prefix_of(row_key);
    let mut end = start.clone();
    end.pop();
    end.push('\u{7f}');
    let query = Query::with_filter(
        filter::partition_key().eq(partition_key)
            & filter::row_key().ge(start.as_str())
            & filter::row_key().lt(end.as_str()),
    );
    match store.query_all(table, query).await {
        Ok(rows) => Ok(rows
            .into_iter()
            .filter(|r| r.row_key.starts_with(&start) && !r.row_key[start.len()..].contains('~'))
            .collect()),
        Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// Settles the records a delivery found (see the module's comment).
///
/// # Errors
/// The store's and blob store's errors.
pub(super) async fn settle<S: TableStore>(
    store: &S,
    blobs: Option<&BlobStore>,
    table: &str,
    records: Vec<Entity>,
) -> Result<(), OperationError> {
    let Some(blobs) = blobs else {
        return Ok(());
    };
    for record in records {
        let prefixes: Vec<String> = match record.properties.get(PREFIXES_PROPERTY) {
            Some(Value::String(json)) => serde_json::from_str(json).unwrap_or_default(),
            _ => Vec::new(),
        };
        // Claimed first, under the ETag read: its writer's commit (conditional on the
        // ETag it wrote) can no longer land, and a crash from here on leaves the record,
        // claimed, to the next delivery.
        let mut claim = Entity::new(record.partition_key.clone(), record.row_key.clone());
        claim
            .properties
            .insert(SETTLING_PROPERTY.to_owned(), Value::Boolean(true));
        let if_match = record.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        let claimed = match store.merge(table, claim, if_match).await {
            Ok(etag) => etag,
            // Its writer committed, or another delivery settles it.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::NotFound | ErrorKind::PreconditionFailed
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        // Then as its writer would: the blobs, then the record.
        settle_own(
            store,
            Some(blobs),
            table,
            &record.partition_key,
            &record.row_key,
            &claimed,
            &prefixes,
        )
        .await?;
    }
    Ok(())
}

/// The record of `round` naming the blob `prefixes` (a blob's whole name names it alone).
pub(super) fn entity(partition_key: &str, round: &Round, prefixes: &[String]) -> Entity {
    let mut entity = Entity::new(partition_key, round.row_key.clone());
    let json = serde_json::to_string(prefixes).unwrap_or_else(|_| "[]".to_owned());
    entity
        .properties
        .insert(PREFIXES_PROPERTY.to_owned(), Value::String(json));
    entity
}

/// Writes the record of `round` naming the blob `prefixes` it uploads under, before the
/// upload: its ETag.
///
/// # Errors
/// The store's errors.
pub(super) async fn record<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    round: &Round,
    prefixes: &[String],
) -> Result<ETag, OperationError> {
    let entity = entity(partition_key, round, prefixes);
    let etag = match store.insert(table, entity.clone()).await {
        Ok(etag) => etag,
        Err(e) if e.kind() == ErrorKind::TableNotFound => {
            store.create_table_if_not_exists(table).await?;
            store.insert(table, entity).await?
        }
        Err(e) => return Err(e.into()),
    };
    Ok(etag)
}

/// Settles a record this delivery wrote and will not commit (a round that ends without
/// the copy's write, or the blobs of a copy it replaced), or one it claimed: its blobs
/// first, then the record (nobody else references them, so the order only has to
/// survive a crash).
///
/// # Errors
/// The store's and blob store's errors.
pub(super) async fn settle_own<S: TableStore>(
    store: &S,
    blobs: Option<&BlobStore>,
    table: &str,
    partition_key: &str,
    row_key: &str,
    etag: &ETag,
    prefixes: &[String],
) -> Result<(), OperationError> {
    if let Some(blobs) = blobs {
        for prefix in prefixes {
            for blob in blobs.list(prefix).await? {
                blobs.delete(&blob.name).await?;
            }
        }
    }
    match store
        .delete(table, partition_key, row_key, IfMatch::ETag(etag.clone()))
        .await
    {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::NotFound | ErrorKind::PreconditionFailed
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}
