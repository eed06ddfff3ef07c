//! The commit primitive and the retry policy every optimistic loop of tablekit follows.
//!
//! [`Engine::commit`] runs one write the way the design guides prescribe: read what it
//! depends on and plan a batch plus its follow-up work ([`Planner::plan`]); lease the
//! partition's pending marker when there is follow-up work; commit the batch and one
//! outbox entry per operation in one entity group transaction; on a refusal let the
//! planner decide ([`Planner::refused`]) and plan again after a jittered backoff; after
//! the commit hand each operation to the sink and delete its entry.

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tracing::Instrument;

use tablekit_core::{Batch, ETag, ErrorKind, IfMatch, TableStore, Value, WriteOp};

use super::operation::Envelope;
use super::outbox;
use super::pending::Markers;
use super::removal::{Removal, Remover};
use super::sink::OutboxSink;
use crate::error::Result;

mod options;

pub use options::EngineOptions;

/// The one retry policy of the workspace, in the core: the patterns' optimistic loops
/// follow it, and its [`Exhausted`](tablekit_core::retry::Exhausted) becomes
/// [`Error::Contention`](crate::Error::Contention).
pub use tablekit_core::retry::{Retry, RetryPolicy};

/// One planned attempt of a write: its batch (each operation with the role the planner
/// gives it, to read a refusal back) and the follow-up work to record with it.
#[derive(Debug)]
pub struct Plan<R> {
    batch: Batch,
    roles: Vec<R>,
    work: Vec<Envelope>,
    pending: bool,
}

impl<R> Default for Plan<R> {
    fn default() -> Self {
        Plan {
            batch: Batch::new(),
            roles: Vec::new(),
            work: Vec::new(),
            pending: false,
        }
    }
}

impl<R> Plan<R> {
    /// An empty plan.
    pub fn new() -> Self {
        Plan::default()
    }

    /// Adds a write of the partition with its role.
    pub fn push(&mut self, op: WriteOp, role: R) -> &mut Self {
        self.batch.push(op);
        self.roles.push(role);
        self
    }

    /// Adds follow-up work: one outbox entry in the transaction.
    pub fn follow_up(&mut self, envelope: Envelope) -> &mut Self {
        self.work.push(envelope);
        self
    }

    /// Marks the plan as writing entries the relay takes from the partition besides
    /// outbox entries (a feed's changes, `crate::feed`): the partition's pending marker is
    /// leased before the commit, as for follow-up work.
    pub fn keep_pending(&mut self) -> &mut Self {
        self.pending = true;
        self
    }

    /// Whether the commit leases the partition's pending marker: the plan has follow-up
    /// work, or [`keep_pending`](Self::keep_pending) was called.
    pub fn keeps_pending(&self) -> bool {
        self.pending || !self.work.is_empty()
    }

    /// The writes planned so far.
    pub fn len(&self) -> usize {
        self.batch.len()
    }

    /// Whether nothing is planned.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty() && self.work.is_empty()
    }

    /// The writes planned so far.
    pub fn operations(&self) -> &[WriteOp] {
        self.batch.operations()
    }

    /// Write `index` of the plan, to change (a step reshaping what an earlier one
    /// planned: a wide entity's primary split into chunks).
    pub fn operation_mut(&mut self, index: usize) -> Option<&mut WriteOp> {
        self.batch.operation_mut(index)
    }

    /// The follow-up work planned so far.
    pub fn work(&self) -> &[Envelope] {
        &self.work
    }

    /// The plan's writes, their roles and its follow-up work (to combine plans).
    pub fn into_parts(self) -> (Vec<WriteOp>, Vec<R>, Vec<Envelope>) {
        (self.batch.into_operations(), self.roles, self.work)
    }
}

/// A write run by [`Engine::commit`].
pub trait Planner: Send {
    /// What each write of the batch is to the planner.
    type Role: Send + Sync;

    /// Reads what the write depends on and plans it; `None` when there is nothing to
    /// commit (the planner keeps what it found).
    fn plan(&mut self) -> impl Future<Output = Result<Option<Plan<Self::Role>>>> + Send;

