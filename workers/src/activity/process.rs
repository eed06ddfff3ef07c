//! The worker processes' heartbeat records: what the console lists as consumers.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tablekit_core::{Entity, ErrorKind, IfMatch, Query, TableStore, Value};

use super::history::next;
use super::keys::WORKERS_PARTITION;
use super::{ACTIVITY_TABLE, FORGET_WORKERS_AFTER, SILENT_AFTER_INTERVALS};
use crate::error::Result;

const HOST: &str = "Host";
const PID: &str = "Pid";
const VERSION: &str = "Version";
const QUEUES: &str = "Queues";
const CONCURRENCY: &str = "Concurrency";
const IN_FLIGHT: &str = "InFlight";
const PER_SECOND: &str = "ProcessedPerSecond";
const STARTED_AT: &str = "StartedAt";
const HEARTBEAT_AT: &str = "HeartbeatAt";
const INTERVAL_MS: &str = "IntervalMs";
const STOPPED_AT: &str = "StoppedAt";
const FORGET_AFTER_SECS: &str = "ForgetAfterSecs";

/// A worker process, as its last heartbeat record tells.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerProcess {
    /// Its id: the RowKey of its record and the process part of its history rows.
    pub id: String,
    /// The machine it runs on.
    pub host: String,
    /// Its process id on that machine.
    pub pid: u32,
    /// The tablekit version it runs.
    pub version: String,
    /// The queues it serves.
    pub queues: Vec<String>,
    /// How many deliveries it handles at once, over all its queues.
    pub concurrency: u64,
    /// Deliveries it was handling at its last heartbeat.
    pub in_flight: u64,
    /// Deliveries it processed per second over the minute before its last heartbeat.
    pub processed_per_second: f64,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it last wrote its record (its own clock).
    pub heartbeat_at: DateTime<Utc>,
    /// How often it writes its record.
    pub interval: Duration,
    /// How long after its last heartbeat (or its stop) its record is forgotten: no longer
    /// listed, and deleted by the next pass ([`forget_workers`]); declared by the process
    /// ([`ActivityOptions::forget_after`](super::ActivityOptions::forget_after), default
    /// [`FORGET_WORKERS_AFTER`]).
    pub forget_after: Duration,
    /// When it stopped gracefully; `None` while it runs (or after it died).
    pub stopped_at: Option<DateTime<Utc>>,
    /// Running, and no heartbeat for [`SILENT_AFTER_INTERVALS`] intervals (by the reader's
    /// clock): it died, hangs or cannot reach the store.
    pub silent: bool,
}

impl WorkerProcess {
    /// Its record.
    pub(super) fn entity(&self) -> Entity {
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let queues = serde_json::to_string(&self.queues).unwrap_or_else(|_| "[]".to_owned());
        let mut entity = Entity::new(WORKERS_PARTITION, self.id.clone())
            .with(HOST, self.host.clone())
            .with(PID, i64::from(self.pid))
            .with(VERSION, self.version.clone())
            .with(QUEUES, queues)
            .with(CONCURRENCY, int(self.concurrency))
            .with(IN_FLIGHT, int(self.in_flight))
            .with(PER_SECOND, finite(self.processed_per_second))
            .with(STARTED_AT, self.started_at)
            .with(HEARTBEAT_AT, self.heartbeat_at)
            .with(
                INTERVAL_MS,
                i64::try_from(self.interval.as_millis()).unwrap_or(i64::MAX),
            )
            .with(
                FORGET_AFTER_SECS,
                i64::try_from(self.forget_after.as_secs()).unwrap_or(i64::MAX),
            );
        if let Some(stopped) = self.stopped_at {
            entity.set(STOPPED_AT, stopped);
        }
        entity
    }

