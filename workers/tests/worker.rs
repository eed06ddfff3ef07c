//! The worker runtime on both queues: poison after the delivery limit, bad messages
//! poisoned with their reason while the worker keeps going, duplicates converging,
//! graceful shutdown.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tablekit_core::{Entity, MemoryStore, TableStore};
use tablekit_workers::archive::ArchiveOperation;
use tablekit_workers::queue::Queue;
use tablekit_workers::{Envelope, Operation, OperationError, Registry, Worker, WorkerConfig};
use tokio::sync::oneshot;

#[derive(Serialize, Deserialize)]
struct Flaky {
    note: String,
}

impl Operation for Flaky {
    const KIND: &'static str = "flaky";
    const VERSION: u32 = 1;
}

#[derive(Serialize, Deserialize)]
struct Slow {
    millis: u64,
}

impl Operation for Slow {
    const KIND: &'static str = "slow";
    const VERSION: u32 = 1;
}

fn config(queue: &str) -> WorkerConfig {
    WorkerConfig {
        max_deliveries: 3,
        base_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(80),
        shutdown_timeout: Duration::from_secs(5),
        lease: Duration::from_secs(5),
        ..WorkerConfig::new(queue)
    }
}

async fn send<Q: Queue, O: Operation>(queue: &Q, name: &str, operation: &O) -> Envelope {
    let envelope = Envelope::new(operation).unwrap();
    queue
        .send(
            name,
            &envelope.id.to_string(),
            &envelope.to_bytes().unwrap(),
        )
        .await
        .unwrap();
    envelope
}

/// Runs a worker until `done` holds (checked every 50 ms, for at most 30 s).
async fn run_until<Q, F, Fut>(
    queue: Q,
    registry: Registry,
    config: WorkerConfig,
    done: F,
) -> tablekit_workers::WorkerReport
where
    Q: Queue + Clone,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let (stop, stopped) = oneshot::channel::<()>();
    let worker = tokio::spawn(Worker::new(queue, registry, config).run(async move {
        let _ = stopped.await;
    }));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker did not finish in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(());
    worker.await.unwrap().unwrap()
}

pub async fn a_message_that_keeps_failing_is_poisoned_after_exactly_the_limit<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let registry = Registry::new().register(move |_: Flaky| {
        let calls = counted.clone();
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(OperationError::Retryable("the service is down".into()))
        }
    });
    queue
        .declare(&name, &config(&name).queue_options())
        .await
        .unwrap();
    let envelope = send(&queue, &name, &Flaky { note: "x".into() }).await;
    let q = queue.clone();
    let n = name.clone();
    let report = run_until(queue.clone(), registry, config(&name), || {
        let (q, n) = (q.clone(), n.clone());
        async move { !q.poison_list(&n, 10).await.unwrap().is_empty() }
    })
    .await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "exactly max_deliveries attempts"
    );
    assert_eq!(
        (report.retried, report.poisoned, report.processed),
        (2, 1, 0)
    );
    let poisoned = queue.poison_list(&name, 10).await.unwrap();
    assert_eq!(poisoned.len(), 1);
    assert_eq!(poisoned[0].id, envelope.id.to_string());
    assert!(
        poisoned[0].reason.contains("failed 3 times"),
        "{}",
        poisoned[0].reason
    );
    assert!(
        poisoned[0].reason.contains("the service is down"),
        "{}",
        poisoned[0].reason
    );
    assert_eq!(queue.stats(&name).await.unwrap().waiting, 0);
}

pub async fn bad_messages_are_poisoned_with_their_reason_and_the_worker_keeps_going<
    Q: Queue + Clone,
