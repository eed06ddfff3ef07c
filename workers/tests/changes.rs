//! Change subscriptions on the distributed brokers: the change events of an
//! `IndexedTable` (a SQLite store) go through `QueueSink` to RabbitMQ and to Azure Queue
//! Storage (Azurite), and `Changes::<E>::consume` receives every insert, update and
//! delete typed, with growing versions and the deleted entity's last state. (The SQLite
//! queue, every table backend and a writer killed mid-run are in the facade's
//! `tests/change_subscriptions.rs`.)

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tablekit_core::{AnyStore, IfMatch};
use tablekit_derive::Entity;
use tablekit_patterns::changes::ChangeKind;
use tablekit_patterns::index::IndexedTable;
use tablekit_workers::changes::{Change, Changes};
use tablekit_workers::index::QueueSink;
use tablekit_workers::queue::AnyQueue;

/// Its change queue is shared by every run of this test: each run writes in a partition
/// of its own and looks only at those events.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Wallets",
    kind = "Wallet",
    partition_key = "{owner}",
    row_key = "w_{id:04}",
    changes = "tk-test-wallet-changes",
    crate = "tablekit_core"
)]
struct Wallet {
    owner: String,
    id: u32,
    balance: i64,
}

async fn changes_arrive_typed_through(broker: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::create(&format!("sqlite:{}", dir.path().join("s.db").display()))
        .await
        .unwrap();
    let queue = AnyQueue::connect(broker).await.unwrap();
    // The type has no index work: nothing reaches this queue.
    let sink = QueueSink::open(queue.clone(), "tk-test-wallet-index")
        .await
        .unwrap();
    let wallets = IndexedTable::<Wallet, _>::options()
        .sink(Arc::new(sink))
        .build(store)
        .unwrap();
    wallets.create().await.unwrap();
    let owner = uuid::Uuid::new_v4().simple().to_string();
    let wallet = |balance| Wallet {
        owner: owner.clone(),
        id: 1,
        balance,
    };
    let first = wallets.insert(&wallet(10)).await.unwrap();
    assert!(first.published, "the event went to its queue at once");
    wallets.replace(&wallet(25), IfMatch::Any).await.unwrap();
    wallets
        .delete(&owner, "w_0001", IfMatch::Any)
        .await
        .unwrap();

    let seen: Arc<Mutex<Vec<Change<Wallet>>>> = Arc::default();
    let worker = {
        let (seen, owner) = (seen.clone(), owner.clone());
        Changes::<Wallet>::consume(queue.clone(), move |change: Change<Wallet>| {
            let (seen, owner) = (seen.clone(), owner.clone());
            async move {
                if change.partition_key == owner {
                    seen.lock().unwrap().push(change);
                }
                Ok(())
            }
        })
        .unwrap()
    };
    let done = {
        let seen = seen.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            while seen.lock().unwrap().len() < 3 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let report = worker.run(done).await.unwrap();
    assert_eq!(report.poisoned, 0, "{report:?}");
    let mut changes = seen.lock().unwrap().clone();
    changes.sort_by_key(|c| c.version);
    let kinds: Vec<ChangeKind> = changes.iter().map(|c| c.change).collect();
    assert_eq!(
        kinds,
        [ChangeKind::Insert, ChangeKind::Update, ChangeKind::Delete]
    );
    let balances: Vec<i64> = changes.iter().map(|c| c.value.balance).collect();
    assert_eq!(balances, [10, 25, 25], "a delete carries the last state");
    assert!(changes.windows(2).all(|w| w[0].version < w[1].version));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_arrive_typed_through_rabbitmq() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    changes_arrive_typed_through(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_arrive_typed_through_azure_queues() {
    let Some(connection) = support::azure_queues() else {
        return;
    };
    changes_arrive_typed_through(&format!("azure:{connection}")).await;
}
