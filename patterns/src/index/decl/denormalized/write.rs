//! The declaration of denormalised fields (`#[denormalized]`) on the write path, both
//! ways:
//! - a primary that copies a property from a source: before its transaction it puts a
//!   link beside a source in another partition (a source written after that finds the
//!   link), reads each source's current value into the new value, and requires a source
//!   in its partition unchanged (a guard under the ETag read); a link beside a source in
//!   the partition is written in the transaction; a source elsewhere is copied again by
//!   the worker afterwards;
//! - a primary others copy from: the dependents in its partition are merged in its
//!   transaction while it has room, the others (and the rest) by the worker.

use std::sync::atomic::Ordering;

use tablekit_core::{Entity, IfMatch, TableStore, WriteOp};

use super::record::DenormalizedTarget;
use super::record::{RemoveLink, SyncDenormalized, SyncNewDependents};
use super::{link_entity, link_ref, links_of};
use crate::error::Result;
use crate::index::operation::{IndexApplier, IndexOperation};
use crate::index::record::{IndexRecord, Target};
use crate::index::write::declaration::{Attempt, Prepared, Role, Step, WriteSteps, Writer, delete};

/// Denormalised fields.
pub(crate) struct Denormalized;

/// The attribute that declares it.
pub(crate) const ATTRIBUTE: &str = "denormalized";

/// What a write does to the entities that copy one of its properties.
struct DependentWork {
    /// Writes in this transaction, each with the worker operation that does the same
    /// when the transaction has no room left.
    ops: Vec<(WriteOp, IndexOperation)>,
    operations: Vec<IndexOperation>,
}

impl Denormalized {
    /// Puts the links beside sources in other partitions (a source written after this
    /// point finds the link, one written before is read by the plan).
    async fn put_links<S: TableStore + Clone>(
        writer: &Writer<S>,
        prepared: &Prepared,
    ) -> Result<()> {
        if prepared.entity.is_none() {
            return Ok(());
        }
        let source = &prepared.source;
        let applier = IndexApplier::new(writer.store().clone());
        for target in &prepared.targets {
            if let Some(DenormalizedTarget {
                property,
                source: from,
                source_property,
            }) = target.get::<DenormalizedTarget>()
                && !target.is_atomic(source)
            {
                applier
                    .put_link_for(
                        source,
                        property,
                        from,
                        source_property,
                        Some(&prepared.reclaim.id),
                    )
                    .await?;
            }
        }
        Ok(())
    }

    /// Sets each denormalised field of the new value from its source's current value
    /// and keeps the ETags of the sources in this partition, which the write's
    /// transaction requires unchanged.
    async fn read_sources<S: TableStore>(attempt: &mut Attempt<'_, S>) -> Result<()> {
        let source = attempt.source;
        let Some(entity) = attempt.entity.as_mut() else {
            return Ok(());
        };
        for target in attempt.new_targets {
            let Some(DenormalizedTarget {
                property,
                source: from,
                source_property,
            }) = target.get::<DenormalizedTarget>()
            else {
                continue;
            };
            if from == source {
                continue;
            }
            let Some(found) = attempt
                .writer
                .store()
                .get_if_table_exists(&from.table, &from.partition_key, &from.row_key)
                .await?
            else {
                continue;
            };
            if let Some(value) = found.properties.get(source_property) {
                entity.properties.insert(property.clone(), value.clone());
            }
            if target.is_atomic(source)
                && !attempt.guards.iter().any(|(r, _)| r == from)
                && let Some(etag) = found.etag
            {
                attempt.guards.push((from.clone(), etag));
            }
        }
        Ok(())
    }

    /// The links of the new value (a link beside a source in the partition, in the
    /// transaction; a source elsewhere copied again by the worker) and of the old one it
    /// drops.
    fn plan_links<S: TableStore>(attempt: &mut Attempt<'_, S>) -> Result<()> {
        let source = attempt.source;
        for target in attempt.new_targets {
            let Some(DenormalizedTarget {
                property,
                source: from,
                source_property,
            }) = target.get::<DenormalizedTarget>()
            else {
                continue;
            };
            if !target.is_atomic(source) {
                // A source in another partition may have changed between the read and
                // this commit: the worker copies its value again afterwards.
                attempt.hand_on(target, true);
            } else if !attempt.kept(target) && from != source {
                let link = link_entity(source, property, from, source_property)?;
                attempt
                    .plan
                    .push(WriteOp::InsertOrReplace(link), Role::of(ATTRIBUTE));
            }
        }
        let dropped = attempt.dropped(|t| t.is::<DenormalizedTarget>());
        for target in &dropped {
            let Some(DenormalizedTarget {
                property,
                source: from,
                ..
            }) = target.get::<DenormalizedTarget>()
            else {
                continue;
            };
            if !target.is_atomic(source) {
                attempt.hand_on(target, false);
                continue;
            }
            let link = link_ref(source, property, from);
            if from != source && !attempt.missing.contains(&link) {
                attempt.plan.push(delete(&link), Role::Dropped(link));
            }
        }
        Ok(())
    }

