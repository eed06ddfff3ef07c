//! `run`'s queues: which it serves, and a worker for each until shutdown or until one
//! stops.

use super::{Error, Registry, Result, Worker, WorkerConfig, WorkerReport};
use crate::queue::Queue;

/// The queues `run` serves: those named, each once in the order named; else every queue
/// the registry's operations travel on.
///
/// # Errors
/// [`Error::Config`] when none is named and the registry has no operation.
pub(super) fn served_queues(named: &[String], registry: &Registry) -> Result<Vec<String>> {
    let mut queues: Vec<String> = if named.is_empty() {
        registry.queues().into_iter().map(str::to_owned).collect()
    } else {
        named.to_vec()
    };
    let mut seen = std::collections::HashSet::new();
    queues.retain(|name| seen.insert(name.clone()));
    if queues.is_empty() {
        return Err(Error::Config(
            "the worker registers no operation, so it serves no queue: name one with --queue"
                .to_owned(),
        ));
    }
    Ok(queues)
}

/// Runs a worker of each of `queues` over `broker` and `registry` until `shutdown`, or
/// until one of them stops (then the others are stopped too, their in-flight deliveries
/// given the shutdown timeout); their reports added up. Only the first reports the
/// process's hot partitions. With `activity`, each worker counts its deliveries in it.
///
/// # Errors
/// The first error of a worker, once every worker has stopped.
// Built without a queue backend, `AnyQueue` has no variant: nothing after the spawn runs.
#[cfg_attr(
    not(any(feature = "rabbitmq", feature = "sqlite", feature = "azure")),
    allow(unused_variables, unused_mut)
)]
pub(super) async fn serve<Q: Queue + Clone>(
    broker: Q,
    registry: Registry,
    config: &WorkerConfig,
    queues: &[String],
    activity: Option<crate::activity::Activity>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<WorkerReport> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut workers = tokio::task::JoinSet::new();
    for (i, name) in queues.iter().enumerate() {
        let config = WorkerConfig {
            queue: name.clone(),
            hot_partitions: config.hot_partitions && i == 0,
            // The other workers' queues are this process's own: one looks at the rest.
            unconsumed_after: config.unconsumed_after.filter(|_| i == 0),
            ..config.clone()
        };
        let mut stopped = stopped.clone();
        let options = match &activity {
            Some(activity) => Worker::options().activity(activity.clone()),
            None => Worker::options(),
        };
        let worker = options.build(broker.clone(), registry.clone(), config);
        workers.spawn(worker.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        }));
    }
    tokio::pin!(shutdown);
    let (mut total, mut failure) = (WorkerReport::default(), None);
    loop {
        let joined = tokio::select! {
            () = &mut shutdown, if !*stop.borrow() => {
                let _ = stop.send(true);
                continue;
            }
            joined = workers.join_next() => joined,
        };
        let _ = stop.send(true);
        match joined {
            None => break,
            Some(Ok(Ok(report))) => {
                total.processed += report.processed;
                total.retried += report.retried;
                total.poisoned += report.poisoned;
                total.lost_leases += report.lost_leases;
            }
            Some(Ok(Err(e))) => {
                failure.get_or_insert(e);
            }
            Some(Err(e)) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(e) => tracing::error!(error = %e, "a worker task was cancelled"),
            },
        }
    }
    failure.map_or(Ok(total), Err)
}