    /// The batch was refused at a write of the plan (`role`), or as a whole (`None`):
    /// `Ok` to plan again after a backoff, or the error to stop with.
    ///
    /// # Errors
    /// The error the write ends with.
    fn refused(&mut self, error: tablekit_core::Error, role: Option<&Self::Role>) -> Result<()>;

    /// What the write is, for [`Error::Contention`](crate::Error::Contention).
    fn what(&self) -> String;
}

/// Whether a refused batch lost a race at one of its writes: a concurrent writer changed,
/// created or removed what the plan read (refused by an ETag, an insert, or a missing
/// entity). Planning again from a fresh read is the answer.
pub fn lost_race(error: &tablekit_core::Error) -> bool {
    error.batch_index().is_some()
        && matches!(
            error.kind(),
            ErrorKind::PreconditionFailed | ErrorKind::AlreadyExists | ErrorKind::NotFound
        )
}

/// How many times the read that recognises a landed attempt is tried when it fails.
const READ_BACK_ATTEMPTS: usize = 4;

/// The property holding the version of a write that records one (tablekit's index
/// record): each attempt stamps its own, so an attempt whose answer was lost is
/// recognised by it.
pub const VERSION_PROPERTY: &str = "TablekitVersion";

/// What shows that an attempt landed, taken from its batch before it is sent (no read on
/// the happy path): the first write's version stamp, else the first outbox entry (its
/// id is the attempt's own), else for a conditional delete the primary's absence.
enum Witness {
    /// The first write stores an entity stamped with this version.
    Written {
        partition_key: String,
        row_key: String,
        version: i64,
    },
    /// The first write deletes an entity under its ETag.
    Deleted {
        partition_key: String,
        row_key: String,
    },
    Unknown,
}

impl Witness {
    fn of(batch: &Batch) -> Self {
        let Some(first) = batch.operations().first() else {
            return Witness::Unknown;
        };
        let (partition_key, row_key) = first.key();
        let (partition_key, row_key) = (partition_key.to_owned(), row_key.to_owned());
        match first {
            WriteOp::Insert(e)
            | WriteOp::Replace(e, _)
            | WriteOp::InsertOrReplace(e)
            | WriteOp::Merge(e, _)
            | WriteOp::InsertOrMerge(e) => match e.properties.get(VERSION_PROPERTY) {
                Some(Value::Int64(version)) => Witness::Written {
                    partition_key,
                    row_key,
                    version: *version,
                },
                _ => Witness::Unknown,
            },
            WriteOp::Delete {
                if_match: IfMatch::ETag(_),
                ..
            } => Witness::Deleted {
                partition_key,
                row_key,
            },
            WriteOp::Delete { .. } => Witness::Unknown,
        }
    }
}

/// An intent recorded before a write acted outside its transaction
/// ([`Engine::record_intent`]).
#[derive(Clone, Debug)]
pub struct Intent {
    table: String,
    partition_key: String,
    row_key: String,
    etag: ETag,
    envelope: Envelope,
    recorded: chrono::DateTime<chrono::Utc>,
}

impl Intent {
    /// The intent's id (its operation's), which what the write does under it is tagged
    /// with.
    pub fn id(&self) -> String {
        self.envelope.id.simple().to_string()
    }

    /// How long ago (by the clock) the intent was recorded.
    pub fn age(&self) -> Duration {
        (tablekit_core::clock::now() - self.recorded)
            .to_std()
            .unwrap_or(Duration::ZERO)
    }

    /// Whether the intent is still pending: recorded, not claimed by the relay (after its
    /// grace) or by a writer fencing a stalled write.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn pending<S: TableStore>(&self, store: &S) -> Result<bool> {
        Ok(
            match store
                .get(&self.table, &self.partition_key, &self.row_key, None)
                .await?
            {
                Some(entry) => entry.etag.as_ref() == Some(&self.etag),
                None => false,
            },
        )
    }

    /// The write of a plan that deletes the intent under the ETag it was recorded with:
    /// the commit lands only while nobody claimed it.
    pub fn fence(&self) -> WriteOp {
        WriteOp::Delete {
            partition_key: self.partition_key.clone(),
            row_key: self.row_key.clone(),
            if_match: IfMatch::ETag(self.etag.clone()),
        }
    }
}

