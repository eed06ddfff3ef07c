//! Index maintenance without the entity type: deleting a primary written through an
//! indexed table removes everything its record names — its same-partition copies, links
//! and id-list entries in the delete's entity group transaction, the rest as follow-up
//! work committed with it through the consistency engine. The archive operation of the
//! worker uses it, so a moved entity leaves no index entry behind.

use std::collections::HashSet;

use tablekit_core::{ErrorKind, IfMatch, TableStore, WriteOp};

use super::members::{plan_partition_change, read_partition_pages};
use super::operation::IndexOperation;
use super::record::{
    EntityRef, IndexRecord, Layout, MemberStorage, Target, is_tombstone, tombstone,
};
use super::registry::SchemaRecord;
use super::table::IndexedTable;
use crate::consistency::{Engine, Plan, Planner, lost_race};
use crate::error::Result;

/// Deletes the primary at `at` if its ETag is still `if_match`, with its index entries
/// (see the module docs); `false` when it is not there. The engine's sink gets the
/// follow-up work after the commit; without one it waits for the relay.
///
/// # Errors
/// `PreconditionFailed` when the primary changed; the store's errors;
/// [`Error::Malformed`](crate::Error::Malformed) for a record that does not read;
/// [`Error::Contention`](crate::Error::Contention).
pub async fn delete_indexed<S: TableStore + Clone + 'static>(
    engine: &Engine<S>,
    at: &EntityRef,
    if_match: IfMatch,
) -> Result<bool> {
    // A primary whose type is registered is deleted through its layout, as a typed
    // delete is: its change event, the blobs it stops referencing and its reservations
    // go with it.
    let Some(primary) = engine
        .store()
        .get_if_table_exists(&at.table, &at.partition_key, &at.row_key)
        .await?
    else {
        return Ok(false);
    };
    if is_tombstone(&primary) {
        return Ok(false);
    }
    if IndexRecord::read(&primary)?.is_some()
        && let Some(layout) = registered_layout(engine.store(), &at.table, &primary).await?
    {
        let table =
            IndexedTable::for_layout(engine.store().clone(), layout).with_engine(engine.clone());
        return match table.delete(&at.partition_key, &at.row_key, if_match).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        };
    }
    let mut delete = IndexedDelete {
        store: engine.store(),
        grace: engine.tombstone_grace(),
        at,
        if_match,
        missing: HashSet::new(),
        found: true,
    };
    let committed = engine
        .commit(&at.table, &at.partition_key, &mut delete)
        .await?;
    Ok(committed.is_some() && delete.found)
}

/// The layout registered on `table` for the kind of `primary`.
async fn registered_layout<S: TableStore>(
    store: &S,
    table: &str,
    primary: &tablekit_core::Entity,
) -> Result<Option<Layout>> {
    for schema in SchemaRecord::list(store, Some(table)).await? {
        if let Some(tablekit_core::Value::String(kind)) =
            primary.properties.get(&schema.kind_property)
            && *kind == schema.kind
        {
            return Ok(Some(schema.layout()?));
        }
    }
    Ok(None)
}

/// Which writes of the delete's batch are what.
enum Role {
    Primary,
    /// A same-partition copy or link.
    Entry(EntityRef),
    Page,
}

struct IndexedDelete<'a, S> {
    store: &'a S,
    /// How long the delete's tombstone stays.
    grace: std::time::Duration,
    at: &'a EntityRef,
    if_match: IfMatch,
    /// Same-partition entries found missing (left out of the next plan).
    missing: HashSet<EntityRef>,
    /// Whether the primary was there.
    found: bool,
}

impl<S: TableStore> Planner for IndexedDelete<'_, S> {
    type Role = Role;

    async fn plan(&mut self) -> Result<Option<Plan<Role>>> {
        let at = self.at;
        let Some(primary) = self
            .store
            .get_if_table_exists(&at.table, &at.partition_key, &at.row_key)
            .await?
        else {
            self.found = false;
            return Ok(None);
        };
        if is_tombstone(&primary) {
            self.found = false;
            return Ok(None);
        }
        if let IfMatch::ETag(expected) = &self.if_match
            && primary.etag.as_ref() != Some(expected)
        {
            return Err(at.precondition_failed());
        }
        let read = primary.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        let delete = |at: &EntityRef, if_match: IfMatch| WriteOp::Delete {
            partition_key: at.partition_key.clone(),
            row_key: at.row_key.clone(),
            if_match,
        };
        let mut plan = Plan::new();
        // Not written through an indexed table: a plain delete.
        let Some(record) = IndexRecord::read(&primary)? else {
            plan.push(delete(at, read), Role::Primary);
            return Ok(Some(plan));
        };
        let version = super::record::delete_version(Some(record.version));
        // A tombstone in its place, buried after the grace period (see
        // `super::record::TOMBSTONE_KIND`).
        let kind_property = tablekit_core::typed::DEFAULT_KIND_PROPERTY;
        plan.push(
            WriteOp::Replace(tombstone(at, version, kind_property)?, read),
            Role::Primary,
        );
        plan.follow_up(IndexOperation::burial(at, version, self.grace)?);
        let mut operations = Vec::new();
        for target in &record.targets {
            match target {
                Target::Copy { at: copy, .. } if target.is_atomic(at) => {
                    if !self.missing.contains(copy) {
                        plan.push(delete(copy, IfMatch::Any), Role::Entry(copy.clone()));
                    }
                }
                Target::Denormalized {
                    property, source, ..
                } if target.is_atomic(at) => {
                    let link = super::links::link_ref(at, property, source);
                    if source != at && !self.missing.contains(&link) {
                        plan.push(delete(&link, IfMatch::Any), Role::Entry(link));
                    }
                }
                Target::Member {
                    index,
                    storage: MemberStorage::Partition,
                    value,
                    ..
                } => {
                    let pages = read_partition_pages(
                        self.store,
                        &at.table,
                        &at.partition_key,
                        index,
                        value,
                    )
                    .await?;
                    for op in plan_partition_change(
                        &pages,
                        &at.partition_key,
                        index,
                        value,
                        &at.row_key,
                        false,
                    )? {
                        plan.push(op, Role::Page);
                    }
                }
                _ => operations.push(IndexOperation::for_target(at, version, target, false, "")),
            }
        }
        if !operations.is_empty() {
            plan.follow_up(super::IndexOperations::new(operations).envelope()?);
        }
        Ok(Some(plan))
    }

    fn refused(&mut self, error: tablekit_core::Error, role: Option<&Role>) -> Result<()> {
        match (role, error.kind()) {
            // The primary changed or went since the read: the caller's condition decides.
            (Some(Role::Primary), ErrorKind::PreconditionFailed | ErrorKind::NotFound)
                if self.if_match != IfMatch::Any =>
            {
                Err(error.into())
            }
            (Some(Role::Entry(entry)), ErrorKind::NotFound) => {
                self.missing.insert(entry.clone());
                Ok(())
            }
            _ if lost_race(&error) => Ok(()),
            _ => Err(error.into()),
        }
    }

    fn what(&self) -> String {
        format!("indexed delete of {}", self.at)
    }
}
