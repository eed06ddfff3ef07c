//! The worker runtime, the same over every queue: up to N deliveries handled at once, each
//! acknowledged only after its handler succeeded; retryable failures retried with
//! exponential backoff and jitter, permanent ones (and messages that reached the delivery
//! limit) moved to the poison queue with their reason — never dropped (on a queue that keeps
//! its poison messages in the store, [`WithPoisonTable`](crate::queue::poison_table::WithPoisonTable),
//! recorded in the poison table, then acknowledged; the worker sweeps the broker's own
//! poison queue into the table at its start and every minute). Shutdown stops
//! receiving, lets in-flight work finish within a timeout, and leaves everything else to be
//! delivered again.
//!
//! Metrics (through the `metrics` facade; [`install_prometheus`], feature `prometheus`,
//! serves them):
//! `tablekit_worker_processed_total`, `tablekit_worker_retried_total`,
//! `tablekit_worker_poisoned_total` (counters, by queue and kind),
//! `tablekit_worker_handler_seconds` and `tablekit_worker_queue_lag_seconds` (histograms);
//! with observability on ([`tablekit_core::observe::enable`]) also, refreshed every
//! [`WorkerConfig::stats_interval`], the queue's `tablekit_queue_messages`,
//! `tablekit_queue_leased_messages`, `tablekit_queue_poison_messages` and
//! `tablekit_queue_oldest_waiting_seconds` (the age of the message that waited longest,
//! where the backend tells: SQLite, Azure; 0 when none waits) gauges (by queue)
//! and the hot partitions of the process's writes
//! (`tablekit_hot_partition_writes_per_second`, the top 10 over each interval).
//!
//! With an [`Activity`] ([`WorkerOptions::activity`]) the worker's deliveries are also
//! counted per queue and minute in the store, beside a heartbeat of the process
//! ([`crate::activity`]): the history and consumers the console shows.
//!
//! Each delivery is handled in a `tablekit.handle` span carrying the operation's id
//! (`tablekit.operation.id`), the id the writer's `tablekit.commit` and
//! `tablekit.publish` spans record: one write can be followed from its commit to the
//! copies the worker wrote.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::activity::{Activity, Counts, QueueActivity};
use crate::display::neutral;
use crate::error::{Error, Result};
use crate::operation::{Envelope, OperationError, Registry};
use crate::queue::{ConsumeOptions, Consumer, Delivery, Queue, QueueOptions};

mod options;

pub use options::WorkerOptions;

/// How a worker handles its queue's deliveries: a plain value (the fields are the
/// settings, [`new`](Self::new) gives their defaults), given to
/// [`WorkerOptions::build`] and to [`handle_delivery`], and the source of the queue's
/// declaration ([`queue_options`](Self::queue_options)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The queue to consume.
    pub queue: String,
    /// How many deliveries are handled at once.
    pub concurrency: usize,
    /// After this many deliveries without success, a message is poisoned.
    pub max_deliveries: u32,
    /// The first retry delay; each further retry doubles it, up to `max_backoff`.
    pub base_backoff: Duration,
    /// The longest retry delay.
    pub max_backoff: Duration,
    /// How long shutdown waits for in-flight deliveries.
    pub shutdown_timeout: Duration,
    /// How long a delivery stays leased (SQLite queue).
    pub lease: Duration,
    /// How often the queue's gauges are refreshed, with observability on.
    pub stats_interval: Duration,
    /// How often the worker asks whether its queue is paused
    /// ([`Queue::set_paused`]): a pause takes effect within this time.
    pub pause_check: Duration,
    /// Whether the worker reports the process's hot partitions with its gauges. One
    /// worker of a process should: each report ends the window the rates are taken over.
    pub hot_partitions: bool,
    /// How long another queue of the worker's registry (one its operations travel on)
    /// may hold messages that no consumer takes before the worker warns in its log
    /// (see [`crate::status::unconsumed`]); `None`: it does not look. One worker of a
    /// process should look (the others' queues are served by the process itself).
    pub unconsumed_after: Option<Duration>,
}

