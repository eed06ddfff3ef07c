//! Crash safety, proven: 1,000 archive operations while the `tablekit-worker` process is
//! killed with SIGKILL at random moments (at least 10 times) and restarted, with a client
//! updating entities meanwhile. Afterwards every entity is in exactly one table (the
//! archive) with its latest data, nothing is left in the queue and nothing is poisoned.
//! On the SQLite queue, RabbitMQ, and Azure Queue Storage (a test's own Azurite, also
//! restarted once mid-run).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rand::Rng;
use tablekit_core::{AnyStore, Entity, ErrorKind, IfMatch, Query, SqliteStore, TableStore, Value};
use tablekit_workers::archive::ArchiveOperation;
use tablekit_workers::queue::poison_table::WithPoisonTable;
use tablekit_workers::queue::{AnyQueue, Queue};
use tablekit_workers::{Envelope, WorkerConfig};

const ENTITIES: usize = 1000;
const KILLS: usize = 10;

fn spawn_worker(store: &str, broker: &str, queue: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tablekit-worker"))
        .args([
            "run", "--queue", queue, "--store", store, "--broker", broker,
        ])
        .args([
            "--concurrency",
            "4",
            "--lease",
            "2",
            "--max-deliveries",
            "20",
            "--backoff-ms",
            "20",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the worker binary starts")
}

fn row_key(i: usize) -> String {
    format!("empid_{i:06}")
}

async fn killed_and_restarted_workers_archive_everything_exactly_once(
    broker: String,
    queue: String,
    mut after_kill: impl FnMut(usize),
) {
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store.db");
    let store_url = format!("sqlite:{}", store_path.display());
    let store = SqliteStore::create(&store_path).await.unwrap();
    store.create_table("Current").await.unwrap();
    store.create_table("Archive").await.unwrap();
    for i in 0..ENTITIES {
        store
            .insert(
                "Current",
                Entity::new(format!("dept{}", i % 5), row_key(i)).with("Version", 0i64),
            )
            .await
            .unwrap();
    }
    let broker_queue = AnyQueue::connect(&broker).await.unwrap();
    broker_queue
        .declare(&queue, &WorkerConfig::new(&queue).queue_options())
        .await
        .unwrap();
    for i in 0..ENTITIES {
        let envelope = Envelope::new(&ArchiveOperation {
            source_table: "Current".into(),
            target_table: "Archive".into(),
            partition_key: format!("dept{}", i % 5),
            row_key: row_key(i),
        })
        .unwrap();
        broker_queue
            .send(
                &queue,
                &envelope.id.to_string(),
                &envelope.to_bytes().unwrap(),
            )
            .await
            .unwrap();
    }

    // A client keeps updating entities that are not archived yet; the last update that
    // succeeded is the data the archive must hold.
    let updater_store = store.clone();
    let updater = tokio::spawn(async move {
        let mut latest: HashMap<usize, i64> = HashMap::new();
        for round in 1..=3000i64 {
            let i = rand::rng().random_range(0..ENTITIES);
            let entity = Entity::new(format!("dept{}", i % 5), row_key(i)).with("Version", round);
            match updater_store.replace("Current", entity, IfMatch::Any).await {
                Ok(_) => {
                    latest.insert(i, round);
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => panic!("update failed: {e}"),
            }
            if round % 50 == 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        latest
    });

    // Kill at random moments while work is going on: after the worker has archived a
    // random 20 to 80 more entities (or 2 s passed), so every kill lands mid-run.
    let remaining = |store: SqliteStore| async move {
        store
            .query_all("Current", Query::new())
            .await
            .unwrap()
            .len()
    };
    let mut worker = spawn_worker(&store_url, &broker, &queue);
    let mut kills_mid_run = 0;
    for _ in 0..KILLS {
        let before = remaining(store.clone()).await;
        let progress = rand::rng().random_range(20..80);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while before - remaining(store.clone()).await < progress
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(rand::rng().random_range(5..25))).await;
        }
        worker.kill().unwrap();
        worker.wait().unwrap();
        if remaining(store.clone()).await > 0 {
            kills_mid_run += 1;
        }
        worker = spawn_worker(&store_url, &broker, &queue);
        after_kill(kills_mid_run);
    }
    assert_eq!(
        kills_mid_run, KILLS,
        "every kill landed while entities were left to archive"
    );
    let latest = updater.await.unwrap();
    // Give the last worker time to start before the stop below.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // Let the last worker finish everything, then stop it gracefully.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let left = store
            .query_all("Current", Query::new().top(1))
            .await
            .unwrap()
            .len();
        let stats = broker_queue.stats(&queue).await.unwrap();
        if left == 0 && stats.waiting == 0 && stats.leased == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not finished after 2 minutes: {left} entities left, {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let status = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = worker.wait().unwrap();
    assert!(exit.success(), "a graceful stop exits 0: {exit:?}");

    let archived = store.query_all("Archive", Query::new()).await.unwrap();
    assert_eq!(archived.len(), ENTITIES, "every entity archived once");
    assert!(
        store
            .query_all("Current", Query::new())
            .await
            .unwrap()
            .is_empty()
    );
    for entity in &archived {
        let i: usize = entity.row_key["empid_".len()..].parse().unwrap();
        let expected = latest.get(&i).copied().unwrap_or(0);
        assert_eq!(
            entity.get("Version"),
            Some(&Value::Int64(expected)),
            "{} holds its latest data",
            entity.row_key
        );
    }
    // The workers keep their poison messages in the store's poison table; counted with
    // what the broker's own poison queue may hold.
    let kept = WithPoisonTable::new(broker_queue.clone(), AnyStore::Sqlite(store.clone()));
    let stats = kept.stats(&queue).await.unwrap();
    assert_eq!((stats.waiting, stats.poisoned), (0, 0), "{stats:?}");
    assert!(kept.poison_list(&queue, 10).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_workers_on_the_sqlite_queue_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = format!("sqlite:{}", dir.path().join("queue.db").display());
    killed_and_restarted_workers_archive_everything_exactly_once(broker, "archive".into(), |_| {})
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_workers_on_rabbitmq_lose_nothing() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let queue = support::unique("kill");
    killed_and_restarted_workers_archive_everything_exactly_once(
        url.clone(),
        queue.clone(),
        |_| {},
    )
    .await;
    if let AnyQueue::Rabbit(rabbit) = AnyQueue::connect(&url).await.unwrap() {
        rabbit
            .delete_queue(
                &queue,
                // The retry queues the workers declared, with their `--backoff-ms 20`.
                &WorkerConfig {
                    base_backoff: std::time::Duration::from_millis(20),
                    ..WorkerConfig::new(&queue)
                }
                .queue_options(),
            )
            .await
            .unwrap();
        // And those the sending side declared, with the default backoff.
        rabbit
            .delete_queue(&queue, &WorkerConfig::new(&queue).queue_options())
            .await
            .unwrap();
    }
}

#[cfg(feature = "azure")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_workers_on_azure_queues_lose_nothing_across_an_azurite_restart() {
    let Some(mut azurite) = support::private_azurite_queue() else {
        return;
    };
    let broker = format!("azure:{}", azurite.connection());
    let mut restarted = false;
    killed_and_restarted_workers_archive_everything_exactly_once(
        broker,
        "archive".into(),
        |kills| {
            // Halfway: the service goes away under the worker just started and comes back
            // with its messages.
            if kills == KILLS / 2 && !restarted {
                azurite.restart();
                restarted = true;
            }
        },
    )
    .await;
    assert!(restarted, "Azurite was restarted mid-run");
}
