//! Change subscriptions (`#[entity(changes = "queue")]`) on every backend (memory, a SQLite
//! file and, with the `azure` feature, Azurite), through a real queue (a SQLite queue
//! file): every committed insert, update and delete arrives typed, with growing versions
//! and the deleted entity's last state; a writer process killed in the middle of 1,000
//! writes loses no committed write's event, and the last event of each entity equals its
//! stored state.

#![allow(missing_docs)]

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tablekit::core::AnyStore;
use tablekit::patterns::changes::ChangeKind;
use tablekit::patterns::index::{OutboxSink, Relay};
use tablekit::prelude::*;
use tablekit::workers::changes::{Change, Changes};
use tablekit::workers::index::QueueSink;
use tablekit::workers::queue::sqlite::SqliteQueue;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Accounts",
    kind = "Account",
    partition_key = "{team}",
    row_key = "a_{id:04}",
    changes = "account-changes"
)]
struct Account {
    team: String,
    id: u32,
    balance: i64,
}

fn account(team: &str, id: u32, balance: i64) -> Account {
    Account {
        team: team.to_owned(),
        id,
        balance,
    }
}

async fn accounts(store: AnyStore, queue: &SqliteQueue) -> IndexedTable<Account, AnyStore> {
    let sink = QueueSink::open(queue.clone(), "index").await.expect("sink");
    let accounts = IndexedTable::<Account, _>::options()
        .sink(Arc::new(sink))
        .build(store)
        .expect("options");
    accounts.create().await.expect("open");
    accounts
}

/// Every change on the queue, consumed until none came for a second.
async fn drain(queue: &SqliteQueue) -> Vec<Change<Account>> {
    let seen: Arc<Mutex<Vec<Change<Account>>>> = Arc::default();
    let last = Arc::new(Mutex::new(Instant::now()));
    let worker = {
        let (seen, last) = (seen.clone(), last.clone());
        Changes::<Account>::consume(queue.clone(), move |change: Change<Account>| {
            let (seen, last) = (seen.clone(), last.clone());
            async move {
                seen.lock().expect("seen").push(change);
                *last.lock().expect("last") = Instant::now();
                Ok(())
            }
        })
        .expect("a change queue")
    };
    let quiet = async {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if last.lock().expect("last").elapsed() > Duration::from_secs(1) {
                break;
            }
        }
    };
    let report = worker.run(quiet).await.expect("worker");
    assert_eq!(report.poisoned, 0, "{report:?}");
    seen.lock().expect("seen").clone()
}

async fn inserts_updates_and_deletes_arrive_typed_in_version_order(store: AnyStore) {
    let dir = tempfile::tempdir().expect("dir");
    let queue = SqliteQueue::open(dir.path().join("queue.db"))
        .await
        .expect("queue");
    let accounts = accounts(store, &queue).await;
    let outcome = accounts.insert(&account("a", 1, 10)).await.expect("insert");
    assert!(outcome.published, "the event went to its queue at once");
    accounts
        .replace(&account("a", 1, 25), IfMatch::Any)
        .await
        .expect("update");
    accounts
        .delete("a", "a_0001", IfMatch::Any)
        .await
        .expect("delete");

    let mut changes = drain(&queue).await;
    changes.sort_by_key(|c| c.version);
    let kinds: Vec<ChangeKind> = changes.iter().map(|c| c.change).collect();
    assert_eq!(
        kinds,
        [ChangeKind::Insert, ChangeKind::Update, ChangeKind::Delete]
    );
    let balances: Vec<i64> = changes.iter().map(|c| c.value.balance).collect();
    assert_eq!(balances, [10, 25, 25], "a delete carries the last state");
    assert!(changes.windows(2).all(|w| w[0].version < w[1].version));
    assert!(
        changes
            .iter()
            .all(|c| (c.partition_key.as_str(), c.row_key.as_str()) == ("a", "a_0001"))
    );
}

on_backends!(inserts_updates_and_deletes_arrive_typed_in_version_order);

