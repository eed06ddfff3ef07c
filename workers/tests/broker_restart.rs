//! RabbitMQ restarted in the middle of a run (`rabbitmqctl stop_app` / `start_app`): the
//! worker and the sender reconnect and no message is lost.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;
use std::time::Duration;

use tablekit_core::{AnyStore, Entity, MemoryStore, Query, TableStore};
use tablekit_workers::archive::ArchiveOperation;
use tablekit_workers::queue::Queue;
use tablekit_workers::queue::rabbit::RabbitQueue;
use tablekit_workers::{Envelope, Worker, WorkerConfig, cli};
use tokio::sync::oneshot;

const FIRST: usize = 200;
const DURING: usize = 200;

fn rabbitmqctl(args: &[&str]) {
    let status = Command::new("rabbitmqctl")
        .args(args)
        .status()
        .expect("rabbitmqctl runs (the broker restart test needs the local broker's tools)");
    assert!(status.success(), "rabbitmqctl {args:?} failed: {status:?}");
}

async fn send_archive(queue: &RabbitQueue, name: &str, i: usize) {
    let envelope = Envelope::new(&ArchiveOperation {
        source_table: "Current".into(),
        target_table: "Archive".into(),
        partition_key: "p".into(),
        row_key: format!("{i:04}"),
    })
    .unwrap();
    queue
        .send(
            name,
            &envelope.id.to_string(),
            &envelope.to_bytes().unwrap(),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_restart_mid_run_loses_no_message() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    if std::env::var("AMQP_URL").is_ok() {
        support::skip("restarts the local broker, not AMQP_URL's");
        return;
    }
    let store = MemoryStore::new();
    store.create_table("Current").await.unwrap();
    for i in 0..FIRST + DURING {
        store
            .insert(
                "Current",
                Entity::new("p", format!("{i:04}")).with("N", i as i64),
            )
            .await
            .unwrap();
    }
    let queue = RabbitQueue::connect(&url).await.unwrap();
    let name = support::unique("restart");
    let config = WorkerConfig {
        concurrency: 2,
        base_backoff: Duration::from_millis(50),
        ..WorkerConfig::new(&name)
    };
    queue.declare(&name, &config.queue_options()).await.unwrap();
    for i in 0..FIRST {
        send_archive(&queue, &name, i).await;
    }

    // A slow handler so that the run spans the restart.
    let slow_store = store.clone();
    let registry = cli::registry(AnyStore::Memory(slow_store));
    let (stop, stopped) = oneshot::channel::<()>();
    let worker = tokio::spawn(Worker::new(queue.clone(), registry, config.clone()).run(
        async move {
            let _ = stopped.await;
        },
    ));

    let archived = |store: MemoryStore| async move {
        store
            .query_all("Archive", Query::new())
            .await
            .map_or(0, |e| e.len())
    };
    while archived(store.clone()).await < 20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::task::spawn_blocking(|| rabbitmqctl(&["stop_app"]))
        .await
        .unwrap();
    // Messages sent while the broker is down wait for it to come back.
    let sender_queue = queue.clone();
    let sender_name = name.clone();
    let sender = tokio::spawn(async move {
        for i in FIRST..FIRST + DURING {
            send_archive(&sender_queue, &sender_name, i).await;
        }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    tokio::task::spawn_blocking(|| rabbitmqctl(&["start_app"]))
        .await
        .unwrap();
    sender.await.unwrap();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while archived(store.clone()).await < FIRST + DURING {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {} archived after the restart",
            archived(store.clone()).await,
            FIRST + DURING
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = stop.send(());
    worker.await.unwrap().unwrap();
    assert!(
        store
            .query_all("Current", Query::new())
            .await
            .unwrap()
            .is_empty()
    );
    let stats = queue.stats(&name).await.unwrap();
    assert_eq!((stats.waiting, stats.poisoned), (0, 0), "{stats:?}");
    queue
        .delete_queue(&name, &config.queue_options())
        .await
        .unwrap();
}