/// What a committed write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The ETags of the plan's writes, in order.
    pub etags: Vec<Option<ETag>>,
    /// The operations recorded as follow-up work.
    pub work: usize,
    /// Whether every operation went to the sink (otherwise the relay publishes the rest
    /// later); `false` without work. The published entries' removal follows off the
    /// write's critical path ([`Engine::flush`] waits for it). Delayed work
    /// ([`Envelope::not_before`](super::Envelope::not_before)) is always the relay's.
    pub published: bool,
}

/// Commits writes with their follow-up work: the store, the sink, the pending markers
/// and the retry policy. Clones share the markers.
#[derive(Clone)]
pub struct Engine<S> {
    store: S,
    sink: Option<Arc<dyn OutboxSink>>,
    markers: Arc<Markers>,
    retry: RetryPolicy,
    tombstone_grace: Duration,
    /// The task removing published entries (started at the first publish).
    remover: Arc<std::sync::OnceLock<Option<Remover>>>,
    /// Starts the remover over a clone of the store.
    start_remover: Arc<dyn Fn() -> Option<Remover> + Send + Sync>,
    /// Whether a writer waits for its published entries' removal (see
    /// [`EngineOptions::removal_in_line`]).
    removal_in_line: bool,
}

/// How long a delete's tombstone stays by default (see [`EngineOptions::tombstone_grace`]).
pub const DEFAULT_TOMBSTONE_GRACE: Duration = Duration::from_secs(5 * 60);

/// The oldest a plan may be when its batch is sent: an older one is planned again. With
/// the store's own bound on a request (30 seconds for Azure Table storage), it bounds how
/// late a write can land after the reads it was planned on.
pub const MAX_PLAN_AGE: Duration = Duration::from_secs(30);

impl<S> std::fmt::Debug for Engine<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("sink", &self.sink.is_some())
            .field("lease", &self.markers.lease())
            .field("retry", &self.retry)
            .field("tombstone_grace", &self.tombstone_grace)
            .field("removal_in_line", &self.removal_in_line)
            .finish()
    }
}

impl<S: TableStore + Clone + 'static> Engine<S> {
    /// The settings of an engine, given in any order, then
    /// [`build`](EngineOptions::build) on a store.
    pub fn options() -> EngineOptions<S> {
        EngineOptions::new()
    }

    /// An engine over `store` with the default settings (see [`EngineOptions::new`]),
    /// without a sink: follow-up work waits in the outbox for the relay. The shortcut for
    /// `Engine::options().build(store)`.
    pub fn new(store: S) -> Self {
        Self::options().build(store)
    }
}

impl<S: TableStore> Engine<S> {
    /// Waits until the published outbox entries handed to the remover so far are removed
    /// (or left to the relay after a failure). A process calls it before it stops;
    /// otherwise the relay publishes what was left again after its grace period.
    pub async fn flush(&self) {
        if let Some(Some(remover)) = self.remover.get() {
            remover.flush().await;
        }
    }

    /// How long a delete's tombstone stays (see [`crate::index::record::TOMBSTONE_KIND`]).
    pub fn tombstone_grace(&self) -> Duration {
        self.tombstone_grace
    }

