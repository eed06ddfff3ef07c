//! Poison messages kept in the store's poison table, on every broker: a worker's poisoning
//! recorded once, pages both ways, counts and groups without a scan, redrive stopped
//! between its steps and completed, the broker's own poison queue swept in, the
//! retention cap, and readers that take nothing off the queue.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

mod support;

use std::time::Duration;

use tablekit_core::{AnyStore, MemoryStore, SqliteStore};
use tablekit_workers::WorkerConfig;
use tablekit_workers::queue::poison_table::{
    PoisonRecord, Recorded, Retention, TakeSteps, WithPoisonTable,
};
use tablekit_workers::queue::{
    AnyQueue, ConsumeOptions, Consumer, Delivery, PoisonAction, PoisonFilter, PoisonQuery, Queue,
};

fn record(id: &str, body: &str, reason: &str, at_micros: i64) -> PoisonRecord {
    PoisonRecord {
        id: id.to_owned(),
        body: body.as_bytes().to_vec(),
        reason: reason.to_owned(),
        reason_undecodable: false,
        delivery_count: 5,
        poisoned_at: chrono::DateTime::from_timestamp_micros(1_700_000_000_000_000 + at_micros)
            .unwrap(),
        sent_at: None,
        headers: vec![("x-test".into(), "1".into())],
        origin: "worker",
        raw: Default::default(),
    }
}

fn envelope(kind: &str, n: usize) -> String {
    format!(
        r#"{{"id":"00000000-0000-0000-0000-{n:012}","kind":"{kind}","version":1,"created_at":"2026-01-01T00:00:00Z","payload":{{"n":{n}}}}}"#
    )
}

async fn sqlite_store(dir: &tempfile::TempDir) -> AnyStore {
    AnyStore::Sqlite(
        SqliteStore::create(dir.path().join("store.db"))
            .await
            .unwrap(),
    )
}

async fn sqlite_queue(dir: &tempfile::TempDir) -> AnyQueue {
    AnyQueue::connect(&format!("sqlite:{}", dir.path().join("queue.db").display()))
        .await
        .unwrap()
}

/// Poisons `n` messages of `name` through the queue's deliveries, as a worker does.
async fn poison_through_deliveries<Q: Queue>(queue: &Q, name: &str, n: usize) {
    for i in 0..n {
        queue
            .send(name, &format!("m{i}"), envelope("archive", i).as_bytes())
            .await
            .unwrap();
    }
    let mut consumer = queue
        .consume(name, ConsumeOptions::default())
        .await
        .unwrap();
    for _ in 0..n {
        let delivery = tokio::time::timeout(Duration::from_secs(10), consumer.next())
            .await
            .expect("a delivery within 10 s")
            .unwrap()
            .unwrap();
        let id = delivery.received().id.clone();
        delivery
            .poison(&format!("conflict on ord-{}", &id[1..]))
            .await
            .unwrap();
    }
    consumer.close().await;
}

fn ids(page: &tablekit_workers::queue::PoisonPage) -> Vec<&str> {
    page.messages.iter().map(|m| m.id.as_str()).collect()
}

#[tokio::test]
async fn a_message_recorded_twice_is_kept_once_and_a_different_body_beside_it() {
    let table = WithPoisonTable::new(
        sqlite_queue(&tempfile::tempdir().unwrap()).await,
        AnyStore::Memory(MemoryStore::new()),
    );
    let table = table.table().expect("a poison table");
    let first = table
        .record("q", &record("m1", "{}", "boom", 1))
        .await
        .unwrap();
    let Recorded::New(handle) = first else {
        panic!("{first:?}")
    };
    // The same message again (a worker stopped between recording and acknowledging).
    assert_eq!(
        table
            .record("q", &record("m1", "{}", "boom again", 2))
            .await
            .unwrap(),
        Recorded::Already(handle.clone())
    );
    assert_eq!(table.count("q").await.unwrap(), 1);
    // Another message with the same id is kept beside it.
    assert!(matches!(
        table
            .record("q", &record("m1", "[1]", "boom", 3))
            .await
            .unwrap(),
        Recorded::New(_)
    ));
    // A message without an id is kept by its content.
    assert!(matches!(
        table.record("q", &record("", "x", "r", 4)).await.unwrap(),
        Recorded::New(_)
    ));
    assert!(matches!(
        table.record("q", &record("", "x", "r", 5)).await.unwrap(),
        Recorded::Already(_)
    ));
    assert_eq!(table.count("q").await.unwrap(), 3);
    let message = table.message("q", &handle).await.unwrap().unwrap();
    assert_eq!(message.reason, "boom");
    assert_eq!(message.delivery_count, 5);
    assert_eq!(message.body, b"{}");
    assert!(message.headers.contains(&("x-test".into(), "1".into())));
    assert!(table.message("q", "nonsense").await.unwrap().is_none());
    assert_eq!(table.count("other").await.unwrap(), 0);
}

