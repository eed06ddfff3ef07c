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
//! Every scan's future is `Send`: an audit, a backfill or a migration runs as an ordinary
//! Tokio task (`tokio::spawn`).
//!
//! [`IndexedTable::backfill`]: super::IndexedTable::backfill

pub(crate) mod auditor;
mod backfill;
mod check;
mod migrate;
pub(crate) mod report;
mod scan;
mod unrecorded;

use std::collections::HashMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tablekit_core::{Entity, ErrorKind, Query, TableStore, Value, filter};
use tracing::Instrument;

use super::operation::IndexApplier;
use super::registry::{self, schema::SchemaRecord};
use crate::error::{Error, Result};

pub(crate) use auditor::Auditor;
pub use backfill::backfill;
pub(crate) use backfill::backfill_with;
pub use migrate::{MigrateReport, migrate};
pub use report::{AuditOptions, AuditProgress, AuditReport, Drift, Finding, ProgressFn};
use report::{JOBS_TABLE, STATE_PROPERTY};
use scan::Scan;

/// Audits a table's indexes (and repairs them with [`AuditOptions::repair`]): every
/// primary against its copies and id lists, every copy and id list against the primaries.
/// The tables to scan and the blob-stored lists come from the schema registry.
///
/// Work not yet applied (pending in the writer's partition or in the queue) shows as
/// drift until the worker applies it:
/// audit a quiet table, or audit again.
///
/// The future is `Send`, as [`IndexedTable::audit`](super::IndexedTable::audit)'s.
///
/// # Errors
/// [`Error::Unsupported`] for a table without registered schemas; the store's errors.
pub async fn audit<S: TableStore + Clone + 'static>(
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
            Value::String(crate::error::json("an audit result", self)?),
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
            Err(e) => return Err(e),
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

async fn audit_table<S: TableStore + Clone + 'static>(
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
        schemas,
        options,
        lists: HashMap::new(),
    };
    let scan = Scan {
        store,
        options,
        started: Instant::now(),
        scope: format!("audit {table}"),
    };
    let (mut report, finished) = scan.run(&tables, &mut auditor).await?;
    if finished {
        // What the declarations keep outside the tables (the id lists in blobs).
        for upkeep in registry::upkeep::<S>() {
            upkeep.beyond_tables(&mut auditor, &mut report).await?;
        }
    }
    Ok((report, finished))
}
