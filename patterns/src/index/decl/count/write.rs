//! A count on the write path: every membership a write adds or drops is handed to the
//! worker as one operation in the write's outbox entry (no round trip of its own); the
//! counter is never touched in the write's transaction.

use tablekit_core::TableStore;

use super::record::CountTarget;
use crate::index::record::Target;
use crate::index::write::declaration::{Attempt, Step, WriteSteps};

/// Counts (`#[count]`).
pub(crate) struct Counts;

impl<S: TableStore + Clone + 'static> WriteSteps<S> for Counts {
    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        let added: Vec<Target> = attempt
            .new_targets
            .iter()
            .filter(|t| t.is::<CountTarget>() && !attempt.kept(t))
            .cloned()
            .collect();
        for target in &added {
            attempt.hand_on(target, true);
        }
        for target in attempt.dropped(Target::is::<CountTarget>) {
            attempt.hand_on(&target, false);
        }
        crate::index::write::declaration::nothing()
    }
}
