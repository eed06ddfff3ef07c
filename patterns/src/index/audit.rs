//! Audit, repair and backfill: scan a table's primaries against the copies and id-list
//! memberships their index records name, report drift — **missing** (a target that is
//! not there), **stale** (a copy that differs from what the primary's current version
//! makes), **orphaned** (a copy or membership no primary claims) — and optionally repair
//! it with the same idempotent steps the worker uses. Backfill adds an index declared
//! after the data was written.
//!
//! Both work from the schema registry and the records on the entities, so they need no
//! entity type (`tablekit-worker audit`, `tablekit-worker backfill`), except to backfill a
//! sparse index, whose predicate only the type knows ([`IndexedTable::backfill`]).
//!
//! Long scans save a checkpoint (the last key done, the counts so far) in the
//! `TablekitJobs` table every few hundred entities; a run with the same job name resumes
//! after it, and a finished run removes it.
//!
//! [`IndexedTable::backfill`]: super::IndexedTable::backfill

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tablekit_core::blob::BlobStore;
use tablekit_core::limits::KeyKind;
use tablekit_core::typed::KeyTemplate;
use tablekit_core::{Entity, ErrorKind, IfMatch, Query, TableStore, Value, filter};
use tracing::Instrument;

use super::links;
use super::members::{
    self, PageIds, list_blob_lists, read_blob_members, read_partition_pages, read_table_members,
};
use super::operation::{Applied, IndexApplier};
use super::record::{
    EntityRef, INDEX_ENTITY_KIND, IndexRecord, Layout, MARKER_PROPERTY, MemberStorage, Target,
    copy_of, copy_source, same_content,
};
use super::registry::SchemaRecord;
use crate::consistency::RetryPolicy;
use crate::error::{Error, Result};

/// The table holding checkpoints of audits and backfills.
pub const JOBS_TABLE: &str = "TablekitJobs";
const STATE_PROPERTY: &str = "State";

/// A kind of drift.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Drift {
    /// A copy or membership the primary should have is not there.
    Missing,
    /// A copy differs from what the primary's current version makes.
    Stale,
    /// A copy or membership that no primary claims.
    Orphaned,
    /// A record tablekit keeps (an index record, a page, a link) that does not read; it
    /// is reported, never repaired, and the scan goes on.
    Unreadable,
}

/// One drift found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// What is wrong.
    pub drift: Drift,
    /// The index or index entity.
    pub index: String,
    /// The primary concerned (for an orphan: the primary it names, if any).
    pub source: Option<EntityRef>,
    /// The copy or id list concerned.
    pub target: String,
    /// Whether it was repaired.
    pub repaired: bool,
}

/// What an audit or backfill found and did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    /// Entities scanned (primaries, copies, id-list pages).
    pub scanned: u64,
    /// Primaries checked.
    pub primaries: u64,
    /// Copies and memberships checked.
    pub checked: u64,
    /// Missing copies or memberships.
    pub missing: u64,
    /// Stale copies.
    pub stale: u64,
    /// Orphaned copies or memberships.
    pub orphaned: u64,
    /// Records that do not read.
    #[serde(default)]
    pub unreadable: u64,
    /// Drift repaired (or, for a backfill, index entries written).
    pub repaired: u64,
    /// The first findings (at most [`AuditOptions::max_findings`]).
    pub findings: Vec<Finding>,
    /// Whether the run resumed from a checkpoint.
    pub resumed: bool,
    /// Seconds the run took.
    pub seconds: f64,
}

impl AuditReport {
    /// Whether no drift was found.
    pub fn is_clean(&self) -> bool {
        self.missing + self.stale + self.orphaned + self.unreadable == 0
    }

    /// Entities scanned per second.
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.scanned as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Progress of a scan, for a progress bar.
#[derive(Clone, Debug)]
pub struct AuditProgress {
    /// The table being scanned.
    pub table: String,
    /// Entities scanned so far (all tables).
    pub scanned: u64,
    /// Drift found so far.
    pub drift: u64,
}

/// A progress callback.
pub type ProgressFn = Arc<dyn Fn(&AuditProgress) + Send + Sync>;

/// How a backfill computes a primary's targets for one index (`None`: not a primary of
/// the type).
pub(crate) type TargetsFn<'a> =
    dyn Fn(&EntityRef, &Entity) -> Result<Option<BTreeSet<Target>>> + Sync + 'a;

/// How an audit or backfill runs.
#[derive(Clone)]
pub struct AuditOptions {
    /// Repair the drift found (audit); always on for a backfill.
    pub repair: bool,
    /// Save a checkpoint under this job name, and resume from it.
    pub job: Option<String>,
    /// The blob store of blob-stored index entities.
    pub blobs: Option<BlobStore>,
    /// Called every [`progress_every`](Self::progress_every) entities.
    pub progress: Option<ProgressFn>,
    /// How often progress is reported and the checkpoint saved.
    pub progress_every: u64,
    /// How many findings the report lists (all are counted).
    pub max_findings: usize,
    /// Stop after this many entities, leaving the checkpoint (tests of resuming).
    pub stop_after: Option<u64>,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            repair: false,
            job: None,
            blobs: None,
            progress: None,
            progress_every: 500,
            max_findings: 1000,
            stop_after: None,
        }
    }
}