#[tokio::test]
async fn pages_run_both_ways_and_counts_groups_and_kinds_need_no_scan() {
    let dir = tempfile::tempdir().unwrap();
    let queue = WithPoisonTable::new(sqlite_queue(&dir).await, sqlite_store(&dir).await);
    let table = queue.table().expect("a poison table");
    for i in 0..25 {
        let kind = if i % 5 == 0 { "audit" } else { "archive" };
        let reason = if i % 2 == 0 {
            format!("conflict on ord-{i}")
        } else {
            "timeout".to_owned()
        };
        table
            .record(
                "q",
                &record(&format!("m{i:02}"), &envelope(kind, i), &reason, i as i64),
            )
            .await
            .unwrap();
    }
    assert_eq!(table.count("q").await.unwrap(), 25);
    let oldest = queue
        .poison_page("q", &PoisonQuery::new(10, 100))
        .await
        .unwrap();
    assert_eq!(ids(&oldest)[..3], ["m00", "m01", "m02"]);
    let second = queue
        .poison_page("q", &PoisonQuery::new(10, 100).after(oldest.next.clone()))
        .await
        .unwrap();
    assert_eq!(ids(&second)[0], "m10");
    let third = queue
        .poison_page("q", &PoisonQuery::new(10, 100).after(second.next.clone()))
        .await
        .unwrap();
    assert_eq!(third.messages.len(), 5);
    assert_eq!(third.next, None);
    let newest = queue
        .poison_page("q", &PoisonQuery::new(3, 100).newest_first(true))
        .await
        .unwrap();
    assert_eq!(ids(&newest), ["m24", "m23", "m22"]);
    let last = queue
        .poison_last_page("q", &PoisonQuery::new(3, 100))
        .await
        .unwrap();
    assert_eq!(ids(&last), ["m22", "m23", "m24"]);
    // A cursor of the other order is refused, not misread.
    assert!(
        queue
            .poison_page(
                "q",
                &PoisonQuery::new(3, 100)
                    .newest_first(true)
                    .after(oldest.next.clone())
            )
            .await
            .is_err()
    );
    // Filters.
    let audits = queue
        .poison_page(
            "q",
            &PoisonQuery::new(100, 100).filter(PoisonFilter::new().kind("audit")),
        )
        .await
        .unwrap();
    assert_eq!(ids(&audits), ["m00", "m05", "m10", "m15", "m20"]);
    let bodies = queue
        .poison_page(
            "q",
            &PoisonQuery::new(100, 10).filter(PoisonFilter::new().body("\"n\":7}")),
        )
        .await
        .unwrap();
    assert_eq!(ids(&bodies), ["m07"]);
    assert_eq!(bodies.messages[0].body.len(), 10);
    // Groups and kinds from their count rows.
    let groups = queue
        .poison_reason_groups("q", &PoisonFilter::new())
        .await
        .unwrap();
    let shown: Vec<(&str, u64)> = groups.iter().map(|g| (g.group.as_str(), g.count)).collect();
    assert_eq!(shown, [("conflict on ord-#", 13), ("timeout", 12)]);
    let kinds = queue.poison_kinds("q", &PoisonFilter::new()).await.unwrap();
    assert_eq!(
        kinds,
        [
            (Some("archive".to_owned()), 20),
            (Some("audit".to_owned()), 5)
        ]
    );
    // Filtered, they are counted over the messages.
    let filtered = queue
        .poison_reason_groups("q", &PoisonFilter::new().kind("audit"))
        .await
        .unwrap();
    let shown: Vec<(&str, u64)> = filtered
        .iter()
        .map(|g| (g.group.as_str(), g.count))
        .collect();
    assert_eq!(shown, [("conflict on ord-#", 3), ("timeout", 2)]);
    // Discarding updates every count.
    let handles: Vec<String> = audits.messages.iter().map(|m| m.handle.clone()).collect();
    let taken = queue
        .poison_take("q", &handles, &PoisonAction::Discard)
        .await
        .unwrap();
    assert_eq!(taken, handles);
    assert_eq!(table.count("q").await.unwrap(), 20);
    let kinds = queue.poison_kinds("q", &PoisonFilter::new()).await.unwrap();
    assert_eq!(kinds, [(Some("archive".to_owned()), 20)]);
    let groups = queue
        .poison_reason_groups("q", &PoisonFilter::new())
        .await
        .unwrap();
    assert_eq!(groups.iter().map(|g| g.count).sum::<u64>(), 20);
    // Taken again: gone, and nothing changes.
    assert!(
        queue
            .poison_take("q", &handles, &PoisonAction::Discard)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(table.count("q").await.unwrap(), 20);
}

#[tokio::test]
async fn a_redrive_stopped_between_its_steps_is_completed_by_the_next_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = sqlite_queue(&dir).await;
    let queue = WithPoisonTable::new(broker.clone(), sqlite_store(&dir).await);
    let config = WorkerConfig::new("work");
    queue
        .declare("work", &config.queue_options())
        .await
        .unwrap();
    poison_through_deliveries(&queue, "work", 2).await;
    assert_eq!(
        broker.stats("work").await.unwrap().poisoned,
        0,
        "nothing on the broker's poison queue"
    );
    assert_eq!(queue.stats("work").await.unwrap().poisoned, 2);
    let page = queue
        .poison_page("work", &PoisonQuery::new(10, 100))
        .await
        .unwrap();
    let (first, second) = (
        page.messages[0].handle.clone(),
        page.messages[1].handle.clone(),
    );
    let table = queue.table().expect("a poison table");

    // Stopped after step 1: marked, nothing sent, still kept and counted.
    let taken = table
        .take_steps(
            broker_of(&queue),
            "work",
            std::slice::from_ref(&first),
            &PoisonAction::Replay,
            TakeSteps::MarkOnly,
        )
        .await
        .unwrap();
    assert!(taken.is_empty());
    assert_eq!(broker.stats("work").await.unwrap().waiting, 0);
    let marked = table.message("work", &first).await.unwrap().unwrap();
    assert!(
        marked.headers.iter().any(|(name, _)| name == "redrive"),
        "{:?}",
        marked.headers
    );
    assert_eq!(table.count("work").await.unwrap(), 2);
    // A new poisoning of the same message meanwhile is kept anew, not merged.
    let again = table
        .record(
            "work",
            &record(
                &marked.id,
                std::str::from_utf8(&marked.body).unwrap(),
                "again",
                99,
            ),
        )
        .await
        .unwrap();
    assert!(matches!(again, Recorded::New(_)), "{again:?}");
    assert_eq!(table.count("work").await.unwrap(), 3);

    // Completed by the next redrive: sent once, its rows and counts gone.
    let taken = queue
        .poison_take("work", std::slice::from_ref(&first), &PoisonAction::Replay)
        .await
        .unwrap();
    assert_eq!(taken, std::slice::from_ref(&first));
    assert_eq!(broker.stats("work").await.unwrap().waiting, 1);
    assert_eq!(table.count("work").await.unwrap(), 2);
    assert!(table.message("work", &first).await.unwrap().is_none());

    // Stopped after step 2: sent, still kept; the next redrive sends it again (by id,
    // harmless) and removes it.
    table
        .take_steps(
            broker_of(&queue),
            "work",
            std::slice::from_ref(&second),
            &PoisonAction::Replay,
            TakeSteps::MarkAndSend,
        )
        .await
        .unwrap();
    assert_eq!(broker.stats("work").await.unwrap().waiting, 2);
    assert_eq!(table.count("work").await.unwrap(), 2);
    let taken = queue
        .poison_take("work", std::slice::from_ref(&second), &PoisonAction::Replay)
        .await
        .unwrap();
    assert_eq!(taken, [second]);
    assert_eq!(broker.stats("work").await.unwrap().waiting, 3);
    assert_eq!(table.count("work").await.unwrap(), 1);
    let left = queue.poison_list("work", 10).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].reason, "again");
}

