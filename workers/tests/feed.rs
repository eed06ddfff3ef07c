//! Typed consumers of a change feed on a SQLite file: a handler's passing failure is
//! retried, a permanent one parks the change and the group goes on; a member stopped and
//! started again goes on after its checkpoint; two members of one group divide the work
//! and together handle every change once; a second group reads everything again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tablekit_core::{IfMatch, SqliteStore};
use tablekit_derive::Entity;
use tablekit_patterns::feed::{self, Position};
use tablekit_patterns::index::{IndexedTable, InlineSink, Relay, handlers};
use tablekit_workers::OperationError;
use tablekit_workers::changes::Change;
use tablekit_workers::feed::Feed;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Staff",
    kind = "Staff",
    partition_key = "{department}",
    row_key = "{id:05}",
    crate = "tablekit_core"
)]
#[feed(shares = 8)]
struct Staff {
    department: String,
    id: u32,
    name: String,
}

async fn setup(dir: &tempfile::TempDir) -> (SqliteStore, IndexedTable<Staff, SqliteStore>) {
    let store = SqliteStore::create(dir.path().join("feed.db"))
        .await
        .expect("open");
    let staff = IndexedTable::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    staff.create().await.expect("create");
    (store, staff)
}

async fn sequence(store: &SqliteStore) {
    let relay = Relay::options().alone().build(
        store.clone(),
        Arc::new(InlineSink::new(handlers(store.clone(), None))),
    );
    relay.run_once().await.expect("relay");
}

type Seen = Arc<Mutex<Vec<(String, u32, i64)>>>;

/// Runs a member until it has seen `until` changes in all (or a few seconds pass).
async fn run_until<F, Fut>(
    worker: &tablekit_workers::feed::FeedWorker<Staff, SqliteStore, F>,
    seen: &Seen,
    until: usize,
) -> tablekit_workers::feed::FeedReport
where
    F: Fn(Change<Staff>) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<(), OperationError>> + Send,
{
    let seen = seen.clone();
    let done = async move {
        for _ in 0..300 {
            if seen.lock().expect("seen").len() >= until {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    worker.run(done).await.expect("run")
}

#[tokio::test]
async fn a_handler_failure_is_retried_or_parked_and_a_restart_goes_on_after_the_checkpoint() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, staff) = setup(&dir).await;
    for id in 0..20 {
        let department = ["sales", "ops", "it"][id as usize % 3];
        staff
            .insert(&Staff {
                department: department.into(),
                id,
                name: format!("n{id}"),
            })
            .await
            .expect("insert");
    }
    sequence(&store).await;
    let seen: Seen = Arc::default();
    let failed_once = Arc::new(Mutex::new(false));
    let consumer = Feed::<Staff>::group(store.clone(), "headcount")
        .expect("group")
        .retry(tablekit_core::retry::RetryPolicy {
            max_attempts: 3,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(2),
        })
        .idle(Duration::from_millis(5));
    let worker = consumer.consume(|change: Change<Staff>| {
        let (seen, failed_once) = (seen.clone(), failed_once.clone());
        async move {
            if change.value.id == 7 {
                return Err(OperationError::Permanent("id 7 is refused".into()));
            }
            if change.value.id == 3
                && !std::mem::replace(&mut *failed_once.lock().expect("lock"), true)
            {
                return Err(OperationError::Retryable("busy".into()));
            }
            seen.lock().expect("seen").push((
                change.value.department,
                change.value.id,
                change.version,
            ));
            Ok(())
        }
    });
    let report = run_until(&worker, &seen, 19).await;
    assert_eq!(
        (report.handled, report.parked, report.retried),
        (19, 1, 1),
        "{report:?}"
    );
    let parked = feed::parked(&store, "Staff", "headcount")
        .await
        .expect("parked");
    assert_eq!(parked.len(), 1);
    assert!(parked[0].reason.contains("id 7"), "{parked:?}");

    // More writes while nobody reads; a new member of the group goes on after the
    // checkpoint: only the new changes.
    staff
        .replace(
            &Staff {
                department: "ops".into(),
                id: 1,
                name: "renamed".into(),
            },
            IfMatch::Any,
        )
        .await
        .expect("replace");
    staff
        .delete("sales", "00000", IfMatch::Any)
        .await
        .expect("delete");
    sequence(&store).await;
    let again: Seen = Arc::default();
    let worker = Feed::<Staff>::group(store.clone(), "headcount")
        .expect("group")
        .idle(Duration::from_millis(5))
        .consume(|change: Change<Staff>| {
            let again = again.clone();
            async move {
                again.lock().expect("again").push((
                    change.value.department,
                    change.value.id,
                    change.version,
                ));
                Ok(())
            }
        });
    let report = run_until(&worker, &again, 2).await;
    assert_eq!(
        report.handled,
        2,
        "only what came after the checkpoint: {:?}",
        again.lock().expect("again")
    );
    let ids: Vec<u32> = again.lock().expect("again").iter().map(|c| c.1).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&1) && ids.contains(&0), "{ids:?}");
}

