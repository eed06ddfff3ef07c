//! The audit of copies: each copy a primary's record names there and current (a
//! missing or stale one written again from the primary), and each copy found claimed
//! by its primary (an orphan deleted); and the backfill of a copy.

use tablekit_core::{Entity, TableStore, Value};

use super::record::CopyTarget;
use super::write::Copies;
use crate::error::Result;
use crate::index::audit::auditor::Auditor;
use crate::index::audit::report::{AuditReport, Drift, Finding};
use crate::index::operation::{Applied, IndexApplier};
use crate::index::record::copy_source;
use crate::index::record::{EntityRef, copy_of, same_content};
use crate::index::upkeep::{Applying, Kept, Upkeep};
use crate::index::write::declaration::Step;

impl<S: TableStore + Clone + 'static> Kept<S> for CopyTarget {
    fn check<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        primary: &'a Entity,
        source: &'a EntityRef,
        version: i64,
        report: &'a mut AuditReport,
    ) -> Step<'a> {
        Box::pin(check(
            auditor,
            primary,
            source,
            version,
            &self.index,
            &self.at,
            self.properties.as_deref(),
            report,
        ))
    }

    fn backfill<'a>(
        &'a self,
        applier: &'a IndexApplier<S>,
        source: &'a EntityRef,
        version: i64,
        present: bool,
        kind_property: &'a str,
    ) -> Applying<'a> {
        Box::pin(backfill(
            applier,
            source,
            version,
            &self.index,
            &self.at,
            self.properties.as_deref(),
            present,
            kind_property,
        ))
    }
}

impl<S: TableStore + Clone + 'static> Upkeep<S> for Copies {
    fn claimed<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        table: &'a str,
        stored: &'a Entity,
        report: &'a mut AuditReport,
    ) -> Option<Step<'a>> {
        let (source, _) = copy_source(stored)?;
        Some(Box::pin(async move {
            claimed(auditor, table, stored, &source, report).await
        }))
    }
}

/// Checks the copy of `source` at `at` for `index` against the primary at `version`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn check<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    primary: &Entity,
    source: &EntityRef,
    version: i64,
    index: &str,
    at: &EntityRef,
    properties: Option<&[String]>,
    report: &mut AuditReport,
) -> Result<()> {
    let kind_property = auditor.kind_property_of(primary).to_owned();
    let expected = copy_of(
        primary,
        source,
        version,
        index,
        at,
        properties,
        &kind_property,
    )?;
    let found = auditor.get(at).await?;
    let drift = match found {
        None => Drift::Missing,
        Some(copy) if same_content(&copy, &expected) => return Ok(()),
        Some(_) => Drift::Stale,
    };
    let finding = Finding::new(drift, index, Some(source.clone()), at.to_string());
    auditor
        .repair_and_record(report, finding, |auditor| async move {
            let put = auditor
                .applier
                .put_copy(source, version, index, at, properties, &kind_property, true)
                .await?;
            Ok(put == Applied::Changed)
        })
        .await
}

/// Checks that the primary of a copy found in `table` claims it.
pub(super) async fn claimed<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    table: &str,
    copy: &Entity,
    source: &EntityRef,
    report: &mut AuditReport,
) -> Result<()> {
    report.checked += 1;
    let at = EntityRef::of(table, copy);
    let record = auditor.record_of(source).await?;
    let claimed = record.as_ref().is_some_and(|r| {
        r.targets
            .iter()
            .any(|t| matches!(t.get::<CopyTarget>(), Some(CopyTarget { at: a, .. }) if *a == at))
    });
    if claimed {
        return Ok(());
    }
    let index = match copy.properties.get(auditor.kind_property_of(copy)) {
        Some(Value::String(kind)) => kind.rsplit_once('#').map_or("", |(_, i)| i).to_owned(),
        _ => String::new(),
    };
    let finding = Finding::new(Drift::Orphaned, index, Some(source.clone()), at.to_string());
    auditor
        .repair_and_record(report, finding, |auditor| async move {
            Ok(auditor.applier.delete_copy(source, None, &at).await? == Applied::Changed)
        })
        .await
}

/// Writes the copy of `source` at `version` (`present`), or deletes it.
#[allow(clippy::too_many_arguments)]
pub(super) async fn backfill<S: TableStore>(
    applier: &IndexApplier<S>,
    source: &EntityRef,
    version: i64,
    index: &str,
    at: &EntityRef,
    properties: Option<&[String]>,
    present: bool,
    kind_property: &str,
) -> Result<Applied> {
    if present {
        applier
            .put_copy(source, version, index, at, properties, kind_property, true)
            .await
    } else {
        applier.delete_copy(source, None, at).await
    }
}
