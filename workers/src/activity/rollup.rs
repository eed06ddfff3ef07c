//! The roll-up pass: minute rows of closed hours older than [`MINUTES_KEPT`] summed into
//! hour rows, hour rows older than [`HOURS_KEPT`] deleted, forgotten queues and workers
//! removed. Any process may run it over every process's rows, at any time, as often as it
//! likes: each step is idempotent, and a pass stopped anywhere leaves rows the next pass
//! finishes.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use tablekit_core::{Batch, Entity, ErrorKind, IfMatch, Query, TableStore, filter};

use super::history::{LAST_SEEN, next, one_hour};
use super::keys::{self, QUEUES_PARTITION};
use super::{ACTIVITY_TABLE, BATCH, Counts, HOURS_KEPT, MINUTES_KEPT, PROCESSED};
use crate::error::Result;

/// What a [`roll_up`] pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RollUpReport {
    /// Hour rows it wrote.
    pub hours_written: u64,
    /// Hour rows it found written already (by another pass, or by one stopped before its
    /// deletes): their minute rows were only deleted.
    pub hours_found: u64,
    /// Minute rows it deleted.
    pub minutes_deleted: u64,
    /// Hour rows it deleted (older than [`HOURS_KEPT`]).
    pub hours_deleted: u64,
    /// Queue markers it deleted (no row of the queue left).
    pub queues_forgotten: u64,
    /// Worker records it deleted (see [`super::forget_workers`]).
    pub workers_forgotten: u64,
}

impl RollUpReport {
    fn add(&mut self, other: &RollUpReport) {
        self.hours_written += other.hours_written;
        self.hours_found += other.hours_found;
        self.minutes_deleted += other.minutes_deleted;
        self.hours_deleted += other.hours_deleted;
        self.queues_forgotten += other.queues_forgotten;
        self.workers_forgotten += other.workers_forgotten;
    }
}

/// One pass over the history as of `now`, for every queue with a history: the minute rows
/// of each hour that ended more than [`MINUTES_KEPT`] before `now`'s hour are summed per
/// process into an hour row — inserted; one found written is left as it is, since the
/// minute rows of such an hour never change and the first complete sum is right — and
/// then deleted; hour rows (and minute rows) older than [`HOURS_KEPT`] are deleted; the
/// markers of queues with no row left and the worker records silent for
/// [`super::FORGET_WORKERS_AFTER`] go too. Reads only the rows it trims (RowKey ranges
/// below the cut-offs), the queue markers and the worker records.
///
/// # Errors
/// The store's errors (a missing table is nothing to do). A queue that fails does not stop
/// the others; the first error is returned once every queue was tried.
pub async fn roll_up<S: TableStore>(store: &S, now: DateTime<Utc>) -> Result<RollUpReport> {
    let duration = |d| chrono::Duration::from_std(d).unwrap_or_default();
    let minute_cut = keys::hour_of(keys::shift(now, -duration(MINUTES_KEPT)));
    let hour_cut = keys::hour_of(keys::shift(now, -duration(HOURS_KEPT)));
    let mut report = RollUpReport::default();
    let mut failure = None;
    let markers = Query::partition(QUEUES_PARTITION);
    let mut markers = std::pin::pin!(store.query_stream(ACTIVITY_TABLE, markers));
    while let Some(marker) = next(&mut markers).await? {
        let Some(queue) = keys::decode_queue(&marker.row_key) else {
            continue;
        };
        match roll_up_queue(store, &queue, &marker, minute_cut, hour_cut).await {
            Ok(done) => report.add(&done),
            Err(e) => {
                tracing::debug!(queue = %crate::display::neutral(&queue), error = %e, "rolling up a queue's history failed");
                failure.get_or_insert(e);
            }
        }
    }
    match super::forget_workers(store, now).await {
        Ok(forgotten) => report.workers_forgotten = forgotten,
        Err(e) => {
            failure.get_or_insert(e);
        }
    }
    failure.map_or(Ok(report), Err)
}