#[tokio::test]
async fn two_members_divide_the_shares_and_handle_every_change_once() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, staff) = setup(&dir).await;
    for id in 0..60 {
        staff
            .insert(&Staff {
                department: format!("d{}", id % 12),
                id,
                name: format!("n{id}"),
            })
            .await
            .expect("insert");
    }
    sequence(&store).await;
    let seen: Seen = Arc::default();
    let handler = |seen: Seen| {
        move |change: Change<Staff>| {
            let seen = seen.clone();
            async move {
                seen.lock().expect("seen").push((
                    change.value.department,
                    change.value.id,
                    change.version,
                ));
                Ok::<(), OperationError>(())
            }
        }
    };
    let one = Feed::<Staff>::group(store.clone(), "pair")
        .expect("group")
        .member("one")
        .expect("member")
        .idle(Duration::from_millis(5));
    let two = Feed::<Staff>::group(store.clone(), "pair")
        .expect("group")
        .member("two")
        .expect("member")
        .idle(Duration::from_millis(5));
    // Both join before either reads: each takes its part.
    one.group().balance().await.expect("balance");
    two.group().balance().await.expect("balance");
    one.group().balance().await.expect("balance");
    two.group().balance().await.expect("balance");
    assert_eq!(one.group().held().len() + two.group().held().len(), 8);
    assert!(!one.group().held().is_empty() && !two.group().held().is_empty());
    let (w1, w2) = (
        one.consume(handler(seen.clone())),
        two.consume(handler(seen.clone())),
    );
    let (r1, r2) = tokio::join!(run_until(&w1, &seen, 60), run_until(&w2, &seen, 60));
    assert_eq!(r1.handled + r2.handled, 60, "{r1:?} {r2:?}");
    assert!(r1.handled > 0 && r2.handled > 0, "{r1:?} {r2:?}");
    let mut ids: Vec<u32> = seen.lock().expect("seen").iter().map(|c| c.1).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..60).collect::<Vec<_>>(), "every change once");

    // Another group reads it all again, independently, and folds the same state.
    let state: Arc<Mutex<BTreeMap<u32, String>>> = Arc::default();
    let count: Seen = Arc::default();
    let worker = Feed::<Staff>::group(store.clone(), "rebuild")
        .expect("group")
        .from(Position::Beginning)
        .idle(Duration::from_millis(5))
        .consume(|change: Change<Staff>| {
            let (state, count) = (state.clone(), count.clone());
            async move {
                state
                    .lock()
                    .expect("state")
                    .insert(change.value.id, change.value.department.clone());
                count.lock().expect("count").push((
                    change.value.department,
                    change.value.id,
                    change.version,
                ));
                Ok(())
            }
        });
    run_until(&worker, &count, 60).await;
    assert_eq!(state.lock().expect("state").len(), 60);
}

#[tokio::test]
async fn a_start_checkpoint_of_a_feed_divided_otherwise_stops_the_worker_with_the_error() {
    let store = tablekit_core::MemoryStore::new();
    let saved = feed::Checkpoint {
        shares: [(40, 7)].into_iter().collect(),
    };
    let worker = Feed::<Staff>::group(store, "billing")
        .expect("group")
        .from(Position::Checkpoint(saved))
        .idle(Duration::from_millis(5))
        .consume(|_: Change<Staff>| async { Ok(()) });
    let ran = tokio::time::timeout(Duration::from_secs(10), worker.run(std::future::pending()))
        .await
        .expect("it stops rather than trying again");
    let err = ran.expect_err("share 40 of the feed's shares");
    assert!(err.to_string().contains("share 40"), "{err}");
}

#[tokio::test]
async fn a_type_without_a_feed_is_refused_with_the_fix() {
    #[derive(Entity, Clone, Debug, PartialEq)]
    #[entity(
        table = "Plain",
        partition_key = "{a}",
        row_key = "{b}",
        crate = "tablekit_core"
    )]
    struct Plain {
        a: String,
        b: String,
    }
    let err = Feed::<Plain>::group(tablekit_core::MemoryStore::new(), "g").expect_err("no feed");
    assert!(err.to_string().contains("#[feed]"), "{err}");
    let err =
        Feed::<Staff>::group(tablekit_core::MemoryStore::new(), "bad name").expect_err("bad name");
    assert!(err.to_string().contains("invalid group name"), "{err}");
}

