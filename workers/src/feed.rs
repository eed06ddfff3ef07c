//! Typed consumers of a change feed (`#[feed]`, see [`tablekit_patterns::feed`]): a member
//! of a named group reads `E`'s changes in order per entity, from a position, dividing
//! the shares with the group's other members.
//!
//! ```no_run
//! use tablekit_patterns::feed::Position;
//! use tablekit_workers::changes::Change;
//! use tablekit_workers::feed::Feed;
//! # #[derive(tablekit_derive::Entity, Clone, Debug, PartialEq)]
//! # #[entity(table = "Orders", partition_key = "{customer}", row_key = "{id:06}",
//! #          crate = "tablekit_core")]
//! # #[feed]
//! # struct Order { customer: String, id: u32, total: i64 }
//!
//! # async fn demo(store: tablekit_core::MemoryStore) -> tablekit_workers::Result<()> {
//! let billing = Feed::<Order>::group(store, "billing")?.from(Position::Beginning);
//! billing
//!     .consume(|change: Change<Order>| async move {
//!         println!("{:?} {} v{}", change.change, change.value.total, change.version);
//!         Ok(())
//!     })
//!     .run(tablekit_workers::runtime::shutdown_signal())
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! [`FeedConsumer::consume`] runs the handler over each change in turn: a failure that
//! may pass is retried with backoff; a permanent one, or retries spent, parks the change
//! with its reason ([`tablekit_patterns::feed::parked()`]) and the group goes on. After
//! each read the handled changes are checkpointed; at shutdown the member finishes the
//! change in hand, checkpoints and gives its shares back. A change is handled again only
//! after a crash (or a lost lease) between handling it and its checkpoint.
//! [`FeedConsumer::poll`] and [`FeedConsumer::checkpoint`] are the pull form.

use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

use tablekit_core::TableStore;
use tablekit_core::retry::RetryPolicy;
use tablekit_core::typed::EntityType;
use tablekit_patterns::feed::{Checkpointed, FeedChange, Group, Position, park};
use tracing::Instrument;

use crate::changes::Change;
use crate::error::{Error, Result};
use crate::operation::OperationError;

/// The feed of `E`.
#[derive(Debug)]
pub struct Feed<E>(PhantomData<fn() -> E>);

impl<E: EntityType> Feed<E> {
    /// A member of `group` reading `E`'s feed on `store`.
    ///
    /// # Errors
    /// [`Error::Config`] when `E` declares no feed or the group's name is not letters,
    /// digits, `-`, `_` or `.`.
    pub fn group<S: TableStore>(store: S, group: &str) -> Result<FeedConsumer<E, S>> {
        let schema = E::schema();
        let declared = schema.declared("feed", "feed").ok_or_else(|| {
            Error::Config(format!(
                "`{}` declares no feed: add #[feed] to the type",
                schema.type_name
            ))
        })?;
        let shares = declared
            .setting("shares")
            .and_then(|s| s.parse().ok())
            .unwrap_or(tablekit_patterns::feed::DEFAULT_SHARES);
        Ok(FeedConsumer {
            group: Group::new(store, schema.table, group, shares)?,
            retry: RetryPolicy {
                max_attempts: 5,
                base: Duration::from_millis(100),
                cap: Duration::from_secs(5),
            },
            idle: Duration::from_millis(100),
            activity: None,
            entity: PhantomData,
        })
    }
}

/// One change of `E` as a group reads it: the change and where it is in the feed.
///
/// It reads as the [`Change`] the push form's handler gets (it dereferences to it), so
/// both forms name the same fields: `delivered.partition_key`, `.row_key`, `.version`,
/// `.change`, `.value` — and the pull form adds `.share`, `.seq` and `.at`.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivered<E> {
    /// The change.
    pub change: Change<E>,
    /// The share it is in.
    pub share: u32,
    /// Its sequence number in the share.
    pub seq: u64,
    /// When it was sequenced.
    pub at: chrono::DateTime<chrono::Utc>,
}

