//! The per-process handle: running totals per queue (atomics the workers add to), the
//! minute rows and heartbeat written from them, and the task that writes them.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tablekit_core::{AnyStore, Batch, Entity, ErrorKind, TableStore};

use super::history::{mark_queue, one_hour, one_minute};
use super::keys;
use super::process::WorkerProcess;
use super::{
    ACTIVITY_TABLE, BATCH, Counts, FLUSH_INTERVAL, HEARTBEAT_INTERVAL, MAX_UNWRITTEN,
    ROLL_UP_INTERVAL,
};
use crate::error::{Error, Result};

/// At most one warning a minute for failed activity writes.
const WARN_EVERY: Duration = Duration::from_secs(60);
/// How long the stop of the sampling task waits for a roll-up pass under way.
const ROLL_UP_STOP_WAIT: Duration = Duration::from_secs(5);

/// A worker process's activity: the running totals of each queue it serves, written to
/// the store (table [`super::ACTIVITY_TABLE`]) as minute rows and a heartbeat record by a
/// task that runs while a worker uses the handle ([`crate::WorkerOptions::activity`]).
/// Cheap to clone: clones share the totals; one handle serves every worker of a process.
///
/// ```no_run
/// use tablekit_core::AnyStore;
/// use tablekit_workers::activity::Activity;
/// use tablekit_workers::queue::sqlite::SqliteQueue;
/// use tablekit_workers::{Registry, Worker, WorkerConfig};
///
/// # async fn demo() -> tablekit_workers::Result<()> {
/// let store = AnyStore::create("sqlite:app.db").await?;
/// let activity = Activity::options().process_id("web-1").build(store);
/// let queue = SqliteQueue::open("queue.db").await?;
/// Worker::options()
///     .activity(activity)
///     .build(queue, Registry::new(), WorkerConfig::new("archive"))
///     .run(tablekit_workers::runtime::shutdown_signal())
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Activity {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Activity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Activity")
            .field("process", &self.inner.process)
            .finish_non_exhaustive()
    }
}

struct Inner {
    store: AnyStore,
    process: String,
    host: String,
    started_at: DateTime<Utc>,
    flush_interval: Duration,
    heartbeat_interval: Duration,
    /// How long after its last heartbeat its record is forgotten.
    forget_after: Duration,
    roll_up_interval: Duration,
    queues: Mutex<BTreeMap<String, QueueActivity>>,
    sampler: Mutex<Sampler>,
    state: tokio::sync::Mutex<State>,
    served_changed: tokio::sync::Notify,
    table_ready: AtomicBool,
    warnings: Mutex<Warnings>,
}

impl Inner {
    fn new(store: AnyStore, process: String, options: ActivityOptions) -> Self {
        Inner {
            store,
            process,
            host: host_name(),
            started_at: Utc::now(),
            flush_interval: options.flush_interval,
            heartbeat_interval: options.heartbeat_interval,
            forget_after: options.forget_after,
            roll_up_interval: options.roll_up_interval,
            queues: Mutex::default(),
            sampler: Mutex::default(),
            state: tokio::sync::Mutex::default(),
            served_changed: tokio::sync::Notify::new(),
            table_ready: AtomicBool::new(false),
            warnings: Mutex::default(),
        }
    }
}

/// The workers attached and the sampling task they keep running.
#[derive(Default)]
struct Sampler {
    attached: usize,
    running: Option<Running>,
}

