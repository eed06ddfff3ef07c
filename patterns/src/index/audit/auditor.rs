//! The [`Auditor`]: what every declaration's checks (its `check` and `claimed` hooks, in
//! its folder's `audit` module) work with — the applier whose steps repair, the layouts
//! of the table's kinds, the options, the findings recorded, and the id lists read
//! during a scan (cached). A leaf: it imports no declaration.

use std::collections::HashMap;

use tablekit_core::{Entity, TableStore, Value};

use super::super::operation::IndexApplier;
use super::super::record::{EntityRef, IndexRecord, Layout, MARKER_PROPERTY, MemberStorage};
use super::super::registry::schema::SchemaRecord;
use super::super::stored::get_or_none;
use crate::error::Result;

use super::report::{AuditOptions, AuditReport, Drift, Finding};

/// The key of a cached id list: storage, table, partition, index, value.
pub(crate) type ListKey = (MemberStorage, String, String, String, String);

/// Checks primaries, copies and id lists of a table; caches id lists read during a scan.
pub(crate) struct Auditor<'a, S> {
    pub(crate) applier: IndexApplier<S>,
    pub(crate) layouts: Vec<Layout>,
    /// The registered schemas the layouts come from (their field names map to
    /// properties), in the same order.
    pub(crate) schemas: Vec<SchemaRecord>,
    pub(crate) options: &'a AuditOptions,
    pub(crate) lists: HashMap<ListKey, Vec<EntityRef>>,
}

impl<S: TableStore + Clone> Auditor<'_, S> {
    pub(crate) fn store(&self) -> &S {
        self.applier.store()
    }

    /// The position of the layout whose kind `entity` records, if any.
    fn layout_of(&self, entity: &Entity) -> Option<usize> {
        self.layouts.iter().position(|l| {
            matches!(entity.properties.get(&l.kind_property), Some(Value::String(k)) if *k == l.kind)
        })
    }

    /// The kind property of the layout whose kind `entity` records (the marker property
    /// when none does).
    pub(crate) fn kind_property_of(&self, entity: &Entity) -> &str {
        self.layout_of(entity).map_or(MARKER_PROPERTY, |at| {
            self.layouts[at].kind_property.as_str()
        })
    }

    /// Counts a finding and keeps it (up to the options' maximum).
    pub(crate) fn record(&self, report: &mut AuditReport, finding: Finding) {
        match finding.drift {
            Drift::Missing => report.missing += 1,
            Drift::Stale => report.stale += 1,
            Drift::Orphaned => report.orphaned += 1,
            Drift::Unreadable => report.unreadable += 1,
            Drift::Ambiguous => report.ambiguous += 1,
        }
        if finding.repaired {
            report.repaired += 1;
        }
        tracing::debug!(?finding, "index drift");
        if report.findings.len() < self.options.max_findings {
            report.findings.push(finding);
        }
    }

    /// Repairs the drift of `finding` with `repair` when the audit repairs, then records
    /// it, `repaired` when `repair` says it changed something (`Ok(false)`: something else
    /// holds the target, or brought it in line meanwhile). `repair` is not called when the
    /// audit only reports.
    ///
    /// # Errors
    /// The error of `repair`, with nothing recorded.
    pub(crate) async fn repair_and_record<'s, F, Fut>(
        &'s self,
        report: &mut AuditReport,
        mut finding: Finding,
        repair: F,
    ) -> Result<()>
    where
        F: FnOnce(&'s Self) -> Fut,
        Fut: Future<Output = Result<bool>>,
    {
        finding.repaired = self.options.repair && repair(self).await?;
        self.record(report, finding);
        Ok(())
    }

    /// The first key template of a primary's layout that its stored values render
    /// ambiguously (a string field holding the separator after it), with why.
    pub(crate) fn ambiguous_key(&self, entity: &Entity) -> Option<String> {
        let at = self.layout_of(entity)?;
        let (layout, schema) = (&self.layouts[at], self.schemas.get(at)?);
        let source = EntityRef::of(&layout.table, entity);
        let render = |template: &tablekit_core::typed::KeyTemplate,
                      kind: tablekit_core::limits::KeyKind| {
            schema.render(entity, template, kind)
        };
        match layout.targets(&source, &render, &|_| true, None) {
            Err(crate::error::Error::Key(error)) if error.is_separator_refusal() => {
                Some(error.to_string())
            }
            _ => None,
        }
    }

    pub(crate) async fn get(&self, at: &EntityRef) -> Result<Option<Entity>> {
        get_or_none(self.store(), at).await
    }

    /// The record of a primary, if it exists and has one.
    pub(crate) async fn record_of(&self, source: &EntityRef) -> Result<Option<IndexRecord>> {
        match self.get(source).await? {
            Some(p) => IndexRecord::read(&p),
            None => Ok(None),
        }
    }
}
