//! The copies on the write path: in the primary's entity group transaction when a copy
//! lives in the same partition (an insert for a new copy, so a value another entity
//! holds is refused; a delete for a dropped one), as follow-up work for the worker
//! otherwise.

use std::any::Any;

use tablekit_core::{ErrorKind, TableStore, WriteOp};

use super::record::CopyTarget;
use crate::error::{Error, Result};
use crate::index::record::{EntityRef, Target, copy_of};
use crate::index::write::declaration::{Attempt, Role, Step, WriteSteps, delete};

/// Secondary indexes.
pub(crate) struct Copies;

/// The attribute that declares them.
pub(crate) const ATTRIBUTE: &str = "index";

/// A new copy in the transaction (an insert): a refusal means another entity holds its
/// slot.
struct NewCopy(String, EntityRef);

impl Copies {
    fn plan_copies<S: TableStore>(attempt: &mut Attempt<'_, S>) -> Result<()> {
        let source = attempt.source;
        let kind_property = &attempt.writer.layout.kind_property;
        for target in attempt.new_targets {
            let Some(CopyTarget {
                index,
                at,
                properties,
            }) = target.get::<CopyTarget>()
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
                    .push(WriteOp::InsertOrReplace(copy), Role::of(ATTRIBUTE));
            } else {
                attempt.plan.push(
                    WriteOp::Insert(copy),
                    Role::noted(ATTRIBUTE, NewCopy(index.clone(), at.clone())),
                );
            }
        }
        let dropped = attempt.dropped(Target::is::<CopyTarget>);
        for target in dropped {
            let Some(CopyTarget { at, .. }) = target.get::<CopyTarget>() else {
                continue;
            };
            if !target.is_atomic(source) {
                attempt.hand_on(&target, false);
            } else if !attempt.missing.contains(at) {
                attempt.plan.push(delete(at), Role::Dropped(at.clone()));
            }
        }
        Ok(())
    }
}

impl<S: TableStore + Clone + 'static> WriteSteps<S> for Copies {
    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        Box::pin(async move { Copies::plan_copies(attempt) })
    }

    fn refused(
        &self,
        note: Option<&(dyn Any + Send + Sync)>,
        error: &tablekit_core::Error,
    ) -> Option<Result<()>> {
        let NewCopy(index, at) = note?.downcast_ref::<NewCopy>()?;
        // Another entity holds the value in a same-partition index.
        (error.kind() == ErrorKind::AlreadyExists).then(|| {
            Err(Error::IndexValueTaken {
                index: index.clone(),
                table: at.table.clone(),
                partition_key: at.partition_key.clone(),
                row_key: at.row_key.clone(),
            })
        })
    }
}
