//! The audit of id lists: each membership a primary's record names there (a missing one
//! added), and each member of a list page claimed by its primary (an orphan removed);
//! the id lists read during a scan are cached in the [`Auditor`]; and the backfill of a
//! membership.

use tablekit_core::{Entity, TableStore, Value};

use super::layout::MemberLayout;
use super::record::MemberTarget;
use super::write::Lists;
use super::{
    PageIds, list_blob_lists, read_blob_members, read_partition_pages, read_table_members,
};
use crate::error::{Error, Result};
use crate::index::audit::auditor::Auditor;
use crate::index::audit::report::{AuditReport, Drift, Finding};
use crate::index::operation::{Applied, IndexApplier};
use crate::index::record::{EntityRef, MemberStorage, Target};
use crate::index::record::{INDEX_ENTITY_KIND, MARKER_PROPERTY};
use crate::index::upkeep::{Applying, Kept, Upkeep};
use crate::index::write::declaration::Step;

/// An id list: its storage, its table (or blob folder), its index and its value.
#[derive(Clone, Copy)]
pub(super) struct List<'a> {
    pub storage: MemberStorage,
    pub table: &'a str,
    pub index: &'a str,
    pub value: &'a str,
}

impl<'a> List<'a> {
    /// The id list a membership target names.
    pub(super) fn of(target: &'a MemberTarget) -> Self {
        List {
            storage: target.storage,
            table: &target.table,
            index: &target.index,
            value: &target.value,
        }
    }
}

impl<S: TableStore + Clone + 'static> Kept<S> for MemberTarget {
    fn check<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        _primary: &'a Entity,
        source: &'a EntityRef,
        version: i64,
        report: &'a mut AuditReport,
    ) -> Step<'a> {
        Box::pin(check(auditor, source, version, List::of(self), report))
    }

    fn backfill<'a>(
        &'a self,
        applier: &'a IndexApplier<S>,
        source: &'a EntityRef,
        version: i64,
        present: bool,
        _kind_property: &'a str,
    ) -> Applying<'a> {
        Box::pin(backfill(applier, source, version, List::of(self), present))
    }
}

impl<S: TableStore + Clone + 'static> Upkeep<S> for Lists {
    fn claimed<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        table: &'a str,
        stored: &'a Entity,
        report: &'a mut AuditReport,
    ) -> Option<Step<'a>> {
        let page = matches!(stored.properties.get(MARKER_PROPERTY), Some(Value::String(k)) if k == INDEX_ENTITY_KIND);
        page.then(|| Box::pin(claimed(auditor, table, stored, report)) as Step<'a>)
    }

    fn beyond_tables<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        report: &'a mut AuditReport,
    ) -> Step<'a> {
        Box::pin(blob_lists(auditor, report))
    }
}

/// The id lists kept in blobs, which the scan of the tables does not see: every member
/// must be claimed by its primary.
async fn blob_lists<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    report: &mut AuditReport,
) -> Result<()> {
    let lists: Vec<(String, String)> = auditor
        .layouts
        .iter()
        .flat_map(|l| {
            MemberLayout::all(l)
                .filter_map(|m| match m {
                    Ok(m) if m.storage != MemberStorage::Blob => None,
                    Ok(m) => Some(Ok((m.table_for(&l.table), m.name))),
                    Err(e) => Some(Err(e)),
                })
                .collect::<Vec<_>>()
        })
        .collect::<Result<_>>()?;
    for (list_table, index) in lists {
        let blobs = auditor
            .options
            .blobs
            .clone()
            .ok_or_else(|| Error::NoBlobStore {
                index: index.clone(),
            })?;
        for (value, members) in list_blob_lists(&blobs, &list_table, &index).await? {
            for member in members.into_iter().filter(|m| m.present) {
                report.scanned += 1;
                claimed_member(
                    auditor,
                    &member.source,
                    &index,
                    MemberStorage::Blob,
                    &list_table,
                    &value,
                    report,
                )
                .await?;
            }
        }
    }
    Ok(())
}

/// Checks that `source` (at `version`) is a member of `list`.
pub(super) async fn check<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    source: &EntityRef,
    version: i64,
    list: List<'_>,
    report: &mut AuditReport,
) -> Result<()> {
    let List {
        storage,
        table,
        index,
        value,
    } = list;
    let found = members(auditor, storage, table, &source.partition_key, index, value).await?;
    if found.contains(source) {
        return Ok(());
    }
    settle(auditor, source, version, list, Drift::Missing, report).await
}

/// Records the drift of `source`'s membership in `list`, brought in line at `version`
/// first when the audit repairs (added when missing, removed when orphaned); the cached
/// list is read again afterwards.
async fn settle<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    source: &EntityRef,
    version: i64,
    list: List<'_>,
    drift: Drift,
    report: &mut AuditReport,
) -> Result<()> {
    let List {
        storage,
        table,
        index,
        value,
    } = list;
    let add = matches!(drift, Drift::Missing);
    let target = format!("id list `{value}` ({storage:?}) in {table}");
    let finding = Finding::new(drift, index, Some(source.clone()), target);
    auditor
        .repair_and_record(report, finding, |auditor| async move {
            let changed = auditor
                .applier
                .change_member(source, version, index, storage, table, value, add, true)
                .await?;
            Ok(changed == Applied::Changed)
        })
        .await?;
    forget(auditor, storage, table, &source.partition_key, index, value);
    Ok(())
}