fn broker_of<Q: Queue>(queue: &WithPoisonTable<Q>) -> &Q {
    queue.inner()
}

#[tokio::test]
async fn the_brokers_own_poison_queue_is_swept_into_the_table_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = sqlite_queue(&dir).await;
    let queue = WithPoisonTable::new(broker.clone(), sqlite_store(&dir).await);
    queue
        .declare("work", &WorkerConfig::new("work").queue_options())
        .await
        .unwrap();
    // Poisoned on the broker (a store failure, or the broker itself).
    poison_through_deliveries(&broker, "work", 3).await;
    assert_eq!(broker.stats("work").await.unwrap().poisoned, 3);
    // Counted while it waits for the sweep.
    assert_eq!(queue.stats("work").await.unwrap().poisoned, 3);
    // One was recorded before a sweep stopped between recording and taking off.
    let on_broker = broker.poison_list("work", 10).await.unwrap();
    let mut first = on_broker[0].clone();
    first.poisoned_at = first.poisoned_at.or(Some(chrono::Utc::now()));
    queue
        .table()
        .expect("a poison table")
        .record(
            "work",
            &PoisonRecord {
                id: first.id.clone(),
                body: first.body.clone(),
                reason: first.reason.clone(),
                reason_undecodable: false,
                delivery_count: first.delivery_count,
                poisoned_at: first.poisoned_at.unwrap(),
                sent_at: first.sent_at,
                headers: first.headers.clone(),
                origin: "broker",
                raw: first.raw.clone(),
            },
        )
        .await
        .unwrap();
    assert_eq!(queue.sweep("work").await.unwrap(), 3);
    assert_eq!(broker.stats("work").await.unwrap().poisoned, 0);
    assert_eq!(queue.stats("work").await.unwrap().poisoned, 3);
    assert_eq!(queue.sweep("work").await.unwrap(), 0);
    let kept = queue.poison_list("work", 10).await.unwrap();
    let mut kept_ids: Vec<&str> = kept.iter().map(|m| m.id.as_str()).collect();
    kept_ids.sort_unstable();
    assert_eq!(kept_ids, ["m0", "m1", "m2"]);
    assert!(
        kept.iter()
            .all(|m| m.reason.starts_with("conflict on ord-"))
    );
    assert!(
        kept.iter()
            .all(|m| m.headers.contains(&("poisoned by".into(), "broker".into())))
    );
}