impl WorkerConfig {
    /// The defaults for a queue: 4 at once, 5 deliveries, backoff 250 ms to 2 min, 30 s to
    /// shut down, 60 s leases, a pause noticed within 2 s, a warning when another queue
    /// of the registry holds messages no consumer has taken for 5 minutes.
    pub fn new(queue: impl Into<String>) -> Self {
        WorkerConfig {
            queue: queue.into(),
            concurrency: 4,
            max_deliveries: 5,
            base_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(120),
            shutdown_timeout: Duration::from_secs(30),
            lease: Duration::from_secs(60),
            stats_interval: Duration::from_secs(15),
            pause_check: Duration::from_secs(2),
            hot_partitions: true,
            unconsumed_after: Some(crate::status::UNCONSUMED_AFTER),
        }
    }

    /// The queue declaration this configuration needs.
    pub fn queue_options(&self) -> QueueOptions {
        let mut delays = Vec::new();
        let mut delay = self.base_backoff.max(Duration::from_millis(1));
        while delay < self.max_backoff {
            delays.push(delay);
            delay *= 2;
        }
        delays.push(self.max_backoff);
        QueueOptions {
            max_deliveries: self.max_deliveries,
            retry_delays: delays,
        }
    }

    /// The delay before the retry that follows delivery number `delivery`: the base
    /// doubled per earlier delivery, capped, with up to 25 % random jitter either way.
    pub fn backoff(&self, delivery: u32) -> Duration {
        let exponent = delivery.saturating_sub(1).min(30);
        let delay = self
            .base_backoff
            .saturating_mul(1 << exponent)
            .min(self.max_backoff);
        let jitter = tablekit_core::random::between(0.75, 1.25);
        delay.mul_f64(jitter).min(self.max_backoff)
    }
}

/// What a worker did before it stopped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Deliveries processed and acknowledged.
    pub processed: u64,
    /// Deliveries sent back for a retry.
    pub retried: u64,
    /// Deliveries moved to the poison queue.
    pub poisoned: u64,
    /// Settlements the queue refused (the lease was lost; the message comes back).
    pub lost_leases: u64,
}

#[derive(Default)]
struct Counters {
    processed: AtomicU64,
    retried: AtomicU64,
    poisoned: AtomicU64,
    lost_leases: AtomicU64,
    /// The process's running totals of the queue, for the activity history.
    activity: Option<QueueActivity>,
}

/// How a delivery was settled.
#[derive(Clone, Copy)]
enum Settled {
    Processed,
    Retried,
    Poisoned,
}

impl Counters {
    fn report(&self) -> WorkerReport {
        WorkerReport {
            processed: self.processed.load(Ordering::Relaxed),
            retried: self.retried.load(Ordering::Relaxed),
            poisoned: self.poisoned.load(Ordering::Relaxed),
            lost_leases: self.lost_leases.load(Ordering::Relaxed),
        }
    }
}

/// A worker: a queue, the handlers of the operations it carries, and how to run.
#[derive(Debug)]
pub struct Worker<Q> {
    queue: Q,
    registry: Registry,
    config: WorkerConfig,
    activity: Option<Activity>,
}

impl<Q: Queue + Clone> Worker<Q> {
    /// The settings of a worker, given in any order, then
    /// [`build`](WorkerOptions::build) on a queue, a registry and a [`WorkerConfig`].
    pub fn options() -> WorkerOptions<Q> {
        WorkerOptions::new()
    }

    /// A worker of `config.queue` on `queue`, running the handlers of `registry`, with the
    /// default settings (see [`WorkerOptions::new`]): the shortcut for
    /// `Worker::options().build(queue, registry, config)`.
    pub fn new(queue: Q, registry: Registry, config: WorkerConfig) -> Self {
        Self::options().build(queue, registry, config)
    }

