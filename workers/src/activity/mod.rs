//! What the workers did, kept in the store for the console: per queue and minute the
//! deliveries processed, sent back for a retry (failed), poisoned and redelivered, and a
//! heartbeat record per worker process (its host, queues, deliveries in flight and rate).
//!
//! A worker counts through an [`Activity`] handle ([`crate::WorkerOptions::activity`]); a
//! task of the process writes the counts of the current minute every
//! [`FLUSH_INTERVAL`] and when the minute closes, its heartbeat every
//! [`HEARTBEAT_INTERVAL`], and runs the [`roll_up`] pass every [`ROLL_UP_INTERVAL`]. A
//! store error while sampling is logged (at most once a minute) and never stops a worker.
//!
//! # Table layout
//!
//! Table [`ACTIVITY_TABLE`]; counts in the Int64 properties `Processed`, `Failed`,
//! `Poisoned` and `Redelivered`.
//!
//! | PartitionKey | RowKey | What |
//! |---|---|---|
//! | `m,<queue>` | `<YYYYMMDDTHHMM>,<process>` | one process's counts of one UTC minute |
//! | `h,<queue>` | `<YYYYMMDDTHH>,<process>` | one process's counts of one UTC hour |
//! | `q` | `<queue>` | a queue with history (`LastSeen`) |
//! | `w` | `<process>` | a worker process's heartbeat ([`WorkerProcess`]) |
//!
//! Queue names are written with `%`, `/`, `\`, `#`, `?` and control characters
//! percent-encoded (keys cannot hold them).
//!
//! Each process writes only its own minute rows, whole (insert-or-replace: writing one
//! again is harmless), and never a minute more than [`MAX_UNWRITTEN`] old. Minute rows are
//! kept for the 24 hours before the current hour ([`MINUTES_KEPT`]); [`roll_up`] sums the
//! minute rows of each older hour into one hour row per process — inserted, so the first
//! complete sum wins and a second pass finds it taken — and only then deletes those minute
//! rows. A pass stopped between the two leaves rows that the next pass (of any process)
//! deletes; the history never counts an hour twice, since minute rows of an hour that has
//! its hour row are left out. Hour rows are kept [`HOURS_KEPT`]. A pass reads only the rows
//! it trims (RowKey ranges below the cut-offs), never the whole history.

mod history;
mod keys;
mod process;
mod rollup;
mod sampler;

use std::ops::{Add, AddAssign};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tablekit_core::{Batch, Entity, TableStore};

use crate::error::Result;

pub use history::{declared_queues, history, queues_with_history, record_declared};
pub(crate) use keys::encode_queue;
pub use process::{WorkerProcess, forget_workers, workers};
pub use rollup::{RollUpReport, roll_up};
pub use sampler::{Activity, ActivityOptions, InFlight, QueueActivity};

/// The table of the activity records.
pub const ACTIVITY_TABLE: &str = "TablekitActivity";
/// How often a process writes the counts of the current minute (and it writes them when
/// the minute closes).
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(15);
/// How often a process writes its heartbeat record.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// A process whose heartbeat is older than this many of its intervals is silent.
pub const SILENT_AFTER_INTERVALS: u32 = 3;
/// How often a process runs the [`roll_up`] pass.
pub const ROLL_UP_INTERVAL: Duration = Duration::from_secs(300);
/// Minute rows are kept for the hours starting in the last 24 hours.
pub const MINUTES_KEPT: Duration = Duration::from_secs(24 * 3600);
/// Hour rows are kept 30 days.
pub const HOURS_KEPT: Duration = Duration::from_secs(30 * 24 * 3600);
/// A worker record whose heartbeat (or stop) is older than this is deleted by the pass.
pub const FORGET_WORKERS_AFTER: Duration = Duration::from_secs(24 * 3600);
/// The oldest minute a process still writes after the store failed to take it; older
/// counts are dropped (with a warning), so the minute rows of a rolled-up hour never
/// change.
pub const MAX_UNWRITTEN: Duration = Duration::from_secs(3600);

/// Entities per entity group transaction.
const BATCH: usize = 100;

/// What a queue's workers did over a time: deliveries settled each way, and deliveries
/// that were not a message's first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counts {
    /// Deliveries processed and acknowledged.
    pub processed: u64,
    /// Deliveries whose handler failed and that were sent back for a retry.
    pub failed: u64,
    /// Deliveries moved to the poison queue.
    pub poisoned: u64,
    /// Deliveries of a message delivered before (its delivery count above 1).
    pub redelivered: u64,
}