impl<E> std::ops::Deref for Delivered<E> {
    type Target = Change<E>;

    fn deref(&self) -> &Change<E> {
        &self.change
    }
}

/// A member of a group of consumers of `E`'s feed.
#[derive(Debug)]
pub struct FeedConsumer<E, S> {
    group: Group<S>,
    retry: RetryPolicy,
    idle: Duration,
    activity: Option<crate::activity::Activity>,
    entity: PhantomData<fn() -> E>,
}

/// The name a group's deliveries are recorded under in the activity history (as a
/// queue's are): `feed~<table>~<group>`.
pub fn history_series(table: &str, group: &str) -> String {
    format!("feed~{table}~{group}")
}

impl<E: EntityType, S: TableStore> FeedConsumer<E, S> {
    /// Names this member (default: a random id).
    ///
    /// # Errors
    /// [`Error::Config`] for a name that is not letters, digits, `-`, `_` or `.`.
    pub fn member(mut self, id: &str) -> Result<Self> {
        self.group = self.group.member(id)?;
        Ok(self)
    }

    /// Where the group starts in a share it has never read (default the beginning).
    pub fn from(mut self, position: Position) -> Self {
        self.group = self.group.from(position);
        self
    }

    /// How long a lease on a share lasts (default 30 s).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.group = self.group.lease(lease);
        self
    }

    /// How a failing handler is retried before its change is parked (default 5
    /// attempts, backoff from 100 ms to 5 s).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Records the member's deliveries per minute in `activity` (handled as processed,
    /// retried as failed, parked as poisoned) under [`history_series`], for the console's
    /// history of the group.
    pub fn activity(mut self, activity: crate::activity::Activity) -> Self {
        self.activity = Some(activity);
        self
    }

    /// How long the member waits after a read that found nothing (default 100 ms).
    pub fn idle(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
    }

    /// The untyped group member.
    pub fn group(&self) -> &Group<S> {
        &self.group
    }

    /// The pull form: the changes after each held share's read position. A change that
    /// does not read as `E` comes as an `Err` with the reason (park it, or stop).
    ///
    /// # Errors
    /// The store's errors; [`tablekit_core::Error::PositionExpired`] when the group's
    /// position is no longer kept.
    pub async fn poll(
        &self,
    ) -> Result<Vec<(FeedChange, std::result::Result<Delivered<E>, String>)>> {
        let changes = self.group.poll().await?;
        Ok(changes
            .into_iter()
            .map(|change| {
                let typed = typed::<E>(&change).map_err(|e| e.to_string());
                (change, typed)
            })
            .collect())
    }

    /// Records `handled` as the group's checkpoint (see [`Group::checkpoint`]).
    ///
    /// # Errors
    /// The store's errors other than a lost lease.
    pub async fn checkpoint(&self, handled: &[FeedChange]) -> Result<Checkpointed> {
        self.group.checkpoint(handled).await
    }

    /// A worker running `handler` on each change; run it with [`FeedWorker::run`].
    pub fn consume<F, Fut>(self, handler: F) -> FeedWorker<E, S, F>
    where
        F: Fn(Change<E>) -> Fut + Send + Sync,
        Fut: Future<Output = std::result::Result<(), OperationError>> + Send,
    {
        FeedWorker {
            consumer: self,
            handler,
        }
    }
}

fn typed<E: EntityType>(change: &FeedChange) -> std::result::Result<Delivered<E>, OperationError> {
    Ok(Delivered {
        change: Change::<E>::from_event(change.event.clone())?,
        share: change.share,
        seq: change.seq,
        at: change.at,
    })
}

/// A member of a group running a handler over `E`'s changes.
#[derive(Debug)]
pub struct FeedWorker<E, S, F> {
    consumer: FeedConsumer<E, S>,
    handler: F,
}

/// What a [`FeedWorker`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeedReport {
    /// Changes the handler took.
    pub handled: u64,
    /// Changes parked (a permanent failure, or retries spent).
    pub parked: u64,
    /// Handler attempts that failed and were retried.
    pub retried: u64,
}

