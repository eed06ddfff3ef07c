//! Primaries written around the write path: a row of a registered kind with no index
//! record, stored by a plain `Table` of an older program, another language's SDK, or a
//! hand edit. Nothing follows such a write — no copy, membership, count, unique
//! reservation, expiry entry or feed change — so every declaration of its kind is
//! missing for it. The audit reports one [`Drift::Missing`] finding per such primary,
//! naming what it lacks; repair writes the primary again through the one write path, as
//! it is stored and under the ETag read, so everything its declarations keep follows,
//! applied in the audit's process (a feed change is sequenced by the relay, as for any
//! write). A repair the write path refuses (a unique value another entity holds, a key
//! that does not render) is reported with the refusal, unrepaired.
//!
//! What is a primary here: a row of the primaries' table that no declaration claims,
//! that is none of tablekit's own rows (their kind is `Tablekit…`, their RowKey starts
//! with `~`), and that records the kind of a registered type — or records no kind at
//! all, on a table where one type is registered (another language's SDK writes no kind;
//! the repair then records it). A sparse index's predicate is code only the type knows,
//! so a repair leaves sparse indexes out and says so: `IndexedTable::backfill` of the
//! index adds them.

use std::collections::BTreeSet;
use std::sync::Arc;

use tablekit_core::{Entity, ErrorKind, TableStore, Value};

use super::super::record::{EntityRef, Layout, MARKER_PROPERTY};
use super::super::write::{Kind, Request, Writer};
use super::auditor::Auditor;
use super::report::{AuditReport, Drift, Finding};
use crate::consistency::{Engine, InlineSink};
use crate::error::Result;

/// The prefix of the kinds of tablekit's own rows (outbox entries, id-list pages, links,
/// counters, tombstones).
const OWN_KIND_PREFIX: &str = "Tablekit";

impl<S: TableStore + Clone + 'static> Auditor<'_, S> {
    /// The position of the layout `entity`, unclaimed in `table`, is a primary of
    /// without a record, if it is one (see the module docs).
    pub(super) fn unrecorded_layout(&self, table: &str, entity: &Entity) -> Option<usize> {
        if entity.row_key.starts_with('~') {
            return None;
        }
        let on_table: Vec<usize> = (0..self.layouts.len())
            .filter(|&at| self.layouts[at].table == table)
            .collect();
        for &at in &on_table {
            let layout = &self.layouts[at];
            match entity.properties.get(&layout.kind_property) {
                Some(Value::String(kind)) if *kind == layout.kind => return Some(at),
                _ => {}
            }
        }
        let own = |v: Option<&Value>| matches!(v, Some(Value::String(k)) if k.starts_with(OWN_KIND_PREFIX));
        let kindless = on_table.iter().all(|&at| {
            !entity
                .properties
                .contains_key(&self.layouts[at].kind_property)
        }) && !own(entity.properties.get(MARKER_PROPERTY))
            && !entity
                .properties
                .keys()
                .any(|p| p.starts_with(OWN_KIND_PREFIX));
        match on_table.as_slice() {
            [only] if kindless => Some(*only),
            _ => None,
        }
    }

    /// Reports (and with repair, writes again through the write path) the primary
    /// `entity` of the layout at `at`, which has no index record.
    ///
    /// # Errors
    /// The store's errors other than a refusal of the repair.
    pub(super) async fn unrecorded(
        &self,
        at: usize,
        table: &str,
        entity: Entity,
        report: &mut AuditReport,
    ) -> Result<()> {
        report.primaries += 1;
        let layout = &self.layouts[at];
        let source = EntityRef::of(table, &entity);
        let sparse: Vec<&str> = layout
            .declared
            .iter()
            .filter(|d| d.settings.iter().any(|(k, _)| k == "sparse"))
            .map(|d| d.name.as_str())
            .collect();
        let lacks: Vec<String> = layout
            .declared
            .iter()
            .map(|d| format!("{} `{}`", d.attribute, d.name))
            .collect();
        let mut target = format!(
            "written around the write path (no index record): {}",
            if lacks.is_empty() {
                "its record".to_owned()
            } else {
                lacks.join(", ")
            }
        );
        let mut repaired = false;
        if self.options.repair {
            match self.rewrite(at, source.clone(), entity).await {
                Ok(()) => repaired = true,
                Err(e) if refusal(&e) => target.push_str(&format!("; not repaired: {e}")),
                Err(e) => return Err(e),
            }
            if repaired && !sparse.is_empty() {
                target.push_str(&format!(
                    "; the sparse index(es) {} need the type's predicate: backfill them with `IndexedTable::backfill`",
                    sparse.join(", ")
                ));
            }
        }
        let mut finding = Finding::new(Drift::Missing, "", Some(source), target);
        finding.repaired = repaired;
        self.record(report, finding);
        Ok(())
    }

    /// Writes `entity` again through the write path of its layout, under the ETag it was
    /// read with, its follow-up work applied here.
    async fn rewrite(&self, at: usize, source: EntityRef, mut entity: Entity) -> Result<()> {
        let (layout, schema) = (&self.layouts[at], &self.schemas[at]);
        let store = self.store().clone();
        let registry = crate::index::handlers(store.clone(), self.options.blobs.clone());
        let engine = Engine::new(store).with_sink(Arc::new(InlineSink::new(registry)));
        let render = |template: &tablekit_core::typed::KeyTemplate,
                      kind: tablekit_core::limits::KeyKind| {
            schema.render(&entity, template, kind)
        };
        let targets: BTreeSet<_> = layout.targets(&source, &render, &|_| false, None)?;
        let user_etag = entity.etag.clone();
        entity
            .properties
            .entry(layout.kind_property.clone())
            .or_insert_with(|| Value::String(layout.kind.clone()));
        let writer = Writer::for_layout(engine, Layout::clone(layout));
        writer
            .write(Request {
                kind: Kind::Replace,
                source,
                entity: Some(entity),
                targets,
                user_etag,
                blob_nonce: None,
            })
            .await?;
        Ok(())
    }
}

/// Whether a repair's error is the write path refusing the row as it is (reported with
/// the finding), not a failure of the store.
fn refusal(error: &crate::Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::PreconditionFailed
            | ErrorKind::NotFound
            | ErrorKind::AlreadyExists
            | ErrorKind::InvalidInput
            | ErrorKind::TooLarge
    )
}