    /// Declares the queue, then handles deliveries until `shutdown` completes; then stops
    /// receiving and waits up to the shutdown timeout for in-flight deliveries (those still
    /// running after it are left unsettled, so they come back).
    ///
    /// # Errors
    /// [`Error::Config`] for an invalid configuration; the queue's errors when it cannot be
    /// declared or consumed (after its own reconnect attempts).
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<WorkerReport> {
        let config = Arc::new(self.config);
        if config.concurrency == 0 {
            return Err(Error::Config("concurrency must be at least 1".into()));
        }
        self.queue
            .declare(&config.queue, &config.queue_options())
            .await?;
        // The store's registry of declared queues: what the console shows and acts on.
        if let Some(activity) = &self.activity
            && let Err(e) = crate::activity::record_declared(activity.store(), &config.queue).await
        {
            tracing::warn!(queue = %config.queue, error = %e, "recording the declared queue in the store failed");
        }
        let options = ConsumeOptions {
            prefetch: u16::try_from(config.concurrency).unwrap_or(u16::MAX),
            lease: config.lease,
        };
        let (stop_stats, stats_stopped) = tokio::sync::watch::channel(false);
        let initially_paused = match self.queue.paused(&config.queue).await {
            Ok(paused) => paused,
            Err(e) => {
                tracing::warn!(queue = %config.queue, error = %e, "reading whether the queue is paused failed; consuming");
                false
            }
        };
        let (pause_sent, mut pause) = tokio::sync::watch::channel(initially_paused);
        // The broker's own poison queue swept into the poison table, at the start and
        // every minute (where the queue keeps one: a no-op otherwise).
        let sweeper = tokio::spawn(sweep_poison(
            self.queue.clone(),
            config.queue.clone(),
            stats_stopped.clone(),
        ));
        let pause_watch = tokio::spawn(watch_pause(
            self.queue.clone(),
            config.queue.clone(),
            config.pause_check,
            pause_sent,
            stats_stopped.clone(),
        ));
        // While paused the worker holds no consumer: nothing is received or prefetched.
        let mut consumer = if initially_paused {
            tracing::info!(queue = %config.queue, "paused");
            None
        } else {
            Some(self.queue.consume(&config.queue, options).await?)
        };
        let attachment = self
            .activity
            .as_ref()
            .map(|activity| activity.attach(&config.queue, config.concurrency));
        tracing::info!(queue = %config.queue, concurrency = config.concurrency, kinds = ?self.registry.kinds(), "worker started");
        let others: Vec<String> = self
            .registry
            .queues()
            .into_iter()
            .filter(|q| *q != config.queue)
            .map(str::to_owned)
            .collect();
        let unconsumed = match config.unconsumed_after {
            Some(after) if !others.is_empty() => Some(tokio::spawn(watch_unconsumed(
                self.queue.clone(),
                config.queue.clone(),
                others,
                after,
                stats_stopped.clone(),
            ))),
            _ => None,
        };
        let stats = tablekit_core::observe::enabled().then(|| {
            tokio::spawn(refresh_gauges(
                self.queue.clone(),
                config.queue.clone(),
                config.stats_interval,
                config.hot_partitions,
                stats_stopped,
            ))
        });
        let registry = Arc::new(self.registry);
        let counters = Arc::new(Counters {
            activity: attachment.as_ref().map(|a| a.counters().clone()),
            ..Counters::default()
        });
        let permits = Arc::new(Semaphore::new(config.concurrency));
        let mut tasks = JoinSet::new();
        tokio::pin!(shutdown);
        let outcome = loop {
            let Some(active) = consumer.as_mut() else {
                tokio::select! {
                    () = &mut shutdown => break Ok(()),
                    paused = pause_changed(&mut pause) => if !paused {
                        match self.queue.consume(&config.queue, options).await {
                            Ok(resumed) => consumer = Some(resumed),
                            Err(e) => break Err(e),
                        }
                        tracing::info!(queue = %config.queue, "resumed");
                    },
                }
                continue;
            };
            let permit = tokio::select! {
                () = &mut shutdown => break Ok(()),
                paused = pause_changed(&mut pause) => {
                    if paused {
                        pause_consumer(&mut consumer, &config.queue).await;
                    }
                    continue;
                }
                permit = permits.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break Ok(()),
                },
            };
            let delivery = tokio::select! {
                () = &mut shutdown => break Ok(()),
                paused = pause_changed(&mut pause) => {
                    // Closing the consumer sends back what it received and did not hand out.
                    if paused {
                        pause_consumer(&mut consumer, &config.queue).await;
                    }
                    continue;
                }
                next = active.next() => next,
            };
            let delivery = match delivery {
                Ok(Some(delivery)) => delivery,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            let (registry, counters, config) = (registry.clone(), counters.clone(), config.clone());
            tasks.spawn(async move {
                handle(delivery, &registry, &counters, &config).await;
                drop(permit);
            });
            while let Some(joined) = tasks.try_join_next() {
                if let Err(e) = joined {
                    tracing::error!(error = %e, "a delivery task failed");
                }
            }
        };
        tracing::info!(queue = %config.queue, in_flight = tasks.len(), "worker stopping");
        let drained = tokio::time::timeout(config.shutdown_timeout, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(queue = %config.queue, left = tasks.len(), "shutdown timeout: unfinished deliveries will be delivered again");
            tasks.abort_all();
        }
        if let Some(consumer) = consumer {
            consumer.close().await;
        }
        let _ = stop_stats.send(true);
        if let Some(stats) = stats {
            let _ = stats.await;
        }
        if let Some(unconsumed) = unconsumed {
            let _ = unconsumed.await;
        }
        let _ = pause_watch.await;
        let _ = sweeper.await;
        if let Some(attachment) = attachment {
            attachment.finish().await;
        }
        let report = counters.report();
        tracing::info!(queue = %config.queue, ?report, "worker stopped");
        outcome.map(|()| report)
    }
}