impl<E, S, F, Fut> FeedWorker<E, S, F>
where
    E: EntityType,
    S: TableStore,
    F: Fn(Change<E>) -> Fut + Send + Sync,
    Fut: Future<Output = std::result::Result<(), OperationError>> + Send,
{
    /// Reads, handles and checkpoints until `shutdown` completes; then finishes the
    /// change in hand, checkpoints what was handled and gives the shares back.
    ///
    /// # Errors
    /// [`tablekit_core::Error::PositionExpired`] (the group fell behind the feed's
    /// retention: nothing is skipped silently); [`tablekit_core::Error::Config`] for a
    /// start checkpoint naming a share beyond the feed's count; the store's errors when
    /// leaving. A failed read or checkpoint is logged and tried again.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) -> Result<FeedReport> {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut report = FeedReport::default();
        let group = &self.consumer.group;
        let (table, name) = (E::schema().table, group.name().to_owned());
        let series = history_series(table, &name);
        let attachment = self
            .consumer
            .activity
            .as_ref()
            .map(|a| a.attach(&series, 1));
        let counted = |report: &FeedReport| crate::activity::Counts {
            processed: report.handled,
            failed: report.retried,
            poisoned: report.parked,
            redelivered: 0,
        };
        let mut recorded = crate::activity::Counts::default();
        loop {
            let changes = tokio::select! {
                biased;
                () = &mut shutdown => break,
                polled = group.poll() => polled,
            };
            let changes = match changes {
                Ok(changes) => changes,
                // A position no longer kept, or one that does not apply (a checkpoint
                // of a feed divided otherwise): reading again cannot help.
                Err(e) if e.kind() == tablekit_core::ErrorKind::InvalidInput => {
                    let _ = group.leave().await;
                    return Err(e);
                }
                Err(e) => {
                    tracing::warn!(table, group = %name, error = %e, "reading the feed failed; trying again");
                    tokio::time::sleep(self.consumer.idle).await;
                    continue;
                }
            };
            if changes.is_empty() {
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(self.consumer.idle) => continue,
                }
            }
            let mut handled = Vec::with_capacity(changes.len());
            let mut lost: Vec<u32> = Vec::new();
            let mut stopping = false;
            for change in changes {
                // A share lost meanwhile is its new holder's: the rest of it is left.
                if lost.contains(&change.share) {
                    continue;
                }
                let span = tracing::info_span!(
                    "tablekit.feed.deliver",
                    db.collection.name = table,
                    tablekit.feed.group = %name,
                    tablekit.feed.share = change.share,
                    tablekit.feed.seq = change.seq,
                    tablekit.partition_key = %change.event.partition_key,
                    tablekit.row_key = %change.event.row_key,
                    tablekit.version = change.event.version,
                );
                self.deliver(&change, &mut report).instrument(span).await?;
                handled.push(change);
                // Checkpointing as it goes renews the leases, so a read that takes longer
                // than a lease to handle keeps its shares.
                if group.renewal_due() {
                    let done = std::mem::take(&mut handled);
                    metrics::counter!("tablekit_feed_delivered_total", "table" => table, "group" => name.clone())
                        .increment(done.len() as u64);
                    match group.checkpoint(&done).await {
                        Ok(checkpointed) => lost.extend(checkpointed.lost),
                        Err(e) => {
                            tracing::warn!(table, group = %name, error = %e, "checkpointing failed; the changes may be delivered again");
                        }
                    }
                }
                // Shutdown between changes: the rest waits for the next member.
                if futures::FutureExt::now_or_never(&mut shutdown).is_some() {
                    stopping = true;
                    break;
                }
            }
            metrics::counter!("tablekit_feed_delivered_total", "table" => table, "group" => name.clone())
                .increment(handled.len() as u64);
            if let Some(attachment) = &attachment {
                let now = counted(&report);
                attachment.counters().add(now.since(&recorded));
                recorded = now;
            }
            if let Err(e) = group.checkpoint(&handled).await {
                tracing::warn!(table, group = %name, error = %e, "checkpointing failed; the changes may be delivered again");
            }
            if stopping {
                break;
            }
        }
        group.leave().await?;
        if let Some(attachment) = attachment {
            attachment.finish().await;
        }
        Ok(report)
    }

    /// Hands one change to the handler, retrying a failure that may pass; parks it when
    /// the failure is permanent or the retries are spent.
    async fn deliver(&self, change: &FeedChange, report: &mut FeedReport) -> Result<()> {
        let group = &self.consumer.group;
        let mut retry = self.consumer.retry.start();
        loop {
            let _ = retry.next(String::new).await;
            // Read again per attempt: the handler takes the value.
            let typed = match typed::<E>(change) {
                Ok(typed) => typed,
                Err(e) => return self.park(change, &e.to_string(), report).await,
            };
            match (self.handler)(typed.change).await {
                Ok(()) => {
                    report.handled += 1;
                    return Ok(());
                }
                Err(e) if e.is_retryable() && retry.has_next() => {
                    report.retried += 1;
                    tracing::debug!(group = group.name(), error = %e, "the handler failed; retrying");
                }
                Err(e) => return self.park(change, &e.to_string(), report).await,
            }
        }
    }

    async fn park(&self, change: &FeedChange, reason: &str, report: &mut FeedReport) -> Result<()> {
        let group = &self.consumer.group;
        tracing::error!(
            group = group.name(),
            share = change.share,
            seq = change.seq,
            reason,
            "parking a change the handler could not take"
        );
        // Parking must land before the checkpoint moves past the change.
        let mut retry = RetryPolicy::azure().start();
        loop {
            match park(
                group.store(),
                E::schema().table,
                group.name(),
                change,
                reason,
            )
            .await
            {
                Ok(()) => break,
                Err(e) if e.is_retryable() && retry.has_next() => {
                    let _ = retry.next(String::new).await;
                }
                Err(e) => return Err(e),
            }
        }
        report.parked += 1;
        metrics::counter!("tablekit_feed_parked_total", "table" => E::schema().table, "group" => group.name().to_owned())
            .increment(1);
        Ok(())
    }
}

