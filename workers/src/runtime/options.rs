//! [`WorkerOptions`]: the settings of a [`Worker`] besides its [`WorkerConfig`].

use std::marker::PhantomData;

use super::{Worker, WorkerConfig};
use crate::activity::Activity;
use crate::operation::Registry;
use crate::queue::Queue;

/// The settings of a [`Worker`], given in any order, then built on a queue, the registry
/// of its handlers and the [`WorkerConfig`] of its deliveries with
/// [`build`](Self::build) (no I/O: [`Worker::run`] declares the queue). Each setter given
/// twice keeps the last value.
///
/// ```no_run
/// use tablekit_core::AnyStore;
/// use tablekit_workers::activity::Activity;
/// use tablekit_workers::queue::sqlite::SqliteQueue;
/// use tablekit_workers::{Registry, Worker, WorkerConfig};
///
/// # async fn demo() -> tablekit_workers::Result<()> {
/// let store = AnyStore::create("sqlite:app.db").await?;
/// let queue = SqliteQueue::open("queue.db").await?;
/// Worker::options()
///     .activity(Activity::new(store))
///     .build(queue, Registry::new(), WorkerConfig::new("archive"))
///     .run(tablekit_workers::runtime::shutdown_signal())
///     .await?;
/// # Ok(()) }
/// ```
pub struct WorkerOptions<Q> {
    activity: Option<Activity>,
    queue: PhantomData<fn() -> Q>,
}

impl<Q> std::fmt::Debug for WorkerOptions<Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerOptions")
            .field("activity", &self.activity)
            .finish()
    }
}

impl<Q> Default for WorkerOptions<Q> {
    fn default() -> Self {
        WorkerOptions {
            activity: None,
            queue: PhantomData,
        }
    }
}

impl<Q: Queue + Clone> WorkerOptions<Q> {
    /// The defaults: deliveries counted in no [`Activity`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts the worker's deliveries in the process's `activity` (the history and the
    /// heartbeat the console shows; default none): while the worker runs, the activity's
    /// task writes them to its store. A store error there is logged and never stops the
    /// worker.
    pub fn activity(mut self, activity: Activity) -> Self {
        self.activity = Some(activity);
        self
    }

    /// The worker of `config.queue` on `queue`, running the handlers of `registry`,
    /// without I/O.
    pub fn build(self, queue: Q, registry: Registry, config: WorkerConfig) -> Worker<Q> {
        Worker {
            queue,
            registry,
            config,
            activity: self.activity,
        }
    }
}