struct Running {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// What the flushes keep between them.
#[derive(Default)]
struct State {
    /// The minute being counted.
    minute: Option<DateTime<Utc>>,
    /// Each queue's totals when that minute started.
    baseline: HashMap<String, Counts>,
    /// Minute rows not written yet, and the current minute's as last written.
    rows: BTreeMap<(String, DateTime<Utc>), Row>,
    /// When this process last marked each queue as having a history.
    marked: HashMap<String, DateTime<Utc>>,
    /// (time, processed so far over all queues) at each heartbeat of the last minute.
    processed: VecDeque<(DateTime<Utc>, u64)>,
}

#[derive(Default)]
struct Row {
    counts: Counts,
    written: Option<Counts>,
}

#[derive(Default)]
struct Warnings {
    last: Option<Instant>,
    suppressed: u64,
}

/// The shortest interval of the sampling task.
const LEAST_INTERVAL: Duration = Duration::from_millis(10);

/// The settings of an [`Activity`], given in any order, then built on a store with
/// [`build`](Self::build) (no I/O: the first worker to use the handle starts its task).
/// Each setter given twice keeps the last value.
///
/// ```
/// use std::time::Duration;
/// use tablekit_core::{AnyStore, MemoryStore};
/// use tablekit_workers::activity::Activity;
///
/// let activity = Activity::options()
///     .process_id("web-1")
///     .heartbeat_interval(Duration::from_secs(5))
///     .build(AnyStore::Memory(MemoryStore::new()));
/// assert_eq!(activity.process_id(), "web-1");
/// ```
#[derive(Clone, Debug)]
pub struct ActivityOptions {
    process_id: Option<String>,
    flush_interval: Duration,
    heartbeat_interval: Duration,
    roll_up_interval: Duration,
    forget_after: Duration,
}

impl Default for ActivityOptions {
    fn default() -> Self {
        ActivityOptions {
            process_id: None,
            flush_interval: FLUSH_INTERVAL,
            heartbeat_interval: HEARTBEAT_INTERVAL,
            roll_up_interval: ROLL_UP_INTERVAL,
            forget_after: super::FORGET_WORKERS_AFTER,
        }
    }
}

impl ActivityOptions {
    /// The defaults: a fresh process id, the current minute written every
    /// [`FLUSH_INTERVAL`], the heartbeat every [`HEARTBEAT_INTERVAL`] and the roll-up
    /// pass every [`ROLL_UP_INTERVAL`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the process `id` (default: the host name, the process id and a random
    /// suffix, `web-1-4242-3fa9c1`). The characters a key cannot hold, and `,`, become
    /// `_`; at most 128 characters. Two running processes must not share a name.
    pub fn process_id(mut self, id: impl Into<String>) -> Self {
        self.process_id = Some(id.into());
        self
    }

    /// Writes the current minute every `flush` (default [`FLUSH_INTERVAL`]; at least
    /// 10 ms), and when the minute closes.
    pub fn flush_interval(mut self, flush: Duration) -> Self {
        self.flush_interval = flush.max(LEAST_INTERVAL);
        self
    }

    /// Writes the process's heartbeat every `heartbeat` (default [`HEARTBEAT_INTERVAL`];
    /// at least 10 ms).
    pub fn heartbeat_interval(mut self, heartbeat: Duration) -> Self {
        self.heartbeat_interval = heartbeat.max(LEAST_INTERVAL);
        self
    }

    /// Runs the [roll-up pass](super::roll_up) every `roll_up` (default
    /// [`ROLL_UP_INTERVAL`]; at least 10 ms).
    pub fn roll_up_interval(mut self, roll_up: Duration) -> Self {
        self.roll_up_interval = roll_up.max(LEAST_INTERVAL);
        self
    }

    /// Forgets this process's record `forget_after` after its last heartbeat or its stop
    /// (default [`FORGET_WORKERS_AFTER`](super::FORGET_WORKERS_AFTER); at least a
    /// minute): the console lists it, stopped or silent, until then.
    pub fn forget_after(mut self, forget_after: Duration) -> Self {
        self.forget_after = forget_after.max(Duration::from_secs(60));
        self
    }

    /// The activity of this process over `store`, without I/O.
    pub fn build(mut self, store: AnyStore) -> Activity {
        let id = self.process_id.take().unwrap_or_else(|| {
            let suffix = tablekit_core::random::uuid().simple().to_string();
            format!(
                "{}-{}-{}",
                host_name(),
                std::process::id(),
                suffix.get(..6).unwrap_or_default()
            )
        });
        Activity {
            inner: Arc::new(Inner::new(store, keys::process_id(&id), self)),
        }
    }
}

impl Activity {
    /// The settings of a process's activity, given in any order, then
    /// [`build`](ActivityOptions::build) on a store.
    pub fn options() -> ActivityOptions {
        ActivityOptions::new()
    }