/// How often [`upkeep`] samples the feeds' lag for the metrics.
pub const LAG_SAMPLE: Duration = Duration::from_secs(5);

/// The feeds' upkeep beside the relay, until `shutdown`: every `trim_every` it trims each
/// declared feed to its retention (a cost that follows what it trims), and every
/// [`LAG_SAMPLE`] it sets the gauges `tablekit_feed_behind` (changes after the
/// checkpoints) and `tablekit_feed_lag_seconds` (the age of the oldest unhandled change)
/// per table and group, and `tablekit_feed_kept` per table.
pub async fn upkeep<S: TableStore>(
    store: S,
    trim_every: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut last_trim: Option<tokio::time::Instant> = None;
    loop {
        if last_trim.is_none_or(|at| at.elapsed() >= trim_every) {
            last_trim = Some(tokio::time::Instant::now());
            match tablekit_patterns::feed::trim_declared(&store).await {
                Ok(trimmed) if trimmed.deleted > 0 => {
                    tracing::info!(
                        deleted = trimmed.deleted,
                        shares = trimmed.shares,
                        "trimmed the feeds to their retention"
                    );
                    metrics::counter!("tablekit_feed_trimmed_total").increment(trimmed.deleted);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "trimming the feeds failed; the next pass tries again")
                }
            }
        }
        match crate::status::feeds(&store).await {
            Ok(feeds) => {
                let now = chrono::Utc::now();
                for feed in feeds {
                    metrics::gauge!("tablekit_feed_kept", "table" => feed.table.clone())
                        .set(feed.kept as f64);
                    for group in feed.groups {
                        let labels = [
                            ("table", feed.table.clone()),
                            ("group", group.group.clone()),
                        ];
                        metrics::gauge!("tablekit_feed_behind", &labels).set(group.behind() as f64);
                        let age = group.oldest_unread().map_or(0.0, |at| {
                            (now - at).num_milliseconds().max(0) as f64 / 1000.0
                        });
                        metrics::gauge!("tablekit_feed_lag_seconds", &labels).set(age);
                    }
                }
            }
            Err(e) => tracing::debug!(error = %e, "sampling the feeds' lag failed"),
        }
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(LAG_SAMPLE.min(trim_every)) => {}
        }
    }
}