/// A change of another kind on the queue, or one that does not read as the type, goes
/// to the poison queue with its reason; the consumer keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_another_kind_is_poisoned_and_the_consumer_keeps_running() {
    use tablekit::patterns::changes::ChangeEvent;
    use tablekit::workers::queue::Queue;
    let dir = tempfile::tempdir().expect("dir");
    let queue = SqliteQueue::open(dir.path().join("queue.db"))
        .await
        .expect("queue");
    let sink = QueueSink::open(queue.clone(), "index").await.expect("sink");
    let written = Entity::new("a", "a_0001").with("balance", 5_i64);
    for (kind, entity) in [
        ("Other", written.clone()),
        ("Account", Entity::new("a", "a_0002")), // no `team`, `id`, `balance`
        ("Account", written.with("team", "a").with("id", 1_i32)),
    ] {
        let event =
            ChangeEvent::of_write("account-changes", kind, "Accounts", 1, Some(&entity), None)
                .expect("an event");
        sink.publish(&event.envelope().expect("envelope"))
            .await
            .expect("publish");
    }
    let seen: Arc<Mutex<Vec<Change<Account>>>> = Arc::default();
    let worker = {
        let seen = seen.clone();
        Changes::<Account>::consume(queue.clone(), move |change: Change<Account>| {
            let seen = seen.clone();
            async move {
                seen.lock().expect("seen").push(change);
                Ok(())
            }
        })
        .expect("a change queue")
    };
    let report = worker
        .run(tokio::time::sleep(Duration::from_secs(2)))
        .await
        .expect("worker");
    assert_eq!((report.processed, report.poisoned), (1, 2), "{report:?}");
    let seen = seen.lock().expect("seen").clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].value, account("a", 1, 5));
    let poison = queue.stats("account-changes").await.expect("stats");
    assert_eq!(poison.poisoned, 2, "{poison:?}");
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Notes",
    kind = "Note",
    partition_key = "{team}",
    row_key = "n_{id}",
    changes = "note-changes"
)]
struct Note {
    team: String,
    id: u32,
    text: String,
    more: String,
}

/// An essay of fifteen long paragraphs: each fits a property, the whole fits an entity,
/// its change event does not fit one outbox entry (an entity of 1 MiB).
#[derive(Entity, Clone, Debug, PartialEq, Default)]
#[entity(
    table = "Essays",
    partition_key = "{team}",
    row_key = "e_{id}",
    changes = "essay-changes"
)]
struct Essay {
    team: String,
    id: u32,
    p00: String,
    p01: String,
    p02: String,
    p03: String,
    p04: String,
    p05: String,
    p06: String,
    p07: String,
    p08: String,
    p09: String,
    p10: String,
    p11: String,
    p12: String,
    p13: String,
    p14: String,
}

/// A write whose change event cannot fit its outbox entry is refused as too large, and
/// nothing is written; an event longer than one property (two of the note's fields)
/// spreads over the entry's parts and is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_event_too_large_for_the_outbox_refuses_the_write() {
    let store = MemoryStore::new();
    // The change events wait in the outbox: the test only reads what was written.
    let notes = IndexedTable::<Note, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    notes.create().await.expect("open");
    let note = Note {
        team: "a".into(),
        id: 1,
        // Each fits a property (32,768 UTF-16 units); both do not fit one.
        text: "x".repeat(20_000),
        more: "y".repeat(20_000),
    };
    notes.insert(&note).await.expect("an event over two parts");
    let essays = IndexedTable::<Essay, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    essays.create().await.expect("open");
    let paragraph = "z".repeat(31_000);
    let essay = Essay {
        team: "a".into(),
        id: 1,
        p00: paragraph.clone(),
        p01: paragraph.clone(),
        p02: paragraph.clone(),
        p03: paragraph.clone(),
        p04: paragraph.clone(),
        p05: paragraph.clone(),
        p06: paragraph.clone(),
        p07: paragraph.clone(),
        p08: paragraph.clone(),
        p09: paragraph.clone(),
        p10: paragraph.clone(),
        p11: paragraph.clone(),
        p12: paragraph.clone(),
        p13: paragraph.clone(),
        p14: paragraph,
    };
    let refused = essays.insert(&essay).await.expect_err("too large");
    assert_eq!(refused.kind(), ErrorKind::TooLarge, "{refused}");
    assert!(essays.get("a", "e_1").await.expect("get").is_none());
}

// ---- A writer killed in the middle of 1,000 writes ------------------------------------

const CHILD_STORE: &str = "TABLEKIT_TEST_CHANGES_KILL_STORE";
const CHILD_QUEUE: &str = "TABLEKIT_TEST_CHANGES_KILL_QUEUE";
const CHILD_LOG: &str = "TABLEKIT_TEST_CHANGES_KILL_LOG";
const CHILD_AFTER: &str = "TABLEKIT_TEST_CHANGES_KILL_AFTER";
const ACCOUNTS: u32 = 50;
const WRITES: u32 = 1_000;