async fn roll_up_queue<S: TableStore>(
    store: &S,
    queue: &str,
    marker: &Entity,
    minute_cut: DateTime<Utc>,
    hour_cut: DateTime<Utc>,
) -> Result<RollUpReport> {
    let mut report = RollUpReport::default();
    let minutes = keys::minute_partition(queue);
    let query = Query::with_filter(
        filter::partition_key()
            .eq(minutes.clone())
            .and(filter::row_key().lt(keys::minute_key(minute_cut))),
    );
    let mut rows = std::pin::pin!(store.query_stream(ACTIVITY_TABLE, query));
    // The rows are in time order: one hour's rows (of every process) at a time.
    let mut hour = None;
    let mut group: BTreeMap<String, (Counts, Vec<String>)> = BTreeMap::new();
    while let Some(entity) = next(&mut rows).await? {
        let Some((minute, process)) = keys::parse_minute_row(&entity.row_key) else {
            continue;
        };
        let this_hour = keys::hour_of(minute);
        if hour != Some(this_hour) {
            if let Some(done) = hour {
                let group = std::mem::take(&mut group);
                report.add(&settle(store, queue, done, group, hour_cut).await?);
            }
            hour = Some(this_hour);
        }
        let (counts, rows) = group.entry(process.to_owned()).or_default();
        *counts += Counts::read_from(&entity);
        rows.push(entity.row_key);
    }
    if let Some(done) = hour {
        report.add(&settle(store, queue, done, group, hour_cut).await?);
    }

    let hours = keys::hour_partition(queue);
    let query = Query::with_filter(
        filter::partition_key()
            .eq(hours.clone())
            .and(filter::row_key().lt(keys::hour_key(hour_cut))),
    );
    let mut rows = std::pin::pin!(store.query_stream(ACTIVITY_TABLE, query.select([PROCESSED])));
    let mut old = Vec::new();
    while let Some(entity) = next(&mut rows).await? {
        old.push(entity.row_key);
        if old.len() == BATCH {
            report.hours_deleted += delete_rows(store, &hours, std::mem::take(&mut old)).await?;
        }
    }
    report.hours_deleted += delete_rows(store, &hours, old).await?;

    // Each process marks the queue at least hourly while it writes its rows: a marker
    // older than the kept hours by more than that has no row left after this pass.
    let seen = marker
        .get(LAST_SEEN)
        .and_then(tablekit_core::Value::as_datetime);
    if seen.is_none_or(|seen| keys::shift(seen, one_hour() * 2) < hour_cut) {
        let etag = marker.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        match store
            .delete(ACTIVITY_TABLE, QUEUES_PARTITION, &marker.row_key, etag)
            .await
        {
            Ok(()) => report.queues_forgotten += 1,
            // Marked again meanwhile, or gone.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::PreconditionFailed | ErrorKind::NotFound
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(report)
}

/// Settles one closed hour of a queue: for each process, its hour row (unless the hour is
/// past keeping), then the deletion of its minute rows. The processes are settled at once.
async fn settle<S: TableStore>(
    store: &S,
    queue: &str,
    hour: DateTime<Utc>,
    group: BTreeMap<String, (Counts, Vec<String>)>,
    hour_cut: DateTime<Utc>,
) -> Result<RollUpReport> {
    let minutes = keys::minute_partition(queue);
    let hours = keys::hour_partition(queue);
    let settled = group.into_iter().map(|(process, (counts, rows))| {
        let (minutes, hours) = (&minutes, &hours);
        async move {
            let mut report = RollUpReport::default();
            if hour >= hour_cut {
                let row =
                    counts.write_to(Entity::new(hours.clone(), keys::hour_row(hour, &process)));
                match store.insert(ACTIVITY_TABLE, row).await {
                    Ok(_) => report.hours_written += 1,
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => report.hours_found += 1,
                    Err(e) => return Err(e),
                }
            }
            report.minutes_deleted += delete_rows(store, minutes, rows).await?;
            Ok::<_, tablekit_core::Error>(report)
        }
    });
    let mut report = RollUpReport::default();
    for done in futures::future::try_join_all(settled).await? {
        report.add(&done);
    }
    Ok(report)
}

/// Deletes rows of one partition, 100 to an entity group transaction; a batch that finds a
/// row gone (another pass deleted it) is done one row at a time. Returns how many this
/// call deleted.
async fn delete_rows<S: TableStore>(store: &S, partition: &str, rows: Vec<String>) -> Result<u64> {
    let mut deleted = 0;
    for chunk in rows.chunks(BATCH) {
        let mut batch = Batch::new();
        for row in chunk {
            batch.delete(partition, row.clone(), IfMatch::Any);
        }
        match store.submit_batch(ACTIVITY_TABLE, batch).await {
            Ok(_) => deleted += chunk.len() as u64,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                for row in chunk {
                    if store
                        .delete_if_exists(ACTIVITY_TABLE, partition, row)
                        .await?
                    {
                        deleted += 1;
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(deleted)
}
