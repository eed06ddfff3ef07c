//! The planner of one write ([`IndexWrite`]), run by the consistency engine's commit:
//! it reads the stored primary, checks the write's conditions against it, chooses the
//! version and the primary's operation (a tombstone for a delete), and lets every
//! declaration add its part (see [`WriteSteps`](super::declaration::WriteSteps)).

use std::collections::{BTreeSet, HashSet};

use tablekit_core::typed::is_expired;
use tablekit_core::{Entity, ErrorKind, IfMatch, Value, WriteOp};

use super::super::operation::{IndexOperation, IndexOperations};
use super::super::record::{
    EntityRef, IndexRecord, Target, VERSION_PROPERTY, is_tombstone, next_version, tombstone,
    version_of,
};
use super::super::registry::{self, write_steps};
use super::declaration::{Attempt, Kind, Role, Writer, undone, what};
use crate::consistency::{Intent, Plan, Planner, lost_race};
use crate::error::Result;

/// The most characters of index operations one `consistency::outbox` entry holds (a
/// string property holds 32 Ki UTF-16 units); more work is spread over several entries.
pub(crate) const WORK_CHARS: usize = 30_000;

/// One write, planned again on each attempt.
pub(crate) struct IndexWrite<'a, S> {
    pub writer: &'a Writer<S>,
    pub kind: Kind,
    pub source: EntityRef,
    pub new_entity: Option<Entity>,
    pub new_targets: BTreeSet<Target>,
    /// The caller's ETag condition.
    pub user_etag: Option<tablekit_core::ETag>,
    /// Same-partition entries found missing (their delete is left out of the next plan).
    pub missing: HashSet<EntityRef>,
    /// The version the last plan records.
    pub version: i64,
    /// The operations the last plan hands to the worker.
    pub operations: usize,
    /// The intent recorded before the write's steps outside its transaction (reserving
    /// unique values, putting links, uploading blobs), deleted by its commit.
    pub intent: Option<Intent>,
    /// An insert refused by an entity in the way (a tombstone, or an entity that
    /// expired): the next plan reads it, and replaces it if it counts as absent.
    pub read_taken: bool,
    /// The stored primary as the caller read it just before the write: the first plan
    /// uses it instead of reading again (the commit is conditional on its ETag, so a
    /// read that went stale only costs a plan).
    pub known: Option<Entity>,
}

impl<S: tablekit_core::TableStore + Clone + 'static> IndexWrite<'_, S> {
    /// After a write that failed: claims its intent, so what it did outside its
    /// transaction is undone (unless it committed and only its answer was lost, or the
    /// relay claimed it already).
    pub(crate) async fn abandon(&self) {
        if let Some(intent) = &self.intent {
            self.writer.engine.abandon(intent).await;
        }
    }

    /// The stored primary, checked against the write's conditions, and whether it
    /// counts as absent.
    async fn read_old(&mut self) -> Result<(Option<Entity>, bool)> {
        let EntityRef {
            table: name,
            partition_key: pk,
            row_key: rk,
        } = &self.source;
        let insert = self.kind == Kind::Insert;
        let old = if let Some(known) = self.known.take() {
            Some(known)
        } else if insert && !self.read_taken {
            None
        } else {
            self.writer.store().get(name, pk, rk, None).await?
        };
        // An entity that expired and waits for the sweeper is absent to every write but a
        // delete (the sweeper's own among them): an insert or upsert replaces it (under
        // its ETag), a replace finds nothing. A delete's tombstone is absent to every
        // write, deletes included.
        let absent = old.as_ref().is_some_and(is_tombstone)
            || (self.new_entity.is_some()
                && old
                    .as_ref()
                    .is_some_and(|o| is_expired(o, self.writer.clock.now())));
        let must_exist = matches!(self.kind, Kind::Replace | Kind::Delete);
        match &old {
            None if must_exist => return Err(self.source.not_found()),
            Some(_) if absent && must_exist => return Err(self.source.not_found()),
            Some(_) if insert && !absent => {
                return Err(tablekit_core::Error::AlreadyExists {
                    table: name.clone(),
                    partition_key: pk.clone(),
                    row_key: rk.clone(),
                });
            }
            Some(old) if self.user_etag.is_some() && old.etag != self.user_etag => {
                return Err(self.source.precondition_failed());
            }
            _ => {}
        }
        Ok((old, absent))
    }
}

impl<S: tablekit_core::TableStore + Clone + 'static> Planner for IndexWrite<'_, S> {
    type Role = Role;