/// What `tablekit-worker feed tail` prints, and until when.
#[derive(Clone, Debug)]
pub struct TailOptions {
    /// The table whose feed to print.
    pub table: String,
    /// `beginning`, `now` or an RFC 3339 time.
    pub from: String,
    /// Stop once caught up.
    pub once: bool,
    /// Stop after this many changes.
    pub limit: Option<u64>,
    /// One JSON object per line.
    pub json: bool,
    /// Milliseconds between two reads once caught up.
    pub interval_ms: u64,
}

/// `tablekit-worker feed tail`: prints `args.table`'s changes from `args.from`, then as
/// they come, until `shutdown` (or caught up with `--once`, or `--limit` printed).
///
/// # Errors
/// [`Error::Config`] for a table whose feed is not registered or a `--from` that does not
/// read; [`tablekit_core::Error::PositionExpired`]; the store's errors.
pub async fn tail<S: TableStore + Clone>(
    store: &S,
    args: &TailOptions,
    out: &mut (dyn std::io::Write + Send),
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let feeds = tablekit_patterns::feed::declared(store).await?;
    let Some(feed) = feeds.iter().find(|f| f.table == args.table) else {
        let known: Vec<&str> = feeds.iter().map(|f| f.table.as_str()).collect();
        return Err(Error::Config(format!(
            "no registered type of table `{}` declares a feed (#[feed]); tables with a feed: {}",
            crate::display::neutral(&args.table),
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        )));
    };
    let from = match args.from.as_str() {
        "beginning" => Position::Beginning,
        "now" => Position::Now,
        time => Position::At(
            chrono::DateTime::parse_from_rfc3339(time)
                .map_err(|e| {
                    Error::Config(format!(
                        "--from `{}` is not `beginning`, `now` or an RFC 3339 time (2026-11-01T00:00:00Z): {e}",
                        crate::display::neutral(time)
                    ))
                })?
                .with_timezone(&chrono::Utc),
        ),
    };
    let mut tail =
        tablekit_patterns::feed::Tail::new(store.clone(), &feed.table, feed.shares, from);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut printed = 0u64;
    let write = |out: &mut (dyn std::io::Write + Send), text: String| {
        writeln!(out, "{text}")
            .and_then(|()| out.flush())
            .map_err(|e| Error::Config(format!("writing output: {e}")))
    };
    loop {
        let changes = tokio::select! {
            biased;
            () = &mut shutdown => return Ok(()),
            changes = tail.next() => changes?,
        };
        let caught_up = changes.is_empty();
        for change in changes {
            let line = if args.json {
                serde_json::json!({
                    "share": change.share,
                    "seq": change.seq,
                    "at": change.at,
                    "change": change.event.change,
                    "partition_key": change.event.partition_key,
                    "row_key": change.event.row_key,
                    "version": change.event.version,
                    "entity": change.event.entity,
                })
                .to_string()
            } else {
                format!(
                    "{}  {}/{}  {:?}  {}/{}  v{}",
                    change.at.to_rfc3339(),
                    change.share,
                    change.seq,
                    change.event.change,
                    crate::display::neutral(&change.event.partition_key),
                    crate::display::neutral(&change.event.row_key),
                    change.event.version
                )
            };
            write(out, line)?;
            printed += 1;
            if args.limit.is_some_and(|limit| printed >= limit) {
                return Ok(());
            }
        }
        if caught_up {
            if args.once {
                return Ok(());
            }
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                () = tokio::time::sleep(Duration::from_millis(args.interval_ms.max(10))) => {}
            }
        }
    }
}
