//! A delivery whose lease is about to run out writes nothing: its writes are refused past
//! the fence, it answers "retry", and the message is applied again from fresh reads — so a
//! paused delivery never writes after another delivery of its message settled it.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tablekit_core::{Entity, MemoryStore, TableStore, WriteOp};
use tablekit_patterns::consistency::{Envelope, Operation, OperationError};
use tablekit_workers::fence::FencedStore;
use tablekit_workers::queue::sqlite::SqliteQueue;
use tablekit_workers::queue::{ConsumeOptions, Consumer, Queue, QueueOptions};
use tablekit_workers::{Registry, WorkerConfig, handle_delivery};

#[derive(Serialize, Deserialize)]
struct Slow {
    pause_ms: u64,
}

impl Operation for Slow {
    const KIND: &'static str = "slow";
    const VERSION: u32 = 1;
    const QUEUE: &'static str = "q";
}

#[tokio::test]
async fn a_delivery_past_its_fence_writes_nothing_and_the_message_is_applied_again() {
    let dir = tempfile::tempdir().unwrap();
    let queue = SqliteQueue::open(dir.path().join("queue.db"))
        .await
        .unwrap();
    queue.declare("q", &QueueOptions::default()).await.unwrap();
    let store = FencedStore::new(MemoryStore::new());
    store.create_table("Fenced").await.unwrap();
    let attempts = Arc::new(AtomicU32::new(0));
    let registry = {
        let (store, attempts) = (store.clone(), attempts.clone());
        Registry::new().register(move |op: Slow| {
            let (store, attempts) = (store.clone(), attempts.clone());
            async move {
                // The first attempt pauses between its read and its write past three
                // quarters of its 400 ms lease; the next one does not.
                if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                    tokio::time::sleep(Duration::from_millis(op.pause_ms)).await;
                }
                store
                    .execute(
                        "Fenced",
                        WriteOp::InsertOrReplace(Entity::new("p", "written")),
                    )
                    .await
                    .map_err(OperationError::from)?;
                Ok(())
            }
        })
    };
    let envelope = Envelope::new(&Slow { pause_ms: 350 }).unwrap();
    queue
        .send("q", &envelope.id.to_string(), &envelope.to_bytes().unwrap())
        .await
        .unwrap();
    let options = ConsumeOptions {
        prefetch: 1,
        lease: Duration::from_millis(400),
    };
    let mut consumer = queue.consume("q", options).await.unwrap();
    let config = WorkerConfig::new("q");
    let first = consumer.next().await.unwrap().expect("a delivery");
    let report = handle_delivery(first, &registry, &config).await;
    assert_eq!(report.retried, 1, "{report:?}");
    assert!(
        store
            .get("Fenced", "p", "written", None)
            .await
            .unwrap()
            .is_none(),
        "the paused delivery wrote nothing"
    );
    // The message comes back and is applied.
    let again = tokio::time::timeout(Duration::from_secs(10), consumer.next())
        .await
        .expect("delivered again")
        .unwrap()
        .expect("a delivery");
    let report = handle_delivery(again, &registry, &config).await;
    assert_eq!(report.processed, 1, "{report:?}");
    assert!(
        store
            .get("Fenced", "p", "written", None)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}