>(
    queue: Q,
    name: String,
) {
    let store = MemoryStore::new();
    store.create_table("Current").await.unwrap();
    store
        .insert("Current", Entity::new("Sales", "e1").with("Name", "Ann"))
        .await
        .unwrap();
    queue
        .declare(&name, &config(&name).queue_options())
        .await
        .unwrap();
    queue.send(&name, "garbage", b"{not json").await.unwrap();
    let mut unknown_kind = Envelope::new(&Flaky { note: "x".into() }).unwrap();
    unknown_kind.kind = "teleport".into();
    queue
        .send(&name, "unknown-kind", &unknown_kind.to_bytes().unwrap())
        .await
        .unwrap();
    let archive = ArchiveOperation {
        source_table: "Current".into(),
        target_table: "Archive".into(),
        partition_key: "Sales".into(),
        row_key: "e1".into(),
    };
    let mut future_version = Envelope::new(&archive).unwrap();
    future_version.version = 9;
    queue
        .send(&name, "future-version", &future_version.to_bytes().unwrap())
        .await
        .unwrap();
    let mut bad_payload = Envelope::new(&archive).unwrap();
    bad_payload.payload = serde_json::json!({"source_table": 5});
    queue
        .send(&name, "bad-payload", &bad_payload.to_bytes().unwrap())
        .await
        .unwrap();
    send(&queue, &name, &archive).await;

    let (q, n) = (queue.clone(), name.clone());
    let report = run_until(
        queue.clone(),
        tablekit_workers::cli::registry(tablekit_core::AnyStore::Memory(store.clone())),
        config(&name),
        || {
            let (q, n) = (q.clone(), n.clone());
            async move {
                let stats = q.stats(&n).await.unwrap();
                stats.poisoned == 4 && stats.waiting == 0
            }
        },
    )
    .await;
    assert_eq!(
        (report.processed, report.poisoned, report.retried),
        (1, 4, 0)
    );
    let mut poisoned = queue.poison_list(&name, 10).await.unwrap();
    poisoned.sort_by(|a, b| a.id.cmp(&b.id));
    let reasons: Vec<(&str, &str)> = poisoned
        .iter()
        .map(|p| (p.id.as_str(), p.reason.as_str()))
        .collect();
    assert!(
        reasons[0].0 == "bad-payload" && reasons[0].1.contains("invalid `archive` payload"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].0 == "future-version" && reasons[1].1.contains("unknown version 9"),
        "{reasons:?}"
    );
    assert!(
        reasons[2].0 == "garbage" && reasons[2].1.contains("malformed operation envelope"),
        "{reasons:?}"
    );
    assert!(
        reasons[3].0 == "unknown-kind"
            && reasons[3].1.contains("unknown operation kind `teleport`"),
        "{reasons:?}"
    );
    assert!(
        poisoned.iter().all(|p| p.delivery_count == 1),
        "poisoned without retries"
    );
    assert!(
        store
            .get("Archive", "Sales", "e1", None)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .get("Current", "Sales", "e1", None)
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn duplicate_archive_messages_converge<Q: Queue + Clone>(queue: Q, name: String) {
    let store = MemoryStore::new();
    store.create_table("Current").await.unwrap();
    for i in 0..20 {
        store
            .insert(
                "Current",
                Entity::new("Ops", format!("e{i:02}")).with("N", i),
            )
            .await
            .unwrap();
    }
    queue
        .declare(&name, &config(&name).queue_options())
        .await
        .unwrap();
    for i in 0..20 {
        let envelope = Envelope::new(&ArchiveOperation {
            source_table: "Current".into(),
            target_table: "Archive".into(),
            partition_key: "Ops".into(),
            row_key: format!("e{i:02}"),
        })
        .unwrap();
        // Every message twice, as an at-least-once broker may deliver it.
        for _ in 0..2 {
            queue
                .send(
                    &name,
                    &envelope.id.to_string(),
                    &envelope.to_bytes().unwrap(),
                )
                .await
                .unwrap();
        }
    }
    let (q, n) = (queue.clone(), name.clone());
    let report = run_until(
        queue.clone(),
        tablekit_workers::cli::registry(tablekit_core::AnyStore::Memory(store.clone())),
        config(&name),
        || {
            let (q, n) = (q.clone(), n.clone());
            async move { q.stats(&n).await.unwrap().waiting == 0 }
        },
    )
    .await;
    assert_eq!(report.processed, 40);
    let archived = store
        .query_all("Archive", tablekit_core::Query::new())
        .await
        .unwrap();
    assert_eq!(archived.len(), 20);
    assert!(
        store
            .query_all("Current", tablekit_core::Query::new())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(queue.stats(&name).await.unwrap().poisoned, 0);
}

pub async fn shutdown_lets_in_flight_work_finish_and_leaves_the_rest_queued<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    let finished = Arc::new(AtomicU32::new(0));
    let counted = finished.clone();
    let registry = Registry::new().register(move |slow: Slow| {
        let finished = counted.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(slow.millis)).await;
            finished.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let config = WorkerConfig {
        concurrency: 1,
        ..config(&name)
    };
    queue.declare(&name, &config.queue_options()).await.unwrap();
    for _ in 0..3 {
        send(&queue, &name, &Slow { millis: 400 }).await;
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let worker = tokio::spawn(
        Worker::new(queue.clone(), registry, config).run(async move {
            let _ = stopped.await;
        }),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = stop.send(());
    let report = worker.await.unwrap().unwrap();
    assert_eq!(
        report.processed, 1,
        "the in-flight message finished and was acked"
    );
    assert_eq!(finished.load(Ordering::SeqCst), 1);
    // A delivery the broker had pushed to the closing consumer is requeued as the channel
    // closes, which the broker may count a moment later.
    let mut stats = queue.stats(&name).await.unwrap();
    for _ in 0..40 {
        if stats.waiting == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        stats = queue.stats(&name).await.unwrap();
    }
    assert_eq!(stats.waiting, 2, "the others stay queued");
    assert_eq!(stats.poisoned, 0);
}

pub async fn a_panicking_handler_is_a_failed_attempt_and_the_worker_goes_on<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    let registry = Registry::new().register(|flaky: Flaky| async move {
        if flaky.note == "panic" {
            panic!("a bug in the handler");
        }
        Ok(())
    });
    queue
        .declare(&name, &config(&name).queue_options())
        .await
        .unwrap();
    send(
        &queue,
        &name,
        &Flaky {
            note: "panic".into(),
        },
    )
    .await;
    send(
        &queue,
        &name,
        &Flaky {
            note: "fine".into(),
        },
    )
    .await;
    let (q, n) = (queue.clone(), name.clone());
    let report = run_until(queue.clone(), registry, config(&name), || {
        let (q, n) = (q.clone(), n.clone());
        async move {
            let stats = q.stats(&n).await.unwrap();
            stats.poisoned == 1 && stats.waiting == 0
        }
    })
    .await;
    assert_eq!(
        (report.processed, report.retried, report.poisoned),
        (1, 2, 1)
    );
    let poisoned = queue.poison_list(&name, 10).await.unwrap();
    assert!(
        poisoned[0].reason.contains("the handler panicked"),
        "{}",
        poisoned[0].reason
    );
}

/// A paused queue's worker takes nothing new: messages sent meanwhile wait, counted, and are
/// processed once the queue is resumed.
pub async fn a_paused_queue_waits_until_resumed<Q: Queue + Clone>(queue: Q, name: String) {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let registry = Registry::new().register(move |_: Flaky| {
        let calls = counted.clone();
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let config = WorkerConfig {
        pause_check: Duration::from_millis(100),
        ..config(&name)
    };
    queue.declare(&name, &config.queue_options()).await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let worker = tokio::spawn(
        Worker::new(queue.clone(), registry, config).run(async move {
            let _ = stopped.await;
        }),
    );
    let until = async |done: &dyn Fn() -> bool| {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(tokio::time::Instant::now() < deadline, "not within 30 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    for _ in 0..3 {
        send(
            &queue,
            &name,
            &Flaky {
                note: "before".into(),
            },
        )
        .await;
    }
    until(&|| calls.load(Ordering::SeqCst) == 3).await;

    queue.set_paused(&name, true).await.unwrap();
    assert!(queue.paused(&name).await.unwrap());
    // Well past the worker's pause check.
    tokio::time::sleep(Duration::from_millis(600)).await;
    for _ in 0..4 {
        send(
            &queue,
            &name,
            &Flaky {
                note: "while paused".into(),
            },
        )
        .await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "nothing handled while paused"
    );
    assert_eq!(queue.stats(&name).await.unwrap().waiting, 4);

    queue.set_paused(&name, false).await.unwrap();
    assert!(!queue.paused(&name).await.unwrap());
    until(&|| calls.load(Ordering::SeqCst) == 7).await;
    let _ = stop.send(());
    let report = worker.await.unwrap().unwrap();
    assert_eq!(
        (report.processed, report.retried, report.poisoned),
        (7, 0, 0)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 7, "each handled once");
}

macro_rules! on_every_queue {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            use super::*;
            use tablekit_workers::queue::sqlite::SqliteQueue;

            $(
                #[tokio::test]
                async fn $case() {
                    let dir = tempfile::tempdir().unwrap();
                    let queue = SqliteQueue::open(dir.path().join("queue.db")).await.unwrap();
                    super::$case(queue, support::unique(stringify!($case))).await;
                }
            )*
        }

        mod rabbitmq {
            use super::*;
            use tablekit_workers::queue::rabbit::RabbitQueue;

            $(
                #[tokio::test]
                async fn $case() {
                    let Some(url) = support::amqp_url() else { return };
                    let queue = RabbitQueue::connect(&url).await.unwrap();
                    let name = support::unique(stringify!($case));
                    super::$case(queue.clone(), name.clone()).await;
                    queue
                        .delete_queue(&name, &config(&name).queue_options())
                        .await
                        .unwrap();
                }
            )*
        }

        #[cfg(feature = "azure")]
        mod azure {
            use super::*;
            use tablekit_workers::queue::azure::AzureQueue;

            $(
                #[tokio::test]
                async fn $case() {
                    let Some(connection) = support::azure_queues() else { return };
                    let queue = AzureQueue::connect(&connection).unwrap();
                    let name = support::azure_name(stringify!($case));
                    super::$case(queue.clone(), name.clone()).await;
                    queue.delete_queue(&name).await.unwrap();
                }
            )*
        }
    };
}

on_every_queue!(
    a_message_that_keeps_failing_is_poisoned_after_exactly_the_limit,
    bad_messages_are_poisoned_with_their_reason_and_the_worker_keeps_going,
    duplicate_archive_messages_converge,
    shutdown_lets_in_flight_work_finish_and_leaves_the_rest_queued,
    a_panicking_handler_is_a_failed_attempt_and_the_worker_goes_on,
    a_paused_queue_waits_until_resumed,
);

/// A log line kept by [`hostile_ids_and_reasons_are_logged_escaped`].
/// A message id holding a line break and a right-to-left override cannot forge a log
/// line or turn the text around it: the worker's logs show both as escapes.
#[tokio::test]
async fn hostile_ids_and_reasons_are_logged_escaped() {
    let captured = support::logs();

    let dir = tempfile::tempdir().unwrap();
    let queue = tablekit_workers::queue::sqlite::SqliteQueue::open(dir.path().join("queue.db"))
        .await
        .unwrap();
    let name = support::unique("hostile-ids");
    queue
        .declare(&name, &config(&name).queue_options())
        .await
        .unwrap();
    let id = "evil\n2024-01-01T00:00:00Z  INFO forged: all clear\u{202E}gnp.exe";
    queue.send(&name, id, b"{not json").await.unwrap();
    let (q, n) = (queue.clone(), name.clone());
    run_until(queue.clone(), Registry::new(), config(&name), || {
        let (q, n) = (q.clone(), n.clone());
        async move { q.stats(&n).await.unwrap().poisoned == 1 }
    })
    .await;

    let logs = captured.text();
    let poisoned = logs
        .lines()
        .find(|line| line.contains("poisoned") && line.contains(&name))
        .unwrap_or_else(|| panic!("no poisoned line in:\n{logs}"));
    assert!(
        poisoned.contains("evil\\n2024-01-01T00:00:00Z  INFO forged: all clear\\u{202E}gnp.exe"),
        "{poisoned}"
    );
    assert!(
        !logs.lines().any(|line| line.starts_with("2024-01-01")),
        "a forged line:\n{logs}"
    );
    assert!(!logs.contains('\u{202E}'), "{logs}");
}

/// The pause check is off the delivery path: a worker that handles 50 messages asks its
/// queue whether it is paused once per `pause_check` (here: once), never per delivery —
/// counted with the round-trip model.
#[tokio::test]
async fn the_pause_check_adds_no_queue_call_per_delivery() {
    use tablekit_core::roundtrip::{Latency, RoundTrips};
    use tablekit_workers::queue::roundtrip::RoundTripQueue;

    let dir = tempfile::tempdir().unwrap();
    let trips = RoundTrips::new(Latency::None);
    let queue = RoundTripQueue::new(
        tablekit_workers::queue::sqlite::SqliteQueue::open(dir.path().join("queue.db"))
            .await
            .unwrap(),
        trips.clone(),
    );
    let name = support::unique("pause-calls");
    queue
        .declare(&name, &config(&name).queue_options())
        .await
        .unwrap();
    for _ in 0..50 {
        send(&queue, &name, &Flaky { note: "n".into() }).await;
    }
    let handled = Arc::new(AtomicU32::new(0));
    let counted = handled.clone();
    let registry = Registry::new().register(move |_: Flaky| {
        let handled = counted.clone();
        async move {
            handled.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let before = trips.counts();
    let config = WorkerConfig {
        pause_check: Duration::from_secs(3600),
        ..config(&name)
    };
    run_until(queue.clone(), registry, config, || {
        let handled = handled.clone();
        async move { handled.load(Ordering::SeqCst) == 50 }
    })
    .await;
    let after = trips.counts();
    assert_eq!(after.settles - before.settles, 50);
    eprintln!(
        "queue administration calls: {}",
        after.queue_admin - before.queue_admin
    );
    assert_eq!(
        after.queue_admin - before.queue_admin,
        3,
        "the worker's declare, its consume and one pause check"
    );
}