#[cfg(feature = "cli")]
#[tokio::test]
async fn feed_tail_prints_the_changes_and_status_shows_each_group_lag() {
    use clap::Parser;
    use tablekit_workers::cli;

    let dir = tempfile::tempdir().expect("dir");
    let (store, staff) = setup(&dir).await;
    for id in 0..3 {
        staff
            .insert(&Staff {
                department: "ops".into(),
                id,
                name: format!("n{id}"),
            })
            .await
            .expect("insert");
    }
    sequence(&store).await;
    let path = format!("sqlite:{}", dir.path().join("feed.db").display());
    let run = |args: Vec<String>| async move {
        let cli = cli::Cli::parse_from(std::iter::once("tablekit-worker".to_owned()).chain(args));
        let mut out = Vec::new();
        let result = cli::run(cli, &mut out).await;
        (result, String::from_utf8(out).expect("utf-8"))
    };
    let args = |extra: &[&str]| {
        [
            "feed",
            "tail",
            "--store",
            path.as_str(),
            "--table",
            "Staff",
            "--once",
        ]
        .iter()
        .chain(extra)
        .map(|s| (*s).to_owned())
        .collect::<Vec<_>>()
    };
    let (result, out) = run(args(&["--from", "beginning", "--json"])).await;
    result.expect("tail");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines
            .iter()
            .all(|l| l["change"] == "insert" && l["partition_key"] == "ops"),
        "{out}"
    );
    // From now: nothing yet. From a time in the future: nothing.
    let (result, out) = run(args(&[])).await;
    result.expect("tail");
    assert!(out.trim().is_empty(), "{out}");
    // A bad position and an unknown table say what to write instead.
    let (result, _) = run(args(&["--from", "yesterday"])).await;
    assert!(
        result
            .expect_err("bad from")
            .to_string()
            .contains("RFC 3339")
    );
    let cli = cli::Cli::parse_from([
        "tablekit-worker",
        "feed",
        "tail",
        "--store",
        &path,
        "--table",
        "Nope",
        "--once",
    ]);
    let err = cli::run(cli, &mut Vec::new())
        .await
        .expect_err("unknown table");
    assert!(
        err.to_string().contains("tables with a feed: Staff"),
        "{err}"
    );

    // A group that read two of three: status shows it one behind.
    let group = feed::Group::new(store.clone(), "Staff", "billing", 8).expect("group");
    let mut polled = Vec::new();
    for _ in 0..3 {
        polled.extend(group.poll().await.expect("poll"));
    }
    assert_eq!(polled.len(), 3);
    group.checkpoint(&polled[..2]).await.expect("checkpoint");
    let feeds = tablekit_workers::status::feeds(&store)
        .await
        .expect("feeds");
    assert_eq!(feeds.len(), 1);
    assert_eq!(feeds[0].kept, 3);
    let billing = &feeds[0].groups[0];
    assert_eq!((billing.group.as_str(), billing.behind()), ("billing", 1));
    assert!(billing.oldest_unread().is_some());
}

#[tokio::test]
async fn the_pull_form_names_the_fields_the_push_form_does() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, staff) = setup(&dir).await;
    let ada = Staff {
        department: "ops".into(),
        id: 7,
        name: "Ada".into(),
    };
    staff.insert(&ada).await.expect("insert");
    sequence(&store).await;
    // The push form's handler reads `change.partition_key`, `change.value.id`, …
    let push = |change: &Change<Staff>| {
        (
            change.partition_key.clone(),
            change.row_key.clone(),
            change.version,
            change.value.id,
        )
    };
    let consumer = Feed::<Staff>::group(store.clone(), "pull")
        .expect("group")
        .member("pull-0")
        .expect("member");
    let batch = consumer.poll().await.expect("poll");
    assert_eq!(batch.len(), 1);
    let delivered = batch[0].1.as_ref().expect("reads as Staff");
    // … and the pull form's delivery reads the same paths, plus where it is in the feed.
    let pulled = (
        delivered.partition_key.clone(),
        delivered.row_key.clone(),
        delivered.version,
        delivered.value.id,
    );
    assert_eq!(pulled, push(&delivered.change));
    assert_eq!(pulled.0, "ops");
    assert_eq!((delivered.share, delivered.seq), (batch[0].0.share, 1));
}