impl std::fmt::Debug for AuditOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditOptions")
            .field("repair", &self.repair)
            .field("job", &self.job)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize, Deserialize, Default)]
struct Checkpoint {
    /// What the job is (`audit Employees`, `backfill Employees by_email`): a checkpoint
    /// only resumes the same work.
    #[serde(default)]
    scope: String,
    table: usize,
    last: Option<(String, String)>,
    report: AuditReport,
}

async fn load_checkpoint<S: TableStore>(store: &S, job: &str) -> Result<Option<Checkpoint>> {
    let row = match store.get(JOBS_TABLE, job, "checkpoint", None).await {
        Ok(row) => row,
        Err(e) if e.kind() == ErrorKind::TableNotFound => None,
        Err(e) => return Err(e.into()),
    };
    match row.as_ref().and_then(|r| r.properties.get(STATE_PROPERTY)) {
        Some(Value::String(json)) => serde_json::from_str(json)
            .map(Some)
            .map_err(|e| Error::malformed(format!("checkpoint of job `{job}`"), e)),
        _ => Ok(None),
    }
}

async fn save_checkpoint<S: TableStore>(store: &S, job: &str, state: &Checkpoint) -> Result<()> {
    store.create_table_if_not_exists(JOBS_TABLE).await?;
    let mut row = Entity::new(job, "checkpoint");
    row.properties.insert(
        STATE_PROPERTY.to_owned(),
        Value::String(Error::json("an audit checkpoint", state)?),
    );
    store.insert_or_replace(JOBS_TABLE, row).await?;
    Ok(())
}

async fn clear_checkpoint<S: TableStore>(store: &S, job: &str) -> Result<()> {
    match store.delete_if_exists(JOBS_TABLE, job, "checkpoint").await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The entities of a table after a key, in key order.
fn after(last: Option<&(String, String)>) -> Query {
    match last {
        None => Query::new(),
        Some((pk, rk)) => Query::with_filter(
            filter::partition_key().gt(pk.as_str())
                | (filter::partition_key().eq(pk.as_str()) & filter::row_key().gt(rk.as_str())),
        ),
    }
}

/// A checkpointed scan over several tables, calling `visit` for each entity.
struct Scan<'a, S> {
    store: &'a S,
    options: &'a AuditOptions,
    started: Instant,
    scope: String,
}

impl<S: TableStore> Scan<'_, S> {
    async fn run<F>(&self, tables: &[String], mut visit: F) -> Result<(AuditReport, bool)>
    where
        F: AsyncFnMut(&str, Entity, &mut AuditReport) -> Result<()>,
    {
        let mut state = match &self.options.job {
            Some(job) => match load_checkpoint(self.store, job).await? {
                Some(state) if state.scope != self.scope => {
                    return Err(Error::Unsupported(format!(
                        "job `{job}` holds the checkpoint of `{}`, not of `{}`: finish it or use another job name",
                        state.scope, self.scope
                    )));
                }
                Some(mut state) => {
                    state.report.resumed = true;
                    state
                }
                None => Checkpoint {
                    scope: self.scope.clone(),
                    ..Checkpoint::default()
                },
            },
            None => Checkpoint::default(),
        };
        let mut since_save = 0;
        let mut done_now = 0;
        while state.table < tables.len() {
            let table = &tables[state.table];
            let query = after(state.last.as_ref());
            let mut stream = std::pin::pin!(self.store.query_stream(table, query));
            // A page: the entities between two checkpoints, checked in one span.
            let mut page = None;
            let mut in_page = 0u64;
            while let Some(entity) = stream.next().await {
                let entity = match entity {
                    Ok(entity) => entity,
                    Err(e) if e.kind() == ErrorKind::TableNotFound => break,
                    Err(e) => return Err(e.into()),
                };
                let key = (entity.partition_key.clone(), entity.row_key.clone());
                state.report.scanned += 1;
                let span = page
                    .get_or_insert_with(|| {
                        tracing::debug_span!(
                            "tablekit.audit_page",
                            db.collection.name = %table,
                            tablekit.first_key = %format_args!("{}/{}", key.0, key.1),
                            tablekit.entities = tracing::field::Empty,
                        )
                    })
                    .clone();
                in_page += 1;
                visit(table, entity, &mut state.report)
                    .instrument(span)
                    .await?;
                state.last = Some(key);
                since_save += 1;
                done_now += 1;
                if since_save >= self.options.progress_every {
                    if let Some(page) = page.take() {
                        page.record("tablekit.entities", in_page);
                    }
                    in_page = 0;
                    since_save = 0;
                    self.report_progress(table, &state.report);
                    if let Some(job) = &self.options.job {
                        save_checkpoint(self.store, job, &state).await?;
                    }
                }
                if self
                    .options
                    .stop_after
                    .is_some_and(|limit| done_now >= limit)
                {
                    if let Some(page) = page.take() {
                        page.record("tablekit.entities", in_page);
                    }
                    if let Some(job) = &self.options.job {
                        save_checkpoint(self.store, job, &state).await?;
                    }
                    return Ok((self.finish(state.report), false));
                }
            }
            if let Some(page) = page.take() {
                page.record("tablekit.entities", in_page);
            }
            state.table += 1;
            state.last = None;
        }
        self.report_progress(tables.last().map_or("", String::as_str), &state.report);
        if let Some(job) = &self.options.job {
            clear_checkpoint(self.store, job).await?;
        }
        Ok((self.finish(state.report), true))
    }

    fn report_progress(&self, table: &str, report: &AuditReport) {
        if let Some(progress) = &self.options.progress {
            progress(&AuditProgress {
                table: table.to_owned(),
                scanned: report.scanned,
                drift: report.missing + report.stale + report.orphaned,
            });
        }
    }

    fn finish(&self, mut report: AuditReport) -> AuditReport {
        report.seconds += self.started.elapsed().as_secs_f64();
        report
    }
}