#[tokio::test]
async fn the_retention_cap_trims_the_oldest_and_records_the_trim() {
    let queue = WithPoisonTable::new(
        sqlite_queue(&tempfile::tempdir().unwrap()).await,
        AnyStore::Memory(MemoryStore::new()),
    );
    let table = queue.table().expect("a poison table");
    let now = chrono::Utc::now();
    for i in 0..30 {
        let mut r = record(&format!("m{i:02}"), "{}", "r", 0);
        r.poisoned_at = now - chrono::Duration::seconds(100 - i);
        table.record("q", &r).await.unwrap();
    }
    // Two more, a year old: over the age cap.
    for i in 0..2 {
        let mut r = record(&format!("old{i}"), "{}", "r", 0);
        r.poisoned_at = now - chrono::Duration::days(365);
        table.record("q", &r).await.unwrap();
    }
    let cap = Retention {
        max_messages: 10,
        max_age: Duration::from_secs(180 * 86_400),
    };
    assert_eq!(table.trim("q", cap).await.unwrap(), 22);
    assert_eq!(table.count("q").await.unwrap(), 10);
    let kept = queue.poison_list("q", 100).await.unwrap();
    let first: Vec<&str> = kept.iter().map(|m| m.id.as_str()).take(2).collect();
    assert_eq!(first, ["m20", "m21"]);
    assert_eq!(table.trim("q", cap).await.unwrap(), 0);
    let trims = table.trims("q", 10).await.unwrap();
    assert_eq!(trims.len(), 1);
    assert_eq!(trims[0].trimmed, 22);
    assert!(
        trims[0].retention.contains("10 messages"),
        "{}",
        trims[0].retention
    );
}

#[tokio::test]
async fn workers_poisoning_at_once_keep_the_counts_exact() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    let queue = WithPoisonTable::new(sqlite_queue(&dir).await, store);
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..8 {
        let table = queue.table().expect("a poison table").clone();
        tasks.spawn(async move {
            for i in 0..40 {
                let reason = format!("reason {} of worker", i % 3);
                table
                    .record(
                        "q",
                        &record(
                            &format!("w{worker}-{i}"),
                            &envelope("archive", i),
                            &reason,
                            i as i64,
                        ),
                    )
                    .await
                    .unwrap();
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    assert_eq!(
        queue
            .table()
            .expect("a poison table")
            .count("q")
            .await
            .unwrap(),
        320
    );
    let groups = queue
        .poison_reason_groups("q", &PoisonFilter::new())
        .await
        .unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].count, 320);
    let mut all = 0;
    let mut query = PoisonQuery::new(100, 0);
    loop {
        let page = queue.poison_page("q", &query).await.unwrap();
        all += page.messages.len();
        match page.next {
            Some(next) => query = query.after(Some(next)),
            None => break,
        }
    }
    assert_eq!(all, 320);
}

/// The defect found on RabbitMQ: while pages were being read, a discard of 10 answered
/// "already gone" for messages still there. Readers of the poison table take nothing off
/// the queue: four readers at once see the same list, and the discard takes all 10.
#[tokio::test]
async fn concurrent_readers_leave_a_discard_exact_over_rabbitmq() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broker = AnyQueue::connect(&url).await.unwrap();
    let name = support::unique("poison-table");
    let queue = WithPoisonTable::new(broker.clone(), sqlite_store(&dir).await);
    let config = WorkerConfig::new(name.as_str());
    queue.declare(&name, &config.queue_options()).await.unwrap();
    poison_through_deliveries(&queue, &name, 30).await;
    assert_eq!(queue.stats(&name).await.unwrap().poisoned, 30);
    let first = queue
        .poison_page(&name, &PoisonQuery::new(10, 100))
        .await
        .unwrap();
    let handles: Vec<String> = first.messages.iter().map(|m| m.handle.clone()).collect();
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (queue, name) = (queue.clone(), name.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                for _ in 0..5 {
                    let page = queue
                        .poison_page(&name, &PoisonQuery::new(50, 100))
                        .await
                        .unwrap();
                    seen.push(page.messages.len());
                }
                seen
            })
        })
        .collect();
    let taken = queue
        .poison_take(&name, &handles, &PoisonAction::Discard)
        .await
        .unwrap();
    assert_eq!(
        taken, handles,
        "every message of the set was there and is taken"
    );
    for reader in readers {
        let seen = reader.await.unwrap();
        assert!(seen.iter().all(|n| (20..=30).contains(n)), "{seen:?}");
    }
    assert_eq!(queue.stats(&name).await.unwrap().poisoned, 20);
    let page = queue
        .poison_page(&name, &PoisonQuery::new(50, 100))
        .await
        .unwrap();
    assert_eq!(page.messages.len(), 20);
    if let AnyQueue::Rabbit(rabbit) = &broker {
        let _ = rabbit.delete_queue(&name, &config.queue_options()).await;
    }
}

