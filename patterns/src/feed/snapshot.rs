//! The snapshot a group reads when it starts from the beginning after retention trimmed
//! the log (the watermark method of DBLog): the table is read in chunks, each between a
//! low and a high watermark of the share's log, interleaved with the log, without locks,
//! resumable from the last chunk checkpointed.
//!
//! The share starts at the log's end when the snapshot begins (what came before is in the
//! table). Each step, for a share:
//! 1. the low watermark `L`: the log's last number;
//! 2. a chunk of the table, in key order from the cursor: the type's entities of the
//!    share's partitions (tombstones and expired entities left out), and the changes
//!    still waiting in those partitions to be sequenced;
//! 3. the high watermark `H`;
//! 4. the log from the read position through `H`, delivered first, in order;
//! 5. then the chunk's entities as [`ChangeKind::Snapshot`] changes numbered `H`, except
//!    those with a change in the log after `L` (the log gives their newer state) or a
//!    change still waiting that the log will give after `H` (a waiting change the relay
//!    already appended before the read position, its removal not done yet, is not one:
//!    the entity's row stands for it).
//!
//! So an entity's changes reach the group in version order across the snapshot and the
//! log: a snapshot row is never followed by an older change of its entity, and a change
//! the snapshot's row already shows may come again after it (the same version, once).
//! The cursor moves, with the checkpoint, only when a chunk's every row was handled.

use std::collections::HashSet;

use tablekit_core::query::ContinuationToken;
use tablekit_core::typed::is_expired;
use tablekit_core::{Entity, ErrorKind, Query, TableStore, Value};

use super::FeedChange;
use super::log::{self, WAITING_PREFIX};
use crate::changes::{ChangeEvent, ChangeKind};
use crate::error::{Error, Result};
use crate::index::SchemaRecord;
use crate::index::record::{is_tombstone, version_of};

/// The property of a share's row holding its snapshot cursor while a snapshot runs: the
/// next key to read (`pk\u{1f}rk`), empty for the start.
pub(crate) const SNAPSHOT: &str = "Snapshot";
/// The entities one step reads (the table's rows scanned may be more).
const CHUNK: usize = 500;

/// Where a snapshot goes on: the next key of the table to read (`None`: the start).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub(crate) next: Option<(String, String)>,
}

impl Cursor {
    /// The cursor a share's row holds, if a snapshot runs.
    pub(crate) fn of(row: &Entity) -> Option<Cursor> {
        let text = row.get(SNAPSHOT).and_then(Value::as_str)?;
        if text.is_empty() {
            return Some(Cursor::default());
        }
        let (pk, rk) = text.split_once('\u{1f}')?;
        Some(Cursor {
            next: Some((pk.to_owned(), rk.to_owned())),
        })
    }

    /// Writes it into a share's row.
    pub(crate) fn write(&self, row: &mut Entity) {
        let text = match &self.next {
            None => String::new(),
            Some((pk, rk)) => format!("{pk}\u{1f}{rk}"),
        };
        row.set(SNAPSHOT, text);
    }
}

/// One step of a snapshot: what to deliver, the high watermark, and where the snapshot
/// goes on once every row of it is handled (`None`: the snapshot is done).
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) changes: Vec<FeedChange>,
    pub(crate) through: u64,
    pub(crate) rows: usize,
    pub(crate) after: Option<Cursor>,
}

/// The registered type whose feed a snapshot of `table` reads (read once per poll, not
/// per step).
///
/// # Errors
/// The store's errors; [`Error::Unsupported`] for a table no registered type declares a
/// feed on, or a wide type (its entities are read whole by their table, not here).
pub(crate) async fn feed_type<S: TableStore>(store: &S, table: &str) -> Result<SchemaRecord> {
    let record = SchemaRecord::list(store, Some(table))
        .await?
        .into_iter()
        .find(|r| r.declared.iter().any(|d| d.attribute == "feed"))
        .ok_or_else(|| {
            Error::Unsupported(format!(
                "a snapshot of `{table}` needs its type registered with its feed (open its IndexedTable once)"
            ))
        })?;
    if record.declared.iter().any(|d| d.attribute == "wide") {
        return Err(Error::Unsupported(format!(
            "a snapshot of `{table}`: wide types are not read by a snapshot yet; start the group from a time or a checkpoint"
        )));
    }
    Ok(record)
}

/// The rows a share's snapshot has still to deliver after `cursor`: the primaries of
/// `record`'s kind in the share, counted keys and kind only. **A scan of the rest of the
/// table** (what the snapshot itself reads), for `status` while a snapshot runs.
///
/// # Errors
/// The store's errors.
pub(crate) async fn remaining<S: TableStore>(
    store: &S,
    record: &SchemaRecord,
    share: u32,
    shares: u32,
    cursor: &Cursor,
) -> Result<u64> {
    use futures::TryStreamExt;
    let table = record.table.as_str();
    let mut query = Query::new().select([
        "PartitionKey",
        "RowKey",
        record.kind_property.as_str(),
        crate::index::record::MARKER_PROPERTY,
        tablekit_core::typed::EXPIRES_PROPERTY,
    ]);
    if let Some((pk, rk)) = &cursor.next {
        query = query.continue_from(Some(ContinuationToken::new(pk.clone(), rk.clone())));
    }
    let now = tablekit_core::clock::now();
    let mut rows = std::pin::pin!(store.query_stream(table, query));
    let mut left = 0;
    loop {
        let row = match rows.try_next().await {
            Ok(Some(row)) => row,
            Ok(None) => return Ok(left),
            Err(e) if e.kind() == ErrorKind::TableNotFound => return Ok(left),
            Err(e) => return Err(e),
        };
        if log::share_of(table, &row.partition_key, shares) == share
            && row.get(&record.kind_property).and_then(Value::as_str) == Some(record.kind.as_str())
            && !is_tombstone(&row)
            && !is_expired(&row, now)
        {
            left += 1;
        }
    }
}