/// Checks primaries, copies and id lists of a table; caches id lists read during a scan.
struct Auditor<'a, S> {
    applier: IndexApplier<S>,
    layouts: Vec<Layout>,
    options: &'a AuditOptions,
    lists: HashMap<(MemberStorage, String, String, String, String), Vec<EntityRef>>,
}

impl<S: TableStore + Clone> Auditor<'_, S> {
    fn store(&self) -> &S {
        self.applier.store()
    }

    fn kind_property_of(&self, entity: &Entity) -> &str {
        self.layouts
            .iter()
            .find(|l| {
                matches!(entity.properties.get(&l.kind_property), Some(Value::String(k)) if *k == l.kind)
            })
            .map_or(MARKER_PROPERTY, |l| l.kind_property.as_str())
    }

    fn record(&self, report: &mut AuditReport, finding: Finding) {
        match finding.drift {
            Drift::Missing => report.missing += 1,
            Drift::Stale => report.stale += 1,
            Drift::Orphaned => report.orphaned += 1,
            Drift::Unreadable => report.unreadable += 1,
        }
        if finding.repaired {
            report.repaired += 1;
        }
        tracing::debug!(?finding, "index drift");
        if report.findings.len() < self.options.max_findings {
            report.findings.push(finding);
        }
    }

    /// The members of an id list (present ones), cached for the scan.
    async fn list(
        &mut self,
        storage: MemberStorage,
        table: &str,
        partition_key: &str,
        index: &str,
        value: &str,
    ) -> Result<Vec<EntityRef>> {
        let key = (
            storage,
            table.to_owned(),
            partition_key.to_owned(),
            index.to_owned(),
            value.to_owned(),
        );
        if let Some(found) = self.lists.get(&key) {
            return Ok(found.clone());
        }
        let found: Vec<EntityRef> = match storage {
            MemberStorage::Partition => {
                read_partition_pages(self.store(), table, partition_key, index, value)
                    .await?
                    .into_iter()
                    .flat_map(|p| p.ids)
                    .map(|rk| EntityRef::new(table, partition_key, rk))
                    .collect()
            }
            MemberStorage::Table => read_table_members(self.store(), table, index, value)
                .await?
                .into_iter()
                .filter(|m| m.present)
                .map(|m| m.source)
                .collect(),
            MemberStorage::Blob => {
                let blobs = self
                    .options
                    .blobs
                    .as_ref()
                    .ok_or_else(|| Error::NoBlobStore {
                        index: index.to_owned(),
                    })?;
                read_blob_members(blobs, table, index, value)
                    .await?
                    .into_iter()
                    .filter(|m| m.present)
                    .map(|m| m.source)
                    .collect()
            }
        };
        if self.lists.len() > 4096 {
            self.lists.clear();
        }
        self.lists.insert(key, found.clone());
        Ok(found)
    }

    fn forget(&mut self, storage: MemberStorage, table: &str, pk: &str, index: &str, value: &str) {
        self.lists.remove(&(
            storage,
            table.to_owned(),
            pk.to_owned(),
            index.to_owned(),
            value.to_owned(),
        ));
    }

    async fn visit(&mut self, table: &str, entity: Entity, report: &mut AuditReport) -> Result<()> {
        let at = EntityRef::of(table, &entity);
        match self.visit_entity(table, entity, report).await {
            Err(Error::Malformed { what, reason }) => {
                self.record(
                    report,
                    Finding {
                        drift: Drift::Unreadable,
                        index: String::new(),
                        source: Some(at),
                        target: format!("{what}: {reason}"),
                        repaired: false,
                    },
                );
                Ok(())
            }
            other => other,
        }
    }

    async fn visit_entity(
        &mut self,
        table: &str,
        entity: Entity,
        report: &mut AuditReport,
    ) -> Result<()> {
        // A delete's tombstone holds nothing; its burial is follow-up work already
        // recorded with the delete.
        if super::record::is_tombstone(&entity) {
            return Ok(());
        }
        if let Some(record) = IndexRecord::read(&entity)? {
            report.primaries += 1;
            let source = EntityRef::of(table, &entity);
            for target in &record.targets {
                report.checked += 1;
                self.check_target(&entity, &source, record.version, target, report)
                    .await?;
            }
        } else if let Some((source, _)) = copy_source(&entity) {
            report.checked += 1;
            self.check_copy_claimed(table, &entity, &source, report)
                .await?;
        } else if links::is_link(&entity) {
            self.check_link_claimed(table, &entity, report).await?;
        } else if matches!(entity.properties.get(MARKER_PROPERTY), Some(Value::String(k)) if k == INDEX_ENTITY_KIND)
        {
            self.check_page(table, &entity, report).await?;
        } else if matches!(entity.properties.get(MARKER_PROPERTY), Some(Value::String(k)) if k == super::unique::RESERVATION_KIND)
        {
            report.checked += 1;
            self.check_reservation(table, &entity, report).await?;
        }
        Ok(())
    }

    /// A reservation of a unique value: an orphan when its holder does not list it and
    /// its lease ran out (a writer stopped between reserving and writing itself, or a
    /// release has not run yet); repaired by deleting it. A reservation within its lease
    /// may belong to a write in flight and is left alone.
    async fn check_reservation(
        &mut self,
        table: &str,
        entity: &Entity,
        report: &mut AuditReport,
    ) -> Result<()> {
        let found = super::unique::Reservation::read(table, entity)?;
        let now = tablekit_core::clock::now();
        if found.leased(now)
            || super::unique::holder_lists(self.applier.store(), &found.holder, &found.at).await?
        {
            return Ok(());
        }
        let repaired = self.options.repair
            && super::unique::reclaim(self.applier.store(), &found, now).await?;
        self.record(
            report,
            Finding {
                drift: Drift::Orphaned,
                index: found.name.clone(),
                source: Some(found.holder.clone()),
                target: format!("reservation of `{}` in {table}", found.value()),
                repaired,
            },
        );
        Ok(())
    }

    async fn check_target(
        &mut self,
        primary: &Entity,
        source: &EntityRef,
        version: i64,
        target: &Target,
        report: &mut AuditReport,
    ) -> Result<()> {
        match target {
            Target::Copy {
                index,
                at,
                properties,
            } => {
                let kind_property = self.kind_property_of(primary).to_owned();
                let expected = copy_of(
                    primary,
                    source,
                    version,
                    index,
                    at,
                    properties.as_deref(),
                    &kind_property,
                )?;
                let found = self.get(at).await?;
                let drift = match found {
                    None => Drift::Missing,
                    Some(copy) if same_content(&copy, &expected) => return Ok(()),
                    Some(_) => Drift::Stale,
                };
                let repaired = self.options.repair
                    && self
                        .applier
                        .put_copy(
                            source,
                            version,
                            index,
                            at,
                            properties.as_deref(),
                            &kind_property,
                            true,
                        )
                        .await?
                        == Applied::Changed;
                self.record(
                    report,
                    Finding {
                        drift,
                        index: index.clone(),
                        source: Some(source.clone()),
                        target: at.to_string(),
                        repaired,
                    },
                );
            }
            Target::Denormalized {
                property,
                source: from,
                source_property,
            } => {
                if from == source {
                    return Ok(());
                }
                let link = links::link_ref(source, property, from);
                let link_found = self.get(&link).await?.is_some();
                let value_ok = match self.get(from).await? {
                    Some(f) => {
                        primary.properties.get(property) == f.properties.get(source_property)
                    }
                    None => true,
                };
                let drift = match (link_found, value_ok) {
                    (true, true) => return Ok(()),
                    (false, _) => Drift::Missing,
                    (true, false) => Drift::Stale,
                };
                let repaired = if self.options.repair {
                    self.applier
                        .put_link(source, property, from, source_property)
                        .await?;
                    self.applier
                        .sync_denormalized(source, property, from, source_property)
                        .await?;
                    true
                } else {
                    false
                };
                self.record(
                    report,
                    Finding {
                        drift,
                        index: property.clone(),
                        source: Some(source.clone()),
                        target: format!("`{property}` copied from {from}"),
                        repaired,
                    },
                );
            }
            Target::Member {
                index,
                storage,
                table,
                value,
            } => {
                let list = self
                    .list(*storage, table, &source.partition_key, index, value)
                    .await?;
                if list.contains(source) {
                    return Ok(());
                }
                let repaired = self.options.repair
                    && self
                        .applier
                        .change_member(source, version, index, *storage, table, value, true, true)
                        .await?
                        == Applied::Changed;
                self.forget(*storage, table, &source.partition_key, index, value);
                self.record(
                    report,
                    Finding {
                        drift: Drift::Missing,
                        index: index.clone(),
                        source: Some(source.clone()),
                        target: format!("id list `{value}` ({storage:?}) in {table}"),
                        repaired,
                    },
                );
            }
            Target::Unique { name, at } => {
                let store = self.applier.store();
                if super::unique::read(store, at)
                    .await?
                    .is_some_and(|r| r.holder == *source)
                {
                    return Ok(());
                }
                // Another entity holding the value is reported, not repaired.
                let repaired = self.options.repair
                    && matches!(
                        self.applier.claim_unique(source, version, at).await,
                        Ok(Applied::Changed)
                    );
                self.record(
                    report,
                    Finding {
                        drift: Drift::Missing,
                        index: name.clone(),
                        source: Some(source.clone()),
                        target: format!("reservation of `{}` in {}", at.partition_key, at.table),
                        repaired,
                    },
                );
            }
        }
        Ok(())
    }

    /// The version of a primary's entry in a worker-kept id list (0 for partition lists,
    /// which hold no versions).
    async fn member_version(
        &self,
        source: &EntityRef,
        index: &str,
        storage: MemberStorage,
        table: &str,
        value: &str,
    ) -> Result<i64> {
        let members = match storage {
            MemberStorage::Partition => return Ok(0),
            MemberStorage::Table => read_table_members(self.store(), table, index, value).await?,
            MemberStorage::Blob => match &self.options.blobs {
                Some(blobs) => read_blob_members(blobs, table, index, value).await?,
                None => return Ok(0),
            },
        };
        Ok(members
            .iter()
            .find(|m| m.source == *source)
            .map_or(0, |m| m.version))
    }

    async fn get(&self, at: &EntityRef) -> Result<Option<Entity>> {
        Ok(self
            .store()
            .get_if_table_exists(&at.table, &at.partition_key, &at.row_key)
            .await?)
    }

    async fn check_link_claimed(
        &mut self,
        table: &str,
        entity: &Entity,
        report: &mut AuditReport,
    ) -> Result<()> {
        report.checked += 1;
        let link = links::read_link(table, entity)?;
        let claim = Target::Denormalized {
            property: link.property.clone(),
            source: link.source.clone(),
            source_property: link.source_property.clone(),
        };
        if self
            .record_of(&link.dependent)
            .await?
            .is_some_and(|r| r.targets.contains(&claim))
        {
            return Ok(());
        }
        let repaired = if self.options.repair {
            let if_match = link.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            match self
                .store()
                .delete(
                    &link.at.table,
                    &link.at.partition_key,
                    &link.at.row_key,
                    if_match,
                )
                .await
            {
                Ok(()) => true,
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::NotFound | ErrorKind::PreconditionFailed
                    ) =>
                {
                    false
                }
                Err(e) => return Err(e.into()),
            }
        } else {
            false
        };
        self.record(
            report,
            Finding {
                drift: Drift::Orphaned,
                index: link.property.clone(),
                source: Some(link.dependent.clone()),
                target: format!("link at {}", link.at),
                repaired,
            },
        );
        Ok(())
    }

    /// The record of a primary, if it exists and has one.
    async fn record_of(&self, source: &EntityRef) -> Result<Option<IndexRecord>> {
        match self.get(source).await? {
            Some(p) => IndexRecord::read(&p),
            None => Ok(None),
        }
    }

    async fn check_copy_claimed(
        &mut self,
        table: &str,
        copy: &Entity,
        source: &EntityRef,
        report: &mut AuditReport,
    ) -> Result<()> {
        let at = EntityRef::of(table, copy);
        let record = self.record_of(source).await?;
        let claimed = record.as_ref().is_some_and(|r| {
            r.targets
                .iter()
                .any(|t| matches!(t, Target::Copy { at: a, .. } if *a == at))
        });
        if claimed {
            return Ok(());
        }
        let index = match copy.properties.get(self.kind_property_of(copy)) {
            Some(Value::String(kind)) => kind.rsplit_once('#').map_or("", |(_, i)| i).to_owned(),
            _ => String::new(),
        };
        let repaired = self.options.repair
            && self.applier.delete_copy(source, None, &at).await? == Applied::Changed;
        self.record(
            report,
            Finding {
                drift: Drift::Orphaned,
                index,
                source: Some(source.clone()),
                target: at.to_string(),
                repaired,
            },
        );
        Ok(())
    }

    async fn check_member_claimed(
        &mut self,
        source: &EntityRef,
        index: &str,
        storage: MemberStorage,
        table: &str,
        value: &str,
        report: &mut AuditReport,
    ) -> Result<()> {
        report.checked += 1;
        let record = self.record_of(source).await?;
        let wanted = Target::Member {
            index: index.to_owned(),
            storage,
            table: table.to_owned(),
            value: value.to_owned(),
        };
        if record.is_some_and(|r| r.targets.contains(&wanted)) {
            return Ok(());
        }
        // The orphan's own version: the removal replaces exactly that entry.
        let version = self
            .member_version(source, index, storage, table, value)
            .await?;
        let repaired = self.options.repair
            && self
                .applier
                .change_member(source, version, index, storage, table, value, false, true)
                .await?
                == Applied::Changed;
        self.forget(storage, table, &source.partition_key, index, value);
        self.record(
            report,
            Finding {
                drift: Drift::Orphaned,
                index: index.to_owned(),
                source: Some(source.clone()),
                target: format!("id list `{value}` ({storage:?}) in {table}"),
                repaired,
            },
        );
        Ok(())
    }

    async fn check_page(
        &mut self,
        table: &str,
        page: &Entity,
        report: &mut AuditReport,
    ) -> Result<()> {
        let (index, value, ids) = members::read_page(page)?;
        match ids {
            PageIds::RowKeys(row_keys) => {
                for rk in row_keys {
                    let source = EntityRef::new(table, &page.partition_key, rk);
                    self.check_member_claimed(
                        &source,
                        &index,
                        MemberStorage::Partition,
                        table,
                        &value,
                        report,
                    )
                    .await?;
                }
            }
            PageIds::Members(members) => {
                for member in members.into_iter().filter(|m| m.present) {
                    self.check_member_claimed(
                        &member.source,
                        &index,
                        MemberStorage::Table,
                        table,
                        &value,
                        report,
                    )
                    .await?;
                }
            }
        }
        Ok(())
    }
}