    async fn plan(&mut self) -> Result<Option<Plan<Role>>> {
        let writer = self.writer;
        let (old, old_absent) = self.read_old().await?;
        let old_record = match &old {
            Some(o) => IndexRecord::read(o)?,
            None => None,
        };
        let old_record_found = old_record.is_some();
        // A primary without a record (a `LargeTable`'s) carries the version stamp alone.
        let previous = old_record
            .as_ref()
            .map(|r| r.version)
            .or_else(|| old.as_ref().and_then(version_of));
        let version = if self.new_entity.is_some() {
            next_version(previous)
        } else {
            super::super::record::delete_version(previous)
        };
        let old_targets = old_record.map(|r| r.targets).unwrap_or_default();
        let mut attempt = Attempt {
            writer,
            source: &self.source,
            version,
            old: old.as_ref(),
            old_absent,
            old_targets: &old_targets,
            new_targets: &self.new_targets,
            entity: self.new_entity.clone(),
            missing: &self.missing,
            intent: self.intent.as_ref(),
            guards: Vec::new(),
            plan: Plan::new(),
            operations: Vec::new(),
            work: Vec::new(),
            work_operations: 0,
        };
        for declaration in write_steps::<S>() {
            declaration.shape(&mut attempt).await?;
        }
        // The primary first (a lost answer is read back by its version), with its
        // record. A delete leaves a tombstone at its version, buried after the grace
        // period — unless nothing indexes the primary (no record, a layout that declares
        // nothing): that is a plain delete.
        let deleting = self.new_entity.is_none();
        let tombstoned =
            deleting && writer.indexed && (old_record_found || !writer.layout.is_bare());
        let primary = match attempt.entity.take() {
            Some(mut entity) => {
                if writer.indexed {
                    IndexRecord {
                        version,
                        targets: self.new_targets.clone(),
                    }
                    .write(&mut entity)?;
                } else {
                    // No record, but the version stamp: a write whose answer was lost is
                    // recognised by it (the engine reads it back), as an indexed one is.
                    entity
                        .properties
                        .insert(VERSION_PROPERTY.to_owned(), Value::Int64(version));
                }
                Some(entity)
            }
            None if tombstoned => Some(tombstone(
                &self.source,
                version,
                &writer.layout.kind_property,
            )?),
            None => None,
        };
        let if_match = old
            .as_ref()
            .and_then(|o| o.etag.clone())
            .map_or(IfMatch::Any, IfMatch::ETag);
        let op = match (&primary, &old) {
            (Some(primary), None) => WriteOp::Insert(primary.clone()),
            (Some(primary), Some(_)) => WriteOp::Replace(primary.clone(), if_match),
            (None, _) => WriteOp::Delete {
                partition_key: self.source.partition_key.clone(),
                row_key: self.source.row_key.clone(),
                if_match,
            },
        };
        attempt.plan.push(op, Role::Primary);
        attempt.entity = primary.filter(|_| !deleting);
        for declaration in write_steps::<S>() {
            declaration.plan(&mut attempt).await?;
        }
        let Attempt {
            mut plan,
            operations,
            work,
            work_operations,
            ..
        } = attempt;
        if let Some(intent) = &self.intent {
            plan.push(intent.fence(), Role::Intent);
        }
        self.operations = operations.len() + work_operations;
        for entry in split_work(operations)? {
            plan.follow_up(entry.envelope()?);
        }
        for envelope in work {
            plan.follow_up(envelope);
        }
        if tombstoned {
            plan.follow_up(IndexOperation::burial(
                &self.source,
                version,
                writer.engine.tombstone_grace(),
            )?);
        }
        self.version = version;
        Ok(Some(plan))
    }

    fn refused(&mut self, error: tablekit_core::Error, role: Option<&Role>) -> Result<()> {
        match (role, error.kind()) {
            (Some(Role::Primary), ErrorKind::AlreadyExists) if self.kind == Kind::Insert => {
                if self.read_taken {
                    return Err(error);
                }
                // The entity in the way may be a delete's tombstone or have expired: the
                // next plan reads it.
                self.read_taken = true;
                Ok(())
            }
            (Some(Role::Primary), ErrorKind::PreconditionFailed | ErrorKind::NotFound)
                if self.user_etag.is_some() =>
            {
                Err(self.source.precondition_failed())
            }
            // The intent was claimed (the write stalled past the relay's grace): what it
            // did outside its transaction is being undone, so it must not commit.
            (Some(Role::Intent), ErrorKind::PreconditionFailed | ErrorKind::NotFound) => {
                Err(undone(&self.source))
            }
            // A dropped entry already gone: the next plan leaves it out.
            (Some(Role::Dropped(at)), ErrorKind::NotFound) => {
                self.missing.insert(at.clone());
                Ok(())
            }
            (Some(role), _) => {
                let answer = match role {
                    Role::Of { by, note } => registry::declaration::<S>(by)
                        .and_then(|d| d.write())
                        .and_then(|steps| steps.refused(note.as_deref(), &error)),
                    _ => None,
                };
                if let Some(answer) = answer {
                    return answer;
                }
                if lost_race(&error) {
                    Ok(())
                } else {
                    Err(error)
                }
            }
            _ if lost_race(&error) => Ok(()),
            _ => Err(error),
        }
    }

    fn what(&self) -> String {
        what(&self.source)
    }
}

/// Splits a write's index work into operations of at most [`WORK_CHARS`]
/// characters each (one entry of `consistency::outbox` apiece).
///
/// # Errors
/// [`Error::Encode`] when an operation does not serialise.
fn split_work(operations: Vec<IndexOperation>) -> Result<Vec<IndexOperations>> {
    let mut entries: Vec<IndexOperations> = Vec::new();
    let mut chars = 0;
    for operation in operations {
        let size = crate::error::json("an index operation", &operation)?.len() + 1;
        match entries.last_mut() {
            Some(entry) if chars + size <= WORK_CHARS => {
                entry.operations.push(operation);
                chars += size;
            }
            _ => {
                entries.push(IndexOperations::new(vec![operation]));
                chars = size;
            }
        }
    }
    Ok(entries)
}