    /// Unchanged sources of denormalised fields under the ETags their values were read
    /// at, and the dependents of this write in the partition while the transaction has
    /// room (keeping room for the follow-up entries); past that the worker updates them.
    async fn plan_dependents<S: TableStore>(attempt: &mut Attempt<'_, S>) -> Result<()> {
        let dependents = Self::dependents(attempt).await?;
        for (from, etag) in std::mem::take(&mut attempt.guards) {
            // A source that is also a dependent of this write is merged below, under the
            // ETag read: that is its guard.
            let also_dependent = dependents
                .ops
                .iter()
                .any(|(op, _)| op.key() == (from.partition_key.as_str(), from.row_key.as_str()));
            if !also_dependent {
                let guard = Entity::new(from.partition_key, from.row_key);
                attempt.plan.push(
                    WriteOp::Merge(guard, IfMatch::ETag(etag)),
                    Role::of(ATTRIBUTE),
                );
            }
        }
        let room = tablekit_core::limits::MAX_BATCH_OPERATIONS
            .saturating_sub(attempt.plan.len() + 2 * attempt.old_targets.len() + 4);
        let in_batch = dependents.ops.len() <= room;
        for (op, fallback) in dependents.ops {
            if in_batch {
                attempt.plan.push(op, Role::of(ATTRIBUTE));
            } else {
                attempt.operations.push(fallback);
            }
        }
        attempt.operations.extend(dependents.operations);
        Ok(())
    }

    /// The updates of the entities that copy a changed property of this one: merges in
    /// this transaction for those in the partition, worker operations for the others.
    async fn dependents<S: TableStore>(attempt: &Attempt<'_, S>) -> Result<DependentWork> {
        let mut work = DependentWork {
            ops: Vec::new(),
            operations: Vec::new(),
        };
        let source = attempt.source;
        let old = attempt.old;
        let store = attempt.writer.store();
        let (Some(entity), true) = (
            attempt.entity.as_ref(),
            attempt.writer.track_dependents.load(Ordering::Relaxed),
        ) else {
            return Ok(work);
        };
        let links = links_of(store, source).await?;
        // Links put after the read above are read again once the write committed.
        let changed: Vec<String> = match old {
            None => entity.properties.keys().cloned().collect(),
            Some(old) => entity
                .properties
                .iter()
                .filter(|(name, value)| old.properties.get(*name) != Some(*value))
                .map(|(name, _)| name.clone())
                .chain(
                    old.properties
                        .keys()
                        .filter(|name| !entity.properties.contains_key(*name))
                        .cloned(),
                )
                .collect(),
        };
        if !changed.is_empty() {
            work.operations
                .push(IndexOperation::from(SyncNewDependents {
                    source: source.clone(),
                    properties: changed,
                    seen: links.iter().map(|l| l.at.row_key.clone()).collect(),
                }));
        }
        for link in links {
            let value = entity.properties.get(&link.source_property);
            let before = old.and_then(|o| o.properties.get(&link.source_property));
            if (old.is_some() && value == before) || link.dependent == *source {
                continue;
            }
            let same_partition = link.dependent.table == source.table
                && link.dependent.partition_key == source.partition_key;
            if !same_partition {
                work.operations.push(IndexOperation::from(SyncDenormalized {
                    dependent: link.dependent,
                    property: link.property,
                    source: source.clone(),
                    source_property: link.source_property,
                }));
                continue;
            }
            let claim = Target::from(DenormalizedTarget {
                property: link.property.clone(),
                source: source.clone(),
                source_property: link.source_property.clone(),
            });
            let dependent = store
                .get(
                    &link.dependent.table,
                    &link.dependent.partition_key,
                    &link.dependent.row_key,
                    None,
                )
                .await?;
            let claimed = match &dependent {
                Some(d) => IndexRecord::read(d)?.is_some_and(|r| r.targets.contains(&claim)),
                None => false,
            };
            let sync = IndexOperation::from(SyncDenormalized {
                dependent: link.dependent.clone(),
                property: link.property.clone(),
                source: source.clone(),
                source_property: link.source_property.clone(),
            });
            match (dependent, claimed, value) {
                (Some(d), true, Some(value)) => {
                    let mut patch = Entity::new(d.partition_key, d.row_key);
                    patch.properties.insert(link.property, value.clone());
                    let if_match = d.etag.map_or(IfMatch::Any, IfMatch::ETag);
                    work.ops.push((WriteOp::Merge(patch, if_match), sync));
                }
                (Some(d), true, None) => {
                    // The source no longer has the property: neither does the copy.
                    if d.properties.contains_key(&link.property) {
                        let if_match = d.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                        let mut whole = d;
                        whole.properties.shift_remove(&link.property);
                        work.ops.push((WriteOp::Replace(whole, if_match), sync));
                    }
                }
                _ => {
                    let remove = IndexOperation::from(RemoveLink {
                        dependent: link.dependent.clone(),
                        property: link.property.clone(),
                        source: source.clone(),
                        source_property: link.source_property.clone(),
                    });
                    work.ops.push((
                        WriteOp::Delete {
                            partition_key: link.at.partition_key,
                            row_key: link.at.row_key,
                            if_match: link.etag.map_or(IfMatch::Any, IfMatch::ETag),
                        },
                        remove,
                    ));
                }
            }
        }
        Ok(work)
    }
}

impl<S: TableStore + Clone + 'static> WriteSteps<S> for Denormalized {
    fn prepare<'a>(&'a self, writer: &'a Writer<S>, prepared: &'a mut Prepared) -> Step<'a> {
        Box::pin(Denormalized::put_links(writer, prepared))
    }

    fn shape<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        Box::pin(Denormalized::read_sources(attempt))
    }

    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        Box::pin(async move {
            Denormalized::plan_links(attempt)?;
            Denormalized::plan_dependents(attempt).await
        })
    }
}