/// Every read the console makes of a poison table holding `TABLEKIT_POISON_SCALE`
/// messages (100,000 by default), timed on a SQLite store: run by hand
/// (`cargo test -p tablekit-workers --test poison_table -- --ignored --nocapture`); the
/// figures go in the issue's note. Loads through `record`, eight writers at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn every_read_of_a_hundred_thousand_poison_messages_is_timed() {
    let scale: usize = std::env::var("TABLEKIT_POISON_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    let queue = WithPoisonTable::new(sqlite_queue(&dir).await, store);
    queue
        .declare("big", &WorkerConfig::new("big").queue_options())
        .await
        .unwrap();
    support::console::load_poison(queue.table().expect("a poison table"), "big", scale).await;
    let time =
        async |what: &str,
               read: std::pin::Pin<Box<dyn std::future::Future<Output = String> + '_>>| {
            let at = std::time::Instant::now();
            let shown = read.await;
            println!(
                "{what:<40} {:>8.1} ms  {shown}",
                at.elapsed().as_secs_f64() * 1000.0
            );
        };
    let q = &queue;
    time(
        "count",
        Box::pin(async { q.stats("big").await.unwrap().poisoned.to_string() }),
    )
    .await;
    let first = q
        .poison_page("big", &PoisonQuery::new(50, 800))
        .await
        .unwrap();
    time(
        "first page, oldest first (50)",
        Box::pin(async {
            q.poison_page("big", &PoisonQuery::new(50, 800))
                .await
                .unwrap()
                .messages
                .len()
                .to_string()
        }),
    )
    .await;
    time(
        "second page",
        Box::pin(async {
            q.poison_page("big", &PoisonQuery::new(50, 800).after(first.next.clone()))
                .await
                .unwrap()
                .messages
                .len()
                .to_string()
        }),
    )
    .await;
    time(
        "first page, newest first",
        Box::pin(async {
            q.poison_page("big", &PoisonQuery::new(50, 800).newest_first(true))
                .await
                .unwrap()
                .messages[0]
                .id
                .clone()
        }),
    )
    .await;
    time(
        "last page (oldest first, read backwards)",
        Box::pin(async {
            q.poison_last_page("big", &PoisonQuery::new(50, 800))
                .await
                .unwrap()
                .messages
                .len()
                .to_string()
        }),
    )
    .await;
    time(
        "reason groups",
        Box::pin(async {
            q.poison_reason_groups("big", &PoisonFilter::new())
                .await
                .unwrap()
                .len()
                .to_string()
        }),
    )
    .await;
    time(
        "kinds",
        Box::pin(async {
            format!(
                "{:?}",
                q.poison_kinds("big", &PoisonFilter::new()).await.unwrap()
            )
        }),
    )
    .await;
    time(
        "page of a reason group",
        Box::pin(async {
            let page = q
                .poison_page(
                    "big",
                    &PoisonQuery::new(50, 800)
                        .filter(PoisonFilter::new().reason_group("timeout after # s")),
                )
                .await
                .unwrap();
            format!("{} next {}", page.messages.len(), page.next.is_some())
        }),
    )
    .await;
    time(
        "page of a rare id (text filter)",
        Box::pin(async {
            let page = q
                .poison_page(
                    "big",
                    &PoisonQuery::new(50, 800).filter(PoisonFilter::new().id("m0099999")),
                )
                .await
                .unwrap();
            format!("{} next {}", page.messages.len(), page.next.is_some())
        }),
    )
    .await;
    time(
        "a message whole",
        Box::pin(async {
            q.poison_body("big", &first.messages[7].handle)
                .await
                .unwrap()
                .unwrap()
                .id
        }),
    )
    .await;
    let handles: Vec<String> = first
        .messages
        .iter()
        .take(10)
        .map(|m| m.handle.clone())
        .collect();
    time(
        "discard of 10",
        Box::pin(async {
            q.poison_take("big", &handles, &PoisonAction::Discard)
                .await
                .unwrap()
                .len()
                .to_string()
        }),
    )
    .await;
    time(
        "filtered reason groups (kind audit, from counts)",
        Box::pin(async {
            q.poison_reason_groups("big", &PoisonFilter::new().kind("audit"))
                .await
                .unwrap()
                .len()
                .to_string()
        }),
    )
    .await;
    time(
        "reason groups of a text filter (budgeted)",
        Box::pin(async {
            q.poison_reason_groups("big", &PoisonFilter::new().reason("hostile"))
                .await
                .unwrap()
                .len()
                .to_string()
        }),
    )
    .await;
    time(
        "groups and kinds of a text filter (one scan)",
        Box::pin(async {
            let table = q.table().expect("a poison table");
            let (groups, kinds) = table
                .facets("big", &PoisonFilter::new().reason("hostile"))
                .await
                .unwrap();
            format!("{} groups, {} kinds", groups.len(), kinds.len())
        }),
    )
    .await;
    time(
        "kinds of a text filter (budgeted)",
        Box::pin(async {
            format!(
                "{:?}",
                q.poison_kinds("big", &PoisonFilter::new().body("\"n\":1"))
                    .await
                    .unwrap()
            )
        }),
    )
    .await;
    assert_eq!(q.stats("big").await.unwrap().poisoned, scale as u64 - 10);
}