/// In the child process: 1,000 writes (20 to each of 50 accounts), each acknowledged
/// write logged, through a store that ends the process after the given write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_kill_child() {
    let (Ok(url), Ok(queue), Ok(log), Ok(after)) = (
        std::env::var(CHILD_STORE),
        std::env::var(CHILD_QUEUE),
        std::env::var(CHILD_LOG),
        std::env::var(CHILD_AFTER),
    ) else {
        return; // Only meaningful as the child of the kill test.
    };
    use std::io::Write;
    let store = support::kill::KilledAfter::new(
        AnyStore::create(&url).await.expect("store"),
        after.parse().expect("a write number"),
    );
    let queue = SqliteQueue::open(queue).await.expect("queue");
    let sink = QueueSink::open(queue, "index").await.expect("sink");
    let accounts = IndexedTable::<Account, _>::options()
        .sink(Arc::new(sink))
        .build(store)
        .expect("options");
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .expect("log");
    for n in 0..WRITES {
        let id = n % ACCOUNTS;
        let outcome = accounts
            .upsert(&account("t", id, i64::from(n)))
            .await
            .expect("write");
        writeln!(log, "{id} {} {n}", outcome.version).expect("log");
        log.flush().expect("log");
    }
    std::process::exit(3);
}

fn run_child(url: &str, queue: &Path, log: &Path, after: usize) {
    let status = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "changes_kill_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_STORE, url)
        .env(CHILD_QUEUE, queue)
        .env(CHILD_LOG, log)
        .env(CHILD_AFTER, after.to_string())
        .env("RUST_LOG", "off")
        .status()
        .expect("the child runs");
    assert!(
        status.code().is_none(),
        "the writer should be killed after write {after}: {status:?}"
    );
}

async fn a_killed_writer_loses_no_committed_change(url: &str, dir: &Path) {
    let store = AnyStore::create(url).await.expect("store");
    let queue_path = dir.join("queue.db");
    let queue = SqliteQueue::open(&queue_path).await.expect("queue");
    let accounts = accounts(store.clone(), &queue).await;
    let log = dir.join("acknowledged.log");
    // Each write is two to three store writes (the pending marker every 30 s, the
    // commit, the outbox entry's delete): the kill lands past the middle.
    run_child(url, &queue_path, &log, 1_500);

    // Restart: the relay publishes the events the kill left in the outbox.
    let sink: Arc<dyn OutboxSink> =
        Arc::new(QueueSink::open(queue.clone(), "index").await.expect("sink"));
    Relay::options()
        .grace(Duration::ZERO)
        .build(store.clone(), sink)
        .run_once()
        .await
        .expect("relay");
    let changes = drain(&queue).await;

    let acknowledged: Vec<(u32, i64, i64)> = std::fs::read_to_string(&log)
        .expect("log")
        .lines()
        .map(|line| {
            let mut parts = line.split(' ').map(|p| p.parse::<i64>().expect("a number"));
            let (id, version, balance) = (
                parts.next().expect("id"),
                parts.next().expect("version"),
                parts.next().expect("balance"),
            );
            (u32::try_from(id).expect("an id"), version, balance)
        })
        .collect();
    assert!(
        acknowledged.len() > 100 && acknowledged.len() < WRITES as usize,
        "killed in the middle: {} writes acknowledged",
        acknowledged.len()
    );
    let seen: HashMap<(String, i64), i64> = changes
        .iter()
        .map(|c| ((c.row_key.clone(), c.version), c.value.balance))
        .collect();
    for (id, version, balance) in &acknowledged {
        assert_eq!(
            seen.get(&(format!("a_{id:04}"), *version)),
            Some(balance),
            "the event of acknowledged write {balance} (account {id}, version {version})"
        );
    }
    // The newest event of each account is its stored state.
    let mut newest: HashMap<String, &Change<Account>> = HashMap::new();
    for change in &changes {
        let slot = newest.entry(change.row_key.clone()).or_insert(change);
        if change.version > slot.version {
            *slot = change;
        }
    }
    assert_eq!(newest.len(), ACCOUNTS as usize);
    for (row_key, change) in newest {
        let stored = accounts
            .get("t", &row_key)
            .await
            .expect("get")
            .expect("stored");
        assert_eq!(change.value, stored.value, "{row_key}");
        assert_eq!(
            Some(change.version),
            tablekit::patterns::index::record::version_of(
                &store
                    .get("Accounts", "t", &row_key, None)
                    .await
                    .expect("get")
                    .expect("stored")
            ),
            "{row_key}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_killed_in_1000_writes_loses_no_change_on_sqlite() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let url = format!("sqlite:{}/store.db", dir.path().display());
    a_killed_writer_loses_no_committed_change(&url, dir.path()).await;
}