impl Counts {
    /// No delivery at all.
    pub fn is_zero(&self) -> bool {
        *self == Counts::default()
    }

    /// These counts less `earlier` (each at least 0): what happened since `earlier` was
    /// taken of the same running totals.
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            processed: self.processed.saturating_sub(earlier.processed),
            failed: self.failed.saturating_sub(earlier.failed),
            poisoned: self.poisoned.saturating_sub(earlier.poisoned),
            redelivered: self.redelivered.saturating_sub(earlier.redelivered),
        }
    }

    fn write_to(&self, mut entity: Entity) -> Entity {
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        entity.set(PROCESSED, int(self.processed));
        entity.set(FAILED, int(self.failed));
        entity.set(POISONED, int(self.poisoned));
        entity.set(REDELIVERED, int(self.redelivered));
        entity
    }

    fn read_from(entity: &Entity) -> Counts {
        let int = |name: &str| {
            entity
                .get(name)
                .and_then(tablekit_core::Value::as_i64)
                .and_then(|v| u64::try_from(v).ok())
                .unwrap_or(0)
        };
        Counts {
            processed: int(PROCESSED),
            failed: int(FAILED),
            poisoned: int(POISONED),
            redelivered: int(REDELIVERED),
        }
    }
}

impl Add for Counts {
    type Output = Counts;

    fn add(self, other: Counts) -> Counts {
        Counts {
            processed: self.processed.saturating_add(other.processed),
            failed: self.failed.saturating_add(other.failed),
            poisoned: self.poisoned.saturating_add(other.poisoned),
            redelivered: self.redelivered.saturating_add(other.redelivered),
        }
    }
}

impl AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        *self = *self + other;
    }
}

/// How long a [`Point`] lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resolution {
    /// One UTC minute.
    Minute,
    /// One UTC hour.
    Hour,
}

impl Resolution {
    /// Its length.
    pub fn duration(self) -> Duration {
        match self {
            Resolution::Minute => Duration::from_secs(60),
            Resolution::Hour => Duration::from_secs(3600),
        }
    }
}

/// A queue's counts over one minute or hour, summed over every process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// When the minute or hour starts (UTC).
    pub at: DateTime<Utc>,
    /// A minute or an hour.
    pub resolution: Resolution,
    /// What the queue's workers did in it.
    pub counts: Counts,
}

impl Point {
    /// When the minute or hour ends.
    pub fn end(&self) -> DateTime<Utc> {
        keys::shift(
            self.at,
            chrono::Duration::from_std(self.resolution.duration()).unwrap_or_default(),
        )
    }
}

const PROCESSED: &str = "Processed";
const FAILED: &str = "Failed";
const POISONED: &str = "Poisoned";
const REDELIVERED: &str = "Redelivered";

/// Writes `minutes` minute rows of one process for `queue`, the minutes before the one
/// `until` falls in, each with the counts `sample` gives for its start: test data and
/// scale benchmarks (a day is 1440 minutes). Rows go in entity group transactions of 100,
/// four in flight; the table is created when missing and the queue listed. Returns how
/// many rows were written.
///
/// # Errors
/// The store's errors.
pub async fn write_sample_minutes<S: TableStore>(
    store: &S,
    queue: &str,
    process: &str,
    until: DateTime<Utc>,
    minutes: u32,
    sample: impl Fn(DateTime<Utc>) -> Counts,
) -> Result<usize> {
    use futures::{StreamExt as _, TryStreamExt as _};
    store.create_table_if_not_exists(ACTIVITY_TABLE).await?;
    let process = keys::process_id(process);
    let last = keys::minute_of(until);
    let partition = keys::minute_partition(queue);
    let rows: Vec<Entity> = (1..=i64::from(minutes))
        .rev()
        .map(|back| {
            let minute = keys::shift(last, -chrono::Duration::minutes(back));
            let entity = Entity::new(partition.clone(), keys::minute_row(minute, &process));
            sample(minute).write_to(entity)
        })
        .collect();
    let batches: Vec<Batch> = rows
        .chunks(BATCH)
        .map(|chunk| {
            let mut batch = Batch::new();
            for entity in chunk {
                batch.insert_or_replace(entity.clone());
            }
            batch
        })
        .collect();
    futures::stream::iter(batches)
        .map(|batch| store.submit_batch(ACTIVITY_TABLE, batch))
        .buffer_unordered(4)
        .try_collect::<Vec<_>>()
        .await?;
    history::mark_queue(store, queue, until).await?;
    Ok(rows.len())
}