#[tokio::test]
async fn views_filtered_by_kind_or_group_are_counted_without_a_scan_and_agree_with_one() {
    let queue = WithPoisonTable::new(
        sqlite_queue(&tempfile::tempdir().unwrap()).await,
        AnyStore::Memory(MemoryStore::new()),
    );
    let table = queue.table().expect("a poison table");
    for i in 0..40 {
        let kind = ["archive", "audit", "index"][i % 3];
        let reason = ["timeout after 3 s", "conflict on ord-7", "gone"][i % 4 % 3];
        let body = if i % 5 == 0 {
            "not an operation".to_owned()
        } else {
            envelope(kind, i)
        };
        table
            .record("q", &record(&format!("m{i}"), &body, reason, i as i64))
            .await
            .unwrap();
    }
    // A text filter that passes everything makes the same views by a scan.
    let scanned = |filter: PoisonFilter| filter.id("m");
    for filter in [
        PoisonFilter::new().kind("audit"),
        PoisonFilter::new().kind("AUDIT"),
        PoisonFilter::new().reason_group("conflict on ord-#"),
        PoisonFilter::new()
            .kind("index")
            .reason_group("timeout after # s"),
    ] {
        let counted = queue.poison_reason_groups("q", &filter).await.unwrap();
        let by_scan = queue
            .poison_reason_groups("q", &scanned(filter.clone()))
            .await
            .unwrap();
        assert_eq!(counted, by_scan, "{filter:?}");
        let counted = queue.poison_kinds("q", &filter).await.unwrap();
        let by_scan = queue
            .poison_kinds("q", &scanned(filter.clone()))
            .await
            .unwrap();
        assert_eq!(counted, by_scan, "{filter:?}");
        assert!(!counted.is_empty());
    }
}

#[tokio::test]
async fn a_body_over_a_row_is_kept_in_pieces_read_whole_and_removed_with_its_message() {
    use tablekit_core::TableStore;
    let store = AnyStore::Memory(MemoryStore::new());
    let queue = WithPoisonTable::new(
        sqlite_queue(&tempfile::tempdir().unwrap()).await,
        store.clone(),
    );
    let table = queue.table().expect("a poison table");
    let body: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut big = record("big", "", "too large to handle", 1);
    big.body = body.clone();
    let Recorded::New(handle) = table.record("q", &big).await.unwrap() else {
        panic!("recorded before")
    };
    let whole = table.message("q", &handle).await.unwrap().unwrap();
    assert_eq!(whole.size, body.len());
    assert_eq!(whole.body, body);
    let page = queue
        .poison_page("q", &PoisonQuery::new(10, 100))
        .await
        .unwrap();
    assert_eq!(page.messages[0].body, body[..100]);
    let pieces = || async {
        store
            .query_all(
                tablekit_workers::queue::poison_table::POISON_TABLE,
                tablekit_core::Query::new(),
            )
            .await
            .unwrap()
            .into_iter()
            .filter(|row| row.row_key.starts_with("b."))
            .count()
    };
    assert_eq!(pieces().await, 3);
    queue
        .poison_take("q", std::slice::from_ref(&handle), &PoisonAction::Discard)
        .await
        .unwrap();
    assert_eq!(pieces().await, 0);
    assert_eq!(table.count("q").await.unwrap(), 0);
}

