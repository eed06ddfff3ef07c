//! The scan of an audit or backfill: the table read in pages after a saved checkpoint
//! (the last key done, the counts so far, in `TablekitJobs`), with progress.

use std::time::Instant;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tablekit_core::{Entity, ErrorKind, Query, TableStore, Value, filter};
use tracing::Instrument;

use crate::error::{Error, Result};

use super::report::{AuditOptions, AuditProgress, AuditReport, JOBS_TABLE, STATE_PROPERTY};

#[derive(Serialize, Deserialize, Default)]
pub(super) struct Checkpoint {
    /// What the job is (`audit Employees`, `backfill Employees by_email`): a checkpoint
    /// only resumes the same work.
    #[serde(default)]
    pub(super) scope: String,
    pub(super) table: usize,
    pub(super) last: Option<(String, String)>,
    pub(super) report: AuditReport,
}

pub(super) async fn load_checkpoint<S: TableStore>(
    store: &S,
    job: &str,
) -> Result<Option<Checkpoint>> {
    let row = match store.get(JOBS_TABLE, job, "checkpoint", None).await {
        Ok(row) => row,
        Err(e) if e.kind() == ErrorKind::TableNotFound => None,
        Err(e) => return Err(e),
    };
    match row.as_ref().and_then(|r| r.properties.get(STATE_PROPERTY)) {
        Some(Value::String(json)) => serde_json::from_str(json)
            .map(Some)
            .map_err(|e| Error::malformed(format!("checkpoint of job `{job}`"), e)),
        _ => Ok(None),
    }
}

pub(super) async fn save_checkpoint<S: TableStore>(
    store: &S,
    job: &str,
    state: &Checkpoint,
) -> Result<()> {
    store.create_table_if_not_exists(JOBS_TABLE).await?;
    let mut row = Entity::new(job, "checkpoint");
    row.properties.insert(
        STATE_PROPERTY.to_owned(),
        Value::String(crate::error::json("an audit checkpoint", state)?),
    );
    store.insert_or_replace(JOBS_TABLE, row).await?;
    Ok(())
}

pub(super) async fn clear_checkpoint<S: TableStore>(store: &S, job: &str) -> Result<()> {
    match store.delete_if_exists(JOBS_TABLE, job, "checkpoint").await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The entities of a table after a key, in key order.
pub(super) fn after(last: Option<&(String, String)>) -> Query {
    match last {
        None => Query::new(),
        Some((pk, rk)) => Query::with_filter(
            filter::partition_key().gt(pk.as_str())
                | (filter::partition_key().eq(pk.as_str()) & filter::row_key().gt(rk.as_str())),
        ),
    }
}

/// What a scan does with each entity it reads: an audit's checks, a backfill's writes, a
/// migration's rewrites.
///
/// The future is declared `Send` for every borrow it is handed, so the scan that holds it
/// across its own awaits is `Send` too and can be spawned. (An `AsyncFnMut` closure cannot
/// say so: its future's `Send` is not provable for every lifetime of its arguments.)
pub(super) trait Visit {
    /// Handles one entity of `table`, counting what it finds and does in `report`.
    fn visit(
        &mut self,
        table: &str,
        entity: Entity,
        report: &mut AuditReport,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// A checkpointed scan over several tables, handing each entity to a [`Visit`].
pub(super) struct Scan<'a, S> {
    pub(super) store: &'a S,
    pub(super) options: &'a AuditOptions,
    pub(super) started: Instant,
    pub(super) scope: String,
}

impl<S: TableStore> Scan<'_, S> {
    pub(super) async fn run(
        &self,
        tables: &[String],
        visitor: &mut impl Visit,
    ) -> Result<(AuditReport, bool)> {
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
                    Err(e) => return Err(e),
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
                visitor
                    .visit(table, entity, &mut state.report)
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
                if self.options.cancelled() {
                    // Another runner owns the job and its checkpoint now: leave both.
                    return Ok((self.finish(state.report), false));
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

    pub(super) fn report_progress(&self, table: &str, report: &AuditReport) {
        if let Some(progress) = &self.options.progress {
            progress(&AuditProgress {
                table: table.to_owned(),
                scanned: report.scanned,
                drift: report.missing + report.stale + report.orphaned,
            });
        }
    }

    pub(super) fn finish(&self, mut report: AuditReport) -> AuditReport {
        report.seconds += self.started.elapsed().as_secs_f64();
        report
    }
}
