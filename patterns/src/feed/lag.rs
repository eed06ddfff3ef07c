//! What the feeds hold and how far each group is behind: the feeds the registered schemas
//! declare, and per group and share its holder, checkpoint, the changes behind it and the
//! age of the oldest it has not handled (for `status`, the console and the metrics).
//! Its cost follows the groups and shares: a head read per share, one row read per share
//! that is behind, and one range read of each group's rows — and while a group reads a
//! snapshot, a keys-only scan of what the snapshot has still to read, per share.

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use tablekit_core::{Entity, ErrorKind, Query, TableStore, Value, filter};

use super::log::{self, FEED_TABLE};
use crate::error::Result;
use crate::index::SchemaRecord;

/// A feed a registered type declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declared {
    /// The primaries' table.
    pub table: String,
    /// The entity kind.
    pub kind: String,
    /// Its shares.
    pub shares: u32,
    /// How long it keeps changes.
    pub retention: Duration,
}

/// The feeds the registered schemas declare (see `SchemaRecord`), one per table.
///
/// # Errors
/// The store's errors; a schema record that does not read.
pub async fn declared<S: TableStore>(store: &S) -> Result<Vec<Declared>> {
    let mut feeds: Vec<Declared> = Vec::new();
    for record in SchemaRecord::list(store, None).await? {
        let Some(feed) = record.declared.iter().find(|d| d.attribute == "feed") else {
            continue;
        };
        if feeds.iter().any(|f| f.table == record.table) {
            continue;
        }
        let shares = feed
            .setting("shares")
            .and_then(|s| s.parse().ok())
            .unwrap_or(super::DEFAULT_SHARES);
        let retention = feed
            .setting("retention")
            .and_then(|s| s.parse().ok())
            .map_or(super::DEFAULT_RETENTION, Duration::from_secs);
        feeds.push(Declared {
            table: record.table,
            kind: record.kind,
            shares,
            retention,
        });
    }
    Ok(feeds)
}

/// Trims every declared feed to its retention (see [`super::trim()`]).
///
/// # Errors
/// The store's errors.
pub async fn trim_declared<S: TableStore>(store: &S) -> Result<super::Trimmed> {
    let mut all = super::Trimmed::default();
    for feed in declared(store).await? {
        let trimmed = super::trim(store, &feed.table, feed.shares, feed.retention).await?;
        all.deleted += trimmed.deleted;
        all.shares += trimmed.shares;
    }
    Ok(all)
}

/// One share as a group reads it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShareLag {
    /// The share.
    pub share: u32,
    /// The member holding its lease, if its lease runs.
    pub holder: Option<String>,
    /// When that lease ends.
    pub until: Option<DateTime<Utc>>,
    /// The last sequence number the group handled (0: none).
    pub checkpoint: u64,
    /// The last sequence number in the share's log.
    pub last: u64,
    /// The lowest sequence number the log still keeps.
    pub oldest: u64,
    /// Changes after the checkpoint, and the rows a snapshot the group reads in this
    /// share has still to deliver.
    pub behind: u64,
    /// The rows of those a snapshot has still to deliver (0: no snapshot runs).
    #[serde(default)]
    pub snapshot_rows: u64,
    /// When the oldest change after the checkpoint was sequenced.
    pub oldest_unread: Option<DateTime<Utc>>,
    /// Whether the checkpoint is older than what the log keeps (the group will get
    /// `PositionExpired`).
    pub expired: bool,
}

/// A group of consumers of a table's feed, with its lag.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupLag {
    /// The primaries' table.
    pub table: String,
    /// The group's name.
    pub group: String,
    /// Its members whose heartbeat runs, with when it ends.
    pub members: Vec<(String, DateTime<Utc>)>,
    /// Each share it has read, by number.
    pub shares: Vec<ShareLag>,
}

impl GroupLag {
    /// The changes behind, over every share.
    pub fn behind(&self) -> u64 {
        self.shares.iter().map(|s| s.behind).sum()
    }

    /// When the oldest change not handled was sequenced.
    pub fn oldest_unread(&self) -> Option<DateTime<Utc>> {
        self.shares.iter().filter_map(|s| s.oldest_unread).min()
    }
}