    /// The activity of this process over `store`, under a fresh process id (the host
    /// name, the process id and a random suffix, `web-1-4242-3fa9c1`), with the default
    /// settings (see [`ActivityOptions::new`]): the shortcut for
    /// `Activity::options().build(store)`.
    pub fn new(store: AnyStore) -> Self {
        Self::options().build(store)
    }

    /// This process's id: its heartbeat record's RowKey, the process part of its rows.
    pub fn process_id(&self) -> &str {
        &self.inner.process
    }

    /// The store it writes.
    pub fn store(&self) -> &AnyStore {
        &self.inner.store
    }

    /// The running totals of `queue` in this process (created at the first ask).
    pub fn queue(&self, queue: &str) -> QueueActivity {
        let mut queues = self.inner.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues.entry(queue.to_owned()).or_default().clone()
    }

    fn queues(&self) -> Vec<(String, QueueActivity)> {
        let queues = self.inner.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues
            .iter()
            .map(|(name, q)| (name.clone(), q.clone()))
            .collect()
    }

    /// A worker of `queue` handling up to `concurrency` deliveries starts: its queue is
    /// listed in the heartbeat, and the sampling task runs while any worker is attached.
    pub(crate) fn attach(&self, queue: &str, concurrency: usize) -> Attachment {
        let counters = self.queue(queue);
        let concurrency = u64::try_from(concurrency).unwrap_or(u64::MAX);
        counters.0.workers.fetch_add(1, Ordering::Relaxed);
        counters
            .0
            .concurrency
            .fetch_add(concurrency, Ordering::Relaxed);
        {
            let mut sampler = self.inner.sampler.lock().unwrap_or_else(|e| e.into_inner());
            sampler.attached += 1;
            if sampler.running.is_none() {
                let (stop, stopped) = tokio::sync::watch::channel(false);
                let task = tokio::spawn(sample(self.clone(), stopped));
                sampler.running = Some(Running { stop, task });
            }
        }
        self.inner.served_changed.notify_one();
        Attachment {
            activity: self.clone(),
            counters,
            concurrency,
            finished: false,
        }
    }

    /// A worker detaches; the last one stops the sampling task, which is returned to be
    /// awaited (it writes the last counts and the stopped record first).
    fn release(&self, counters: &QueueActivity, concurrency: u64) -> Option<Running> {
        counters.0.workers.fetch_sub(1, Ordering::Relaxed);
        counters
            .0
            .concurrency
            .fetch_sub(concurrency, Ordering::Relaxed);
        let running = {
            let mut sampler = self.inner.sampler.lock().unwrap_or_else(|e| e.into_inner());
            sampler.attached = sampler.attached.saturating_sub(1);
            if sampler.attached == 0 {
                sampler.running.take()
            } else {
                None
            }
        };
        match &running {
            Some(running) => {
                let _ = running.stop.send(true);
            }
            None => self.inner.served_changed.notify_one(),
        }
        running
    }