/// A text filter's reason groups and kinds are counted over the oldest `SCAN_BUDGET`
/// messages only, so a page stays fast whatever the table holds; `counted_whole` says so,
/// and the listing itself still finds the messages past the budget.
#[tokio::test]
async fn a_text_filters_counts_stop_at_the_scan_budget_and_say_so() {
    use tablekit_workers::queue::poison_table::{PoisonTable, SCAN_BUDGET};
    let table = PoisonTable::new(AnyStore::Memory(MemoryStore::new()));
    let over = SCAN_BUDGET + 25;
    for i in 0..over {
        table
            .record(
                "q",
                &record(
                    &format!("m{i:06}"),
                    &envelope("archive", i),
                    "slow disk",
                    i as i64,
                ),
            )
            .await
            .unwrap();
    }
    let text = PoisonFilter::new().reason("slow");
    let groups = table.reason_groups("q", &text).await.unwrap();
    assert_eq!(
        groups.iter().map(|g| g.count).sum::<u64>(),
        SCAN_BUDGET as u64
    );
    let kinds = table.kinds("q", &text).await.unwrap();
    assert_eq!(kinds, [(Some("archive".to_owned()), SCAN_BUDGET as u64)]);
    // Both in one scan, the same answers.
    assert_eq!(
        table.facets("q", &text).await.unwrap(),
        (groups.clone(), kinds.clone())
    );
    assert!(!PoisonTable::<AnyStore>::counted_whole(&text, over as u64));
    assert!(PoisonTable::<AnyStore>::counted_whole(
        &text,
        SCAN_BUDGET as u64
    ));
    // Counted from the count rows, whatever the size.
    assert!(PoisonTable::<AnyStore>::counted_whole(
        &PoisonFilter::new()
            .kind("archive")
            .reason_group("slow disk"),
        over as u64
    ));
    let all = table
        .reason_groups("q", &PoisonFilter::new())
        .await
        .unwrap();
    assert_eq!(all.iter().map(|g| g.count).sum::<u64>(), over as u64);
    // The listing finds the newest, past the budget.
    let newest = table
        .page(
            "q",
            &PoisonQuery::new(5, 0).filter(PoisonFilter::new().id(format!("m{:06}", over - 1))),
        )
        .await
        .unwrap();
    let mut found = newest.messages.len();
    let mut next = newest.next;
    while found == 0 && next.is_some() {
        let page = table
            .page(
                "q",
                &PoisonQuery::new(5, 0)
                    .filter(PoisonFilter::new().id(format!("m{:06}", over - 1)))
                    .after(next.clone()),
            )
            .await
            .unwrap();
        found = page.messages.len();
        next = page.next;
    }
    assert_eq!(found, 1);
}

/// What each use of the poison table costs in store calls, counted: recording a message
/// (its id marker checked, its count shares read, one transaction), recording it again
/// (found by its marker), a count, a page, the unfiltered groups and kinds (count rows),
/// one message, and a discard.
#[tokio::test]
async fn every_use_of_the_poison_table_costs_the_store_calls_counted_here() {
    use tablekit_core::roundtrip::{Latency, RoundTripStore};
    use tablekit_workers::queue::poison_table::PoisonTable;
    let store = RoundTripStore::new(MemoryStore::new(), Latency::None);
    let table = PoisonTable::new(store.clone());
    for i in 0..20 {
        table
            .record(
                "q",
                &record(&format!("m{i}"), &envelope("archive", i), "slow", i as i64),
            )
            .await
            .unwrap();
    }
    let calls = |what: &str| {
        let c = store.trips().counts();
        store.trips().reset();
        println!("{what}: {c:?}");
        (c.gets, c.queries, c.writes, c.batches)
    };
    calls("warm up");
    table
        .record("q", &record("m20", &envelope("archive", 20), "slow", 20))
        .await
        .unwrap();
    let first = calls("a recording");
    table
        .record("q", &record("m20", &envelope("archive", 20), "slow", 20))
        .await
        .unwrap();
    let again = calls("the same recording again");
    assert_eq!(table.count("q").await.unwrap(), 21);
    let count = calls("a count");
    let page = table.page("q", &PoisonQuery::new(50, 800)).await.unwrap();
    let paged = calls("a page of 21");
    table
        .reason_groups("q", &PoisonFilter::new())
        .await
        .unwrap();
    table.kinds("q", &PoisonFilter::new()).await.unwrap();
    let facets = calls("groups and kinds, unfiltered");
    let handle = page.messages[3].handle.clone();
    table.message("q", &handle).await.unwrap().unwrap();
    let one = calls("one message");
    assert_eq!(first.3, 1, "one transaction: {first:?}");
    assert_eq!(again.3, 0, "recording again writes nothing: {again:?}");
    assert_eq!(
        count.1, 1,
        "a count reads its shares in one query: {count:?}"
    );
    assert_eq!((paged.0, paged.1), (0, 1), "a page is one query: {paged:?}");
    assert_eq!(facets.1, 2, "two count-row queries: {facets:?}");
    assert_eq!((one.0, one.1), (1, 0), "one message is one get: {one:?}");
    // Its id marker, then the share of each of the four counts it adds to (the queue,
    // its reason group, its kind, the pair) read for their ETags; one transaction.
    assert_eq!(first, (5, 0, 0, 1), "a recording: {first:?}");
    assert_eq!(again, (1, 0, 0, 0), "found by its marker: {again:?}");
}

