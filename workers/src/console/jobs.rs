//! The console's background jobs: an audit, a repair or an index backfill, run by the
//! console process and kept in the store (table [`JOBS_TABLE`]), so that the page shows
//! their progress and results, and a job a stopped console left running is taken up again.
//!
//! A running job also has a marker (partition `running`), removed when it ends: looking
//! for jobs left running reads the markers, not every job ever run. A job's record
//! carries a heartbeat its runner renews every few seconds; a console takes up a running
//! job whose heartbeat is older than [`STALE_AFTER`] by replacing the
//! record under its ETag (two consoles cannot both take it), and names itself the job's
//! owner. Only the owner writes the record: a runner whose heartbeat finds another owner
//! stops its scan and leaves the record alone. The scan itself resumes from the audit's
//! checkpoint (`job` = `console-<id>`), not from the start. Staleness is judged by the
//! consoles' clocks: their skew must stay well under [`STALE_AFTER`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tablekit_core::blob::BlobStore;
use tablekit_core::filter;
use tablekit_core::{AnyStore, Entity, ErrorKind, IfMatch, Query, TableStore, Value};
use tablekit_patterns::index::{AuditOptions, AuditReport, AuditResult, MigrateReport};

use crate::migrate::Migrations;

use crate::error::{Error, Result};

/// The table of the console's job records.
pub const JOBS_TABLE: &str = "TablekitConsole";
const JOB_PARTITION: &str = "job";
/// A marker per running job (RowKey its id), so that looking for jobs left running reads
/// the running ones, not every job ever run.
const RUNNING_PARTITION: &str = "running";
const STATE_PROPERTY: &str = "State";
/// How often a running job's record is written (progress and heartbeat).
const HEARTBEAT: Duration = Duration::from_secs(2);
/// A running job whose heartbeat is older than this has no runner left.
pub const STALE_AFTER: Duration = Duration::from_secs(30);
/// How many jobs the page lists.
pub(super) const LISTED: usize = 20;

/// What a job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    /// Check a table's indexes against its primaries.
    Audit,
    /// Check and repair them.
    Repair,
    /// Write the entries of one index.
    Backfill,
    /// Rewrite the entities of one type stored under an older version.
    Migrate,
}

impl JobKind {
    /// The word for it.
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Audit => "audit",
            JobKind::Repair => "repair",
            JobKind::Backfill => "backfill",
            JobKind::Migrate => "migrate",
        }
    }

    pub(super) fn parse(word: &str) -> Option<Self> {
        match word {
            "audit" => Some(JobKind::Audit),
            "repair" => Some(JobKind::Repair),
            "backfill" => Some(JobKind::Backfill),
            "migrate" => Some(JobKind::Migrate),
            _ => None,
        }
    }
}

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Running (or left running by a console that stopped: taken up again).
    Running,
    /// Finished; the report is kept.
    Done,
    /// Ended with an error.
    Failed,
}

/// A job's record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Its id (newest first in key order).
    pub id: String,
    /// What it does.
    pub kind: JobKind,
    /// The table of the primaries.
    pub table: String,
    /// The index a backfill writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// The entity kind a migration rewrites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_kind: Option<String>,
    /// Where it is.
    pub state: JobState,
    /// Entities scanned so far.
    pub scanned: u64,
    /// Drift found so far.
    pub drift: u64,
    /// About how many entities the scan reads (the table's last audit), for the bar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<u64>,
    /// When it was started.
    pub started: DateTime<Utc>,
    /// When its runner last wrote the record.
    pub heartbeat: DateTime<Utc>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<DateTime<Utc>>,
    /// How many times it was taken up again after its console stopped.
    #[serde(default)]
    pub resumed: u32,
    /// The console process running it (a random id per process): only the owner writes
    /// the job's record.
    #[serde(default)]
    pub owner: String,
    /// What it found and did, once done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<AuditReport>,
    /// What a migration found and did, once done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrateReport>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Job {
    /// The audit's checkpoint name: the scan resumes from it.
    fn checkpoint(&self) -> String {
        format!("console-{}", self.id)
    }

    fn entity(&self) -> Result<Entity> {
        let state = serde_json::to_string(self).map_err(|e| Error::encode("a job's state", e))?;
        Ok(Entity::new(JOB_PARTITION, self.id.clone()).with(STATE_PROPERTY, state))
    }

    fn from_entity(entity: &Entity) -> Option<Self> {
        match entity.properties.get(STATE_PROPERTY) {
            Some(Value::String(state)) => serde_json::from_str(state).ok(),
            _ => None,
        }
    }
}

