//! The audit of denormalised fields: each link a dependent's record names there and its
//! copied value current (repaired by putting the link and copying the value again), and
//! each link found claimed by its dependent (an orphan deleted); and the backfill of a
//! link.

use tablekit_core::{Entity, IfMatch, TableStore};

use super::record::DenormalizedTarget;
use super::write::Denormalized;
use crate::error::Result;
use crate::index::audit::auditor::Auditor;
use crate::index::audit::report::{AuditReport, Drift, Finding};
use crate::index::operation::{Applied, IndexApplier};
use crate::index::reclaim::Reclaim;
use crate::index::record::{EntityRef, Target};
use crate::index::stored::delete_unless_changed;
use crate::index::upkeep::{Applying, Kept, Upkeep};
use crate::index::write::declaration::Step;

impl<S: TableStore + Clone + 'static> Kept<S> for DenormalizedTarget {
    fn check<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        primary: &'a Entity,
        source: &'a EntityRef,
        _version: i64,
        report: &'a mut AuditReport,
    ) -> Step<'a> {
        Box::pin(check(
            auditor,
            primary,
            source,
            (&self.property, &self.source, &self.source_property),
            report,
        ))
    }

    fn backfill<'a>(
        &'a self,
        applier: &'a IndexApplier<S>,
        source: &'a EntityRef,
        _version: i64,
        present: bool,
        _kind_property: &'a str,
    ) -> Applying<'a> {
        Box::pin(backfill(
            applier,
            source,
            (&self.property, &self.source, &self.source_property),
            present,
        ))
    }
}

impl<S: TableStore + Clone + 'static> Upkeep<S> for Denormalized {
    fn claimed<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        table: &'a str,
        stored: &'a Entity,
        report: &'a mut AuditReport,
    ) -> Option<Step<'a>> {
        super::is_link(stored)
            .then(|| Box::pin(claimed(auditor, table, stored, report)) as Step<'a>)
    }

    fn undo<'a>(&'a self, applier: &'a IndexApplier<S>, undoing: &'a Reclaim) -> Step<'a> {
        Box::pin(async move {
            for (property, from, source_property) in &undoing.links {
                applier
                    .remove_link_of(
                        &undoing.source,
                        property,
                        from,
                        source_property,
                        Some(&undoing.id),
                    )
                    .await?;
            }
            Ok(())
        })
    }
}

/// Checks the link of `source`'s `property`, copied from `from`'s `source_property`.
pub(super) async fn check<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    primary: &Entity,
    source: &EntityRef,
    (property, from, source_property): (&str, &EntityRef, &str),
    report: &mut AuditReport,
) -> Result<()> {
    if from == source {
        return Ok(());
    }
    let link = super::link_ref(source, property, from);
    let link_found = auditor.get(&link).await?.is_some();
    let value_ok = match auditor.get(from).await? {
        Some(f) => primary.properties.get(property) == f.properties.get(source_property),
        None => true,
    };
    let drift = match (link_found, value_ok) {
        (true, true) => return Ok(()),
        (false, _) => Drift::Missing,
        (true, false) => Drift::Stale,
    };
    let target = format!("`{property}` copied from {from}");
    let finding = Finding::new(drift, property, Some(source.clone()), target);
    auditor
        .repair_and_record(report, finding, |auditor| async move {
            put(&auditor.applier, source, property, from, source_property).await?;
            Ok(true)
        })
        .await
}

/// Checks that the dependent of a link found in `table` claims it.
pub(super) async fn claimed<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    table: &str,
    entity: &Entity,
    report: &mut AuditReport,
) -> Result<()> {
    report.checked += 1;
    let link = super::read_link(table, entity)?;
    let claim = Target::from(DenormalizedTarget {
        property: link.property.clone(),
        source: link.source.clone(),
        source_property: link.source_property.clone(),
    });
    if auditor
        .record_of(&link.dependent)
        .await?
        .is_some_and(|r| r.targets.contains(&claim))
    {
        return Ok(());
    }
    let finding = Finding::new(
        Drift::Orphaned,
        link.property.clone(),
        Some(link.dependent.clone()),
        format!("link at {}", link.at),
    );
    auditor
        .repair_and_record(report, finding, |auditor| async move {
            let if_match = link.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            delete_unless_changed(auditor.store(), &link.at, if_match).await
        })
        .await
}

/// Puts the link of `source`'s `property` and copies its value again.
async fn put<S: TableStore>(
    applier: &IndexApplier<S>,
    source: &EntityRef,
    property: &str,
    from: &EntityRef,
    source_property: &str,
) -> Result<()> {
    applier
        .put_link(source, property, from, source_property)
        .await?;
    applier
        .sync_denormalized(source, property, from, source_property)
        .await?;
    Ok(())
}

/// Puts the link of a dependent at `version` and copies the value (`present`), or
/// removes the link.
pub(super) async fn backfill<S: TableStore>(
    applier: &IndexApplier<S>,
    source: &EntityRef,
    (property, from, source_property): (&str, &EntityRef, &str),
    present: bool,
) -> Result<Applied> {
    if present {
        put(applier, source, property, from, source_property).await?;
        return Ok(Applied::Changed);
    }
    applier
        .remove_link(source, property, from, source_property)
        .await
}
