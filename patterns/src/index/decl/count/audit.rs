//! The audit of counts: each member row a primary's record names is there (a missing
//! one added, its counter with it), each member row found is claimed by its primary (an
//! orphan removed, its counter with it), and each counter equals the number of member
//! rows of its partition (a recount; a wrong counter set to it under its ETag); and the
//! backfill of a membership.

use futures::TryStreamExt;
use tablekit_core::{Entity, IfMatch, Query, TableStore, Value, filter};

use super::apply::{count_of, counter_row};
use super::record::CountTarget;
use super::write::Counts;
use super::{COUNTER_KIND, COUNTER_ROW_KEY, MEMBER_KIND, MEMBER_OF_PROPERTY};
use crate::error::Result;
use crate::index::audit::auditor::Auditor;
use crate::index::audit::report::{AuditReport, Drift, Finding};
use crate::index::operation::{Applied, IndexApplier};
use crate::index::record::{EntityRef, MARKER_PROPERTY};
use crate::index::upkeep::{Applying, Kept, Upkeep};
use crate::index::write::declaration::Step;

impl<S: TableStore + Clone + 'static> Kept<S> for CountTarget {
    fn check<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        _primary: &'a Entity,
        source: &'a EntityRef,
        _version: i64,
        report: &'a mut AuditReport,
    ) -> Step<'a> {
        Box::pin(async move {
            if auditor.get(&self.at).await?.is_some() {
                return Ok(());
            }
            let finding = Finding::new(
                Drift::Missing,
                self.count.clone(),
                Some(source.clone()),
                self.at.to_string(),
            );
            auditor
                .repair_and_record(report, finding, |auditor| async move {
                    let synced = auditor
                        .applier
                        .sync_count(source, &self.count, &self.at)
                        .await?;
                    Ok(synced == Applied::Changed)
                })
                .await
        })
    }

    fn backfill<'a>(
        &'a self,
        applier: &'a IndexApplier<S>,
        source: &'a EntityRef,
        _version: i64,
        _present: bool,
        _kind_property: &'a str,
    ) -> Applying<'a> {
        Box::pin(applier.sync_count(source, &self.count, &self.at))
    }
}

/// The marker of a stored entity, if it has one.
fn marker(stored: &Entity) -> Option<&str> {
    match stored.properties.get(MARKER_PROPERTY) {
        Some(Value::String(kind)) => Some(kind),
        _ => None,
    }
}

/// The count a shard partition belongs to (`<count>|<value>|<shard>`).
fn count_name(partition_key: &str) -> &str {
    partition_key.split('|').next().unwrap_or(partition_key)
}

impl<S: TableStore + Clone + 'static> Upkeep<S> for Counts {
    fn claimed<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        table: &'a str,
        stored: &'a Entity,
        report: &'a mut AuditReport,
    ) -> Option<Step<'a>> {
        match marker(stored)? {
            MEMBER_KIND => Some(Box::pin(member(auditor, table, stored, report))),
            COUNTER_KIND => Some(Box::pin(counter(auditor, table, stored, report))),
            _ => None,
        }
    }
}

/// Checks that the primary of a member row claims it; an orphan is removed (and its
/// counter taken down) by the same step the worker applies.
async fn member<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    table: &str,
    stored: &Entity,
    report: &mut AuditReport,
) -> Result<()> {
    report.checked += 1;
    let at = EntityRef::of(table, stored);
    let count = count_name(&stored.partition_key).to_owned();
    let source: Option<EntityRef> = match stored.properties.get(MEMBER_OF_PROPERTY) {
        Some(Value::String(json)) => serde_json::from_str(json).ok(),
        _ => None,
    };
    let Some(source) = source else {
        auditor.record(
            report,
            Finding::new(Drift::Unreadable, count, None, at.to_string()),
        );
        return Ok(());
    };
    let record = auditor.record_of(&source).await?;
    let claimed = record.is_some_and(|r| {
        r.targets.iter().any(|t| {
            t.get::<CountTarget>()
                .is_some_and(|c| c.count == count && c.at == at)
        })
    });
    if claimed {
        return Ok(());
    }
    let finding = Finding::new(
        Drift::Orphaned,
        count.clone(),
        Some(source.clone()),
        at.to_string(),
    );
    auditor
        .repair_and_record(report, finding, |auditor| async move {
            Ok(auditor.applier.sync_count(&source, &count, &at).await? == Applied::Changed)
        })
        .await
}

/// Recounts the member rows of a counter's partition (their keys only); a counter that
/// differs is set to the recount under the ETag it was read at.
async fn counter<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    table: &str,
    stored: &Entity,
    report: &mut AuditReport,
) -> Result<()> {
    report.checked += 1;
    let query = Query::with_filter(
        filter::partition_key().eq(stored.partition_key.as_str())
            & filter::row_key().lt(COUNTER_ROW_KEY),
    )
    .select(["RowKey"]);
    let members = auditor
        .store()
        .query_stream(table, query)
        .try_fold(0i64, |n, _| async move { Ok(n + 1) })
        .await?;
    if members == count_of(stored) {
        return Ok(());
    }
    let finding = Finding::new(
        Drift::Stale,
        count_name(&stored.partition_key),
        None,
        format!(
            "{}: counter {} for {members} member rows",
            EntityRef::of(table, stored),
            count_of(stored)
        ),
    );
    auditor
        .repair_and_record(report, finding, |auditor| async move {
            let if_match = stored.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            let fixed = counter_row(&stored.partition_key, members);
            // A worker that changed the shard meanwhile kept it consistent: leave it.
            match auditor
                .store()
                .execute(table, tablekit_core::WriteOp::Replace(fixed, if_match))
                .await
            {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == tablekit_core::ErrorKind::PreconditionFailed => Ok(false),
                Err(e) => Err(e),
            }
        })
        .await
}
