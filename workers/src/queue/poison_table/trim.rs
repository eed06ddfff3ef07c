//! The poison table's retention cap: a queue keeps at most so many poison messages, none
//! older than so long; the workers trim the oldest beyond it, and record each trim.

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::TryStreamExt as _;
use tablekit_core::{Entity, Query, TableStore, Value, filter};

use super::rows::*;
use super::{POISON_TABLE, PoisonTable, missing_table};
use crate::error::Result;

/// How many poison messages a queue keeps, and for how long (Sidekiq's dead set's
/// defaults: 10,000 messages, 180 days).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// The most messages kept: the oldest beyond it are trimmed.
    pub max_messages: u64,
    /// The longest a message is kept.
    pub max_age: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_messages: 10_000,
            max_age: Duration::from_secs(180 * 24 * 3600),
        }
    }
}

/// The most messages one trim takes (the next trim takes the rest).
const TRIM_MOST: usize = 1_000;

/// A trim the retention cap made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trim {
    /// When.
    pub at: DateTime<Utc>,
    /// How many messages went.
    pub trimmed: u64,
    /// The cap it kept.
    pub retention: String,
}

impl<S: TableStore> PoisonTable<S> {
    /// Discards `queue`'s oldest poison messages beyond `retention` (at most 1,000 a call),
    /// and records the trim; returns how many went. Reads the count's shares and, without
    /// their bodies, only the rows it trims and the first it keeps (one row when none is
    /// due).
    ///
    /// # Errors
    /// The store's errors; what went before stays gone, and is recorded.
    pub async fn trim(&self, queue: &str, retention: Retention) -> Result<u64> {
        let mut over = self
            .count(queue)
            .await?
            .saturating_sub(retention.max_messages);
        let now = tablekit_core::clock::now();
        let oldest_kept =
            now - chrono::Duration::from_std(retention.max_age).unwrap_or(chrono::Duration::MAX);
        let partition = crate::activity::encode_queue(queue);
        // The oldest rows, without their bodies: what a removal reads.
        let oldest = |top: usize| {
            Query::with_filter(
                filter::partition_key()
                    .eq(partition.clone())
                    .and(filter::row_key().ge(OLDEST.to_owned()))
                    .and(filter::row_key().lt("t/".to_owned())),
            )
            .select(REMOVAL_PROPERTIES.iter().copied())
            .top(top)
        };
        // Under the count cap, the oldest row alone says whether any is too old: the
        // usual pass reads one row.
        if over == 0 {
            let first = match self.store.query(POISON_TABLE, &oldest(1)).await {
                Ok(page) => page.entities.into_iter().next(),
                Err(e) if missing_table(&e) => None,
                Err(e) => return Err(e),
            };
            let due = first.is_some_and(|row| {
                row.get(POISONED_AT)
                    .and_then(Value::as_datetime)
                    .is_some_and(|at| at < oldest_kept)
            });
            if !due {
                return Ok(0);
            }
        }
        let mut rows = std::pin::pin!(self.store.query_stream(POISON_TABLE, oldest(TRIM_MOST)));
        let mut trimmed = 0;
        while trimmed < TRIM_MOST as u64 {
            let row = match rows.try_next().await {
                Ok(Some(row)) => row,
                Ok(None) => break,
                Err(e) if missing_table(&e) => break,
                Err(e) => return Err(e),
            };
            let too_old = row
                .get(POISONED_AT)
                .and_then(Value::as_datetime)
                .is_some_and(|at| at < oldest_kept);
            if over == 0 && !too_old {
                break;
            }
            if self.remove(&row).await? {
                trimmed += 1;
            }
            over = over.saturating_sub(1);
        }
        if trimmed > 0 {
            let record = Entity::new(
                &partition,
                format!(
                    "{TRIMS}{}",
                    inverted(&time_key(now, "0")).unwrap_or_default()
                ),
            )
            .with(TRIMMED, i64::try_from(trimmed).unwrap_or(i64::MAX))
            .with(
                EXAMPLE,
                format!(
                    "kept at most {} messages, none older than {} days",
                    retention.max_messages,
                    retention.max_age.as_secs() / 86_400
                ),
            );
            self.store.insert_or_replace(POISON_TABLE, record).await?;
            tracing::info!(queue = %queue, trimmed, "trimmed the poison table to its retention cap");
        }
        Ok(trimmed)
    }

    /// The trims of `queue`, newest first, up to `limit` (the rows are keyed newest first).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn trims(&self, queue: &str, limit: usize) -> Result<Vec<Trim>> {
        let partition = crate::activity::encode_queue(queue);
        let query = Query::with_filter(
            filter::partition_key()
                .eq(partition)
                .and(filter::row_key().ge(TRIMS.to_owned()))
                .and(filter::row_key().lt("r/".to_owned())),
        )
        .top(limit.max(1));
        let rows: Vec<Entity> = match self
            .store
            .query_stream(POISON_TABLE, query)
            .try_collect()
            .await
        {
            Ok(rows) => rows,
            Err(e) if missing_table(&e) => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut trims: Vec<Trim> = rows
            .iter()
            .map(|row| {
                let micros = row
                    .row_key
                    .strip_prefix(TRIMS)
                    .and_then(|k| k.split_once('.'))
                    .and_then(|(m, _)| m.parse::<i64>().ok())
                    .map_or(0, |inverted| LATEST - inverted);
                Trim {
                    at: DateTime::from_timestamp_micros(micros).unwrap_or_default(),
                    trimmed: u64::try_from(int(row, TRIMMED)).unwrap_or(0),
                    retention: str_of(row, EXAMPLE).to_owned(),
                }
            })
            .collect();
        trims.truncate(limit);
        Ok(trims)
    }
}