/// What a finished scan returns.
enum Outcome {
    Scanned(AuditReport),
    Migrated(MigrateReport),
}

/// A new job id: later ids sort first, so the newest jobs are read first.
fn new_id() -> String {
    let millis = u64::try_from(Utc::now().timestamp_millis()).unwrap_or_default();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "{:013}-{}",
        9_999_999_999_999u64.saturating_sub(millis),
        &suffix[..6]
    )
}

/// The jobs of one console process.
#[derive(Clone)]
pub(super) struct Jobs {
    /// This process's id as a job owner.
    owner: String,
    store: AnyStore,
    blobs: Option<BlobStore>,
    migrations: Migrations,
    /// Progress of the jobs this process runs: (scanned, drift).
    running: Arc<Mutex<HashMap<String, (u64, u64)>>>,
}

impl Jobs {
    pub(super) fn new(store: AnyStore, blobs: Option<BlobStore>, migrations: Migrations) -> Self {
        Jobs {
            owner: uuid::Uuid::new_v4().simple().to_string(),
            store,
            blobs,
            migrations,
            running: Arc::default(),
        }
    }

    /// The newest jobs, with the live progress of those running here.
    pub(super) async fn list(&self) -> Result<Vec<Job>> {
        let query = Query::with_filter(filter::partition_key().eq(JOB_PARTITION)).top(LISTED);
        let page = match self.store.query(JOBS_TABLE, &query).await {
            Ok(page) => page,
            Err(e) if e.kind() == ErrorKind::TableNotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let running = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Ok(page
            .entities
            .iter()
            .filter_map(Job::from_entity)
            .map(|mut job| {
                if let Some((scanned, drift)) = running.get(&job.id) {
                    job.scanned = *scanned;
                    job.drift = *drift;
                }
                job
            })
            .collect())
    }

    /// Deletes the records of finished jobs (done or failed) and of records that no longer
    /// read as a job; running jobs stay. Returns how many went. Streams the job records a
    /// page at a time.
    ///
    /// # Errors
    /// The store's errors.
    pub(super) async fn clear_finished(&self) -> Result<u64> {
        use futures::TryStreamExt as _;
        let query = Query::with_filter(filter::partition_key().eq(JOB_PARTITION));
        let mut records = std::pin::pin!(self.store.query_stream(JOBS_TABLE, query));
        let mut cleared = 0;
        loop {
            let entity = match records.try_next().await {
                Ok(Some(entity)) => entity,
                Ok(None) => break,
                Err(e) if e.kind() == ErrorKind::TableNotFound => break,
                Err(e) => return Err(e),
            };
            let finished =
                Job::from_entity(&entity).is_none_or(|job| job.state != JobState::Running);
            if !finished {
                continue;
            }
            let etag = entity.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            match self
                .store
                .delete(JOBS_TABLE, &entity.partition_key, &entity.row_key, etag)
                .await
            {
                Ok(()) => cleared += 1,
                // Taken up or rewritten meanwhile, or gone: left as it is.
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed | ErrorKind::NotFound
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(cleared)
    }

    /// The types the console can migrate.
    pub(super) fn migrations(&self) -> &Migrations {
        &self.migrations
    }

    /// Starts a job; returns its record. `target` is the index of a backfill, the entity
    /// kind of a migration.
    ///
    /// # Errors
    /// [`Error::Config`] for a backfill without an index or a migration of a type not
    /// registered; the store's errors.
    pub(super) async fn start(
        &self,
        kind: JobKind,
        table: &str,
        target: Option<String>,
    ) -> Result<Job> {
        if kind == JobKind::Backfill && target.as_deref().is_none_or(str::is_empty) {
            return Err(Error::Config("a backfill names its index".into()));
        }
        if kind == JobKind::Migrate {
            self.migrations.find(table, target.as_deref())?;
        }
        let (index, entity_kind) = match kind {
            JobKind::Backfill => (target, None),
            JobKind::Migrate => (None, target),
            _ => (None, None),
        };
        let estimate = AuditResult::list(&self.store)
            .await?
            .into_iter()
            .find(|(t, _)| t == table)
            .map(|(_, result)| result.report.scanned);
        let now = Utc::now();
        let job = Job {
            id: new_id(),
            kind,
            table: table.to_owned(),
            index,
            entity_kind,
            state: JobState::Running,
            scanned: 0,
            drift: 0,
            estimate,
            started: now,
            heartbeat: now,
            finished: None,
            resumed: 0,
            owner: self.owner.clone(),
            report: None,
            migration: None,
            error: None,
        };
        self.store.create_table_if_not_exists(JOBS_TABLE).await?;
        // The marker first: a marker without its record is removed by the next look.
        self.store
            .insert_or_replace(JOBS_TABLE, Entity::new(RUNNING_PARTITION, job.id.clone()))
            .await?;
        let etag = self.store.insert(JOBS_TABLE, job.entity()?).await?;
        self.spawn(job.clone(), etag);
        Ok(job)
    }

    /// Takes up the running jobs whose runner is gone (a console stopped mid-scan).
    pub(super) async fn take_up_stale(&self) -> Result<usize> {
        let query = Query::with_filter(filter::partition_key().eq(RUNNING_PARTITION));
        let markers = match self.store.query_all(JOBS_TABLE, query).await {
            Ok(markers) => markers,
            Err(e) if e.kind() == ErrorKind::TableNotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        let stale_before = Utc::now() - chrono::Duration::from_std(STALE_AFTER).unwrap_or_default();
        let mut taken = 0;
        for marker in markers {
            let id = marker.row_key;
            let here = self
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains_key(&id);
            if here {
                continue;
            }
            let Some((mut job, etag)) = self.record(&id).await? else {
                self.unmark(&id).await;
                continue;
            };
            if job.state != JobState::Running {
                self.unmark(&id).await;
                continue;
            }
            if job.heartbeat > stale_before {
                continue;
            }
            job.heartbeat = Utc::now();
            job.resumed += 1;
            job.owner = self.owner.clone();
            match self
                .store
                .replace(JOBS_TABLE, job.entity()?, IfMatch::ETag(etag))
                .await
            {
                Ok(etag) => {
                    tracing::info!(job = %job.id, kind = job.kind.name(), table = %crate::display::neutral(&job.table), "taking up a job its console left running");
                    self.spawn(job, etag);
                    taken += 1;
                }
                // Another console took it first.
                Err(e) if e.kind() == ErrorKind::PreconditionFailed => {}
                Err(e) => return Err(e),
            }
        }
        Ok(taken)
    }

    /// Removes a job's running marker (a marker left behind is removed by a later look).
    async fn unmark(&self, id: &str) {
        if let Err(e) = self
            .store
            .delete_if_exists(JOBS_TABLE, RUNNING_PARTITION, id)
            .await
        {
            tracing::warn!(job = id, error = %e, "a finished job's marker was not removed");
        }
    }

    /// Runs a job in the background: the scan, a heartbeat beside it, the result.
    fn spawn(&self, job: Job, etag: tablekit_core::ETag) {
        let this = self.clone();
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(job.id.clone(), (job.scanned, job.drift));
        tokio::spawn(async move {
            let id = job.id.clone();
            // A job whose end could not be written stays marked as running here, so this
            // console does not take it up again (another one may, once it looks stale).
            if this.run(job, etag).await {
                this.running
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
            }
        });
    }

    /// Runs the job; returns whether its end was written (or it is another's now).
    async fn run(&self, mut job: Job, etag: tablekit_core::ETag) -> bool {
        let progress = Arc::clone(&self.running);
        let id = job.id.clone();
        let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let options = AuditOptions {
            cancel: Some(Arc::clone(&cancel)),
            repair: job.kind != JobKind::Audit,
            job: Some(job.checkpoint()),
            blobs: self.blobs.clone(),
            progress: Some(Arc::new(move |p| {
                if let Some(slot) = progress
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_mut(&id)
                {
                    *slot = (p.scanned, p.drift);
                }
            })),
            ..AuditOptions::default()
        };
        let (store, table, index, kind) = (
            self.store.clone(),
            job.table.clone(),
            job.index.clone(),
            job.kind,
        );
        let migration = match kind {
            JobKind::Migrate => Some(
                self.migrations
                    .find(&job.table, job.entity_kind.as_deref())
                    .map_err(|e| e.to_string()),
            ),
            _ => None,
        };
        let blobs = self.blobs.clone();
        // The scan is a task of its own beside the heartbeat: a scan that panics fails its
        // job rather than the runner.
        let mut scan = tokio::spawn(async move {
            match (kind, index.as_deref(), migration) {
                (JobKind::Migrate, _, Some(migration)) => migration?
                    .run(store, blobs, options)
                    .await
                    .map(Outcome::Migrated)
                    .map_err(|e| e.to_string()),
                (JobKind::Backfill, Some(index), _) => {
                    tablekit_patterns::index::backfill(&store, &table, index, &options)
                        .await
                        .map(Outcome::Scanned)
                        .map_err(|e| e.to_string())
                }
                _ => tablekit_patterns::index::audit(&store, &table, &options)
                    .await
                    .map(Outcome::Scanned)
                    .map_err(|e| e.to_string()),
            }
        });
        let mut etag = etag;
        let mut lost = false;
        let outcome = loop {
            tokio::select! {
                outcome = &mut scan => {
                    break outcome.unwrap_or_else(|e| {
                        Err(format!("the job's scan ended without a result: {e}"))
                    });
                }
                () = tokio::time::sleep(HEARTBEAT), if !lost => {
                    let (scanned, drift) = self.progress_of(&job.id);
                    job.scanned = scanned;
                    job.drift = drift;
                    job.heartbeat = Utc::now();
                    match self.write(&job, &etag).await {
                        Ok(next) => etag = next,
                        Err(e) => {
                            tracing::warn!(job = %job.id, error = %e, "a job's heartbeat was not written");
                            // A lost answer leaves a stale ETag, a take-over a new owner:
                            // the record says which.
                            match self.record(&job.id).await {
                                Ok(Some((record, current))) if record.owner == self.owner => {
                                    etag = current;
                                }
                                Ok(_) => {
                                    tracing::warn!(job = %job.id, "another console took the job over: this run stops");
                                    cancel.store(true, std::sync::atomic::Ordering::SeqCst);
                                    lost = true;
                                }
                                Err(_) => {}
                            }
                        }
                    }
                }
            }
        };
        if lost {
            return true;
        }
        let (scanned, drift) = self.progress_of(&job.id);
        job.finished = Some(Utc::now());
        job.heartbeat = Utc::now();
        match outcome {
            Ok(Outcome::Scanned(report)) => {
                job.state = JobState::Done;
                job.scanned = report.scanned;
                job.drift = report.missing + report.stale + report.orphaned;
                job.report = Some(report);
            }
            Ok(Outcome::Migrated(report)) => {
                job.state = JobState::Done;
                job.scanned = report.scanned;
                job.drift = report.conflicts + report.unreadable;
                job.migration = Some(report);
            }
            Err(e) => {
                job.state = JobState::Failed;
                job.scanned = scanned;
                job.drift = drift;
                job.error = Some(e);
            }
        }
        // The end, written only while this console owns the job, retried a while.
        for attempt in 0..6u32 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
            }
            match self.record(&job.id).await {
                Ok(Some((record, current))) if record.owner == self.owner => {
                    match self.write(&job, &current).await {
                        Ok(_) => {
                            self.unmark(&job.id).await;
                            return true;
                        }
                        Err(e) => {
                            tracing::warn!(job = %job.id, error = %e, "a job's result was not written")
                        }
                    }
                }
                Ok(_) => {
                    tracing::warn!(job = %job.id, "another console took the job over: its result is theirs to write");
                    return true;
                }
                Err(e) => tracing::warn!(job = %job.id, error = %e, "a job's record does not read"),
            }
        }
        false
    }

    /// A job's record and its ETag.
    async fn record(&self, id: &str) -> Result<Option<(Job, tablekit_core::ETag)>> {
        let entity = self.store.get(JOBS_TABLE, JOB_PARTITION, id, None).await?;
        Ok(entity.and_then(|e| {
            let etag = e.etag.clone()?;
            Some((Job::from_entity(&e)?, etag))
        }))
    }

    fn progress_of(&self, id: &str) -> (u64, u64) {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .copied()
            .unwrap_or_default()
    }

    async fn write(&self, job: &Job, etag: &tablekit_core::ETag) -> Result<tablekit_core::ETag> {
        self.store
            .replace(JOBS_TABLE, job.entity()?, IfMatch::ETag(etag.clone()))
            .await
    }
}
