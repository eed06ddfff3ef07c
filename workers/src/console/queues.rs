//! The queues the console acts on: those tablekit declared that the broker holds. One
//! list serves the overview's default queues, pause, replay and redrive, the API's queue
//! paths and every refusal, which lists exactly the queues accepted.

use super::Console;
use crate::error::{Error, Result};
use crate::queue::Queue as _;

impl Console {
    /// The queues tablekit may have declared, without asking the broker: those the
    /// store's registry records (a worker's start, `tablekit-worker declare --store`) and,
    /// on SQLite, the queue's own registry (which holds tablekit's queues only); apart,
    /// those workers served (their history) — never a poison queue, a retry queue or a
    /// pause marker.
    pub(super) async fn candidates(&self) -> Result<Candidates> {
        let (recorded, served) = futures::join!(
            crate::activity::declared_queues(&self.store),
            crate::activity::queues_with_history(&self.store)
        );
        let mut declared = recorded?;
        if lists_only_its_own_queues(self.broker.inner())
            && let Some(listed) = self.broker.declared_queues().await?
        {
            declared.extend(listed);
        }
        let derived =
            |q: &String| crate::queue::is_poison_queue(q) || crate::queue::is_derived_queue(q);
        declared.retain(|q| !derived(q));
        declared.sort();
        declared.dedup();
        let mut served = served?;
        served.retain(|q| !derived(q));
        Ok(Candidates { declared, served })
    }

    /// Whether `queue` is one tablekit declared that the broker holds (one of
    /// [`Self::declared`]): the store read once and the broker asked of this queue only.
    ///
    /// # Errors
    /// The store's or broker's errors.
    pub(super) async fn is_declared(&self, queue: &str) -> Result<bool> {
        let Candidates { declared, served } = self.candidates().await?;
        if !declared.iter().chain(&served).any(|q| q == queue) {
            return Ok(false);
        }
        match self.broker.exists(queue).await {
            Ok(held) => Ok(held),
            Err(Error::InvalidQueueName { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The queues tablekit declared that the broker holds, sorted: the
    /// [candidates](Self::candidates), declared and served, each checked to exist — never
    /// a poison queue, a retry queue or pause marker, nor a queue tablekit did not declare
    /// (another client's queue on the same broker). The one list the console acts on:
    /// replays, redrives and pauses go only to these ([`Self::is_declared`]), and a
    /// refusal lists them.
    ///
    /// # Errors
    /// The store's or broker's errors.
    pub(super) async fn declared(&self) -> Result<Vec<String>> {
        let Candidates {
            declared: mut candidates,
            served,
        } = self.candidates().await?;
        candidates.extend(served);
        candidates.sort();
        candidates.dedup();
        let held =
            futures::future::join_all(candidates.iter().map(|q| self.broker.exists(q))).await;
        let mut declared = Vec::with_capacity(candidates.len());
        for (queue, held) in candidates.into_iter().zip(held) {
            match held {
                Ok(true) => declared.push(queue),
                Ok(false) | Err(Error::InvalidQueueName { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(declared)
    }
}

/// The queues tablekit may have declared ([`Console::candidates`]).
pub(super) struct Candidates {
    /// Recorded in the store, or in the SQLite queue's own registry.
    pub(super) declared: Vec<String>,
    /// Served by workers (their history).
    pub(super) served: Vec<String>,
}

/// Whether the broker's own list of queues holds tablekit's only (the SQLite queue's
/// registry; an Azure account or a RabbitMQ vhost may hold other clients' queues).
fn lists_only_its_own_queues(broker: &crate::queue::AnyQueue) -> bool {
    #[cfg(feature = "sqlite")]
    {
        matches!(broker, crate::queue::AnyQueue::Sqlite(_))
    }
    #[cfg(not(feature = "sqlite"))]
    {
        let _ = broker;
        false
    }
}
