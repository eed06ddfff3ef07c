//! The declaration of unique values (`#[unique]`) on the write path: before each plan the
//! write reserves the values its new value holds and its old one did not (step 1 of
//! [`super`]), for the version that plan records; the values it drops are released after
//! the commit by follow-up work.

use tablekit_core::TableStore;

use super::record::UniqueTarget;
use super::reserve_for;
use crate::error::Result;
use crate::index::record::Target;
use crate::index::write::declaration::{Attempt, Step, WriteSteps};

/// Unique values.
pub(crate) struct Unique;

impl Unique {
    /// Reserves the unique values the new value holds and the old one did not, for the
    /// attempt's version; a plan run again renews them with its own version and lease.
    async fn reserve<S: TableStore>(attempt: &mut Attempt<'_, S>) -> Result<()> {
        let new: Vec<&Target> = attempt
            .new_targets
            .iter()
            .filter(|t| t.is::<UniqueTarget>() && !attempt.old_targets.contains(t))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        // A write planned long after its intent (it stalled) may have been fenced and
        // undone meanwhile: it must not reserve after its undoing ran.
        attempt.check_not_undone().await?;
        let intent = attempt.intent.map(crate::consistency::Intent::id);
        for target in new {
            let Some(UniqueTarget { at, .. }) = target.get::<UniqueTarget>() else {
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
        let dropped = attempt.dropped(|t| t.is::<UniqueTarget>());
        for target in &dropped {
            attempt.hand_on(target, false);
        }
    }
}

impl<S: TableStore + Clone + 'static> WriteSteps<S> for Unique {
    fn shape<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        Box::pin(Unique::reserve(attempt))
    }

    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        Unique::release(attempt);
        crate::index::write::declaration::nothing()
    }
}
