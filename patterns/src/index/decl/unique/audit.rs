//! The audit of unique values: each reservation a primary's record names held by it (a
//! missing one made again, unless another entity holds the value: that is reported, not
//! repaired), and each reservation found listed by its holder (a dead one deleted).

use tablekit_core::{Entity, TableStore, Value};

use super::record::UniqueTarget;
use super::write::Unique;
use super::{Reservation, holder_lists, read, reclaim};
use crate::error::Result;
use crate::index::audit::auditor::Auditor;
use crate::index::audit::report::{AuditReport, Drift, Finding};
use crate::index::operation::{Applied, IndexApplier};
use crate::index::reclaim::Reclaim;
use crate::index::record::{EntityRef, MARKER_PROPERTY};
use crate::index::upkeep::{Applying, Kept, Upkeep};
use crate::index::write::declaration::Step;

impl<S: TableStore + Clone + 'static> Kept<S> for UniqueTarget {
    fn check<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        _primary: &'a Entity,
        source: &'a EntityRef,
        version: i64,
        report: &'a mut AuditReport,
    ) -> Step<'a> {
        Box::pin(check(
            auditor,
            source,
            version,
            (&self.name, &self.at),
            report,
        ))
    }

    fn backfill<'a>(
        &'a self,
        applier: &'a IndexApplier<S>,
        source: &'a EntityRef,
        version: i64,
        present: bool,
        _kind_property: &'a str,
    ) -> Applying<'a> {
        Box::pin(async move {
            if present {
                applier.claim_unique(source, version, &self.at).await
            } else {
                super::apply::release(applier, &self.at, source, version).await
            }
        })
    }
}

impl<S: TableStore + Clone + 'static> Upkeep<S> for Unique {
    fn claimed<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        table: &'a str,
        stored: &'a Entity,
        report: &'a mut AuditReport,
    ) -> Option<Step<'a>> {
        let reservation = matches!(stored.properties.get(MARKER_PROPERTY), Some(Value::String(k)) if k == super::RESERVATION_KIND);
        reservation.then(|| Box::pin(claimed(auditor, table, stored, report)) as Step<'a>)
    }

    fn undo<'a>(&'a self, applier: &'a IndexApplier<S>, undoing: &'a Reclaim) -> Step<'a> {
        Box::pin(async move {
            for at in &undoing.reservations {
                super::release_intent(applier.store(), at, &undoing.source).await?;
            }
            Ok(())
        })
    }
}

/// Checks that the reservation of `name` at `at` is held by `source` (at `version`).
pub(super) async fn check<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    source: &EntityRef,
    version: i64,
    (name, at): (&str, &EntityRef),
    report: &mut AuditReport,
) -> Result<()> {
    if read(auditor.store(), at)
        .await?
        .is_some_and(|r| r.holder == *source)
    {
        return Ok(());
    }
    let target = format!("reservation of `{}` in {}", at.partition_key, at.table);
    let finding = Finding::new(Drift::Missing, name, Some(source.clone()), target);
    auditor
        .repair_and_record(report, finding, |auditor| async move {
            // Another entity holding the value is reported, not repaired.
            let claimed = auditor.applier.claim_unique(source, version, at).await;
            Ok(matches!(claimed, Ok(Applied::Changed)))
        })
        .await
}

/// A reservation of a unique value: an orphan when its holder does not list it and its
/// lease ran out (a writer stopped between reserving and writing itself, or a release
/// has not run yet); repaired by deleting it. A reservation within its lease may belong
/// to a write in flight and is left alone.
pub(super) async fn claimed<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    table: &str,
    entity: &Entity,
    report: &mut AuditReport,
) -> Result<()> {
    report.checked += 1;
    let found = Reservation::read(table, entity)?;
    let now = tablekit_core::clock::now();
    if found.leased(now) || holder_lists(auditor.store(), &found.holder, &found.at).await? {
        return Ok(());
    }
    let finding = Finding::new(
        Drift::Orphaned,
        found.name.clone(),
        Some(found.holder.clone()),
        format!("reservation of `{}` in {table}", found.value()),
    );
    auditor
        .repair_and_record(report, finding, |auditor| {
            reclaim(auditor.store(), &found, now)
        })
        .await
}