    async fn ensure_table(&self) -> Result<()> {
        if !self.inner.table_ready.load(Ordering::Relaxed) {
            self.inner
                .store
                .create_table_if_not_exists(ACTIVITY_TABLE)
                .await?;
            self.inner.table_ready.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Passes `result` on; a missing table is created again by the next write.
    fn note<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result
            && e.kind() == ErrorKind::TableNotFound
        {
            self.inner.table_ready.store(false, Ordering::Relaxed);
        }
        result
    }

    /// Writes the counts of each queue as of `now`: the rows of the minutes not written
    /// yet and, when `now` falls in a later minute than the last flush, the final counts of
    /// that minute (what was counted before this call). Writes only rows that changed, one
    /// entity group transaction per queue, the queues at once; rows of minutes older than
    /// [`MAX_UNWRITTEN`] that still failed are dropped with a warning. The sampling task
    /// calls this; tests and runtimes of one's own may too.
    ///
    /// # Errors
    /// The store's first error (the rows that failed are tried again by the next flush).
    pub async fn flush_at(&self, now: DateTime<Utc>) -> Result<()> {
        let minute = keys::minute_of(now);
        let mut state = self.inner.state.lock().await;
        let state = &mut *state;
        let current = *state.minute.get_or_insert(minute);
        let closing = minute > current;
        for (name, queue) in self.queues() {
            let totals = queue.totals();
            let counts = totals.since(&state.baseline.get(&name).copied().unwrap_or_default());
            let key = (name.clone(), current);
            if !counts.is_zero() || state.rows.contains_key(&key) {
                state.rows.entry(key).or_default().counts = counts;
            }
            if closing {
                state.baseline.insert(name, totals);
            }
        }
        if closing {
            state.minute = Some(minute);
        }
        let oldest = keys::shift(
            minute,
            -chrono::Duration::from_std(MAX_UNWRITTEN).unwrap_or_default(),
        );
        state.rows.retain(|(queue, at), row| {
            let lost = *at < oldest && row.written != Some(row.counts);
            if lost {
                tracing::warn!(queue = %crate::display::neutral(queue), minute = %at, "the store did not take a minute's activity for an hour: its counts are dropped");
            }
            *at >= oldest
        });
        let mut dirty: BTreeMap<&str, Vec<(DateTime<Utc>, Counts)>> = BTreeMap::new();
        for ((queue, at), row) in &state.rows {
            if row.written != Some(row.counts) {
                dirty.entry(queue).or_default().push((*at, row.counts));
            }
        }
        if dirty.is_empty() {
            return Ok(());
        }
        self.ensure_table().await?;
        let process = &self.inner.process;
        let writes = dirty.into_iter().map(|(queue, rows)| async move {
            let partition = keys::minute_partition(queue);
            let mut written = Vec::new();
            for chunk in rows.chunks(BATCH) {
                let mut batch = Batch::new();
                for (at, counts) in chunk {
                    let row = Entity::new(partition.clone(), keys::minute_row(*at, process));
                    batch.insert_or_replace(counts.write_to(row));
                }
                match self.inner.store.submit_batch(ACTIVITY_TABLE, batch).await {
                    Ok(_) => written.extend_from_slice(chunk),
                    Err(e) => return (queue.to_owned(), written, Some(e)),
                }
            }
            (queue.to_owned(), written, None)
        });
        let mut failure = None;
        let mut to_mark = Vec::new();
        for (queue, written, error) in futures::future::join_all(writes).await {
            for (at, counts) in written {
                if let Some(row) = state.rows.get_mut(&(queue.clone(), at)) {
                    row.written = Some(counts);
                }
            }
            match error {
                Some(e) => {
                    failure.get_or_insert(e);
                }
                None => {
                    let marked = state.marked.get(&queue);
                    if marked.is_none_or(|at| keys::shift(*at, one_hour()) <= now) {
                        to_mark.push(queue);
                    }
                }
            }
        }
        // Closed minutes once written are done; the current one stays to compare with.
        let current = state.minute.unwrap_or(minute);
        state
            .rows
            .retain(|(_, at), row| *at >= current || row.written != Some(row.counts));
        for queue in to_mark {
            match mark_queue(&self.inner.store, &queue, now).await {
                Ok(()) => {
                    state.marked.insert(queue, now);
                }
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        self.note(failure.map_or(Ok(()), Err))
    }

    /// Writes this process's heartbeat record as of `now`: the queues its workers serve,
    /// deliveries in flight, processed per second over the last minute (from the totals at
    /// each heartbeat). The sampling task calls this.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn heartbeat_at(&self, now: DateTime<Utc>) -> Result<()> {
        self.write_record(now, None).await
    }

    /// Writes the counts as of `now` ([`flush_at`](Self::flush_at)), then the heartbeat
    /// record marked stopped at `now`. The sampling task calls this when the last worker
    /// stops.
    ///
    /// # Errors
    /// The store's first error.
    pub async fn stop_at(&self, now: DateTime<Utc>) -> Result<()> {
        let flushed = self.flush_at(now).await;
        let recorded = self.write_record(now, Some(now)).await;
        flushed.and(recorded)
    }

    async fn write_record(&self, now: DateTime<Utc>, stopped: Option<DateTime<Utc>>) -> Result<()> {
        let (mut queues, mut concurrency, mut in_flight, mut processed) = (Vec::new(), 0, 0, 0u64);
        for (name, queue) in self.queues() {
            // A stopped process keeps the queues it served, for the console to show.
            if queue.0.workers.load(Ordering::Relaxed) > 0 || stopped.is_some() {
                queues.push(name);
                concurrency += queue.0.concurrency.load(Ordering::Relaxed);
            }
            in_flight += queue.in_flight();
            processed = processed.saturating_add(queue.totals().processed);
        }
        let per_second = {
            let mut state = self.inner.state.lock().await;
            per_second(&mut state.processed, now, processed)
        };
        let record = WorkerProcess {
            id: self.inner.process.clone(),
            host: self.inner.host.clone(),
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            queues,
            concurrency,
            in_flight,
            processed_per_second: per_second,
            started_at: self.inner.started_at,
            heartbeat_at: now,
            interval: self.inner.heartbeat_interval,
            forget_after: self.inner.forget_after,
            stopped_at: stopped,
            silent: false,
        };
        self.ensure_table().await?;
        let written = self
            .inner
            .store
            .insert_or_replace(ACTIVITY_TABLE, record.entity())
            .await;
        self.note(written).map(drop)
    }

    /// Logs a failed write, at most once every [`WARN_EVERY`].
    fn warn(&self, what: &'static str, error: &Error) {
        let mut warnings = self
            .inner
            .warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if warnings.last.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            tracing::warn!(error = %error, suppressed = warnings.suppressed, "{what} failed; the workers go on (further failures for a minute are only counted)");
            warnings.last = Some(Instant::now());
            warnings.suppressed = 0;
        } else {
            warnings.suppressed += 1;
        }
    }
}

/// Processed per second over the minute before `now`, from the totals kept at each call.
fn per_second(samples: &mut VecDeque<(DateTime<Utc>, u64)>, now: DateTime<Utc>, total: u64) -> f64 {
    samples.push_back((now, total));
    let window = keys::shift(now, -one_minute());
    // Keep one sample at or before the window's start, to measure the whole minute.
    while samples.len() > 2 && samples.get(1).is_some_and(|(at, _)| *at <= window) {
        samples.pop_front();
    }
    match samples.front() {
        Some((at, first)) if *at < now => {
            let seconds = (now - *at).num_milliseconds() as f64 / 1000.0;
            #[allow(clippy::cast_precision_loss)]
            let done = total.saturating_sub(*first) as f64;
            done / seconds
        }
        _ => 0.0,
    }
}

/// The sampling task: flushes, heartbeats and roll-up passes until `stopped`, then the
/// last counts and the stopped record.
async fn sample(activity: Activity, mut stopped: tokio::sync::watch::Receiver<bool>) {
    let inner = Arc::clone(&activity.inner);
    let mut next_flush = tokio::time::Instant::now() + inner.flush_interval;
    let mut next_heartbeat = tokio::time::Instant::now();
    let first_pass =
        tablekit_core::random::up_to(inner.roll_up_interval.min(Duration::from_secs(60)));
    let mut next_roll_up = tokio::time::Instant::now() + first_pass;
    let mut roll_up: Option<tokio::task::JoinHandle<()>> = None;
    let mut flushed = None;
    loop {
        let now = Utc::now();
        let minute_end = (keys::shift(keys::minute_of(now), one_minute()) - now)
            .to_std()
            .unwrap_or_default()
            + Duration::from_millis(20);
        let wake = next_flush
            .min(next_heartbeat)
            .min(next_roll_up)
            .min(tokio::time::Instant::now() + minute_end);
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => break,
            () = inner.served_changed.notified() => next_heartbeat = tokio::time::Instant::now(),
            () = tokio::time::sleep_until(wake) => {}
        }
        let at = tokio::time::Instant::now();
        let minute = keys::minute_of(Utc::now());
        if at >= next_flush || flushed != Some(minute) {
            if let Err(e) = activity.flush_at(Utc::now()).await {
                activity.warn("writing the activity history", &e);
            }
            next_flush = at + inner.flush_interval;
            flushed = Some(minute);
        }
        if at >= next_heartbeat {
            if let Err(e) = activity.heartbeat_at(Utc::now()).await {
                activity.warn("writing the worker's heartbeat", &e);
            }
            next_heartbeat = at + inner.heartbeat_interval;
        }
        if at >= next_roll_up {
            next_roll_up = at + inner.roll_up_interval;
            if roll_up
                .as_ref()
                .is_none_or(tokio::task::JoinHandle::is_finished)
            {
                let pass = activity.clone();
                roll_up = Some(tokio::spawn(async move {
                    match super::roll_up(pass.store(), Utc::now()).await {
                        Ok(report) => tracing::debug!(?report, "activity roll-up"),
                        Err(e) => pass.warn("rolling up the activity history", &e),
                    }
                }));
            }
        }
    }
    if let Err(e) = activity.stop_at(Utc::now()).await {
        activity.warn("writing the last activity", &e);
    }
    // A pass stopped midway is finished by the next one, of any process.
    if let Some(mut pass) = roll_up
        && tokio::time::timeout(ROLL_UP_STOP_WAIT, &mut pass)
            .await
            .is_err()
    {
        pass.abort();
    }
}

/// A worker attached to an [`Activity`]; dropping it detaches the worker, and
/// [`finish`](Self::finish) also waits for the last writes when it was the last one.
pub(crate) struct Attachment {
    activity: Activity,
    counters: QueueActivity,
    concurrency: u64,
    finished: bool,
}

impl Attachment {
    /// The totals the worker adds to.
    pub(crate) fn counters(&self) -> &QueueActivity {
        &self.counters
    }