    /// The process a record describes, judged silent or not at `now`; `None` for a record
    /// without a heartbeat time.
    fn from_entity(entity: &Entity, now: DateTime<Utc>) -> Option<Self> {
        let text = |name| {
            entity
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let int = |name| {
            entity
                .get(name)
                .and_then(Value::as_i64)
                .and_then(|v| u64::try_from(v).ok())
                .unwrap_or(0)
        };
        let time = |name| entity.get(name).and_then(Value::as_datetime);
        let heartbeat_at = time(HEARTBEAT_AT)?;
        let interval = Duration::from_millis(int(INTERVAL_MS).max(1));
        let stopped_at = time(STOPPED_AT);
        let silent_after = interval
            .checked_mul(SILENT_AFTER_INTERVALS)
            .and_then(|d| chrono::Duration::from_std(d).ok())
            .unwrap_or(chrono::Duration::MAX);
        Some(WorkerProcess {
            id: entity.row_key.clone(),
            host: text(HOST),
            pid: u32::try_from(int(PID)).unwrap_or(0),
            version: text(VERSION),
            queues: serde_json::from_str(&text(QUEUES)).unwrap_or_default(),
            concurrency: int(CONCURRENCY),
            in_flight: int(IN_FLIGHT),
            processed_per_second: entity
                .get(PER_SECOND)
                .and_then(Value::as_f64)
                .map_or(0.0, finite),
            started_at: time(STARTED_AT).unwrap_or(heartbeat_at),
            heartbeat_at,
            interval,
            forget_after: match int(FORGET_AFTER_SECS) {
                0 => FORGET_WORKERS_AFTER,
                secs => Duration::from_secs(secs),
            },
            stopped_at,
            silent: stopped_at.is_none() && now.signed_duration_since(heartbeat_at) > silent_after,
        })
    }
}

impl WorkerProcess {
    /// Whether its record is past its [`forget_after`](Self::forget_after) at `now`.
    pub fn forgotten_at(&self, now: DateTime<Utc>) -> bool {
        let after = chrono::Duration::from_std(self.forget_after).unwrap_or(chrono::Duration::MAX);
        super::keys::shift(self.heartbeat_at, after) < now
    }
}

fn finite(value: f64) -> f64 {
    if value.is_finite() {
        value.max(0.0)
    } else {
        0.0
    }
}

/// The worker processes with a record, in id order: those running, and those silent (see
/// [`WorkerProcess::silent`]) or stopped whose last heartbeat is within their
/// [`forget_after`](WorkerProcess::forget_after). Reads the records a page at a time.
///
/// # Errors
/// The store's errors (a missing table reads as none).
pub async fn workers<S: TableStore>(store: &S) -> Result<Vec<WorkerProcess>> {
    let now = Utc::now();
    let mut records =
        std::pin::pin!(store.query_stream(ACTIVITY_TABLE, Query::partition(WORKERS_PARTITION)));
    let mut processes = Vec::new();
    while let Some(record) = next(&mut records).await? {
        if let Some(process) = WorkerProcess::from_entity(&record, now)
            && !process.forgotten_at(now)
        {
            processes.push(process);
        }
    }
    Ok(processes)
}

/// Deletes the worker records whose last heartbeat (or stop) is older than their
/// [`forget_after`](WorkerProcess::forget_after) before `now`, and those that do not read
/// as one; a record written again meanwhile stays. Returns how many went. The
/// [`super::roll_up`] pass of every worker calls it, and the console every minute (so
/// records go when no worker runs).
///
/// # Errors
/// The store's errors (a missing table is nothing to do).
pub async fn forget_workers<S: TableStore>(store: &S, now: DateTime<Utc>) -> Result<u64> {
    let mut records =
        std::pin::pin!(store.query_stream(ACTIVITY_TABLE, Query::partition(WORKERS_PARTITION)));
    let mut forgotten = 0;
    while let Some(record) = next(&mut records).await? {
        if WorkerProcess::from_entity(&record, now).is_some_and(|p| !p.forgotten_at(now)) {
            continue;
        }
        let etag = record.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        match store
            .delete(ACTIVITY_TABLE, WORKERS_PARTITION, &record.row_key, etag)
            .await
        {
            Ok(()) => forgotten += 1,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::PreconditionFailed | ErrorKind::NotFound
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(forgotten)
}
