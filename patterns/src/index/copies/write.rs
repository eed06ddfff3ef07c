//! The copies on the write path: in the primary's entity group transaction when a copy
//! lives in the same partition (an insert for a new copy, so a value another entity
//! holds is refused; a delete for a dropped one), as follow-up work for the worker
//! otherwise.

use std::collections::HashSet;

use tablekit_core::{ErrorKind, IfMatch, TableStore, WriteOp};

use super::super::record::{EntityRef, Target, copy_of};
use super::super::write::declaration::{Attempt, Role, Step, WriteSteps};
use super::record::CopyTarget;
use crate::error::{Error, Result};

/// Secondary indexes.
pub(crate) struct Copies;

impl Copies {
    fn plan_copies<S: TableStore>(attempt: &mut Attempt<'_, S>) -> Result<()> {
        let source = attempt.source;
        let kind_property = &attempt.writer.layout.kind_property;
        for target in attempt.new_targets {
            let Target::Copy(CopyTarget {
                index,
                at,
                properties,
            }) = target
            else {
                continue;
            };
            if !target.is_atomic(source) {
                attempt.hand_on(target, true);
                continue;
            }
            let Some(primary) = &attempt.entity else {
                continue;
            };
            let copy = copy_of(
                primary,
                source,
                attempt.version,
                index,
                at,
                properties.as_deref(),
                kind_property,
            )?;
            if attempt.kept(target) {
                attempt
                    .plan
                    .push(WriteOp::InsertOrReplace(copy), Role::KeptCopy);
            } else {
                attempt.plan.push(
                    WriteOp::Insert(copy),
                    Role::NewCopy(index.clone(), at.clone()),
                );
            }
        }
        let dropped = attempt.dropped(|t| matches!(t, Target::Copy(..)));
        for target in dropped {
            let Target::Copy(CopyTarget { at, .. }) = &target else {
                continue;
            };
            if !target.is_atomic(source) {
                attempt.hand_on(&target, false);
            } else if !attempt.missing.contains(at) {
                attempt.plan.push(delete(at), Role::DroppedCopy(at.clone()));
            }
        }
        Ok(())
    }
}

/// The unconditional delete of an entry at `at` (a dropped copy or link).
pub(crate) fn delete(at: &EntityRef) -> WriteOp {
    WriteOp::Delete {
        partition_key: at.partition_key.clone(),
        row_key: at.row_key.clone(),
        if_match: IfMatch::Any,
    }
}

impl<S: TableStore + Clone + 'static> WriteSteps<S> for Copies {
    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        Box::pin(async move { Copies::plan_copies(attempt) })
    }

    fn refused(
        &self,
        role: &Role,
        error: &tablekit_core::Error,
        missing: &mut HashSet<EntityRef>,
    ) -> Option<Result<()>> {
        match (role, error.kind()) {
            // Another entity holds the value in a same-partition index.
            (Role::NewCopy(index, at), ErrorKind::AlreadyExists) => {
                Some(Err(Error::IndexValueTaken {
                    index: index.clone(),
                    table: at.table.clone(),
                    partition_key: at.partition_key.clone(),
                    row_key: at.row_key.clone(),
                }))
            }
            // A dropped copy (or link) already gone: the next plan leaves it out.
            (Role::DroppedCopy(at), ErrorKind::NotFound) => {
                missing.insert(at.clone());
                Some(Ok(()))
            }
            _ => None,
        }
    }
}