/// A feed's log and the groups reading it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FeedLag {
    /// The changes its logs keep now.
    pub kept: u64,
    /// Each group, with its members, shares, checkpoints and lag.
    pub groups: Vec<GroupLag>,
}

/// `table`'s feed (divided into `shares`): what its logs keep and every group with its
/// lag. One head read per share serves both.
///
/// # Errors
/// The store's errors.
pub async fn lag<S: TableStore>(store: &S, table: &str, shares: u32) -> Result<FeedLag> {
    let heads = futures::future::try_join_all(
        (0..shares.max(1)).map(|share| log::head(store, table, share)),
    )
    .await?;
    let kept = heads.iter().map(super::Head::len).sum();
    let prefix = format!("group~{table}~");
    let query = Query::with_filter(
        filter::partition_key().ge(prefix.as_str())
            & filter::partition_key().lt(format!("{prefix}~").as_str()),
    );
    let rows: Vec<Entity> = match store.query_stream(FEED_TABLE, query).try_collect().await {
        Ok(rows) => rows,
        Err(e) if e.kind() == ErrorKind::TableNotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let now = tablekit_core::clock::now();
    let mut feed_type: Option<SchemaRecord> = None;
    let mut groups: Vec<GroupLag> = Vec::new();
    for row in &rows {
        let Some(name) = row.partition_key.strip_prefix(&prefix) else {
            continue;
        };
        if groups.last().is_none_or(|g| g.group != name) {
            groups.push(GroupLag {
                table: table.to_owned(),
                group: name.to_owned(),
                members: Vec::new(),
                shares: Vec::new(),
            });
        }
        let Some(group) = groups.last_mut() else {
            continue;
        };
        let until = row.get("Until").and_then(Value::as_datetime);
        if let Some(member) = row.row_key.strip_prefix("member~") {
            if let Some(until) = until.filter(|u| *u > now) {
                group.members.push((member.to_owned(), until));
            }
        } else if let Some(share) = row.row_key.strip_prefix("share~")
            && let Ok(share) = share.parse::<u32>()
            && let Some(head) = heads.get(share as usize)
        {
            let checkpoint = row
                .get("Checkpoint")
                .and_then(Value::as_i64)
                .and_then(|n| u64::try_from(n).ok())
                .unwrap_or(0);
            let owner = row.get("Owner").and_then(Value::as_str).unwrap_or("");
            let held = !owner.is_empty() && until.is_some_and(|u| u > now);
            let last = head.next - 1;
            let expired = checkpoint + 1 < head.oldest;
            let oldest_unread = if checkpoint < last && !expired {
                unread_at(store, table, share, checkpoint + 1).await?
            } else {
                None
            };
            // A group reading its snapshot is behind by the rows it has still to read.
            let snapshot_rows = match super::snapshot::Cursor::of(row) {
                Some(cursor) => {
                    let record = match &feed_type {
                        Some(record) => record.clone(),
                        None => {
                            let record = super::snapshot::feed_type(store, table).await?;
                            feed_type = Some(record.clone());
                            record
                        }
                    };
                    super::snapshot::remaining(store, &record, share, shares, &cursor).await?
                }
                None => 0,
            };
            group.shares.push(ShareLag {
                share,
                holder: held.then(|| owner.to_owned()),
                until: held.then_some(until).flatten(),
                checkpoint,
                last,
                oldest: head.oldest,
                snapshot_rows,
                behind: last.saturating_sub(checkpoint) + snapshot_rows,
                oldest_unread,
                expired,
            });
        }
    }
    Ok(FeedLag { kept, groups })
}

/// When the change `seq` of a share was sequenced.
async fn unread_at<S: TableStore>(
    store: &S,
    table: &str,
    share: u32,
    seq: u64,
) -> Result<Option<DateTime<Utc>>> {
    let row = store
        .get(
            FEED_TABLE,
            &log::log_partition(table, share),
            &log::seq_row_key(seq),
            Some(&[log::AT]),
        )
        .await?;
    Ok(row.and_then(|r| r.get(log::AT).and_then(Value::as_datetime)))
}
