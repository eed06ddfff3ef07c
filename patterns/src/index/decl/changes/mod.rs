//! The declaration of change events (`#[entity(changes = "…")]`) on the write path: a
//! type that publishes its changes records each write's event (insert, update or delete,
//! at the write's version) as follow-up work in the write's transaction, so the event is
//! sent after the commit, once at least (`crate::changes`).

use tablekit_core::TableStore;

use crate::error::Result;
use crate::index::record::{DeclaredLayout, Elsewhere, LaysOut};
use crate::index::write::declaration::{Attempt, Step, WriteSteps, nothing};

/// Change events.
pub(crate) struct Changes;

impl<S: TableStore + Clone + 'static> WriteSteps<S> for Changes {
    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        let layout = &attempt.writer.layout;
        let Some(queue) = layout.changes() else {
            return nothing();
        };
        let Some(event) = attempt.change_event(queue) else {
            return nothing();
        };
        Box::pin(async move {
            attempt.work_operations += 1;
            attempt.work.push(event.envelope()?);
            Ok(())
        })
    }
}

/// How `changes` lays out: no target and no table of its own, its events handed to a
/// queue.
struct Queue;

impl LaysOut for Queue {
    fn check(&self, declared: &DeclaredLayout) -> Result<()> {
        declared.needs::<String>("queue").map(drop)
    }

    fn follow_up(&self, declared: &DeclaredLayout, _at: &Elsewhere<'_>) -> Option<String> {
        let queue = declared.setting("queue")?;
        Some(format!("change events: queue `{queue}`"))
    }
}

crate::index::registry::roles::declaration! {
    Changes {
        attribute: "changes",
        steps: [write],
        targets: [],
        operations: [],
        lays_out: Queue,
    }
}
