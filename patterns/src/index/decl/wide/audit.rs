//! The audit of wide primaries' chunks: a chunk row is claimed when its chunk 0 exists,
//! counts it, and lists the version it was written at; any other is an orphan (a chunk
//! left by a write that was not the last, or by a crash before this version), repaired by
//! deleting it under its ETag.

use tablekit_core::{Entity, IfMatch, TableStore};

use super::split::{CHUNK_OF_PROPERTY, chunk_of, chunk_version, count_of, versions_of};
use super::write::Wide;
use crate::error::Result;
use crate::index::audit::auditor::Auditor;
use crate::index::audit::report::{AuditReport, Drift, Finding};
use crate::index::record::{EntityRef, is_tombstone};
use crate::index::stored::delete_unless_changed;
use crate::index::upkeep::Upkeep;
use crate::index::write::declaration::Step;

impl<S: TableStore + Clone + 'static> Upkeep<S> for Wide {
    fn claimed<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        table: &'a str,
        stored: &'a Entity,
        report: &'a mut AuditReport,
    ) -> Option<Step<'a>> {
        stored
            .properties
            .contains_key(CHUNK_OF_PROPERTY)
            .then(|| Box::pin(claimed(auditor, table, stored, report)) as Step<'a>)
    }
}

async fn claimed<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    table: &str,
    chunk: &Entity,
    report: &mut AuditReport,
) -> Result<()> {
    report.checked += 1;
    let at = EntityRef::of(table, chunk);
    let Some((base, n)) = chunk_of(&chunk.row_key) else {
        return Ok(());
    };
    let source = EntityRef::new(table, chunk.partition_key.clone(), base);
    let chunk0 = auditor.get(&source).await?;
    let claimed = chunk0.as_ref().is_some_and(|c0| {
        !is_tombstone(c0)
            && n < count_of(c0)
            && versions_of(c0).get(n - 1).copied() == chunk_version(chunk)
    });
    if claimed {
        return Ok(());
    }
    let finding = Finding::new(Drift::Orphaned, "wide", Some(source), at.to_string());
    auditor
        .repair_and_record(report, finding, |auditor| async move {
            let if_match = chunk.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            delete_unless_changed(auditor.store(), &at, if_match).await
        })
        .await
}