/// Audits a table's indexes (and repairs them with [`AuditOptions::repair`]): every
/// primary against its copies and id lists, every copy and id list against the primaries.
/// The tables to scan and the blob-stored lists come from the schema registry.
///
/// Work not yet applied (pending in the writer's partition or in the queue) shows as
/// drift until the worker applies it:
/// audit a quiet table, or audit again.
///
/// # Errors
/// [`Error::Unsupported`] for a table without registered schemas; the store's errors.
pub async fn audit<S: TableStore + Clone>(
    store: &S,
    table: &str,
    options: &AuditOptions,
) -> Result<AuditReport> {
    let span = tracing::debug_span!(
        "tablekit.audit",
        db.collection.name = table,
        tablekit.scanned = tracing::field::Empty,
        tablekit.drift = tracing::field::Empty,
    );
    let (report, finished) = audit_table(store, table, options)
        .instrument(span.clone())
        .await?;
    span.record("tablekit.scanned", report.scanned);
    span.record(
        "tablekit.drift",
        report.missing + report.stale + report.orphaned + report.unreadable,
    );
    if !finished {
        // A run stopped part way (`stop_after`) resumes from its checkpoint; only a
        // finished run is the table's last audit.
        return Ok(report);
    }
    let result = AuditResult {
        at: tablekit_core::clock::now(),
        report: AuditReport {
            findings: Vec::new(),
            ..report.clone()
        },
    };
    // A finished audit's result is what `tablekit-worker status` shows; failing to keep
    // it does not fail the audit.
    if let Err(e) = result.save(store, table).await {
        tracing::warn!(table, error = %e, "keeping the audit's result failed");
    }
    Ok(report)
}