/// Sweeps the broker's poison queue of `name` into the poison table (and trims the
/// table to its retention cap) now and every [`SWEEP_INTERVAL`](crate::queue::poison_table::SWEEP_INTERVAL),
/// until `stopped`. A failure is logged and tried again at the next sweep.
async fn sweep_poison<Q: Queue>(
    queue: Q,
    name: String,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        if let Err(e) = queue.sweep_poison(&name).await {
            tracing::warn!(queue = %name, error = %e, "sweeping the broker's poison queue into the poison table failed");
        }
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            () = tokio::time::sleep(crate::queue::poison_table::SWEEP_INTERVAL) => {}
        }
    }
}

/// Closes the consumer of a queue just paused.
async fn pause_consumer<C: Consumer>(consumer: &mut Option<C>, queue: &str) {
    if let Some(consumer) = consumer.take() {
        consumer.close().await;
    }
    tracing::info!(queue = %queue, "paused");
}

/// The pause state once it changes; never, once nobody watches it any more.
async fn pause_changed(pause: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    if pause.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
    *pause.borrow_and_update()
}

/// Asks the queue whether it is paused every `interval` and publishes each change, until
/// `stopped`. A failed read keeps the state last read.
async fn watch_pause<Q: Queue>(
    queue: Q,
    name: String,
    interval: Duration,
    sent: tokio::sync::watch::Sender<bool>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let interval = interval.max(Duration::from_millis(10));
    loop {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            () = tokio::time::sleep(interval) => {}
        }
        match queue.paused(&name).await {
            Ok(paused) => {
                sent.send_if_modified(|state| std::mem::replace(state, paused) != paused);
            }
            Err(e) => {
                tracing::warn!(queue = %name, error = %e, "reading whether the queue is paused failed");
            }
        }
    }
}

