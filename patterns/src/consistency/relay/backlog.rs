//! What the relay has left to publish, read-only (for `status` and the console).

use chrono::Utc;
use tablekit_core::{Query, TableStore};

use super::super::outbox;
use super::super::pending::{PENDING_TABLE, next_or_end};
use crate::error::Result;

/// What the relay has left to publish: read-only, through the pending markers (its cost
/// follows the partitions with pending work, like a relay pass).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Backlog {
    /// Pending markers read (a marker stays a while after its partition's outbox empties).
    pub markers: u64,
    /// Partitions whose outbox holds entries.
    pub partitions: u64,
    /// Outbox entries in them, delayed work whose time has not come left out.
    pub entries: u64,
    /// When the oldest of those entries was written.
    pub oldest: Option<chrono::DateTime<Utc>>,
    /// Delayed work whose time has not come (the burial of a delete's tombstone).
    #[serde(default)]
    pub delayed: u64,
    /// When the first of that delayed work comes due.
    #[serde(default)]
    pub delayed_next: Option<chrono::DateTime<Utc>>,
    /// Entries counted in `entries` that were delayed work whose time has come.
    #[serde(default)]
    pub came_due: u64,
    /// When the first of those came due.
    #[serde(default)]
    pub came_due_since: Option<chrono::DateTime<Utc>>,
    /// Each table with entries waiting, and how many (by table name).
    #[serde(default)]
    pub tables: std::collections::BTreeMap<String, u64>,
    /// Changes of a feed waiting in their partitions for a relay to sequence them (no
    /// group receives them until one does).
    #[serde(default)]
    pub feed_changes: u64,
    /// Each table with feed changes waiting, and how many.
    #[serde(default)]
    pub feed_tables: std::collections::BTreeMap<String, u64>,
}

/// The relay's backlog over every table's pending markers.
///
/// # Errors
/// The store's errors.
pub async fn backlog<S: TableStore>(store: &S) -> Result<Backlog> {
    backlog_in(store, Query::new()).await
}

/// The relay's backlog of one table, over its pending markers.
///
/// # Errors
/// The store's errors.
pub async fn backlog_of<S: TableStore>(store: &S, table: &str) -> Result<Backlog> {
    backlog_in(
        store,
        Query::with_filter(tablekit_core::filter::partition_key().eq(table)),
    )
    .await
}

async fn backlog_in<S: TableStore>(store: &S, markers: Query) -> Result<Backlog> {
    let mut backlog = Backlog::default();
    let mut markers = std::pin::pin!(store.query_stream(PENDING_TABLE, markers));
    while let Some(marker) = next_or_end(&mut markers).await? {
        backlog.markers += 1;
        let (table, partition_key) = (&marker.partition_key, &marker.row_key);
        let before = backlog.entries;
        let changes_before = backlog.feed_changes;
        let mut entries =
            std::pin::pin!(store.query_stream(table, outbox::relay_query(partition_key)));
        while let Some(entry) = next_or_end(&mut entries).await? {
            if outbox::is_waiting(&entry) {
                backlog.feed_changes += 1;
                continue;
            }
            if outbox::waiting(&entry) {
                backlog.delayed += 1;
                if let Some(due) = outbox::not_before(&entry) {
                    backlog.delayed_next = Some(backlog.delayed_next.map_or(due, |d| d.min(due)));
                }
                continue;
            }
            backlog.entries += 1;
            if let Some(due) = outbox::not_before(&entry) {
                backlog.came_due += 1;
                backlog.came_due_since = Some(backlog.came_due_since.map_or(due, |d| d.min(due)));
            }
            if let Some(created) = outbox::created_at(&entry) {
                backlog.oldest = Some(backlog.oldest.map_or(created, |o| o.min(created)));
            }
        }
        if backlog.entries > before || backlog.feed_changes > changes_before {
            backlog.partitions += 1;
        }
        if backlog.entries > before {
            *backlog.tables.entry(table.clone()).or_default() += backlog.entries - before;
        }
        if backlog.feed_changes > changes_before {
            *backlog.feed_tables.entry(table.clone()).or_default() +=
                backlog.feed_changes - changes_before;
        }
    }
    Ok(backlog)
}
