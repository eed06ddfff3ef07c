//! The checks of one stored entity: a primary against each target its record names
//! (each copy, link, membership, reservation and expiry entry there and current), and
//! any other entity of a declaration (a copy, a link, an id-list page, a reservation)
//! against the primary that should claim it — each handed to the declaration whose
//! `check` or `claimed` hook takes it.

use tablekit_core::{Entity, TableStore};

use super::super::record::{EntityRef, IndexRecord, is_tombstone};
use super::super::registry::{kept, upkeep};
use super::auditor::Auditor;
use super::report::{AuditReport, Drift, Finding};
use super::scan::Visit;
use crate::error::{Error, Result};

impl<S: TableStore + Clone + 'static> Visit for Auditor<'_, S> {
    /// Checks one stored entity of the scan; an unreadable one is a finding.
    ///
    /// # Errors
    /// The store's errors.
    async fn visit(&mut self, table: &str, entity: Entity, report: &mut AuditReport) -> Result<()> {
        let at = EntityRef::of(table, &entity);
        match self.visit_entity(table, entity, report).await {
            Err(Error::Malformed { what, reason }) => {
                let target = format!("{what}: {reason}");
                self.record(
                    report,
                    Finding::new(Drift::Unreadable, "", Some(at), target),
                );
                Ok(())
            }
            other => other,
        }
    }
}

impl<S: TableStore + Clone + 'static> Auditor<'_, S> {
    async fn visit_entity(
        &mut self,
        table: &str,
        entity: Entity,
        report: &mut AuditReport,
    ) -> Result<()> {
        // A delete's tombstone holds nothing; its burial is follow-up work already
        // recorded with the delete.
        if is_tombstone(&entity) {
            return Ok(());
        }
        if let Some(record) = IndexRecord::read(&entity)? {
            report.primaries += 1;
            let source = EntityRef::of(table, &entity);
            if let Some(why) = self.ambiguous_key(&entity) {
                let finding = Finding::new(Drift::Ambiguous, "", Some(source.clone()), why);
                self.record(report, finding);
            }
            for target in &record.targets {
                report.checked += 1;
                kept::<S>(target)?
                    .check(self, &entity, &source, record.version, report)
                    .await?;
            }
            return Ok(());
        }
        for declaration in upkeep::<S>() {
            if let Some(check) = declaration.claimed(self, table, &entity, report) {
                return check.await;
            }
        }
        // A primary written around the write path: nothing of its declarations followed.
        if let Some(at) = self.unrecorded_layout(table, &entity) {
            return self.unrecorded(at, table, entity, report).await;
        }
        Ok(())
    }
}
