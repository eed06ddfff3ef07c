//! The queue workers of the simulated world: the index workers, the change consumers, and
//! the delivery loop every worker runs (the workers' own delivery handling).

use std::rc::Rc;
use std::time::Duration;

use tablekit_workers::changes::Changes;
use tablekit_workers::queue::{ConsumeOptions, Consumer, Delivery, Queue};
use tablekit_workers::{Registry, WorkerConfig, handle_delivery};

use super::trace::describe;
use super::written::Written;
use super::{Store, World};

fn worker_config(queue: &str) -> WorkerConfig {
    let mut config = WorkerConfig::new(queue);
    config.max_deliveries = 20;
    config.base_backoff = Duration::from_millis(50);
    config.max_backoff = Duration::from_secs(2);
    config.lease = Duration::from_secs(30);
    config
}

/// Deliveries a simulated worker handles at once, as the worker runtime does (their
/// writes to one partition share transactions: see `CoalescingStore`).
const DELIVERIES_AT_ONCE: usize = 4;

/// Consumes `queue` with the workers' own delivery handling, up to
/// [`DELIVERIES_AT_ONCE`] deliveries at once.
pub(super) async fn consume(world: &World, queue: &str, registry: &Registry) {
    use futures::StreamExt;
    let config = worker_config(queue);
    let options = ConsumeOptions {
        prefetch: u16::try_from(DELIVERIES_AT_ONCE).unwrap_or(1),
        lease: config.lease,
    };
    // Through the poison table, as the worker runtime consumes: a message given up on is
    // recorded in the store's table, and left on the queue's poison lane only when that
    // fails.
    let Ok(mut consumer) = world.poison.consume(queue, options).await else {
        return;
    };
    let mut in_flight = futures::stream::FuturesUnordered::new();
    loop {
        // The queue's `next` takes a message only when it returns it: dropping it while
        // a delivery finishes loses nothing.
        let next = if in_flight.len() < DELIVERIES_AT_ONCE {
            tokio::select! {
                biased;
                Some(()) = in_flight.next(), if !in_flight.is_empty() => continue,
                next = consumer.next() => next,
            }
        } else {
            in_flight.next().await;
            continue;
        };
        let Ok(Some(delivery)) = next else {
            break;
        };
        let stall = world.queue.stall(delivery.inner());
        in_flight.push(crate::stall::stalled(
            stall,
            deliver(world, queue, registry, &config, delivery),
        ));
    }
    while in_flight.next().await.is_some() {}
}

/// Handles one delivery and notes how it was settled.
async fn deliver<D: Delivery>(
    world: &World,
    queue: &str,
    registry: &Registry,
    config: &WorkerConfig,
    delivery: D,
) {
    let about = describe(&delivery.received().body);
    let busy = world.busy("a delivery");
    let report = handle_delivery(delivery, registry, config).await;
    drop(busy);
    let how = if report.processed > 0 {
        "processed"
    } else if report.retried > 0 {
        "retried"
    } else if report.poisoned > 0 {
        "poisoned"
    } else {
        "unsettled"
    };
    world.log(format!("{queue}: {about}: {how}"));
    if report.poisoned > 0 {
        world.log(format!("{queue}: a message was poisoned"));
    }
}

pub(super) async fn index_worker(world: Rc<World>, store: Store) {
    let registry = tablekit_workers::index::register(
        Registry::new(),
        crate::stall::StallingStore::new(store),
        Some(world.blobs.clone()),
    );
    consume(&world, "index", &registry).await;
}

pub(super) async fn change_consumer<E: Written>(world: Rc<World>, _store: Store) {
    let events = world.events.clone();
    let registry = Changes::<E>::registry(move |change| {
        let rev = match change.change {
            tablekit_patterns::changes::ChangeKind::Delete => None,
            _ => Some(change.value.rev()),
        };
        if let Ok(mut events) = events.lock() {
            events.push((
                (E::NAME, change.partition_key, change.row_key),
                change.version,
                rev,
            ));
        }
        async { Ok(()) }
    });
    let queue = E::schema().changes().unwrap_or_default();
    consume(&world, queue, &registry).await;
}