/// Looks every `after / 5` (1 s to 1 min) at `queues`, the other queues of the registry
/// of the worker of `served`, and warns in the log of each whose messages no consumer has
/// taken for `after` — again after each further `after` while it lasts — and notes when
/// one is consumed again; until `stopped`. A broker that counts consumers (RabbitMQ) is
/// judged from when this worker first saw it count none.
async fn watch_unconsumed<Q: Queue>(
    queue: Q,
    served: String,
    queues: Vec<String>,
    after: Duration,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let interval = (after / 5).clamp(Duration::from_secs(1), Duration::from_secs(60));
    let mut watch = crate::status::ConsumerWatch::default();
    let mut warned: std::collections::HashMap<&str, Instant> = std::collections::HashMap::new();
    loop {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            () = tokio::time::sleep(interval) => {}
        }
        for name in &queues {
            let (stats, paused) = futures::join!(queue.stats(name), queue.paused(name));
            let status = crate::status::QueueStatus::of(name.clone(), stats, paused.ok());
            if let Some(error) = &status.error {
                tracing::debug!(queue = %neutral(name), %error, "reading the queue's statistics failed");
                continue;
            }
            match watch.unconsumed(&status, chrono::Utc::now(), after) {
                Some(idle) => {
                    if warned
                        .get(name.as_str())
                        .is_none_or(|at| at.elapsed() >= after)
                    {
                        tracing::warn!(
                            queue = %neutral(name),
                            waiting = idle.waiting,
                            served = %neutral(&served),
                            "{}",
                            idle.warning()
                        );
                        warned.insert(name.as_str(), Instant::now());
                    }
                }
                None => {
                    if warned.remove(name.as_str()).is_some() {
                        tracing::info!(queue = %neutral(name), "the queue is consumed again");
                    }
                }
            }
        }
    }
}

/// The hot partitions shown.
const HOT_TOP: usize = 10;

/// Refreshes the queue's gauges and, with `hot_partitions`, the hot partitions (over the
/// interval since the last refresh) every `interval`, until `stopped`.
async fn refresh_gauges<Q: Queue>(
    queue: Q,
    name: String,
    interval: Duration,
    hot_partitions: bool,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        match queue.stats(&name).await {
            Ok(stats) => {
                #[allow(clippy::cast_precision_loss)]
                let set = |metric: &'static str, value: u64| {
                    metrics::gauge!(metric, "queue" => name.clone()).set(value as f64);
                };
                set("tablekit_queue_messages", stats.waiting);
                set("tablekit_queue_leased_messages", stats.leased);
                set("tablekit_queue_poison_messages", stats.poisoned);
                let oldest = stats.waiting_since.map_or(0, |since| {
                    u64::try_from((chrono::Utc::now() - since).num_seconds()).unwrap_or(0)
                });
                set("tablekit_queue_oldest_waiting_seconds", oldest);
            }
            Err(e) => {
                tracing::warn!(queue = %name, error = %e, "reading the queue's statistics failed")
            }
        }
        if hot_partitions {
            tablekit_core::observe::report_hot_partitions(HOT_TOP);
        }
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// Handles one delivery as [`Worker::run`] does — the registry's handler, then an ack, a
/// retry after the backoff, or the poison queue with the reason — and reports how it was
/// settled (one of the report's counts is 1). For runtimes of one's own, such as the
/// deterministic simulation's.
pub async fn handle_delivery<D: Delivery>(
    delivery: D,
    registry: &Registry,
    config: &WorkerConfig,
) -> WorkerReport {
    let counters = Counters::default();
    handle(delivery, registry, &counters, config).await;
    counters.report()
}

/// Handles one delivery and settles it, in a `delivery` span naming the queue and the
/// message's id (the operation's id): every log line of the delivery carries both.
async fn handle<D: Delivery>(
    delivery: D,
    registry: &Registry,
    counters: &Counters,
    config: &WorkerConfig,
) {
    use tracing::Instrument;
    let _in_flight = counters
        .activity
        .as_ref()
        .map(QueueActivity::start_delivery);
    let span = tracing::info_span!(
        "delivery",
        queue = %config.queue,
        operation_id = %neutral(&delivery.received().id)
    );
    handle_in_span(delivery, registry, counters, config)
        .instrument(span)
        .await;
}

