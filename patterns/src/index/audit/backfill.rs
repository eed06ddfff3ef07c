//! Backfill: an index or index entity declared after the data was written, added to
//! each primary of the kind that declares it.

use std::collections::BTreeSet;
use std::time::Instant;

use tablekit_core::limits::KeyKind;
use tablekit_core::typed::KeyTemplate;
use tablekit_core::{Entity, ErrorKind, IfMatch, TableStore, Value};

use super::super::operation::{Applied, IndexApplier};
use super::super::record::{EntityRef, IndexRecord, Layout, Target};
use super::super::registry::schema::SchemaRecord;
use crate::consistency::RetryPolicy;
use crate::error::{Error, Result};

use super::report::{AuditOptions, AuditReport, TargetsFn};
use super::scan::{Scan, Visit};

/// Backfills one index or index entity of a table from the registered schema: each
/// primary of the kind that declares it gets the index's targets added to its record
/// (under its ETag; its version is kept) and the copies or memberships written.
///
/// The future is `Send`, as [`IndexedTable::audit`](super::super::IndexedTable::audit)'s.
///
/// # Errors
/// [`Error::Unsupported`] for an undeclared or sparse index; the store's errors.
pub async fn backfill<S: TableStore + Clone + 'static>(
    store: &S,
    table: &str,
    index: &str,
    options: &AuditOptions,
) -> Result<AuditReport> {
    let schemas = SchemaRecord::list(store, Some(table)).await?;
    let Some(schema) = schemas
        .iter()
        .find(|s| s.declared.iter().any(|d| d.name == index))
    else {
        return Err(Error::Unsupported(format!(
            "no schema registered for table `{table}` declares an index `{index}`"
        )));
    };
    if schema
        .declared
        .iter()
        .any(|d| d.name == index && d.setting("sparse").is_some())
    {
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
pub(crate) async fn backfill_with<S: TableStore + Clone + 'static>(
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
    let mut backfill = Backfill {
        store,
        applier,
        layout,
        index,
        compute,
    };
    let (report, _) = scan.run(&tables, &mut backfill).await?;
    Ok(report)
}

/// The backfill of one index, handed each entity of the scan.
struct Backfill<'a, S> {
    store: &'a S,
    applier: IndexApplier<S>,
    layout: &'a Layout,
    index: &'a str,
    compute: &'a TargetsFn<'a>,
}

impl<S: TableStore + Clone + 'static> Visit for Backfill<'_, S> {
    async fn visit(&mut self, table: &str, entity: Entity, report: &mut AuditReport) -> Result<()> {
        let layout = self.layout;
        let is_kind = matches!(entity.properties.get(&layout.kind_property), Some(Value::String(k)) if *k == layout.kind);
        if !is_kind {
            return Ok(());
        }
        let source = EntityRef::of(table, &entity);
        backfill_one(
            self.store,
            &self.applier,
            layout,
            self.index,
            &source,
            entity,
            self.compute,
            report,
        )
        .await
    }
}

#[allow(clippy::too_many_arguments)]
async fn backfill_one<S: TableStore + Clone + 'static>(
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
            .map_or_else(|| super::super::record::next_version(None), |r| r.version);
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
            Err(e) => return Err(e),
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

/// Brings `target` in line with the primary at `version` through the declaration whose
/// target it is.
async fn apply_target<S: TableStore + Clone + 'static>(
    applier: &IndexApplier<S>,
    layout: &Layout,
    source: &EntityRef,
    version: i64,
    target: &Target,
    present: bool,
) -> Result<Applied> {
    super::super::registry::kept::<S>(target)?
        .backfill(applier, source, version, present, &layout.kind_property)
        .await
}