/// Ids and reasons another program wrote as bytes that are not UTF-8 are kept byte for
/// byte: swept in from the SQLite queue's poison queue, and recorded by a worker that gives
/// up on such a message; the export writes them in base64 beside their lossy text.
#[tokio::test]
async fn ids_and_reasons_that_are_not_utf8_are_kept_and_exported_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let broker = sqlite_queue(&dir).await;
    let queue = WithPoisonTable::new(broker.clone(), sqlite_store(&dir).await);
    queue
        .declare("bytes", &WorkerConfig::new("bytes").queue_options())
        .await
        .unwrap();
    let file = rusqlite::Connection::open(dir.path().join("queue.db")).unwrap();
    let now = chrono::Utc::now().timestamp_micros();
    // On the broker's poison queue, as another program left it.
    file.execute(
        "INSERT INTO tablekit_queue (queue, id, body, sent_at, visible_at, dequeue_count, reason) VALUES ('bytes-poison', ?1, ?2, ?3, ?3, 5, ?4)",
        rusqlite::params![b"id-\xff\xfe".to_vec(), b"{}".to_vec(), now, b"bad \xc3(".to_vec()],
    )
    .unwrap();
    // Waiting, for a worker to give up on.
    file.execute(
        "INSERT INTO tablekit_queue (queue, id, body, sent_at, visible_at) VALUES ('bytes', ?1, ?2, ?3, ?3)",
        rusqlite::params![b"w-\x80".to_vec(), b"not json".to_vec(), now],
    )
    .unwrap();
    assert_eq!(queue.sweep("bytes").await.unwrap(), 1);
    let mut consumer = queue
        .consume("bytes", ConsumeOptions::default())
        .await
        .unwrap();
    let delivery = consumer.next().await.unwrap().unwrap();
    assert_eq!(delivery.received().id, "w-\u{FFFD}");
    delivery.poison("cannot decode").await.unwrap();
    consumer.close().await;

    let table = queue.table().expect("a poison table");
    let page = table.page("bytes", &PoisonQuery::new(10, 0)).await.unwrap();
    assert_eq!(page.messages.len(), 2);
    let mut lines = Vec::new();
    for listed in &page.messages {
        let whole = table
            .message("bytes", &listed.handle)
            .await
            .unwrap()
            .unwrap();
        let line = tablekit_workers::queue::desk::export_line(&whole);
        lines.push(serde_json::from_slice::<serde_json::Value>(&line).unwrap());
    }
    let b64 = |bytes: &[u8]| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(bytes)
    };
    let swept = lines
        .iter()
        .find(|l| l["reason"] != "cannot decode")
        .unwrap();
    assert_eq!(swept["id"], "id-\u{FFFD}\u{FFFD}");
    assert_eq!(swept["raw"]["id"], b64(b"id-\xff\xfe"), "{swept}");
    assert_eq!(swept["raw"]["reason"], b64(b"bad \xc3("), "{swept}");
    let recorded = lines
        .iter()
        .find(|l| l["reason"] == "cannot decode")
        .unwrap();
    assert_eq!(recorded["raw"]["id"], b64(b"w-\x80"), "{recorded}");
    assert!(recorded["raw"].get("reason").is_none(), "{recorded}");
    // Read back, an export line gives the bytes again.
    let exported: tablekit_workers::queue::desk::ExportedMessage =
        serde_json::from_value(swept.clone()).unwrap();
    assert_eq!(exported.raw.id.as_deref(), Some(&b"id-\xff\xfe"[..]));
    // Two ids that read the same lossily are two messages.
    file.execute(
        "INSERT INTO tablekit_queue (queue, id, body, sent_at, visible_at, dequeue_count, reason) VALUES ('bytes-poison', ?1, ?2, ?3, ?3, 5, 'r')",
        rusqlite::params![b"id-\xfe\xff".to_vec(), b"{}".to_vec(), now],
    )
    .unwrap();
    assert_eq!(queue.sweep("bytes").await.unwrap(), 1);
    assert_eq!(table.count("bytes").await.unwrap(), 3);
}
