//! Reading the history: a queue's points over a time, the queues that have one.

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use futures::TryStreamExt as _;
use tablekit_core::{Entity, ErrorKind, Query, TableStore, filter};

use super::keys::{self, DECLARED_PARTITION, QUEUES_PARTITION};
use super::{ACTIVITY_TABLE, Counts, MINUTES_KEPT, Point, Resolution};
use crate::error::Result;

/// The property of a queue marker: when a process last marked it.
pub(super) const LAST_SEEN: &str = "LastSeen";

/// A queue's history from `since` to `until` (UTC), summed over every process: a point per
/// minute from the hour that started 24 hours ago on, a point per hour before, in time
/// order. Only minutes and hours with some activity have a point (the others are zero).
/// The rows are read a page at a time, the hour rows then the minute rows of the time; at
/// most 1440 minute points and one point per hour are held.
///
/// # Errors
/// The store's errors (a missing table reads as no history).
pub async fn history<S: TableStore>(
    store: &S,
    queue: &str,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Vec<Point>> {
    if until <= since {
        return Ok(Vec::new());
    }
    let now = Utc::now();
    let kept = chrono::Duration::from_std(MINUTES_KEPT).unwrap_or_default();
    // Hours before this are shown per hour; minutes from it on per minute.
    let mut minute_cut = keys::hour_of(keys::shift(now, -kept));

    let mut hours: BTreeMap<DateTime<Utc>, Counts> = BTreeMap::new();
    let mut rolled_up: HashSet<(DateTime<Utc>, String)> = HashSet::new();
    let hour_rows = Query::with_filter(
        filter::partition_key()
            .eq(keys::hour_partition(queue))
            .and(filter::row_key().ge(keys::hour_key(keys::hour_of(since))))
            .and(filter::row_key().lt(keys::hour_key(keys::shift(
                keys::hour_of(until),
                one_hour(),
            )))),
    );
    let mut rows = std::pin::pin!(store.query_stream(ACTIVITY_TABLE, hour_rows));
    while let Some(entity) = next(&mut rows).await? {
        let Some((hour, process)) = keys::parse_hour_row(&entity.row_key) else {
            continue;
        };
        if hour + one_hour() <= since || hour >= until {
            continue;
        }
        *hours.entry(hour).or_default() += Counts::read_from(&entity);
        rolled_up.insert((hour, process.to_owned()));
        // A pass whose clock runs ahead rolled this hour up already: show it per hour.
        minute_cut = minute_cut.max(hour + one_hour());
    }

    let mut minutes: BTreeMap<DateTime<Utc>, Counts> = BTreeMap::new();
    let minute_rows = Query::with_filter(
        filter::partition_key()
            .eq(keys::minute_partition(queue))
            .and(filter::row_key().ge(keys::minute_key(keys::minute_of(since))))
            .and(filter::row_key().lt(keys::minute_key(keys::shift(
                keys::minute_of(until),
                one_minute(),
            )))),
    );
    let mut rows = std::pin::pin!(store.query_stream(ACTIVITY_TABLE, minute_rows));
    while let Some(entity) = next(&mut rows).await? {
        let Some((minute, process)) = keys::parse_minute_row(&entity.row_key) else {
            continue;
        };
        if minute + one_minute() <= since || minute >= until {
            continue;
        }
        let hour = keys::hour_of(minute);
        // Left by a roll-up stopped before its deletes: counted in the hour row.
        if rolled_up.contains(&(hour, process.to_owned())) {
            continue;
        }
        let counts = Counts::read_from(&entity);
        if minute < minute_cut {
            *hours.entry(hour).or_default() += counts;
        } else {
            *minutes.entry(minute).or_default() += counts;
        }
    }

    let point = |resolution| {
        move |(at, counts): (DateTime<Utc>, Counts)| Point {
            at,
            resolution,
            counts,
        }
    };
    Ok(hours
        .into_iter()
        .map(point(Resolution::Hour))
        .chain(minutes.into_iter().map(point(Resolution::Minute)))
        .filter(|p| !p.counts.is_zero())
        .collect())
}

/// The queues with a history, sorted by name (their markers; a queue's marker goes some
/// days after its last row).
///
/// # Errors
/// The store's errors (a missing table reads as none).
pub async fn queues_with_history<S: TableStore>(store: &S) -> Result<Vec<String>> {
    let query = Query::partition(QUEUES_PARTITION);
    let mut markers = std::pin::pin!(store.query_stream(ACTIVITY_TABLE, query));
    let mut queues = Vec::new();
    while let Some(marker) = next(&mut markers).await? {
        if let Some(queue) = keys::decode_queue(&marker.row_key) {
            queues.push(queue);
        }
    }
    queues.sort();
    Ok(queues)
}

/// Records in the store that tablekit declared `queue` (a worker at its start,
/// `tablekit-worker declare --store`): the console shows it and acts on it — replays,
/// redrives and pauses go only to a queue recorded here ([`declared_queues`]) or served
/// by a worker, that the broker holds. Idempotent.
///
/// # Errors
/// The store's errors.
pub async fn record_declared<S: TableStore>(store: &S, queue: &str) -> Result<()> {
    store.create_table_if_not_exists(ACTIVITY_TABLE).await?;
    let marker =
        Entity::new(DECLARED_PARTITION, keys::encode_queue(queue)).with(LAST_SEEN, Utc::now());
    store.insert_or_replace(ACTIVITY_TABLE, marker).await?;
    Ok(())
}

/// The queues [`record_declared`] recorded, sorted, each once (the console adds those
/// workers served, [`queues_with_history`]). Names tablekit derives from a queue
/// (`-poison`, RabbitMQ's `-retry-<ms>`) are never recorded.
///
/// # Errors
/// The store's errors (a missing table reads as none).
pub async fn declared_queues<S: TableStore>(store: &S) -> Result<Vec<String>> {
    let mut markers =
        std::pin::pin!(store.query_stream(ACTIVITY_TABLE, Query::partition(DECLARED_PARTITION)));
    let mut queues = Vec::new();
    while let Some(marker) = next(&mut markers).await? {
        if let Some(queue) = keys::decode_queue(&marker.row_key) {
            queues.push(queue);
        }
    }
    queues.sort();
    queues.dedup();
    Ok(queues)
}

/// Marks `queue` as having a history, seen at `at`.
pub(super) async fn mark_queue<S: TableStore>(
    store: &S,
    queue: &str,
    at: DateTime<Utc>,
) -> Result<()> {
    let marker = Entity::new(QUEUES_PARTITION, keys::encode_queue(queue)).with(LAST_SEEN, at);
    store.insert_or_replace(ACTIVITY_TABLE, marker).await?;
    Ok(())
}

/// The next entity of a stream, a missing table ending it.
pub(super) async fn next<St>(rows: &mut St) -> Result<Option<Entity>>
where
    St: futures::Stream<Item = Result<Entity>> + Unpin,
{
    match rows.try_next().await {
        Ok(entity) => Ok(entity),
        Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(None),
        Err(e) => Err(e),
    }
}

pub(super) fn one_minute() -> chrono::Duration {
    chrono::Duration::minutes(1)
}

pub(super) fn one_hour() -> chrono::Duration {
    chrono::Duration::hours(1)
}
