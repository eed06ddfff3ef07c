//! Changes a group's handler could not take (a permanent failure, or retries spent):
//! parked in the group's partition with the reason, so the group goes on and an operator
//! sees them — as a queue's poison messages are kept (RowKey
//! `parked~<share:05>~<seq:020>`).

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use tablekit_core::{Entity, ErrorKind, Query, TableStore, Value, WriteOp, filter};

use super::FeedChange;
use super::group::group_partition;
use super::log::FEED_TABLE;
use crate::error::{Error, Result};

const REASON: &str = "Reason";
const CHANGE: &str = "Change";
const PARKED_AT: &str = "ParkedAt";
/// The longest reason kept (characters).
const MAX_REASON: usize = 4_000;

/// A change a group parked.
#[derive(Clone, Debug, PartialEq)]
pub struct Parked {
    /// The share it was in.
    pub share: u32,
    /// Its sequence number.
    pub seq: u64,
    /// Why the handler could not take it.
    pub reason: String,
    /// When it was parked.
    pub parked_at: DateTime<Utc>,
    /// The change, as JSON (its entity may be large: shown bounded).
    pub change: String,
}

fn row_key(share: u32, seq: u64) -> String {
    format!("parked~{share:05}~{seq:020}")
}

/// Parks `change` for `group` of `table` with `reason` (again is harmless).
///
/// # Errors
/// The store's errors; [`Error::Encode`] when the change does not serialise.
pub async fn park<S: TableStore>(
    store: &S,
    table: &str,
    group: &str,
    change: &FeedChange,
    reason: &str,
) -> Result<()> {
    let json = crate::error::json("a parked change", &change.event)?;
    let reason: String = reason.chars().take(MAX_REASON).collect();
    let mut entity = Entity::new(
        group_partition(table, group),
        row_key(change.share, change.seq),
    )
    .with(REASON, reason)
    .with(PARKED_AT, tablekit_core::clock::now());
    // A change too large for one property keeps its keys and version only.
    let json = if json.len() > 30_000 {
        format!(
            "{{\"partition_key\":{:?},\"row_key\":{:?},\"version\":{},\"truncated\":true}}",
            change.event.partition_key, change.event.row_key, change.event.version
        )
    } else {
        json
    };
    entity.set(CHANGE, json);
    store
        .execute(FEED_TABLE, WriteOp::InsertOrReplace(entity))
        .await
        .map(drop)
}

/// The changes `group` of `table` parked, oldest share and number first.
///
/// # Errors
/// The store's errors.
pub async fn parked<S: TableStore>(store: &S, table: &str, group: &str) -> Result<Vec<Parked>> {
    let query = Query::with_filter(
        filter::partition_key().eq(group_partition(table, group))
            & filter::row_key().ge("parked~")
            & filter::row_key().lt("parked~~"),
    );
    let rows: Vec<Entity> = match store.query_stream(FEED_TABLE, query).try_collect().await {
        Ok(rows) => rows,
        Err(e) if e.kind() == ErrorKind::TableNotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    rows.iter()
        .map(|row| {
            let what = || format!("parked change {}/{}", row.partition_key, row.row_key);
            let mut parts = row.row_key.splitn(3, '~').skip(1);
            let share = parts.next().and_then(|s| s.parse().ok());
            let seq = parts.next().and_then(|s| s.parse().ok());
            let (Some(share), Some(seq)) = (share, seq) else {
                return Err(Error::malformed(
                    what(),
                    "its key names no share and number",
                ));
            };
            Ok(Parked {
                share,
                seq,
                reason: row
                    .get(REASON)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                parked_at: row
                    .get(PARKED_AT)
                    .and_then(Value::as_datetime)
                    .unwrap_or(DateTime::<Utc>::MIN_UTC),
                change: row
                    .get(CHANGE)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            })
        })
        .collect()
}