    /// Detaches the worker; the last one waits for the sampling task to write the last
    /// counts and the stopped record.
    pub(crate) async fn finish(mut self) {
        self.finished = true;
        if let Some(running) = self.activity.release(&self.counters, self.concurrency) {
            let _ = running.task.await;
        }
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        if !self.finished {
            // The task, told to stop, writes the last counts on its own.
            let _ = self.activity.release(&self.counters, self.concurrency);
        }
    }
}

/// The running totals of one queue in one process. Cheap to clone; clones share them.
#[derive(Clone, Default)]
pub struct QueueActivity(Arc<QueueCounters>);

impl std::fmt::Debug for QueueActivity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueActivity")
            .field("totals", &self.totals())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

#[derive(Default)]
struct QueueCounters {
    processed: AtomicU64,
    failed: AtomicU64,
    poisoned: AtomicU64,
    redelivered: AtomicU64,
    in_flight: AtomicU64,
    /// Workers attached, and the deliveries they handle at once.
    workers: AtomicU64,
    concurrency: AtomicU64,
}

impl QueueActivity {
    /// Adds to the totals.
    pub fn add(&self, counts: Counts) {
        let c = &self.0;
        for (total, n) in [
            (&c.processed, counts.processed),
            (&c.failed, counts.failed),
            (&c.poisoned, counts.poisoned),
            (&c.redelivered, counts.redelivered),
        ] {
            if n > 0 {
                total.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// The totals since the process started.
    pub fn totals(&self) -> Counts {
        let c = &self.0;
        Counts {
            processed: c.processed.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            poisoned: c.poisoned.load(Ordering::Relaxed),
            redelivered: c.redelivered.load(Ordering::Relaxed),
        }
    }

    /// Deliveries being handled now.
    pub fn in_flight(&self) -> u64 {
        self.0.in_flight.load(Ordering::Relaxed)
    }

    /// Counts a delivery in flight until the guard drops (when the delivery is settled,
    /// or its task is aborted).
    pub fn start_delivery(&self) -> InFlight {
        self.0.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }
}

/// A delivery in flight, counted until dropped ([`QueueActivity::start_delivery`]).
#[derive(Debug)]
pub struct InFlight(QueueActivity);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// This machine's name: `HOSTNAME`, else `/etc/hostname`, else `host`.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "host".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_taken_over_the_last_minute() {
        let t0: DateTime<Utc> = DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default();
        let mut samples = VecDeque::new();
        assert!(per_second(&mut samples, t0, 0).abs() < f64::EPSILON);
        let mut rate = 0.0;
        for i in 1..=12u32 {
            rate = per_second(
                &mut samples,
                t0 + chrono::Duration::seconds(10 * i64::from(i)),
                u64::from(i) * 100,
            );
        }
        // 10 per second throughout, measured over a minute at most.
        assert!((rate - 10.0).abs() < 1e-9, "{rate}");
        assert!(samples.len() <= 8, "{}", samples.len());
    }
}