async fn handle_in_span<D: Delivery>(
    delivery: D,
    registry: &Registry,
    counters: &Counters,
    config: &WorkerConfig,
) {
    // The id (as the logs show the sender's text) and count only: the body is read in
    // place, not copied.
    let (id, count) = {
        let received = delivery.received();
        (neutral(&received.id).into_owned(), received.delivery_count)
    };
    let queue = &config.queue;
    if count > 1
        && let Some(activity) = &counters.activity
    {
        activity.add(one(|c| &mut c.redelivered));
    }

    // A message delivered more often than allowed (its consumers kept dying) is poisoned
    // before it can kill another.
    if count > config.max_deliveries {
        let reason = format!(
            "delivered {count} times without being settled (limit {})",
            config.max_deliveries
        );
        settle(delivery.poison(&reason), counters, Settled::Poisoned).await;
        let labels = [("queue", queue.clone()), ("kind", "unknown".to_owned())];
        metrics::counter!("tablekit_worker_poisoned_total", &labels).increment(1);
        tracing::error!(queue = %queue, %id, reason = %neutral(&reason), "poisoned");
        return;
    }

    let envelope = Envelope::from_bytes(&delivery.received().body);
    let kind = envelope
        .as_ref()
        .map_or_else(|_| "malformed".to_owned(), |e| e.kind.clone());
    let labels = [("queue", queue.clone()), ("kind", kind.clone())];
    if let Ok(envelope) = &envelope {
        let lag = (chrono::Utc::now() - envelope.created_at)
            .to_std()
            .unwrap_or_default();
        metrics::histogram!("tablekit_worker_queue_lag_seconds", &labels).record(lag.as_secs_f64());
    }
    let started = Instant::now();
    let result = match envelope {
        // A panicking handler is a failed attempt, retried like any other: the delivery
        // is settled either way.
        Ok(envelope) => {
            use futures::FutureExt;
            use tracing::Instrument;
            let span = tracing::debug_span!(
                "tablekit.handle",
                otel.kind = "consumer",
                messaging.destination.name = %queue,
                messaging.message.id = %id,
                tablekit.operation.id = %envelope.id,
                tablekit.operation.kind = %neutral(&envelope.kind),
                tablekit.delivery = count,
            );
            // Its writes are refused once its lease is about to run out.
            let fence = delivery
                .lease_ends()
                .map(|ends| crate::fence::fence_of(tokio::time::Instant::now(), ends));
            let handling = crate::fence::fenced(fence, registry.handle(envelope));
            std::panic::AssertUnwindSafe(handling.instrument(span))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| Err(OperationError::Retryable("the handler panicked".into())))
        }
        Err(e) => Err(e),
    };
    metrics::histogram!("tablekit_worker_handler_seconds", &labels)
        .record(started.elapsed().as_secs_f64());

    match result {
        Ok(()) => {
            settle(delivery.ack(), counters, Settled::Processed).await;
            metrics::counter!("tablekit_worker_processed_total", &labels).increment(1);
            tracing::debug!(queue = %queue, %id, kind = %neutral(&kind), "processed");
        }
        Err(e) if e.is_retryable() && count < config.max_deliveries => {
            let reason = chain(&e);
            let delay = config.backoff(count);
            settle(delivery.retry(delay), counters, Settled::Retried).await;
            metrics::counter!("tablekit_worker_retried_total", &labels).increment(1);
            tracing::warn!(queue = %queue, %id, kind = %neutral(&kind), delivery = count, ?delay, reason = %neutral(&reason), "retrying");
        }
        Err(e) => {
            let reason = if e.is_retryable() {
                format!(
                    "failed {count} times (limit {}); last error: {}",
                    config.max_deliveries,
                    chain(&e)
                )
            } else {
                chain(&e)
            };
            settle(delivery.poison(&reason), counters, Settled::Poisoned).await;
            metrics::counter!("tablekit_worker_poisoned_total", &labels).increment(1);
            tracing::error!(queue = %queue, %id, kind = %neutral(&kind), reason = %neutral(&reason), "poisoned");
        }
    }
}