/// The last finished audit of a table, kept in `TablekitJobs` (PartitionKey
/// `audit-result`, RowKey the table).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditResult {
    /// When the audit finished.
    pub at: chrono::DateTime<chrono::Utc>,
    /// What it found (counts; findings left out).
    pub report: AuditReport,
}

const RESULT_PARTITION: &str = "audit-result";

impl AuditResult {
    async fn save<S: TableStore>(&self, store: &S, table: &str) -> Result<()> {
        store.create_table_if_not_exists(JOBS_TABLE).await?;
        let mut row = Entity::new(RESULT_PARTITION, table);
        row.properties.insert(
            STATE_PROPERTY.to_owned(),
            Value::String(Error::json("an audit result", self)?),
        );
        store.insert_or_replace(JOBS_TABLE, row).await?;
        Ok(())
    }

    /// The last result of every audited table, by table.
    ///
    /// # Errors
    /// The store's errors; [`Error::Malformed`] for a result that does not read.
    pub async fn list<S: TableStore>(store: &S) -> Result<Vec<(String, AuditResult)>> {
        let query = Query::with_filter(filter::partition_key().eq(RESULT_PARTITION));
        let rows = match store.query_all(JOBS_TABLE, query).await {
            Ok(rows) => rows,
            Err(e) if e.kind() == ErrorKind::TableNotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        rows.into_iter()
            .map(|row| match row.properties.get(STATE_PROPERTY) {
                Some(Value::String(json)) => serde_json::from_str(json)
                    .map(|result| (row.row_key.clone(), result))
                    .map_err(|e| Error::malformed(format!("audit result of {}", row.row_key), e)),
                _ => Err(Error::malformed(
                    format!("audit result of {}", row.row_key),
                    "no State property",
                )),
            })
            .collect()
    }
}

async fn audit_table<S: TableStore + Clone>(
    store: &S,
    table: &str,
    options: &AuditOptions,
) -> Result<(AuditReport, bool)> {
    let schemas = SchemaRecord::list(store, Some(table)).await?;
    if schemas.is_empty() {
        return Err(Error::Unsupported(format!(
            "table `{table}` has no registered schema: open it through an IndexedTable first"
        )));
    }
    let layouts = schemas
        .iter()
        .map(SchemaRecord::layout)
        .collect::<Result<Vec<_>>>()?;
    let mut tables = vec![table.to_owned()];
    for layout in &layouts {
        for other in layout.other_tables() {
            if !tables.contains(&other) {
                tables.push(other);
            }
        }
    }
    let mut applier = IndexApplier::new(store.clone());
    if let Some(blobs) = &options.blobs {
        applier = applier.with_blobs(blobs.clone());
    }
    let mut auditor = Auditor {
        applier,
        layouts,
        options,
        lists: HashMap::new(),
    };
    let scan = Scan {
        store,
        options,
        started: Instant::now(),
        scope: format!("audit {table}"),
    };
    let (mut report, finished) = scan
        .run(&tables, async |table, entity, report| {
            auditor.visit(table, entity, report).await
        })
        .await?;
    if finished {
        // Blob-stored id lists: every member must be claimed by its primary.
        let blob_lists: Vec<(String, String)> = auditor
            .layouts
            .iter()
            .flat_map(|l| {
                l.members
                    .iter()
                    .filter(|m| m.storage == MemberStorage::Blob)
                    .map(|m| {
                        (
                            m.table.clone().unwrap_or_else(|| l.table.clone()),
                            m.name.clone(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        for (list_table, index) in blob_lists {
            let blobs = options.blobs.clone().ok_or_else(|| Error::NoBlobStore {
                index: index.clone(),
            })?;
            for (value, members) in list_blob_lists(&blobs, &list_table, &index).await? {
                for member in members.into_iter().filter(|m| m.present) {
                    report.scanned += 1;
                    auditor
                        .check_member_claimed(
                            &member.source,
                            &index,
                            MemberStorage::Blob,
                            &list_table,
                            &value,
                            &mut report,
                        )
                        .await?;
                }
            }
        }
    }
    Ok((report, finished))
}

/// Backfills one index or index entity of a table from the registered schema: each
/// primary of the kind that declares it gets the index's targets added to its record
/// (under its ETag; its version is kept) and the copies or memberships written.
///
/// # Errors
/// [`Error::Unsupported`] for an undeclared or sparse index; the store's errors.
pub async fn backfill<S: TableStore + Clone>(
    store: &S,
    table: &str,
    index: &str,
    options: &AuditOptions,
) -> Result<AuditReport> {
    let schemas = SchemaRecord::list(store, Some(table)).await?;
    let Some(schema) = schemas.iter().find(|s| {
        s.indexes.iter().any(|i| i.name == index) || s.members.iter().any(|m| m.name == index)
    }) else {
        return Err(Error::Unsupported(format!(
            "no schema registered for table `{table}` declares an index `{index}`"
        )));
    };
    if schema.indexes.iter().any(|i| i.name == index && i.sparse) {
        return Err(Error::Unsupported(format!(
            "index `{index}` is sparse (`when = …`): only the entity type can tell which entities it holds; backfill it with IndexedTable::backfill"
        )));
    }
    let layout = schema.layout()?;
    let compute = |source: &EntityRef, entity: &Entity| -> Result<Option<BTreeSet<Target>>> {
        let render =
            |t: &KeyTemplate, kind: KeyKind| -> Result<String> { schema.render(entity, t, kind) };
        layout
            .targets(source, &render, &|_| true, Some(index))
            .map(Some)
    };
    backfill_with(store, table, &layout, index, options, &compute).await
}

/// The backfill of one index with a way to compute a primary's targets for it (`None`:
/// not a primary of this type).
pub(crate) async fn backfill_with<S: TableStore + Clone>(
    store: &S,
    table: &str,
    layout: &Layout,
    index: &str,
    options: &AuditOptions,
    compute: &TargetsFn<'_>,
) -> Result<AuditReport> {
    let mut applier = IndexApplier::new(store.clone());
    if let Some(blobs) = &options.blobs {
        applier = applier.with_blobs(blobs.clone());
    }
    let scan = Scan {
        store,
        options,
        started: Instant::now(),
        scope: format!("backfill {table} {index}"),
    };
    let tables = vec![table.to_owned()];
    let (report, _) = scan
        .run(&tables, async |table, entity, report| {
            let is_kind = matches!(entity.properties.get(&layout.kind_property), Some(Value::String(k)) if *k == layout.kind);
            if !is_kind {
                return Ok(());
            }
            let source = EntityRef::of(table, &entity);
            backfill_one(store, &applier, layout, index, &source, entity, compute, report).await
        })
        .await?;
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
async fn backfill_one<S: TableStore + Clone>(
    store: &S,
    applier: &IndexApplier<S>,
    layout: &Layout,
    index: &str,
    source: &EntityRef,
    mut entity: Entity,
    compute: &TargetsFn<'_>,
    report: &mut AuditReport,
) -> Result<()> {
    let mut retry = RetryPolicy::default().start();
    loop {
        retry.next(|| format!("backfill of {source}")).await?;
        let Some(wanted) = compute(source, &entity)? else {
            return Ok(());
        };
        report.primaries += 1;
        let record = IndexRecord::read(&entity)?;
        let version = record
            .as_ref()
            .map_or_else(|| super::record::next_version(None), |r| r.version);
        let mut targets = record.map(|r| r.targets).unwrap_or_default();
        let current: BTreeSet<Target> = targets
            .iter()
            .filter(|t| t.index() == index)
            .cloned()
            .collect();
        if current == wanted {
            return Ok(());
        }
        targets.retain(|t| t.index() != index);
        targets.extend(wanted.iter().cloned());
        let mut patch = Entity::new(source.partition_key.clone(), source.row_key.clone());
        IndexRecord { version, targets }.write(&mut patch)?;
        let if_match = entity.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        match store.merge(&source.table, patch, if_match).await {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::PreconditionFailed => {
                match store
                    .get(&source.table, &source.partition_key, &source.row_key, None)
                    .await?
                {
                    Some(again) => {
                        entity = again;
                        report.primaries -= 1;
                        continue;
                    }
                    None => return Ok(()),
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        for gone in current.difference(&wanted) {
            apply_target(applier, layout, source, version, gone, false).await?;
        }
        for new in wanted.difference(&current) {
            report.checked += 1;
            if apply_target(applier, layout, source, version, new, true).await? == Applied::Changed
            {
                report.repaired += 1;
            }
        }
        return Ok(());
    }
}

async fn apply_target<S: TableStore>(
    applier: &IndexApplier<S>,
    layout: &Layout,
    source: &EntityRef,
    version: i64,
    target: &Target,
    present: bool,
) -> Result<Applied> {
    match (target, present) {
        (
            Target::Copy {
                index,
                at,
                properties,
            },
            true,
        ) => {
            applier
                .put_copy(
                    source,
                    version,
                    index,
                    at,
                    properties.as_deref(),
                    &layout.kind_property,
                    true,
                )
                .await
        }
        (Target::Copy { at, .. }, false) => applier.delete_copy(source, None, at).await,
        (
            Target::Denormalized {
                property,
                source: from,
                source_property,
            },
            true,
        ) => {
            applier
                .put_link(source, property, from, source_property)
                .await?;
            applier
                .sync_denormalized(source, property, from, source_property)
                .await?;
            Ok(Applied::Changed)
        }
        (Target::Denormalized { .. } | Target::Unique { .. }, false) => {
            applier
                .apply(&super::operation::IndexOperation::for_target(
                    source,
                    version,
                    target,
                    false,
                    &layout.kind_property,
                ))
                .await
        }
        (
            Target::Member {
                index,
                storage,
                table,
                value,
            },
            present,
        ) => {
            applier
                .change_member(
                    source, version, index, *storage, table, value, present, true,
                )
                .await
        }
        (Target::Unique { at, .. }, true) => applier.claim_unique(source, version, at).await,
    }
}