/// One step of the snapshot of `share` of `record`'s table (see the module docs), the log
/// read from `next`.
///
/// # Errors
/// The store's errors.
pub(crate) async fn step<S: TableStore>(
    store: &S,
    record: &SchemaRecord,
    share: u32,
    shares: u32,
    cursor: &Cursor,
    next: u64,
) -> Result<Step> {
    let table = record.table.as_str();
    // 1. The low watermark.
    let low_head = log::head(store, table, share).await?;
    let low = low_head.next - 1;
    // 2. A chunk of the table.
    let mut query = Query::new().top(CHUNK);
    if let Some((pk, rk)) = &cursor.next {
        query = query.continue_from(Some(ContinuationToken::new(pk.clone(), rk.clone())));
    }
    let page = match store.query(table, &query).await {
        Ok(page) => page,
        Err(e) if e.kind() == ErrorKind::TableNotFound => tablekit_core::Page::default(),
        Err(e) => return Err(e),
    };
    let after = page.continuation.as_ref().map(|token| Cursor {
        next: Some((
            token.next_partition_key().to_owned(),
            token.next_row_key().to_owned(),
        )),
    });
    let now = tablekit_core::clock::now();
    let mine = |pk: &str| log::share_of(table, pk, shares) == share;
    let mut rows = Vec::new();
    let mut waiting: HashSet<(String, String)> = HashSet::new();
    for row in page.entities {
        if !mine(&row.partition_key) {
            continue;
        }
        if row.row_key.starts_with(WAITING_PREFIX) {
            if to_come(store, table, share, &low_head, next, &row).await? {
                waiting.insert((row.partition_key.clone(), waiting_hash(&row.row_key)));
            }
        } else if row.get(&record.kind_property).and_then(Value::as_str)
            == Some(record.kind.as_str())
            && !is_tombstone(&row)
            && !is_expired(&row, now)
        {
            rows.push(row);
        }
    }
    // The chunk may end inside a partition: that partition's waiting changes (keyed
    // after its entities) are read on their own.
    if let (Some(after), Some(last)) = (&after, rows.last())
        && after
            .next
            .as_ref()
            .is_some_and(|(pk, _)| *pk == last.partition_key)
    {
        let partition = last.partition_key.clone();
        let query = Query::with_filter(
            tablekit_core::filter::partition_key().eq(partition.as_str()) & log::waiting_range(),
        );
        for row in store.query_all(table, query).await? {
            if to_come(store, table, share, &low_head, next, &row).await? {
                waiting.insert((partition.clone(), waiting_hash(&row.row_key)));
            }
        }
    }
    // 3. The high watermark.
    let high = log::head(store, table, share).await?.next - 1;
    // 4. The log through it.
    let mut changes = Vec::new();
    let mut at = next;
    while at <= high {
        let page = super::read(store, table, share, at, super::DEFAULT_READ).await?;
        let Some(last) = page.last() else { break };
        at = last.seq + 1;
        changes.extend(page.into_iter().filter(|c| c.seq <= high));
    }
    let changed: HashSet<(&str, &str)> = changes
        .iter()
        .filter(|c| c.seq > low)
        .map(|c| (c.event.partition_key.as_str(), c.event.row_key.as_str()))
        .collect();
    // 5. The chunk's entities not changed meanwhile.
    let mut snapshot = Vec::new();
    for row in rows {
        let key = (row.partition_key.as_str(), row.row_key.as_str());
        if changed.contains(&key)
            || waiting.contains(&(
                row.partition_key.clone(),
                waiting_hash(&log::waiting_row_key(&row.row_key, 0)),
            ))
        {
            continue;
        }
        let version = version_of(&row).unwrap_or(0);
        let Some(mut event) =
            ChangeEvent::of_write("", &record.kind, table, version, Some(&row), None)
        else {
            continue;
        };
        event.change = ChangeKind::Snapshot;
        snapshot.push(FeedChange {
            share,
            seq: high,
            at: now,
            event,
        });
    }
    let rows = snapshot.len();
    changes.extend(snapshot);
    Ok(Step {
        changes,
        through: high,
        rows,
        after,
    })
}

/// Whether a change still waiting in its partition is one the log gives from `next` on:
/// one not sequenced yet, or numbered from `next` on, or numbered but not appended (the
/// relay numbers it again, as it does one whose number was trimmed). One appended before
/// `next` (its removal from the partition not done yet) is not: the entity's row stands
/// for it. The relay's own check decides, with its point read, made only in the moment
/// between a relay's append and its removal, or after a failed removal.
async fn to_come<S: TableStore>(
    store: &S,
    table: &str,
    share: u32,
    head: &log::Head,
    next: u64,
    change: &Entity,
) -> Result<bool> {
    match log::seq_of(change) {
        Some(seq) if seq < next => Ok(!log::appended(store, table, share, head, change).await?),
        _ => Ok(true),
    }
}

/// The part of a waiting change's RowKey naming its entity (the hash of its RowKey).
fn waiting_hash(row_key: &str) -> String {
    row_key.rsplit('~').next().unwrap_or_default().to_owned()
}