/// An error and its causes, on one line.
fn chain(error: &OperationError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Counts of one delivery, in the count `field` picks.
fn one(field: impl FnOnce(&mut Counts) -> &mut u64) -> Counts {
    let mut counts = Counts::default();
    *field(&mut counts) = 1;
    counts
}

async fn settle(settlement: impl Future<Output = Result<()>>, counters: &Counters, how: Settled) {
    let (counter, counts) = match how {
        Settled::Processed => (&counters.processed, one(|c| &mut c.processed)),
        Settled::Retried => (&counters.retried, one(|c| &mut c.failed)),
        Settled::Poisoned => (&counters.poisoned, one(|c| &mut c.poisoned)),
    };
    match settlement.await {
        Ok(()) => {
            counter.fetch_add(1, Ordering::Relaxed);
            if let Some(activity) = &counters.activity {
                activity.add(counts);
            }
        }
        Err(e) => {
            counters.lost_leases.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "settlement failed; the message will be delivered again");
        }
    }
}

/// A future that completes on SIGINT or SIGTERM. The handlers are installed when this is
/// called (inside a Tokio runtime), not when the future is first polled, so a signal that
/// arrives while the worker is still connecting is not lost.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).ok();
        let mut interrupt = signal(SignalKind::interrupt()).ok();
        async move {
            let wait = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = wait(terminate.take()) => {},
                () = wait(interrupt.take()) => {},
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Serves the metrics for Prometheus at `http://ADDRESS/metrics`. Feature `prometheus`.
///
/// # Errors
/// [`Error::Config`] when the exporter cannot be installed (the address is taken, or a
/// recorder is already installed).
#[cfg(feature = "prometheus")]
pub fn install_prometheus(address: std::net::SocketAddr) -> Result<()> {
    use metrics_exporter_prometheus::Matcher;
    let config = |e: metrics_exporter_prometheus::BuildError| {
        Error::Config(format!("metrics endpoint on {address}: {e}"))
    };
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(address)
        // Latencies and lags as histograms (for `histogram_quantile`): 1 ms to 5 min.
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), SECONDS_BUCKETS)
        .map_err(config)?
        // A gauge not set for ten minutes leaves the page: a partition that dropped out
        // of the hot ones, a queue no longer consumed. Live gauges are set every
        // `--stats-interval` (at most five minutes).
        .idle_timeout(
            metrics_util::MetricKindMask::GAUGE,
            Some(GAUGE_IDLE_TIMEOUT),
        )
        .install()
        .map_err(config)?;
    tablekit_core::observe::enable();
    Ok(())
}

/// How long a gauge stays on the page without being set.
pub const GAUGE_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// The buckets of every `_seconds` histogram.
#[cfg(feature = "prometheus")]
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_double_from_the_base_up_to_the_cap() {
        let config = WorkerConfig {
            base_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            ..WorkerConfig::new("q")
        };
        let delays: Vec<u128> = config
            .queue_options()
            .retry_delays
            .iter()
            .map(Duration::as_millis)
            .collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000]);
    }

    #[test]
    fn backoff_grows_with_each_delivery_within_its_jitter_and_cap() {
        let config = WorkerConfig {
            base_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            ..WorkerConfig::new("q")
        };
        for delivery in 1..=10u32 {
            let nominal = (100u64 << (delivery - 1)).min(2000);
            for _ in 0..20 {
                let ms = config.backoff(delivery).as_millis() as u64;
                assert!(
                    ms >= nominal * 3 / 4 - 1 && ms <= (nominal * 5 / 4).min(2000) + 1,
                    "{delivery}: {ms}"
                );
            }
        }
    }
}