    /// This engine handing follow-up work to `sink` after each commit, for the tables
    /// that take an engine from their caller and set its sink from their own settings
    /// ([`EngineOptions::sink`] is the public way).
    pub(crate) fn with_sink(mut self, sink: Arc<dyn OutboxSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// This engine retrying under `policy`, for the tables that take an engine from
    /// their caller and bound its attempts from their own settings
    /// ([`EngineOptions::retry`] is the public way).
    pub(crate) fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Creates the table of pending markers (writes create it too when it is missing).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn open(&self) -> Result<()> {
        self.store
            .create_table_if_not_exists(super::pending::PENDING_TABLE)
            .await?;
        Ok(())
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The sink, if any.
    pub fn sink(&self) -> Option<&Arc<dyn OutboxSink>> {
        self.sink.as_ref()
    }

    /// The retry policy.
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// Runs a write in `partition_key` of `table` (see the module docs). `None` when
    /// the planner found nothing to commit.
    ///
    /// # Errors
    /// The planner's errors; limit violations before any I/O; the marker's write; the
    /// store's errors the planner does not retry; [`Error::Contention`](crate::Error::Contention).
    pub async fn commit<P: Planner>(
        &self,
        table: &str,
        partition_key: &str,
        planner: &mut P,
    ) -> Result<Option<Committed>> {
        let span = tracing::debug_span!(
            "tablekit.commit",
            db.collection.name = table,
            tablekit.partition_key = partition_key,
            tablekit.attempts = tracing::field::Empty,
            tablekit.operation.ids = tracing::field::Empty,
        );
        self.commit_planned(table, partition_key, planner, &span)
            .instrument(span.clone())
            .await
    }

    async fn commit_planned<P: Planner>(
        &self,
        table: &str,
        partition_key: &str,
        planner: &mut P,
        span: &tracing::Span,
    ) -> Result<Option<Committed>> {
        let mut retry = self.retry.start();
        let mut attempts = 0u32;
        loop {
            retry.next(|| planner.what()).await?;
            attempts += 1;
            span.record("tablekit.attempts", attempts);
            let planned_at = tablekit_core::clock::now();
            let Some(Plan {
                mut batch,
                roles,
                work,
                pending,
            }) = planner.plan().await?
            else {
                return Ok(None);
            };
            let planned = batch.len();
            for envelope in &work {
                batch.insert(outbox::entry(partition_key, envelope)?);
            }
            batch.check().map_err(tablekit_core::Error::from)?;
            let lease = if work.is_empty() && !pending {
                None
            } else {
                Some(
                    self.markers
                        .ensure(&self.store, table, partition_key)
                        .await?,
                )
            };
            // A plan that waited too long (a paused process, a slow marker) is planned
            // again: what it read may have changed past what a tombstone's grace covers.
            if (tablekit_core::clock::now() - planned_at)
                .to_std()
                .is_ok_and(|age| age > MAX_PLAN_AGE)
            {
                tracing::debug!(
                    table,
                    partition_key,
                    "a plan grew too old before its commit; planning again"
                );
                continue;
            }
            let witness = Witness::of(&batch);
            let answer = match self.store.submit_batch(table, batch).await {
                // A write whose answer was lost may have landed: one read tells.
                Err(e) if e.is_retryable() => {
                    match self.landed(table, partition_key, witness, &work).await {
                        Some(etag) => {
                            tracing::debug!(table, partition_key, error = %e, "a lost answer: the attempt landed");
                            let mut etags = vec![None; planned + work.len()];
                            if let Some(first) = etags.first_mut() {
                                *first = etag;
                            }
                            Ok(etags)
                        }
                        None => Err(e),
                    }
                }
                answer => answer,
            };
            match answer {
                Ok(mut etags) => {
                    if !work.is_empty() && !span.is_disabled() {
                        let ids: Vec<String> = work.iter().map(|e| e.id.to_string()).collect();
                        span.record("tablekit.operation.ids", ids.join(",").as_str());
                    }
                    let entry_etags = etags.split_off(planned.min(etags.len()));
                    if lease.is_some_and(|ends| Instant::now() > ends)
                        && !self.markers.lease().is_zero()
                        && let Err(e) = self.markers.renew(&self.store, table, partition_key).await
                    {
                        tracing::warn!(table, partition_key, error = %e, "renewing a pending marker after a slow commit failed");
                    }
                    let published = self.publish(table, partition_key, &work, entry_etags).await;
                    return Ok(Some(Committed {
                        etags,
                        work: work.len(),
                        published,
                    }));
                }
                Err(e) => {
                    let role = e.batch_index().and_then(|at| roles.get(at));
                    planner.refused(e, role)?;
                }
            }
        }
    }

    /// Whether an attempt whose answer was lost landed, with one point read (see
    /// [`Witness`]): `Some` with the ETag of the first write's entity when it did (or
    /// `None` inside when that is unknown), `None` when it did not or the read cannot tell.
    async fn landed(
        &self,
        table: &str,
        partition_key: &str,
        witness: Witness,
        work: &[Envelope],
    ) -> Option<Option<ETag>> {
        // One point read; again (under the retry policy, a few times) only when the read
        // itself fails.
        let read = |pk: String, rk: String| async move {
            let mut retry = self.retry.attempts(READ_BACK_ATTEMPTS).start();
            loop {
                retry.next(String::new).await.ok()?;
                match self.store.get(table, &pk, &rk, None).await {
                    Ok(found) => return Some(found),
                    Err(e) if e.is_retryable() => {}
                    Err(_) => return None,
                }
            }
        };
        match witness {
            Witness::Written {
                partition_key: pk,
                row_key: rk,
                version,
            } => {
                let found = read(pk, rk).await??;
                (found.properties.get(VERSION_PROPERTY) == Some(&Value::Int64(version)))
                    .then_some(found.etag)
            }
            _ if !work.is_empty() => {
                let key = outbox::entry_row_key(&work[0]);
                read(partition_key.to_owned(), key).await?.map(|_| None)
            }
            Witness::Deleted {
                partition_key: pk,
                row_key: rk,
            } => match read(pk, rk).await? {
                None => Some(None),
                Some(_) => None,
            },
            Witness::Unknown => None,
        }
    }

    /// Records an intent (see [`outbox::INTENT_PROPERTY`]) in `partition_key` of
    /// `table` before a write acts outside its transaction: the partition's pending
    /// marker, then the entry. The write's plan deletes it with [`Intent::fence`].
    ///
    /// # Errors
    /// The store's errors; [`Error::Encode`](crate::Error::Encode).
    pub async fn record_intent(
        &self,
        table: &str,
        partition_key: &str,
        envelope: Envelope,
    ) -> Result<Intent> {
        let entry = outbox::intent(partition_key, &envelope)?;
        self.markers
            .ensure(&self.store, table, partition_key)
            .await?;
        let row_key = entry.row_key.clone();
        let etag = match self.store.insert(table, entry).await {
            Ok(etag) => etag,
            Err(e) => return Err(e),
        };
        Ok(Intent {
            table: table.to_owned(),
            partition_key: partition_key.to_owned(),
            row_key,
            etag,
            envelope,
            recorded: tablekit_core::clock::now(),
        })
    }

    /// After a write with an intent failed: claims the intent (unless the write committed
    /// or the relay claimed it) and hands its undoing to the sink; without a sink, or if
    /// that fails, the relay publishes it.
    pub async fn abandon(&self, intent: &Intent) {
        let entry = match self
            .store
            .get(&intent.table, &intent.partition_key, &intent.row_key, None)
            .await
        {
            Ok(Some(entry)) if entry.etag.as_ref() == Some(&intent.etag) => entry,
            // Claimed already (the write stalled past the relay's grace), or committed
            // (the batch deleted it). The undoing may have run before the write's late
            // steps outside its transaction: it is recorded again (harmless after a
            // commit: it never takes what a committed write holds).
            Ok(_) => return self.record_undoing_again(intent, self.retry).await,
            // Unknown: the relay may have claimed and undone it before the write's late
            // steps. The undoing is recorded again, as above: it is harmless if the
            // intent is still there (the relay claims that one later) or committed. One
            // attempt: a store that cannot answer this read is likely down, and the
            // failed write's caller is not held back by retries.
            Err(e) => {
                tracing::warn!(error = %e, "reading an abandoned write's intent failed; its undoing is recorded again");
                return self
                    .record_undoing_again(intent, self.retry.attempts(1))
                    .await;
            }
        };
        match outbox::claim_intent(&self.store, &intent.table, &entry, intent.etag.clone()).await {
            Ok(Some(etag)) => {
                let _ = self
                    .publish(
                        &intent.table,
                        &intent.partition_key,
                        std::slice::from_ref(&intent.envelope),
                        vec![Some(etag)],
                    )
                    .await;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "claiming an abandoned write's intent failed; the relay undoes it");
            }
        }
    }

    /// Records `intent`'s undoing again as ordinary work, under a fresh key (the claimed
    /// entry, if still there, may have been published before the write's late steps),
    /// and publishes it. A store failure is tried again under the engine's retry policy;
    /// a process that dies here leaves the late reservations to their lease (a writer
    /// takes a dead one over, the audit's repair deletes it).
    async fn record_undoing_again(&self, intent: &Intent, retry: RetryPolicy) {
        let again = Envelope {
            id: tablekit_core::random::uuid(),
            ..intent.envelope.clone()
        };
        let mut retry = retry.start();
        let recorded = loop {
            if let Err(e) = retry
                .next(|| "recording an abandoned write's undoing".to_owned())
                .await
            {
                break Err(e.into());
            }
            let entry = match outbox::entry(&intent.partition_key, &again) {
                Ok(entry) => entry,
                Err(e) => break Err(e),
            };
            if let Err(e) = self
                .markers
                .ensure(&self.store, &intent.table, &intent.partition_key)
                .await
            {
                if e.is_retryable() {
                    continue;
                }
                break Err(e);
            }
            match self.store.insert(&intent.table, entry).await {
                Ok(etag) => break Ok(Some(etag)),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => break Ok(None),
                Err(e) if e.is_retryable() => {}
                Err(e) => break Err(e),
            }
        };
        match recorded {
            Ok(Some(etag)) => {
                self.publish(
                    &intent.table,
                    &intent.partition_key,
                    std::slice::from_ref(&again),
                    vec![Some(etag)],
                )
                .await;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "recording an abandoned write's undoing failed; its late reservations lapse with their lease");
            }
        }
    }

