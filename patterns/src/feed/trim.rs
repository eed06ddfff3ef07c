//! Retention: the changes of a share older than the feed's retention are deleted from the
//! oldest on, and the head's `Oldest` moves past them. A pass reads the head and the rows
//! it deletes (plus one it keeps), so its cost follows what it trims, not the log.

use std::time::Duration;

use tablekit_core::{Batch, ErrorKind, IfMatch, Query, TableStore, Value};

use super::log::{self, FEED_TABLE, Head};
use crate::error::Result;

/// What a trim did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trimmed {
    /// Changes deleted.
    pub deleted: u64,
    /// The shares whose oldest kept position moved.
    pub shares: u32,
}

/// Deletes the changes of `table`'s feed (divided into `shares`) sequenced more than
/// `retention` ago.
///
/// # Errors
/// The store's errors.
pub async fn trim<S: TableStore>(
    store: &S,
    table: &str,
    shares: u32,
    retention: Duration,
) -> Result<Trimmed> {
    let cutoff = tablekit_core::clock::now()
        - chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
    let mut trimmed = Trimmed::default();
    for share in 0..shares.max(1) {
        let deleted = trim_share(store, table, share, cutoff).await?;
        if deleted > 0 {
            trimmed.deleted += deleted;
            trimmed.shares += 1;
        }
    }
    Ok(trimmed)
}

async fn trim_share<S: TableStore>(
    store: &S,
    table: &str,
    share: u32,
    cutoff: chrono::DateTime<chrono::Utc>,
) -> Result<u64> {
    let mut deleted = 0;
    loop {
        let head = log::head(store, table, share).await?;
        if head.is_empty() {
            return Ok(deleted);
        }
        let partition = log::log_partition(table, share);
        let query = Query::with_filter(log::rows_from(table, share, head.oldest)).top(99);
        let page = match store.query(FEED_TABLE, &query).await {
            Ok(page) => page,
            Err(e) if e.kind() == ErrorKind::TableNotFound => return Ok(deleted),
            Err(e) => return Err(e),
        };
        let expired: Vec<u64> = page
            .entities
            .iter()
            .take_while(|row| {
                row.get(log::AT)
                    .and_then(Value::as_datetime)
                    .is_some_and(|at| at < cutoff)
            })
            .filter_map(log::seq_of)
            .collect();
        let Some(&last) = expired.last() else {
            return Ok(deleted);
        };
        // Moving the head first, then deleting in the same transaction: a reader never
        // finds a gap below `Oldest`.
        let mut batch = Batch::new();
        for seq in &expired {
            batch.delete(partition.as_str(), log::seq_row_key(*seq), IfMatch::Any);
        }
        let moved = Head {
            oldest: last + 1,
            ..head
        };
        batch.push(moved.write(table, share));
        match store.submit_batch(FEED_TABLE, batch).await {
            Ok(_) => deleted += expired.len() as u64,
            // The relay appended meanwhile (the head's ETag moved): read again.
            Err(e) if crate::consistency::lost_race(&e) => continue,
            Err(e) => return Err(e),
        }
        if expired.len() < page.entities.len() {
            return Ok(deleted);
        }
    }
}
