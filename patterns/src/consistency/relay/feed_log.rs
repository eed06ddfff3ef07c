//! The change feed's log as the relay writes it (`crate::feed` reads it): each share's
//! log in [`FEED_TABLE`], PartitionKey `<table>~<share:05>`, one row per change (RowKey
//! its sequence number, `<seq:020>`, from 1 with no gap) and the head (RowKey
//! [`HEAD_ROW`]: `Next`, the next number, and `Oldest`, the lowest one still kept). The
//! changes waiting in their partitions are outbox-range rows (`super::super::outbox`'s
//! `WAITING_PREFIX`).

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use tablekit_core::{Entity, Value};

use super::super::outbox::{self, WAITING_PREFIX};
use crate::error::Result;

/// The table holding every feed's logs and groups.
pub const FEED_TABLE: &str = "TablekitFeed";
/// The marker of a log row.
pub(crate) const LOG_KIND: &str = "TablekitFeedLog";
/// The RowKey of a share's head.
pub const HEAD_ROW: &str = "~head";

pub(crate) const SHARES: &str = "Shares";
pub(crate) const SEQ: &str = "Seq";
pub(crate) const AT: &str = "At";
pub(crate) const NEXT: &str = "Next";
pub(crate) const OLDEST: &str = "Oldest";
pub(crate) const SOURCE_PARTITION: &str = "SourcePartition";
pub(crate) const SOURCE_ROW: &str = "SourceRow";

/// The share a partition's changes go to: a hash of its table and PartitionKey.
pub fn share_of(table: &str, partition_key: &str, shares: u32) -> u32 {
    super::shares::share_of(table, partition_key, shares)
}

/// The PartitionKey of a share's log.
pub fn log_partition(table: &str, share: u32) -> String {
    format!("{table}~{share:05}")
}

/// The filter of a share's log rows from number `from` on (the head, keyed above every
/// number, left out).
pub fn rows_from(table: &str, share: u32, from: u64) -> tablekit_core::Filter {
    tablekit_core::filter::partition_key().eq(log_partition(table, share))
        & tablekit_core::filter::row_key().ge(seq_row_key(from))
        & tablekit_core::filter::row_key().lt("~")
}

/// The RowKey of a log row.
pub fn seq_row_key(seq: u64) -> String {
    format!("{seq:020}")
}

/// The RowKey of a change waiting in its partition.
pub(crate) fn waiting_row_key(row_key: &str, version: i64) -> String {
    let digest = Sha256::digest(row_key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    format!(
        "{WAITING_PREFIX}{:020}~{:016x}",
        version.max(0),
        u64::from_be_bytes(first)
    )
}

/// The feed's shares a waiting entry names.
pub(crate) fn shares_of(entry: &Entity) -> u32 {
    entry
        .get(SHARES)
        .and_then(Value::as_i32)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0)
        .unwrap_or(1)
}

/// The sequence number a waiting entry was given, if one was (see `super::sequence`).
pub(crate) fn seq_of(entity: &Entity) -> Option<u64> {
    entity
        .get(SEQ)
        .and_then(Value::as_i64)
        .and_then(|n| u64::try_from(n).ok())
}

/// The log row of a waiting entry given number `seq` in `share` of `table`.
pub(crate) fn log_row(
    table: &str,
    share: u32,
    seq: u64,
    entry: &Entity,
    at: DateTime<Utc>,
) -> Entity {
    let mut row = Entity::new(log_partition(table, share), seq_row_key(seq));
    for (name, value) in &entry.properties {
        if name != SEQ && name != SHARES {
            row.properties.insert(name.clone(), value.clone());
        }
    }
    row.set(outbox::MARKER_PROPERTY, LOG_KIND);
    row.set(SEQ, Value::Int64(seq as i64));
    row.set(AT, Value::DateTime(at));
    row.set(SOURCE_PARTITION, entry.partition_key.clone());
    row.set(SOURCE_ROW, entry.row_key.clone());
    row
}

/// Whether the log row holds the waiting entry (its source keys).
fn holds(row: &Entity, entry: &Entity) -> bool {
    row.get(SOURCE_PARTITION).and_then(Value::as_str) == Some(entry.partition_key.as_str())
        && row.get(SOURCE_ROW).and_then(Value::as_str) == Some(entry.row_key.as_str())
}

/// Whether a waiting entry of `share` was appended at the number its mark gives: the
/// number is one the log keeps (`head`) and its row holds the entry (one point read).
/// `false` for an entry not marked, or marked with a number the log does not keep: the
/// relay numbers it again.
///
/// # Errors
/// The store's errors.
pub(crate) async fn appended<S: tablekit_core::TableStore>(
    store: &S,
    table: &str,
    share: u32,
    head: &Head,
    entry: &Entity,
) -> Result<bool> {
    match seq_of(entry) {
        Some(seq) if seq >= head.oldest && seq < head.next => {
            let row = store
                .get(
                    FEED_TABLE,
                    &log_partition(table, share),
                    &seq_row_key(seq),
                    None,
                )
                .await?;
            Ok(row.is_some_and(|row| holds(&row, entry)))
        }
        _ => Ok(false),
    }
}

/// A share's head: the next sequence number and the lowest one kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// The number the next change gets (1 for an empty log).
    pub next: u64,
    /// The lowest number still kept (`next` when everything was trimmed).
    pub oldest: u64,
    /// The head's ETag (`None`: no head stored yet).
    pub etag: Option<tablekit_core::ETag>,
}

impl Default for Head {
    fn default() -> Self {
        Head {
            next: 1,
            oldest: 1,
            etag: None,
        }
    }
}

impl Head {
    /// Reads a stored head (`None`: none stored yet, an empty log).
    pub(crate) fn read(found: Option<Entity>) -> Head {
        let Some(found) = found else {
            return Head::default();
        };
        let number = |name| {
            found
                .get(name)
                .and_then(Value::as_i64)
                .and_then(|n| u64::try_from(n).ok())
                .unwrap_or(1)
        };
        Head {
            next: number(NEXT),
            oldest: number(OLDEST),
            etag: found.etag.clone(),
        }
    }

    /// The head as stored.
    pub(crate) fn entity(&self, table: &str, share: u32) -> Entity {
        Entity::new(log_partition(table, share), HEAD_ROW)
            .with(NEXT, Value::Int64(self.next as i64))
            .with(OLDEST, Value::Int64(self.oldest as i64))
    }

    /// The write of this head: an insert when none is stored, else a replace under the
    /// ETag read.
    pub(crate) fn write(&self, table: &str, share: u32) -> tablekit_core::WriteOp {
        let entity = self.entity(table, share);
        match &self.etag {
            None => tablekit_core::WriteOp::Insert(entity),
            Some(etag) => {
                tablekit_core::WriteOp::Replace(entity, tablekit_core::IfMatch::ETag(etag.clone()))
            }
        }
    }

    /// The changes in the log: from `oldest` to `next - 1`.
    pub fn len(&self) -> u64 {
        self.next.saturating_sub(self.oldest)
    }

    /// Whether the log holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A share's head, read.
///
/// # Errors
/// The store's errors (a missing table reads as an empty log).
pub async fn head<S: tablekit_core::TableStore>(
    store: &S,
    table: &str,
    share: u32,
) -> Result<Head> {
    match store
        .get(FEED_TABLE, &log_partition(table, share), HEAD_ROW, None)
        .await
    {
        Ok(found) => Ok(Head::read(found)),
        Err(e) if e.kind() == tablekit_core::ErrorKind::TableNotFound => Ok(Head::default()),
        Err(e) => Err(e),
    }
}