    async fn publish(
        &self,
        table: &str,
        partition_key: &str,
        work: &[Envelope],
        etags: Vec<Option<ETag>>,
    ) -> bool {
        let Some(sink) = &self.sink else {
            return false;
        };
        let now = tablekit_core::clock::now();
        // Delayed work (a tombstone's burial) is the relay's, when its time comes.
        let ready: Vec<(&Envelope, Option<ETag>)> = work
            .iter()
            .zip(etags)
            .filter(|(envelope, _)| !envelope.waits(now))
            .collect();
        let mut published = !work.is_empty();
        if self.removal_in_line {
            for (envelope, etag) in ready {
                published &= outbox::publish(
                    &self.store,
                    table,
                    partition_key,
                    sink.as_ref(),
                    envelope,
                    etag,
                )
                .await;
            }
            return published;
        }
        // Every operation at once; each entry's removal off the critical path.
        let sent =
            futures::future::join_all(ready.iter().map(|(envelope, _)| {
                outbox::hand_over(table, partition_key, sink.as_ref(), envelope)
            }))
            .await;
        for ((envelope, etag), sent) in ready.into_iter().zip(sent) {
            if !sent {
                published = false;
                continue;
            }
            let removal = Removal {
                table: table.to_owned(),
                partition_key: partition_key.to_owned(),
                row_key: outbox::entry_row_key(envelope),
                etag,
            };
            let remover = self.remover.get_or_init(|| (self.start_remover)());
            let left = match remover {
                Some(remover) => remover.remove(removal).await.err(),
                None => Some(removal),
            };
            // No remover (no runtime, or it stopped): the writer removes it itself.
            if let Some(removal) = left {
                let if_match = removal.etag.map_or(IfMatch::Any, IfMatch::ETag);
                outbox::remove_entries(
                    &self.store,
                    table,
                    partition_key,
                    vec![(removal.row_key, if_match)],
                )
                .await;
            }
        }
        published
    }
}
