//! The checks of one primary against what its record names: each copy, link,
//! membership, reservation and expiry entry there and current, and each entry found
//! claimed by its primary.

use std::collections::HashMap;

use tablekit_core::{Entity, ErrorKind, IfMatch, TableStore, Value};

use super::super::links;
use super::super::members::{
    self, PageIds, read_blob_members, read_partition_pages, read_table_members,
};
use super::super::operation::{Applied, IndexApplier};
use super::super::record::{
    EntityRef, INDEX_ENTITY_KIND, IndexRecord, Layout, MARKER_PROPERTY, MemberStorage, Target,
    copy_of, copy_source, same_content,
};
use crate::error::{Error, Result};

use super::report::{AuditOptions, AuditReport, Drift, Finding};

/// Checks primaries, copies and id lists of a table; caches id lists read during a scan.
pub(super) struct Auditor<'a, S> {
    pub(super) applier: IndexApplier<S>,
    pub(super) layouts: Vec<Layout>,
    pub(super) options: &'a AuditOptions,
    pub(super) lists: HashMap<(MemberStorage, String, String, String, String), Vec<EntityRef>>,
}

impl<S: TableStore + Clone> Auditor<'_, S> {
    pub(super) fn store(&self) -> &S {
        self.applier.store()
    }

    pub(super) fn kind_property_of(&self, entity: &Entity) -> &str {
        self.layouts
            .iter()
            .find(|l| {
                matches!(entity.properties.get(&l.kind_property), Some(Value::String(k)) if *k == l.kind)
            })
            .map_or(MARKER_PROPERTY, |l| l.kind_property.as_str())
    }

    pub(super) fn record(&self, report: &mut AuditReport, finding: Finding) {
        match finding.drift {
            Drift::Missing => report.missing += 1,
            Drift::Stale => report.stale += 1,
            Drift::Orphaned => report.orphaned += 1,
            Drift::Unreadable => report.unreadable += 1,
        }
        if finding.repaired {
            report.repaired += 1;
        }
        tracing::debug!(?finding, "index drift");
        if report.findings.len() < self.options.max_findings {
            report.findings.push(finding);
        }
    }

    /// The members of an id list (present ones), cached for the scan.
    pub(super) async fn list(
        &mut self,
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
        if let Some(found) = self.lists.get(&key) {
            return Ok(found.clone());
        }
        let found: Vec<EntityRef> = match storage {
            MemberStorage::Partition => {
                read_partition_pages(self.store(), table, partition_key, index, value)
                    .await?
                    .into_iter()
                    .flat_map(|p| p.ids)
                    .map(|rk| EntityRef::new(table, partition_key, rk))
                    .collect()
            }
            MemberStorage::Table => read_table_members(self.store(), table, index, value)
                .await?
                .into_iter()
                .filter(|m| m.present)
                .map(|m| m.source)
                .collect(),
            MemberStorage::Blob => {
                let blobs = self
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
        if self.lists.len() > 4096 {
            self.lists.clear();
        }
        self.lists.insert(key, found.clone());
        Ok(found)
    }

    pub(super) fn forget(
        &mut self,
        storage: MemberStorage,
        table: &str,
        pk: &str,
        index: &str,
        value: &str,
    ) {
        self.lists.remove(&(
            storage,
            table.to_owned(),
            pk.to_owned(),
            index.to_owned(),
            value.to_owned(),
        ));
    }

    pub(super) async fn visit(
        &mut self,
        table: &str,
        entity: Entity,
        report: &mut AuditReport,
    ) -> Result<()> {
        let at = EntityRef::of(table, &entity);
        match self.visit_entity(table, entity, report).await {
            Err(Error::Malformed { what, reason }) => {
                self.record(
                    report,
                    Finding {
                        drift: Drift::Unreadable,
                        index: String::new(),
                        source: Some(at),
                        target: format!("{what}: {reason}"),
                        repaired: false,
                    },
                );
                Ok(())
            }
            other => other,
        }
    }

    pub(super) async fn visit_entity(
        &mut self,
        table: &str,
        entity: Entity,
        report: &mut AuditReport,
    ) -> Result<()> {
        // A delete's tombstone holds nothing; its burial is follow-up work already
        // recorded with the delete.
        if super::super::record::is_tombstone(&entity) {
            return Ok(());
        }
        if let Some(record) = IndexRecord::read(&entity)? {
            report.primaries += 1;
            let source = EntityRef::of(table, &entity);
            for target in &record.targets {
                report.checked += 1;
                self.check_target(&entity, &source, record.version, target, report)
                    .await?;
            }
        } else if let Some((source, _)) = copy_source(&entity) {
            report.checked += 1;
            self.check_copy_claimed(table, &entity, &source, report)
                .await?;
        } else if links::is_link(&entity) {
            self.check_link_claimed(table, &entity, report).await?;
        } else if matches!(entity.properties.get(MARKER_PROPERTY), Some(Value::String(k)) if k == INDEX_ENTITY_KIND)
        {
            self.check_page(table, &entity, report).await?;
        } else if matches!(entity.properties.get(MARKER_PROPERTY), Some(Value::String(k)) if k == super::super::unique::RESERVATION_KIND)
        {
            report.checked += 1;
            self.check_reservation(table, &entity, report).await?;
        }
        Ok(())
    }

    /// A reservation of a unique value: an orphan when its holder does not list it and
    /// its lease ran out (a writer stopped between reserving and writing itself, or a
    /// release has not run yet); repaired by deleting it. A reservation within its lease
    /// may belong to a write in flight and is left alone.
    pub(super) async fn check_reservation(
        &mut self,
        table: &str,
        entity: &Entity,
        report: &mut AuditReport,
    ) -> Result<()> {
        let found = super::super::unique::Reservation::read(table, entity)?;
        let now = tablekit_core::clock::now();
        if found.leased(now)
            || super::super::unique::holder_lists(self.applier.store(), &found.holder, &found.at)
                .await?
        {
            return Ok(());
        }
        let repaired = self.options.repair
            && super::super::unique::reclaim(self.applier.store(), &found, now).await?;
        self.record(
            report,
            Finding {
                drift: Drift::Orphaned,
                index: found.name.clone(),
                source: Some(found.holder.clone()),
                target: format!("reservation of `{}` in {table}", found.value()),
                repaired,
            },
        );
        Ok(())
    }

    pub(super) async fn check_target(
        &mut self,
        primary: &Entity,
        source: &EntityRef,
        version: i64,
        target: &Target,
        report: &mut AuditReport,
    ) -> Result<()> {
        match target {
            Target::Copy {
                index,
                at,
                properties,
            } => {
                let kind_property = self.kind_property_of(primary).to_owned();
                let expected = copy_of(
                    primary,
                    source,
                    version,
                    index,
                    at,
                    properties.as_deref(),
                    &kind_property,
                )?;
                let found = self.get(at).await?;
                let drift = match found {
                    None => Drift::Missing,
                    Some(copy) if same_content(&copy, &expected) => return Ok(()),
                    Some(_) => Drift::Stale,
                };
                let repaired = self.options.repair
                    && self
                        .applier
                        .put_copy(
                            source,
                            version,
                            index,
                            at,
                            properties.as_deref(),
                            &kind_property,
                            true,
                        )
                        .await?
                        == Applied::Changed;
                self.record(
                    report,
                    Finding {
                        drift,
                        index: index.clone(),
                        source: Some(source.clone()),
                        target: at.to_string(),
                        repaired,
                    },
                );
            }
            Target::Denormalized {
                property,
                source: from,
                source_property,
            } => {
                if from == source {
                    return Ok(());
                }
                let link = links::link_ref(source, property, from);
                let link_found = self.get(&link).await?.is_some();
                let value_ok = match self.get(from).await? {
                    Some(f) => {
                        primary.properties.get(property) == f.properties.get(source_property)
                    }
                    None => true,
                };
                let drift = match (link_found, value_ok) {
                    (true, true) => return Ok(()),
                    (false, _) => Drift::Missing,
                    (true, false) => Drift::Stale,
                };
                let repaired = if self.options.repair {
                    self.applier
                        .put_link(source, property, from, source_property)
                        .await?;
                    self.applier
                        .sync_denormalized(source, property, from, source_property)
                        .await?;
                    true
                } else {
                    false
                };
                self.record(
                    report,
                    Finding {
                        drift,
                        index: property.clone(),
                        source: Some(source.clone()),
                        target: format!("`{property}` copied from {from}"),
                        repaired,
                    },
                );
            }
            Target::Member {
                index,
                storage,
                table,
                value,
            } => {
                let list = self
                    .list(*storage, table, &source.partition_key, index, value)
                    .await?;
                if list.contains(source) {
                    return Ok(());
                }
                let repaired = self.options.repair
                    && self
                        .applier
                        .change_member(source, version, index, *storage, table, value, true, true)
                        .await?
                        == Applied::Changed;
                self.forget(*storage, table, &source.partition_key, index, value);
                self.record(
                    report,
                    Finding {
                        drift: Drift::Missing,
                        index: index.clone(),
                        source: Some(source.clone()),
                        target: format!("id list `{value}` ({storage:?}) in {table}"),
                        repaired,
                    },
                );
            }
            Target::Unique { name, at } => {
                let store = self.applier.store();
                if super::super::unique::read(store, at)
                    .await?
                    .is_some_and(|r| r.holder == *source)
                {
                    return Ok(());
                }
                // Another entity holding the value is reported, not repaired.
                let repaired = self.options.repair
                    && matches!(
                        self.applier.claim_unique(source, version, at).await,
                        Ok(Applied::Changed)
                    );
                self.record(
                    report,
                    Finding {
                        drift: Drift::Missing,
                        index: name.clone(),
                        source: Some(source.clone()),
                        target: format!("reservation of `{}` in {}", at.partition_key, at.table),
                        repaired,
                    },
                );
            }
        }
        Ok(())
    }

    /// The version of a primary's entry in a worker-kept id list (0 for partition lists,
    /// which hold no versions).
    pub(super) async fn member_version(
        &self,
        source: &EntityRef,
        index: &str,
        storage: MemberStorage,
        table: &str,
        value: &str,
    ) -> Result<i64> {
        let members = match storage {
            MemberStorage::Partition => return Ok(0),
            MemberStorage::Table => read_table_members(self.store(), table, index, value).await?,
            MemberStorage::Blob => match &self.options.blobs {
                Some(blobs) => read_blob_members(blobs, table, index, value).await?,
                None => return Ok(0),
            },
        };
        Ok(members
            .iter()
            .find(|m| m.source == *source)
            .map_or(0, |m| m.version))
    }

    pub(super) async fn get(&self, at: &EntityRef) -> Result<Option<Entity>> {
        Ok(self
            .store()
            .get_if_table_exists(&at.table, &at.partition_key, &at.row_key)
            .await?)
    }

    pub(super) async fn check_link_claimed(
        &mut self,
        table: &str,
        entity: &Entity,
        report: &mut AuditReport,
    ) -> Result<()> {
        report.checked += 1;
        let link = links::read_link(table, entity)?;
        let claim = Target::Denormalized {
            property: link.property.clone(),
            source: link.source.clone(),
            source_property: link.source_property.clone(),
        };
        if self
            .record_of(&link.dependent)
            .await?
            .is_some_and(|r| r.targets.contains(&claim))
        {
            return Ok(());
        }
        let repaired = if self.options.repair {
            let if_match = link.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            match self
                .store()
                .delete(
                    &link.at.table,
                    &link.at.partition_key,
                    &link.at.row_key,
                    if_match,
                )
                .await
            {
                Ok(()) => true,
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::NotFound | ErrorKind::PreconditionFailed
                    ) =>
                {
                    false
                }
                Err(e) => return Err(e.into()),
            }
        } else {
            false
        };
        self.record(
            report,
            Finding {
                drift: Drift::Orphaned,
                index: link.property.clone(),
                source: Some(link.dependent.clone()),
                target: format!("link at {}", link.at),
                repaired,
            },
        );
        Ok(())
    }

    /// The record of a primary, if it exists and has one.
    pub(super) async fn record_of(&self, source: &EntityRef) -> Result<Option<IndexRecord>> {
        match self.get(source).await? {
            Some(p) => IndexRecord::read(&p),
            None => Ok(None),
        }
    }

    pub(super) async fn check_copy_claimed(
        &mut self,
        table: &str,
        copy: &Entity,
        source: &EntityRef,
        report: &mut AuditReport,
    ) -> Result<()> {
        let at = EntityRef::of(table, copy);
        let record = self.record_of(source).await?;
        let claimed = record.as_ref().is_some_and(|r| {
            r.targets
                .iter()
                .any(|t| matches!(t, Target::Copy { at: a, .. } if *a == at))
        });
        if claimed {
            return Ok(());
        }
        let index = match copy.properties.get(self.kind_property_of(copy)) {
            Some(Value::String(kind)) => kind.rsplit_once('#').map_or("", |(_, i)| i).to_owned(),
            _ => String::new(),
        };
        let repaired = self.options.repair
            && self.applier.delete_copy(source, None, &at).await? == Applied::Changed;
        self.record(
            report,
            Finding {
                drift: Drift::Orphaned,
                index,
                source: Some(source.clone()),
                target: at.to_string(),
                repaired,
            },
        );
        Ok(())
    }

    pub(super) async fn check_member_claimed(
        &mut self,
        source: &EntityRef,
        index: &str,
        storage: MemberStorage,
        table: &str,
        value: &str,
        report: &mut AuditReport,
    ) -> Result<()> {
        report.checked += 1;
        let record = self.record_of(source).await?;
        let wanted = Target::Member {
            index: index.to_owned(),
            storage,
            table: table.to_owned(),
            value: value.to_owned(),
        };
        if record.is_some_and(|r| r.targets.contains(&wanted)) {
            return Ok(());
        }
        // The orphan's own version: the removal replaces exactly that entry.
        let version = self
            .member_version(source, index, storage, table, value)
            .await?;
        let repaired = self.options.repair
            && self
                .applier
                .change_member(source, version, index, storage, table, value, false, true)
                .await?
                == Applied::Changed;
        self.forget(storage, table, &source.partition_key, index, value);
        self.record(
            report,
            Finding {
                drift: Drift::Orphaned,
                index: index.to_owned(),
                source: Some(source.clone()),
                target: format!("id list `{value}` ({storage:?}) in {table}"),
                repaired,
            },
        );
        Ok(())
    }

    pub(super) async fn check_page(
        &mut self,
        table: &str,
        page: &Entity,
        report: &mut AuditReport,
    ) -> Result<()> {
        let (index, value, ids) = members::read_page(page)?;
        match ids {
            PageIds::RowKeys(row_keys) => {
                for rk in row_keys {
                    let source = EntityRef::new(table, &page.partition_key, rk);
                    self.check_member_claimed(
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
                    self.check_member_claimed(
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
}
