//! The declaration of unique values (`#[unique]`) on the write path: before each plan the
//! write reserves the values its new value holds and its old one did not (step 1 of
//! [`super`]), for the version that plan records; the values it drops are released after
//! the commit by follow-up work.

use tablekit_core::{Entity, TableStore, Value};

use super::super::audit::{AuditReport, Auditor};
use super::super::operation::{Applied, IndexApplier, IndexOperation};
use super::super::reclaim::Reclaim;
use super::super::record::{EntityRef, MARKER_PROPERTY, Target};
use super::super::write::declaration::{Applying, Attempt, Declaration, Step};
use super::record::ReservationChange;
use super::record::UniqueTarget;
use super::reserve_for;
use crate::error::Result;

/// Unique values.
pub(crate) struct Unique;

impl Unique {
    /// Reserves the unique values the new value holds and the old one did not, for the
    /// attempt's version; a plan run again renews them with its own version and lease.
    async fn reserve<S: TableStore>(attempt: &mut Attempt<'_, S>) -> Result<()> {
        let new: Vec<&Target> = attempt
            .new_targets
            .iter()
            .filter(|t| matches!(t, Target::Unique(..)) && !attempt.old_targets.contains(t))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        // A write planned long after its intent (it stalled) may have been fenced and
        // undone meanwhile: it must not reserve after its undoing ran.
        attempt.check_not_undone().await?;
        let intent = attempt.intent.map(crate::consistency::Intent::id);
        for target in new {
            let Target::Unique(UniqueTarget { at, .. }) = target else {
                continue;
            };
            reserve_for(
                attempt.writer.store(),
                at,
                attempt.source,
                attempt.version,
                attempt.writer.unique_lease,
                intent.as_deref(),
            )
            .await?;
        }
        // It may also have stalled while it reserved (a pause, a backoff across a jump of
        // the clock): fenced meanwhile, its undoing may have run before its reservation.
        // It stops; abandoning it records the undoing again, which takes the reservation.
        attempt.check_not_undone().await
    }

    /// The values the new value drops are released after the commit.
    fn release<S: TableStore>(attempt: &mut Attempt<'_, S>) {
        let dropped = attempt.dropped(|t| matches!(t, Target::Unique(..)));
        for target in &dropped {
            attempt.hand_on(target, false);
        }
    }
}

impl<S: TableStore + Clone + 'static> Declaration<S> for Unique {
    fn shape<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        Box::pin(Unique::reserve(attempt))
    }

    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        Unique::release(attempt);
        super::super::write::declaration::nothing()
    }

    fn apply<'a>(
        &'a self,
        applier: &'a IndexApplier<S>,
        operation: &'a IndexOperation,
    ) -> Option<Applying<'a>> {
        match operation {
            IndexOperation::ReleaseUnique(ReservationChange {
                source,
                version,
                at,
                ..
            }) => Some(Box::pin(async move {
                Ok(
                    if super::release(applier.store(), at, source, *version).await? {
                        Applied::Changed
                    } else {
                        Applied::Unchanged
                    },
                )
            })),
            IndexOperation::ClaimUnique(ReservationChange {
                source,
                version,
                at,
                ..
            }) => Some(Box::pin(applier.claim_unique(source, *version, at))),
            _ => None,
        }
    }

    fn check<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        _primary: &'a Entity,
        source: &'a EntityRef,
        version: i64,
        target: &'a Target,
        report: &'a mut AuditReport,
    ) -> Option<Step<'a>> {
        let Target::Unique(UniqueTarget { name, at }) = target else {
            return None;
        };
        Some(Box::pin(super::audit::check(
            auditor,
            source,
            version,
            (name, at),
            report,
        )))
    }

    fn claimed<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        table: &'a str,
        stored: &'a Entity,
        report: &'a mut AuditReport,
    ) -> Option<Step<'a>> {
        let reservation = matches!(stored.properties.get(MARKER_PROPERTY), Some(Value::String(k)) if k == super::RESERVATION_KIND);
        reservation
            .then(|| Box::pin(super::audit::claimed(auditor, table, stored, report)) as Step<'a>)
    }

    fn backfill<'a>(
        &'a self,
        applier: &'a IndexApplier<S>,
        source: &'a EntityRef,
        version: i64,
        target: &'a Target,
        present: bool,
        _kind_property: &'a str,
    ) -> Option<Applying<'a>> {
        let Target::Unique(UniqueTarget { at, .. }) = target else {
            return None;
        };
        Some(Box::pin(async move {
            if present {
                applier.claim_unique(source, version, at).await
            } else {
                Ok(
                    if super::release(applier.store(), at, source, version).await? {
                        Applied::Changed
                    } else {
                        Applied::Unchanged
                    },
                )
            }
        }))
    }

    fn undo<'a>(&'a self, applier: &'a IndexApplier<S>, undoing: &'a Reclaim) -> Step<'a> {
        Box::pin(async move {
            for at in &undoing.reservations {
                super::release_intent(applier.store(), at, &undoing.source).await?;
            }
            Ok(())
        })
    }
}