/// Adds `source` at `version` to `list` (`present`), or removes it.
pub(super) async fn backfill<S: TableStore>(
    applier: &IndexApplier<S>,
    source: &EntityRef,
    version: i64,
    list: List<'_>,
    present: bool,
) -> Result<Applied> {
    applier
        .change_member(
            source,
            version,
            list.index,
            list.storage,
            list.table,
            list.value,
            present,
            true,
        )
        .await
}

/// The members of an id list (present ones), cached for the scan.
async fn members<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    storage: MemberStorage,
    table: &str,
    partition_key: &str,
    index: &str,
    value: &str,
) -> Result<Vec<EntityRef>> {
    let key = (
        storage,
        table.to_owned(),
        partition_key.to_owned(),
        index.to_owned(),
        value.to_owned(),
    );
    if let Some(found) = auditor.lists.get(&key) {
        return Ok(found.clone());
    }
    let found: Vec<EntityRef> = match storage {
        MemberStorage::Partition => {
            read_partition_pages(auditor.store(), table, partition_key, index, value)
                .await?
                .into_iter()
                .flat_map(|p| p.ids)
                .map(|rk| EntityRef::new(table, partition_key, rk))
                .collect()
        }
        MemberStorage::Table => read_table_members(auditor.store(), table, index, value)
            .await?
            .into_iter()
            .filter(|m| m.present)
            .map(|m| m.source)
            .collect(),
        MemberStorage::Blob => {
            let blobs = auditor
                .options
                .blobs
                .as_ref()
                .ok_or_else(|| Error::NoBlobStore {
                    index: index.to_owned(),
                })?;
            read_blob_members(blobs, table, index, value)
                .await?
                .into_iter()
                .filter(|m| m.present)
                .map(|m| m.source)
                .collect()
        }
    };
    if auditor.lists.len() > 4096 {
        auditor.lists.clear();
    }
    auditor.lists.insert(key, found.clone());
    Ok(found)
}

fn forget<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    storage: MemberStorage,
    table: &str,
    pk: &str,
    index: &str,
    value: &str,
) {
    auditor.lists.remove(&(
        storage,
        table.to_owned(),
        pk.to_owned(),
        index.to_owned(),
        value.to_owned(),
    ));
}

/// The version of a primary's entry in a worker-kept id list (0 for partition lists,
/// which hold no versions).
async fn member_version<S: TableStore + Clone>(
    auditor: &Auditor<'_, S>,
    source: &EntityRef,
    index: &str,
    storage: MemberStorage,
    table: &str,
    value: &str,
) -> Result<i64> {
    let members = match storage {
        MemberStorage::Partition => return Ok(0),
        MemberStorage::Table => read_table_members(auditor.store(), table, index, value).await?,
        MemberStorage::Blob => match &auditor.options.blobs {
            Some(blobs) => read_blob_members(blobs, table, index, value).await?,
            None => return Ok(0),
        },
    };
    Ok(members
        .iter()
        .find(|m| m.source == *source)
        .map_or(0, |m| m.version))
}

async fn claimed_member<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    source: &EntityRef,
    index: &str,
    storage: MemberStorage,
    table: &str,
    value: &str,
    report: &mut AuditReport,
) -> Result<()> {
    report.checked += 1;
    let record = auditor.record_of(source).await?;
    let wanted = Target::from(MemberTarget {
        index: index.to_owned(),
        storage,
        table: table.to_owned(),
        value: value.to_owned(),
    });
    if record.is_some_and(|r| r.targets.contains(&wanted)) {
        return Ok(());
    }
    // The orphan's own version: the removal replaces exactly that entry.
    let version = member_version(auditor, source, index, storage, table, value).await?;
    let list = List {
        storage,
        table,
        index,
        value,
    };
    settle(auditor, source, version, list, Drift::Orphaned, report).await
}

pub(super) async fn claimed<S: TableStore + Clone>(
    auditor: &mut Auditor<'_, S>,
    table: &str,
    page: &Entity,
    report: &mut AuditReport,
) -> Result<()> {
    let (index, value, ids) = super::read_page(page)?;
    match ids {
        PageIds::RowKeys(row_keys) => {
            for rk in row_keys {
                let source = EntityRef::new(table, &page.partition_key, rk);
                claimed_member(
                    auditor,
                    &source,
                    &index,
                    MemberStorage::Partition,
                    table,
                    &value,
                    report,
                )
                .await?;
            }
        }
        PageIds::Members(members) => {
            for member in members.into_iter().filter(|m| m.present) {
                claimed_member(
                    auditor,
                    &member.source,
                    &index,
                    MemberStorage::Table,
                    table,
                    &value,
                    report,
                )
                .await?;
            }
        }
    }
    Ok(())
}
