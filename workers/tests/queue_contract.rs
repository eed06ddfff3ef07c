//! One contract for every queue backend, run against RabbitMQ, the SQLite queue and Azure
//! Queue Storage (Azurite).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use tablekit_workers::Error;
use tablekit_workers::queue::{
    ConsumeOptions, Consumer, Delivery, PeekQuery, PoisonAction, PoisonFilter, PoisonMessage,
    PoisonPage, PoisonQuery, Queue, QueueOptions, ReasonGroup, UNDECODABLE_REASON_GROUP,
    poison_queue,
};
use tokio::time::timeout;

fn options() -> QueueOptions {
    QueueOptions {
        max_deliveries: 5,
        retry_delays: vec![Duration::from_millis(200), Duration::from_millis(400)],
    }
}

fn consume_options(prefetch: u16) -> ConsumeOptions {
    ConsumeOptions {
        prefetch,
        lease: Duration::from_secs(30),
    }
}

async fn next<C: Consumer>(consumer: &mut C) -> C::Delivery {
    timeout(Duration::from_secs(10), consumer.next())
        .await
        .expect("a delivery within 10 s")
        .expect("the queue works")
        .expect("the consumer is open")
}

async fn nothing_within<C: Consumer>(consumer: &mut C, wait: Duration) -> bool {
    timeout(wait, consumer.next()).await.is_err()
}

pub async fn sent_messages_arrive_once_and_acked_ones_are_gone<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    queue.declare(&name, &options()).await.unwrap();
    for i in 0..3 {
        queue
            .send(&name, &format!("m{i}"), format!("body {i}").as_bytes())
            .await
            .unwrap();
    }
    let mut consumer = queue.consume(&name, consume_options(8)).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let delivery = next(&mut consumer).await;
        let received = delivery.received().clone();
        assert_eq!(received.delivery_count, 1);
        assert_eq!(
            received.body,
            format!("body {}", &received.id[1..]).into_bytes()
        );
        assert!(received.sent_at.is_some());
        seen.push(received.id);
        delivery.ack().await.unwrap();
    }
    seen.sort();
    assert_eq!(seen, ["m0", "m1", "m2"]);
    assert!(nothing_within(&mut consumer, Duration::from_millis(500)).await);
    consumer.close().await;
    let stats = queue.stats(&name).await.unwrap();
    assert_eq!((stats.waiting, stats.poisoned), (0, 0));
}

/// What each backend can tell of a queue's consumers: RabbitMQ counts them; SQLite and
/// Azure tell since when the message at the front has waited, which a receive ends.
pub async fn stats_tell_whether_a_consumer_takes_the_messages<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    queue.declare(&name, &options()).await.unwrap();
    assert_eq!(queue.stats(&name).await.unwrap().waiting_since, None);
    // The service's clock may differ a little from this one's, and it keeps seconds.
    let before = chrono::Utc::now() - chrono::Duration::seconds(5);
    queue.send(&name, "w1", b"waiting").await.unwrap();
    let stats = queue.stats(&name).await.unwrap();
    match (stats.consumers, stats.waiting_since) {
        (Some(consumers), None) => assert_eq!(consumers, 0),
        (None, Some(since)) => assert!(
            since >= before && since <= chrono::Utc::now() + chrono::Duration::seconds(5),
            "{since}"
        ),
        other => panic!("a backend tells one of the two: {other:?}"),
    }
    let mut consumer = queue.consume(&name, consume_options(1)).await.unwrap();
    let delivery = next(&mut consumer).await;
    let stats = queue.stats(&name).await.unwrap();
    match stats.consumers {
        Some(consumers) => assert_eq!(consumers, 1),
        None => assert_eq!(stats.waiting_since, None, "the message was taken"),
    }
    delivery.ack().await.unwrap();
    consumer.close().await;
}

pub async fn a_retry_comes_back_after_its_delay_with_the_next_count<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    queue.declare(&name, &options()).await.unwrap();
    queue.send(&name, "r1", b"retry me").await.unwrap();
    let mut consumer = queue.consume(&name, consume_options(4)).await.unwrap();
    let first = next(&mut consumer).await;
    assert_eq!(first.received().delivery_count, 1);
    first.retry(Duration::from_millis(200)).await.unwrap();
    let started = std::time::Instant::now();
    let second = next(&mut consumer).await;
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(second.received().id, "r1");
    assert_eq!(second.received().body, b"retry me");
    assert_eq!(second.received().delivery_count, 2);
    second.retry(Duration::ZERO).await.unwrap();
    let third = next(&mut consumer).await;
    assert_eq!(third.received().delivery_count, 3);
    third.ack().await.unwrap();
    consumer.close().await;
}

pub async fn unsettled_deliveries_come_back_counted<Q: Queue + Clone>(queue: Q, name: String) {
    queue.declare(&name, &options()).await.unwrap();
    queue.send(&name, "u1", b"x").await.unwrap();
    let mut consumer = queue
        .consume(
            &name,
            ConsumeOptions {
                prefetch: 1,
                lease: Duration::from_millis(300),
            },
        )
        .await
        .unwrap();
    let delivery = next(&mut consumer).await;
    assert_eq!(delivery.received().delivery_count, 1);
    // The consumer dies without settling: the message returns.
    drop(delivery);
    consumer.close().await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut consumer = queue.consume(&name, consume_options(1)).await.unwrap();
    let again = next(&mut consumer).await;
    assert_eq!(again.received().id, "u1");
    assert_eq!(again.received().delivery_count, 2);
    again.ack().await.unwrap();
    consumer.close().await;
}

pub async fn poison_keeps_the_reason_and_replay_brings_messages_back<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    queue.declare(&name, &options()).await.unwrap();
    for id in ["p1", "p2"] {
        queue.send(&name, id, id.as_bytes()).await.unwrap();
    }
    let mut consumer = queue.consume(&name, consume_options(4)).await.unwrap();
    for _ in 0..2 {
        let delivery = next(&mut consumer).await;
        let reason = format!("cannot handle {}", delivery.received().id);
        delivery.poison(&reason).await.unwrap();
    }
    let mut poisoned = queue.poison_list(&name, 10).await.unwrap();
    poisoned.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(poisoned.len(), 2);
    assert_eq!(poisoned[0].reason, "cannot handle p1");
    assert_eq!(poisoned[0].body, b"p1");
    assert_eq!(poisoned[0].delivery_count, 1);
    let at = poisoned[0].poisoned_at.expect("when it was poisoned");
    assert!(
        (chrono::Utc::now() - at).num_seconds().abs() < 120,
        "poisoned at {at}"
    );
    // Listing does not consume.
    assert_eq!(queue.poison_list(&name, 10).await.unwrap().len(), 2);
    assert_eq!(queue.stats(&name).await.unwrap().poisoned, 2);

    assert_eq!(queue.poison_replay(&name, Some("p2")).await.unwrap(), 1);
    let back = next(&mut consumer).await;
    assert_eq!(back.received().id, "p2");
    assert_eq!(
        back.received().delivery_count,
        1,
        "a replay starts a fresh count"
    );
    back.ack().await.unwrap();
    assert_eq!(queue.poison_replay(&name, None).await.unwrap(), 1);
    let back = next(&mut consumer).await;
    assert_eq!(back.received().id, "p1");
    back.ack().await.unwrap();
    assert!(queue.poison_list(&name, 10).await.unwrap().is_empty());
    consumer.close().await;
}

pub async fn discard_deletes_poison_messages_for_good_and_twice_is_harmless<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    queue.declare(&name, &options()).await.unwrap();
    for id in ["d1", "d2", "d3"] {
        queue.send(&name, id, id.as_bytes()).await.unwrap();
    }
    let mut consumer = queue.consume(&name, consume_options(4)).await.unwrap();
    for _ in 0..3 {
        next(&mut consumer).await.poison("no").await.unwrap();
    }
    assert_eq!(queue.poison_discard(&name, Some("d2")).await.unwrap(), 1);
    // A second discard of the same message finds nothing (a double click).
    assert_eq!(queue.poison_discard(&name, Some("d2")).await.unwrap(), 0);
    let mut left: Vec<String> = queue
        .poison_list(&name, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    left.sort();
    assert_eq!(left, ["d1", "d3"]);
    assert_eq!(queue.poison_discard(&name, None).await.unwrap(), 2);
    assert!(queue.poison_list(&name, 10).await.unwrap().is_empty());
    assert_eq!(queue.stats(&name).await.unwrap().poisoned, 0);
    // Nothing came back to the queue.
    assert!(nothing_within(&mut consumer, Duration::from_millis(500)).await);
    consumer.close().await;
}

pub async fn prefetch_bounds_the_deliveries_held_at_once<Q: Queue + Clone>(queue: Q, name: String) {
    queue.declare(&name, &options()).await.unwrap();
    for i in 0..5 {
        queue.send(&name, &format!("f{i}"), b"x").await.unwrap();
    }
    let mut consumer = queue.consume(&name, consume_options(2)).await.unwrap();
    let a = next(&mut consumer).await;
    let b = next(&mut consumer).await;
    assert!(
        nothing_within(&mut consumer, Duration::from_millis(500)).await,
        "a third delivery while two are unsettled"
    );
    a.ack().await.unwrap();
    b.ack().await.unwrap();
    for _ in 0..3 {
        next(&mut consumer).await.ack().await.unwrap();
    }
    consumer.close().await;
}

pub async fn invalid_queue_names_are_refused_before_any_io<Q: Queue + Clone>(
    queue: Q,
    _name: String,
) {
    let long = "q".repeat(300);
    for name in ["", long.as_str(), "amq.reserved", "bad\nname"] {
        let error = queue
            .send(name, "id", b"x")
            .await
            .expect_err("invalid name");
        assert!(matches!(error, Error::InvalidQueueName { .. }), "{error}");
        let error = queue
            .declare(name, &options())
            .await
            .expect_err("invalid name");
        assert!(matches!(error, Error::InvalidQueueName { .. }), "{error}");
    }
}

/// A queue nobody declared, and so its retry and poison queues: its stats say it is not
/// declared, on every backend (the SQLite queue keeps a registry of declarations); every
/// other read of it and its companions is empty, not an error (a reader can start before
/// the first worker declares).
pub async fn reads_of_an_undeclared_queue_and_its_companions_are_empty<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    match queue.stats(&name).await {
        Err(Error::NotDeclared { queue }) => assert_eq!(queue, name),
        other => panic!("not declared: {other:?}"),
    }
    assert!(!queue.exists(&name).await.unwrap());
    match queue.peek(&name, &PeekQuery::new(10)).await {
        Ok(waiting) => assert!(waiting.is_empty(), "{waiting:?}"),
        Err(Error::Unsupported(_)) => {}
        Err(e) => panic!("{e}"),
    }
    assert!(
        queue
            .poison_reason_groups(&name, &PoisonFilter::new())
            .await
            .unwrap()
            .is_empty()
    );
    match queue
        .poison_page(&name, &PoisonQuery::new(10, 10).newest_first(true))
        .await
    {
        Ok(page) => assert!(page.messages.is_empty() && page.next.is_none()),
        Err(Error::Unsupported(_)) => {}
        Err(e) => panic!("{e}"),
    }
    assert!(queue.poison_list(&name, 10).await.unwrap().is_empty());
    // More than one Azure peek shows: another path.
    assert!(queue.poison_list(&name, 100).await.unwrap().is_empty());
    assert_eq!(queue.poison_replay(&name, None).await.unwrap(), 0);
    assert_eq!(queue.poison_replay(&name, Some("x")).await.unwrap(), 0);
    assert_eq!(queue.poison_discard(&name, None).await.unwrap(), 0);
    assert_eq!(queue.poison_discard(&name, Some("x")).await.unwrap(), 0);
    // The queue still works afterwards (a closed channel is not left behind).
    queue.declare(&name, &options()).await.unwrap();
    queue.send(&name, "after", b"x").await.unwrap();
    assert_eq!(queue.stats(&name).await.unwrap().waiting, 1);
}

/// The body of poison message `i` of [`poison_many`]: an operation's envelope padded to
/// over a kilobyte (every fourth one not JSON at all), some holding a needle.
fn many_body(i: usize) -> Vec<u8> {
    let pad = "x".repeat(1000 + i);
    let needle = if i.is_multiple_of(25) {
        "a NeedLe here"
    } else {
        ""
    };
    match i % 4 {
        3 => format!("raw {i} {needle} {pad}\u{0}\u{7f}").into_bytes(),
        odd => {
            let kind = if odd == 1 {
                "index-order"
            } else {
                "archive-employee"
            };
            format!(
                r#"{{"id":"00000000-0000-0000-0000-{i:012}","kind":"{kind}","version":2,"created_at":"2026-01-01T00:00:00Z","payload":{{"n":{i},"note":"{needle}","pad":"{pad}"}}}}"#
            )
            .into_bytes()
        }
    }
}

fn many_reason(i: usize) -> &'static str {
    match i % 10 {
        0..=4 => "alpha failed",
        5..=7 => "Beta failed",
        _ => "gamma failed",
    }
}

/// Sends `n` messages (`m-000`…) and poisons each with its reason.
async fn poison_many<Q: Queue + Clone>(queue: &Q, name: &str, n: usize) {
    for i in 0..n {
        queue
            .send(name, &format!("m-{i:03}"), &many_body(i))
            .await
            .unwrap();
    }
    let mut consumer = queue.consume(name, consume_options(32)).await.unwrap();
    for _ in 0..n {
        let delivery = next(&mut consumer).await;
        let i: usize = delivery.received().id[2..].parse().unwrap();
        delivery.poison(many_reason(i)).await.unwrap();
    }
    consumer.close().await;
}

/// Every page of `query`, in turn.
async fn all_pages<Q: Queue>(queue: &Q, name: &str, query: PoisonQuery) -> Vec<PoisonPage> {
    let mut pages = Vec::new();
    let mut after = None;
    loop {
        let page = queue
            .poison_page(name, &query.clone().after(after))
            .await
            .unwrap();
        after = page.next.clone();
        pages.push(page);
        if after.is_none() {
            return pages;
        }
        assert!(pages.len() < 100, "pages without end");
    }
}

async fn ids_passing<Q: Queue>(queue: &Q, name: &str, filter: PoisonFilter) -> Vec<String> {
    let mut ids: Vec<String> = all_pages(queue, name, PoisonQuery::new(100, 0).filter(filter))
        .await
        .into_iter()
        .flat_map(|p| p.messages)
        .map(|m| m.id)
        .collect();
    ids.sort();
    ids
}

fn expected_ids(pass: impl Fn(usize) -> bool) -> Vec<String> {
    (0..250)
        .filter(|i| pass(*i))
        .map(|i| format!("m-{i:03}"))
        .collect()
}

pub async fn a_poison_queue_reads_in_pages_with_previews_filters_and_reasons<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    queue.declare(&name, &options()).await.unwrap();
    poison_many(&queue, &name, 250).await;

    let pages = all_pages(&queue, &name, PoisonQuery::new(100, 16)).await;
    let sizes: Vec<usize> = pages.iter().map(|p| p.messages.len()).collect();
    assert_eq!(sizes, [100, 100, 50]);
    let mut seen = std::collections::HashSet::new();
    for message in pages.iter().flat_map(|p| &p.messages) {
        assert!(seen.insert(message.id.clone()), "{} twice", message.id);
        let i: usize = message.id[2..].parse().unwrap();
        let whole = many_body(i);
        assert_eq!(message.size, whole.len(), "{}", message.id);
        assert_eq!(message.body, whole[..16], "{}", message.id);
        assert!(!message.is_whole());
        assert_eq!(message.reason, many_reason(i));
        let kind = match i % 4 {
            3 => None,
            1 => Some(("index-order".to_owned(), 2)),
            _ => Some(("archive-employee".to_owned(), 2)),
        };
        assert_eq!(
            message.operation, kind,
            "a cut body still shows its operation"
        );
    }
    assert_eq!(seen.len(), 250);

    assert_eq!(
        ids_passing(&queue, &name, PoisonFilter::new().kind("Archive-Employee")).await,
        expected_ids(|i| i.is_multiple_of(2))
    );
    assert_eq!(
        ids_passing(&queue, &name, PoisonFilter::new().id("M-01")).await,
        expected_ids(|i| (10..20).contains(&i))
    );
    assert_eq!(
        ids_passing(&queue, &name, PoisonFilter::new().reason("beta")).await,
        expected_ids(|i| (5..=7).contains(&(i % 10)))
    );
    assert_eq!(
        ids_passing(&queue, &name, PoisonFilter::new().body("needle")).await,
        expected_ids(|i| i.is_multiple_of(25))
    );
    assert_eq!(
        ids_passing(
            &queue,
            &name,
            PoisonFilter::new().kind("index-order").reason("ALPHA")
        )
        .await,
        expected_ids(|i| i % 4 == 1 && i % 10 <= 4)
    );
    // A filtered page is full and says where the next one starts.
    let filtered = PoisonQuery::new(10, 4).filter(PoisonFilter::new().reason("gamma"));
    let pages = all_pages(&queue, &name, filtered).await;
    let sizes: Vec<usize> = pages.iter().map(|p| p.messages.len()).collect();
    assert_eq!(sizes, [10, 10, 10, 10, 10]);

    assert_eq!(
        queue
            .poison_reasons(&name, &PoisonFilter::new())
            .await
            .unwrap(),
        [
            ("alpha failed".to_owned(), 125),
            ("Beta failed".to_owned(), 75),
            ("gamma failed".to_owned(), 50)
        ]
    );
    assert_eq!(
        queue
            .poison_reasons(&name, &PoisonFilter::new().body("needle"))
            .await
            .unwrap(),
        // Most first, then by the text (an uppercase letter sorts first).
        [
            ("Beta failed".to_owned(), 5),
            ("alpha failed".to_owned(), 5)
        ]
    );

    // One message whole, by the handle its page gave.
    let first = &pages[0].messages[3];
    let whole = queue
        .poison_body(&name, &first.handle)
        .await
        .unwrap()
        .expect("still poisoned");
    let i: usize = whole.id[2..].parse().unwrap();
    assert_eq!(whole.id, first.id);
    assert_eq!(whole.body, many_body(i));
    assert!(whole.is_whole());
    assert_eq!(whole.size, whole.body.len());
    assert_eq!(whole.reason, "gamma failed");
    assert_eq!(
        queue.stats(&name).await.unwrap().poisoned,
        250,
        "reading takes nothing"
    );
}

/// The handles of the poison messages with these ids, read from a page.
async fn handles_of<Q: Queue>(queue: &Q, name: &str, ids: &[&str]) -> Vec<String> {
    let page = queue
        .poison_page(name, &PoisonQuery::new(1000, 0))
        .await
        .unwrap();
    ids.iter()
        .map(|id| {
            page.messages
                .iter()
                .find(|m| m.id == *id)
                .unwrap_or_else(|| panic!("{id} is poisoned"))
                .handle
                .clone()
        })
        .collect()
}

async fn poison_ids<Q: Queue + Clone>(queue: &Q, name: &str, ids: &[&str]) {
    for id in ids {
        queue.send(name, id, id.as_bytes()).await.unwrap();
    }
    let mut consumer = queue.consume(name, consume_options(8)).await.unwrap();
    for _ in ids {
        let delivery = next(&mut consumer).await;
        let reason = format!("no {}", delivery.received().id);
        delivery.poison(&reason).await.unwrap();
    }
    consumer.close().await;
}

async fn poisoned_ids<Q: Queue>(queue: &Q, name: &str) -> Vec<String> {
    let mut ids: Vec<String> = queue
        .poison_list(name, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    ids.sort();
    ids
}

/// A handle names one poisoning: of two messages with one id, poisoned one after the
/// other, the handle of the first takes the first only (the SQLite queue's row, the mark
/// tablekit sets when it poisons on RabbitMQ, the service's message id on Azure) — what
/// binds a console's "all" to the set its dry run listed.
pub async fn a_handle_names_one_poisoning_of_a_repeated_id<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    queue.declare(&name, &options()).await.unwrap();
    poison_ids(&queue, &name, &["same"]).await;
    let first = handles_of(&queue, &name, &["same"]).await;
    assert_ne!(first[0], "same", "a handle of its own, not the id");
    poison_ids(&queue, &name, &["same"]).await;
    let taken = queue
        .poison_take(&name, &first, &PoisonAction::Discard)
        .await
        .unwrap();
    assert_eq!(taken, first);
    let left = queue.poison_list(&name, 10).await.unwrap();
    assert_eq!(left.len(), 1, "the second poisoning stays");
    assert_ne!(left[0].handle, first[0]);
}

pub async fn an_exact_set_of_poison_messages_is_taken_by_handle<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    let other = format!("{name}-to");
    queue.declare(&name, &options()).await.unwrap();
    queue.declare(&other, &options()).await.unwrap();
    poison_ids(&queue, &name, &["t0", "t1", "t2", "t3", "t4"]).await;
    let handles = handles_of(&queue, &name, &["t1", "t3", "t0", "t4"]).await;
    // Poisoned after the handles were read: not theirs to take.
    poison_ids(&queue, &name, &["t5"]).await;

    let taken = queue
        .poison_take(&name, &handles[..2], &PoisonAction::Replay)
        .await
        .unwrap();
    assert_eq!(taken, handles[..2]);
    assert_eq!(poisoned_ids(&queue, &name).await, ["t0", "t2", "t4", "t5"]);
    let mut consumer = queue.consume(&name, consume_options(8)).await.unwrap();
    let mut back = Vec::new();
    for _ in 0..2 {
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.received().delivery_count, 1, "a fresh count");
        assert_eq!(
            delivery.received().body,
            delivery.received().id.as_bytes(),
            "the body whole"
        );
        back.push(delivery.received().id.clone());
        delivery.ack().await.unwrap();
    }
    back.sort();
    assert_eq!(back, ["t1", "t3"]);
    assert!(nothing_within(&mut consumer, Duration::from_millis(300)).await);
    consumer.close().await;

    // Handles already gone (a double click) are not taken again, nor reported.
    let again = queue
        .poison_take(&name, &handles[..3], &PoisonAction::Discard)
        .await
        .unwrap();
    assert_eq!(again, [handles[2].clone()], "only t0 was still there");
    assert_eq!(poisoned_ids(&queue, &name).await, ["t2", "t4", "t5"]);

    // To another queue, with a fresh count.
    let moved = queue
        .poison_take(
            &name,
            &[handles[3].clone()],
            &PoisonAction::ReplayTo(other.clone()),
        )
        .await
        .unwrap();
    assert_eq!(moved, [handles[3].clone()]);
    let mut consumer = queue.consume(&other, consume_options(8)).await.unwrap();
    let delivery = next(&mut consumer).await;
    assert_eq!(delivery.received().id, "t4");
    assert_eq!(delivery.received().body, b"t4");
    assert_eq!(delivery.received().delivery_count, 1);
    delivery.ack().await.unwrap();
    consumer.close().await;
    assert_eq!(poisoned_ids(&queue, &name).await, ["t2", "t5"]);
    assert_eq!(queue.stats(&name).await.unwrap().waiting, 0);
    assert!(
        queue
            .poison_take(&name, &[], &PoisonAction::Discard)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn a_paused_queue_reads_paused_until_resumed<Q: Queue + Clone>(queue: Q, name: String) {
    let other = format!("{name}-to");
    queue.declare(&name, &options()).await.unwrap();
    queue.declare(&other, &options()).await.unwrap();
    assert!(!queue.paused(&name).await.unwrap());
    queue.set_paused(&name, true).await.unwrap();
    queue.set_paused(&name, true).await.unwrap();
    assert!(queue.paused(&name).await.unwrap());
    assert!(
        !queue.paused(&other).await.unwrap(),
        "one queue paused only"
    );
    // Messages keep arriving while paused.
    queue.send(&name, "w1", b"x").await.unwrap();
    queue.set_paused(&name, false).await.unwrap();
    queue.set_paused(&name, false).await.unwrap();
    assert!(!queue.paused(&name).await.unwrap());
    let mut consumer = queue.consume(&name, consume_options(1)).await.unwrap();
    let delivery = next(&mut consumer).await;
    assert_eq!(delivery.received().id, "w1");
    delivery.ack().await.unwrap();
    consumer.close().await;
}

/// A declared queue exists; a name nobody declared (a typo of it, or `jbos`) does not, nor
/// its poison queue, which no listing names either.
pub async fn declared_queues_exist_and_nothing_else_does<Q: Queue + Clone>(queue: Q, name: String) {
    let typo = format!("{name}-jbos");
    assert!(!queue.exists(&name).await.unwrap(), "not declared yet");
    queue.declare(&name, &options()).await.unwrap();
    assert!(queue.exists(&name).await.unwrap());
    assert!(!queue.exists(&typo).await.unwrap());
    assert!(!queue.exists("jbos").await.unwrap());
    assert!(
        !queue.exists(&poison_queue(&name)).await.unwrap(),
        "a poison queue is no queue to send to"
    );
    // RabbitMQ lists no queues (`None`): AMQP cannot.
    if let Some(listed) = queue.declared_queues().await.unwrap() {
        assert!(listed.contains(&name), "{name} in {listed:?}");
        assert!(!listed.contains(&typo));
        assert!(
            listed
                .iter()
                .all(|q| !tablekit_workers::queue::is_poison_queue(q)),
            "{listed:?}"
        );
    }
    // Declaring again changes nothing.
    queue.declare(&name, &options()).await.unwrap();
    assert!(queue.exists(&name).await.unwrap());
}

fn envelope(i: usize) -> Vec<u8> {
    format!(
        r#"{{"id":"00000000-0000-0000-0000-{i:012}","kind":"archive-employee","version":2,"created_at":"2026-01-01T00:00:00Z","payload":{{"n":{i}}}}}"#
    )
    .into_bytes()
}

/// A peek shows the waiting messages, oldest first (or newest first where the backend can),
/// with their kinds and attempts, and takes none; where the backend shows leased and
/// delayed messages, they are marked.
pub async fn a_peek_shows_waiting_messages_and_takes_none<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    queue.declare(&name, &options()).await.unwrap();
    let before = chrono::Utc::now() - chrono::Duration::seconds(5);
    for i in 0..3 {
        queue
            .send(&name, &format!("w{i}"), &envelope(i))
            .await
            .unwrap();
    }
    let waiting = match queue.peek(&name, &PeekQuery::new(10)).await {
        Ok(waiting) => waiting,
        Err(Error::Unsupported(reason)) => {
            // RabbitMQ: no read leaves a message in place.
            assert!(!reason.is_empty());
            assert_eq!(queue.stats(&name).await.unwrap().waiting, 3);
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let ids: Vec<&str> = waiting.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["w0", "w1", "w2"]);
    for message in &waiting {
        assert_eq!(message.kind, Some(("archive-employee".to_owned(), 2)));
        assert_eq!(message.attempts, 0);
        assert!(!message.leased);
        assert_eq!(message.next_attempt, None);
        assert!(message.handle.is_some());
        let sent = message.sent_at.expect("a sending time");
        assert!(sent >= before && sent <= chrono::Utc::now() + chrono::Duration::seconds(5));
    }
    assert_eq!(
        queue.peek(&name, &PeekQuery::new(2)).await.unwrap().len(),
        2
    );
    match queue
        .peek(&name, &PeekQuery::new(2).newest_first(true))
        .await
    {
        Ok(newest) => {
            let ids: Vec<&str> = newest.iter().map(|m| m.id.as_str()).collect();
            assert_eq!(ids, ["w2", "w1"]);
        }
        // Azure peeks at the front only.
        Err(Error::Unsupported(_)) => {}
        Err(e) => panic!("{e}"),
    }
    assert_eq!(
        queue.stats(&name).await.unwrap().waiting,
        3,
        "a peek takes nothing"
    );

    // One leased, one delayed: marked, or not shown (Azure shows visible messages only).
    let mut consumer = queue.consume(&name, consume_options(1)).await.unwrap();
    let held = next(&mut consumer).await;
    assert_eq!(held.received().id, "w0");
    let waiting = queue.peek(&name, &PeekQuery::new(10)).await.unwrap();
    match waiting.iter().find(|m| m.id == "w0") {
        Some(leased) => {
            assert!(leased.leased);
            assert_eq!(leased.attempts, 1);
            assert!(leased.next_attempt.expect("the lease's end") > chrono::Utc::now());
        }
        None => assert_eq!(waiting.len(), 2),
    }
    held.retry(Duration::from_secs(60)).await.unwrap();
    let waiting = queue.peek(&name, &PeekQuery::new(10)).await.unwrap();
    match waiting.iter().find(|m| m.id == "w0") {
        Some(delayed) => {
            assert!(!delayed.leased);
            assert_eq!(delayed.attempts, 1);
            let at = delayed.next_attempt.expect("when the retry is due");
            assert!(
                at > chrono::Utc::now() + chrono::Duration::seconds(30),
                "{at}"
            );
        }
        None => assert_eq!(waiting.len(), 2),
    }
    let next_one = next(&mut consumer).await;
    assert_eq!(next_one.received().id, "w1", "a peek moved nothing");
    next_one.ack().await.unwrap();
    consumer.close().await;
}

fn ids(messages: &[PoisonMessage]) -> Vec<String> {
    messages.iter().map(|m| m.id.clone()).collect()
}

/// Poison pages read newest first where the backend can (the reverse of oldest first,
/// filtered alike, the cursor working backwards); the last page is one read.
pub async fn poison_pages_read_newest_first_and_the_last_page_is_one_read<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    queue.declare(&name, &options()).await.unwrap();
    let names: Vec<String> = (0..25).map(|i| format!("n{i:02}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    poison_ids(&queue, &name, &names).await;
    let oldest: Vec<String> = all_pages(&queue, &name, PoisonQuery::new(10, 4))
        .await
        .iter()
        .flat_map(|p| ids(&p.messages))
        .collect();
    assert_eq!(oldest.len(), 25);
    let mut reversed = oldest.clone();
    reversed.reverse();
    let newest_query = PoisonQuery::new(10, 4).newest_first(true);
    match queue.poison_page(&name, &newest_query).await {
        Ok(_) => {}
        Err(Error::Unsupported(reason)) => {
            // RabbitMQ: read from the front only. The last page oldest first needs newest
            // first; the last page newest first is the first oldest first, reversed.
            assert!(!reason.is_empty());
            assert!(matches!(
                queue
                    .poison_last_page(&name, &PoisonQuery::new(10, 4))
                    .await,
                Err(Error::Unsupported(_))
            ));
            let last = queue.poison_last_page(&name, &newest_query).await.unwrap();
            assert_eq!(ids(&last.messages), reversed[15..]);
            return;
        }
        Err(e) => panic!("{e}"),
    }
    let pages = all_pages(&queue, &name, newest_query.clone()).await;
    let sizes: Vec<usize> = pages.iter().map(|p| p.messages.len()).collect();
    assert_eq!(sizes, [10, 10, 5]);
    let newest: Vec<String> = pages.iter().flat_map(|p| ids(&p.messages)).collect();
    assert_eq!(newest, reversed);

    // Filtered alike: the messages whose id holds a 1, in both orders.
    let filter = PoisonFilter::new().id("1");
    let mut forward: Vec<String> =
        all_pages(&queue, &name, PoisonQuery::new(3, 0).filter(filter.clone()))
            .await
            .iter()
            .flat_map(|p| ids(&p.messages))
            .collect();
    let backward: Vec<String> = all_pages(
        &queue,
        &name,
        PoisonQuery::new(3, 0).filter(filter).newest_first(true),
    )
    .await
    .iter()
    .flat_map(|p| ids(&p.messages))
    .collect();
    assert_eq!(forward.len(), 12, "{forward:?}");
    forward.reverse();
    assert_eq!(backward, forward);

    // The last page oldest first: the last 10, oldest first; the page before it read
    // backwards from its cursor.
    let last = queue
        .poison_last_page(&name, &PoisonQuery::new(10, 4))
        .await
        .unwrap();
    assert_eq!(ids(&last.messages), oldest[15..]);
    let before = queue
        .poison_page(
            &name,
            &PoisonQuery::new(10, 4).reversed().after(last.next.clone()),
        )
        .await
        .unwrap()
        .reversed();
    assert_eq!(ids(&before.messages), oldest[5..15]);
    // The last page newest first: the first 10 sent, newest first.
    let last_newest = queue.poison_last_page(&name, &newest_query).await.unwrap();
    assert_eq!(ids(&last_newest.messages), reversed[15..]);
}

/// Reasons that differ only by the numbers and ids they name fall in one group, counted,
/// with an example; a group filters pages, reasons and groups.
pub async fn poison_reasons_group_by_what_they_say<Q: Queue + Clone>(queue: Q, name: String) {
    queue.declare(&name, &options()).await.unwrap();
    let reasons = [
        ("g0", "conflict on ord-17"),
        ("g1", "conflict on ord-9001"),
        ("g2", "timeout after 30 s"),
        ("g3", "conflict on ord-2"),
        ("g4", "entity 550e8400-e29b-41d4-a716-446655440000 gone"),
    ];
    for (id, _) in reasons {
        queue.send(&name, id, &envelope(0)).await.unwrap();
    }
    let mut consumer = queue.consume(&name, consume_options(8)).await.unwrap();
    for _ in reasons {
        let delivery = next(&mut consumer).await;
        let reason = reasons
            .iter()
            .find(|(id, _)| *id == delivery.received().id)
            .unwrap()
            .1;
        delivery.poison(reason).await.unwrap();
    }
    consumer.close().await;
    let group = |group: &str, count: u64, example: &str| ReasonGroup {
        group: group.to_owned(),
        count,
        example: example.to_owned(),
    };
    assert_eq!(
        queue
            .poison_reason_groups(&name, &PoisonFilter::new())
            .await
            .unwrap(),
        [
            group("conflict on ord-#", 3, "conflict on ord-17"),
            group(
                "entity # gone",
                1,
                "entity 550e8400-e29b-41d4-a716-446655440000 gone"
            ),
            group("timeout after # s", 1, "timeout after 30 s"),
        ]
    );
    let conflicts = PoisonFilter::new().reason_group("conflict on ord-#");
    assert_eq!(
        ids_passing(&queue, &name, conflicts.clone()).await,
        ["g0", "g1", "g3"]
    );
    assert_eq!(
        queue.poison_reasons(&name, &conflicts).await.unwrap().len(),
        3,
        "three reasons in the group"
    );
    assert_eq!(
        queue
            .poison_reason_groups(&name, &conflicts.clone().id("g1"))
            .await
            .unwrap(),
        [group("conflict on ord-#", 1, "conflict on ord-9001")]
    );
    assert!(
        ids_passing(
            &queue,
            &name,
            PoisonFilter::new().reason_group("conflict on ord-17")
        )
        .await
        .is_empty(),
        "a group is matched whole, not as text"
    );
    assert!(
        ids_passing(&queue, &name, PoisonFilter::new().undecodable_reason())
            .await
            .is_empty()
    );
    let page = queue
        .poison_page(&name, &PoisonQuery::new(10, 0))
        .await
        .unwrap();
    assert!(page.messages.iter().all(|m| !m.reason_undecodable));
}

/// A poison message shows what its backend records beside the body (never a pop receipt),
/// and when it was sent; its body is kept byte for byte.
pub async fn a_poison_message_shows_its_headers_and_sending_time<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    queue.declare(&name, &options()).await.unwrap();
    let before = chrono::Utc::now() - chrono::Duration::seconds(5);
    let body = b"\xff\x00raw \xfe bytes".to_vec();
    queue.send(&name, "h1", &body).await.unwrap();
    let mut consumer = queue.consume(&name, consume_options(1)).await.unwrap();
    next(&mut consumer).await.poison("no h1").await.unwrap();
    consumer.close().await;
    let page = queue
        .poison_page(&name, &PoisonQuery::new(10, 3))
        .await
        .unwrap();
    let listed = &page.messages[0];
    assert_eq!(listed.body, body[..3]);
    assert!(!listed.headers.is_empty());
    let whole = queue
        .poison_body(&name, &listed.handle)
        .await
        .unwrap()
        .expect("still poisoned");
    assert_eq!(whole.body, body, "byte for byte");
    assert_eq!(whole.reason, "no h1");
    let sent = whole.sent_at.expect("when it was sent");
    assert!(sent >= before && sent <= chrono::Utc::now() + chrono::Duration::seconds(5));
    assert!(!whole.headers.is_empty());
    for (header, value) in &whole.headers {
        assert!(
            !header.to_ascii_lowercase().contains("receipt"),
            "{header}: {value}"
        );
    }
    let names: Vec<&str> = whole.headers.iter().map(|(n, _)| n.as_str()).collect();
    // Each backend's own record.
    assert!(
        names.contains(&"delivery-count")
            || names.contains(&"dequeue-count")
            || names.contains(&"x-tablekit-reason"),
        "{names:?}"
    );
}

macro_rules! contract {
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
                    queue.delete_queue(&name, &options()).await.unwrap();
                    queue.delete_queue(&format!("{name}-to"), &options()).await.unwrap();
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
                    queue.delete_queue(&format!("{name}-to")).await.unwrap();
                }
            )*
        }
    };
}

contract!(
    sent_messages_arrive_once_and_acked_ones_are_gone,
    stats_tell_whether_a_consumer_takes_the_messages,
    a_retry_comes_back_after_its_delay_with_the_next_count,
    unsettled_deliveries_come_back_counted,
    poison_keeps_the_reason_and_replay_brings_messages_back,
    discard_deletes_poison_messages_for_good_and_twice_is_harmless,
    prefetch_bounds_the_deliveries_held_at_once,
    invalid_queue_names_are_refused_before_any_io,
    reads_of_an_undeclared_queue_and_its_companions_are_empty,
    a_poison_queue_reads_in_pages_with_previews_filters_and_reasons,
    an_exact_set_of_poison_messages_is_taken_by_handle,
    a_handle_names_one_poisoning_of_a_repeated_id,
    a_paused_queue_reads_paused_until_resumed,
    declared_queues_exist_and_nothing_else_does,
    a_peek_shows_waiting_messages_and_takes_none,
    poison_pages_read_newest_first_and_the_last_page_is_one_read,
    poison_reasons_group_by_what_they_say,
    a_poison_message_shows_its_headers_and_sending_time,
);

mod sqlite_only {
    use super::*;
    use tablekit_workers::queue::sqlite::SqliteQueue;

    #[tokio::test]
    async fn a_stale_ack_cannot_remove_a_message_leased_again() {
        let dir = tempfile::tempdir().unwrap();
        let queue = SqliteQueue::open(dir.path().join("queue.db"))
            .await
            .unwrap();
        queue.declare("q", &options()).await.unwrap();
        queue.send("q", "s1", b"x").await.unwrap();
        let short = ConsumeOptions {
            prefetch: 1,
            lease: Duration::from_millis(100),
        };
        let mut slow = queue.consume("q", short).await.unwrap();
        let stale = next(&mut slow).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        let mut fast = queue.consume("q", consume_options(1)).await.unwrap();
        let fresh = next(&mut fast).await;
        assert_eq!(fresh.received().delivery_count, 2);
        let error = stale.ack().await.expect_err("the lease ran out");
        assert!(error.is_retryable(), "{error}");
        assert_eq!(
            queue.stats("q").await.unwrap().leased,
            1,
            "still leased to the fresh consumer"
        );
        fresh.ack().await.unwrap();
        assert_eq!(queue.stats("q").await.unwrap().waiting, 0);
    }

    /// A delivery whose lease ran out, whose message another delivery then settled, and
    /// whose own work failed half way: its retry sends the message again (its id, body
    /// and deliveries so far), so the work is applied once more.
    #[tokio::test]
    async fn a_retry_after_the_lease_ran_out_and_another_delivery_settled_sends_it_again() {
        let dir = tempfile::tempdir().unwrap();
        let queue = SqliteQueue::open(dir.path().join("queue.db"))
            .await
            .unwrap();
        queue.declare("q", &options()).await.unwrap();
        queue.send("q", "s1", b"work").await.unwrap();
        let short = ConsumeOptions {
            prefetch: 1,
            lease: Duration::from_millis(100),
        };
        let mut slow = queue.consume("q", short).await.unwrap();
        let stale = next(&mut slow).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
        let mut fast = queue.consume("q", consume_options(1)).await.unwrap();
        let fresh = next(&mut fast).await;
        fresh.ack().await.unwrap();
        assert_eq!(queue.stats("q").await.unwrap().waiting, 0);

        stale.retry(Duration::ZERO).await.unwrap();
        let again = next(&mut fast).await;
        assert_eq!(again.received().id, "s1");
        assert_eq!(again.received().body, b"work");
        assert_eq!(
            again.received().delivery_count,
            2,
            "the deliveries so far count"
        );
        again.ack().await.unwrap();
        assert_eq!(queue.stats("q").await.unwrap().waiting, 0);
    }

    /// A retry whose lease still holds sends nothing more.
    #[tokio::test]
    async fn a_retry_within_the_lease_sends_no_second_copy() {
        let dir = tempfile::tempdir().unwrap();
        let queue = SqliteQueue::open(dir.path().join("queue.db"))
            .await
            .unwrap();
        queue.declare("q", &options()).await.unwrap();
        queue.send("q", "s1", b"work").await.unwrap();
        let mut consumer = queue.consume("q", consume_options(1)).await.unwrap();
        next(&mut consumer)
            .await
            .retry(Duration::ZERO)
            .await
            .unwrap();
        let stats = queue.stats("q").await.unwrap();
        assert_eq!(stats.waiting + stats.leased, 1, "{stats:?}");
    }

    #[tokio::test]
    async fn processes_sharing_the_file_see_each_others_messages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.db");
        let a = SqliteQueue::open(&path).await.unwrap();
        let b = SqliteQueue::open(&path).await.unwrap();
        for i in 0..50 {
            a.send("shared", &format!("{i}"), b"x").await.unwrap();
        }
        let (mut ca, mut cb) = (
            a.consume("shared", consume_options(1)).await.unwrap(),
            b.consume("shared", consume_options(1)).await.unwrap(),
        );
        let mut ids = Vec::new();
        for turn in 0..50 {
            let delivery = if turn % 2 == 0 {
                next(&mut ca).await
            } else {
                next(&mut cb).await
            };
            ids.push(delivery.received().id.clone());
            delivery.ack().await.unwrap();
        }
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 50, "every message once");
    }

    /// Writes a poison row as another program could: id and reason bytes that are not
    /// UTF-8, a body that is not JSON.
    fn write_raw_poison(path: &std::path::Path, queue: &str) {
        let file = rusqlite::Connection::open(path).unwrap();
        file.execute(
            "INSERT INTO tablekit_queue (queue, id, body, sent_at, visible_at, dequeue_count, reason) \
             VALUES (?1, CAST(X'6261642DFF' AS TEXT), X'FF00FE', 0, 0, 2, CAST(X'6F6F7073FE' AS TEXT))",
            [format!("{queue}-poison")],
        )
        .unwrap();
    }

    #[tokio::test]
    async fn an_id_and_reason_that_are_not_utf8_read_lossily_and_are_taken_by_handle() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.db");
        let queue = SqliteQueue::open(&path).await.unwrap();
        queue.declare("bytes", &options()).await.unwrap();
        poison_ids(&queue, "bytes", &["fine"]).await;
        write_raw_poison(&path, "bytes");

        let listed = queue.poison_list("bytes", 10).await.unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[1].id, "bad-\u{FFFD}");
        assert_eq!(listed[1].reason, "oops\u{FFFD}");
        assert_eq!(listed[1].body, b"\xFF\x00\xFE");
        assert_eq!(listed[1].operation, None);

        let page = queue
            .poison_page("bytes", &PoisonQuery::new(10, 2))
            .await
            .unwrap();
        assert_eq!(page.next, None);
        let bad = &page.messages[1];
        assert_eq!(
            (
                bad.id.as_str(),
                bad.reason.as_str(),
                bad.size,
                &bad.body[..]
            ),
            ("bad-\u{FFFD}", "oops\u{FFFD}", 3, &b"\xFF\x00"[..])
        );
        assert_eq!(bad.handle, listed[1].handle);
        // Filters read the bytes without failing.
        for filter in [
            PoisonFilter::new().kind("archive"),
            PoisonFilter::new().id("bad"),
            PoisonFilter::new().reason("OOPS"),
            PoisonFilter::new().body("x"),
        ] {
            queue
                .poison_page("bytes", &PoisonQuery::new(10, 2).filter(filter))
                .await
                .unwrap();
        }
        assert_eq!(
            ids_passing(&queue, "bytes", PoisonFilter::new().reason("OOPS")).await,
            ["bad-\u{FFFD}"]
        );
        assert!(
            ids_passing(&queue, "bytes", PoisonFilter::new().kind("archive"))
                .await
                .is_empty()
        );
        assert_eq!(
            queue
                .poison_reasons("bytes", &PoisonFilter::new())
                .await
                .unwrap(),
            [("no fine".to_owned(), 1), ("oops\u{FFFD}".to_owned(), 1)]
        );
        let whole = queue
            .poison_body("bytes", &bad.handle)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(whole.body, b"\xFF\x00\xFE");

        let taken = queue
            .poison_take(
                "bytes",
                std::slice::from_ref(&bad.handle),
                &PoisonAction::Discard,
            )
            .await
            .unwrap();
        assert_eq!(taken, std::slice::from_ref(&bad.handle));
        assert_eq!(poisoned_ids(&queue, "bytes").await, ["fine"]);
        assert_eq!(queue.poison_body("bytes", &bad.handle).await.unwrap(), None);
    }

    /// A message whose id is not UTF-8, replayed from the poison queue, is received like
    /// any other (its id read lossily): it cannot stop the queue's consumers.
    #[tokio::test]
    async fn a_replayed_message_whose_id_is_not_utf8_is_received() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.db");
        let queue = SqliteQueue::open(&path).await.unwrap();
        queue.declare("bytes", &options()).await.unwrap();
        write_raw_poison(&path, "bytes");
        let handle = queue.poison_list("bytes", 10).await.unwrap()[0]
            .handle
            .clone();
        queue
            .poison_take("bytes", &[handle], &PoisonAction::Replay)
            .await
            .unwrap();
        queue.send("bytes", "after", b"after").await.unwrap();
        let mut consumer = queue.consume("bytes", consume_options(4)).await.unwrap();
        let first = next(&mut consumer).await;
        assert_eq!(first.received().id, "bad-\u{FFFD}");
        assert_eq!(first.received().body, b"\xFF\x00\xFE");
        first.ack().await.unwrap();
        let second = next(&mut consumer).await;
        assert_eq!(second.received().id, "after", "the consumer goes on");
        second.ack().await.unwrap();
        consumer.close().await;
    }

    /// A handle names one row: of two messages with one id, poisoned one after the other,
    /// only the one named is taken.
    #[tokio::test]
    async fn a_handle_names_one_message_of_several_with_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let queue = SqliteQueue::open(dir.path().join("queue.db"))
            .await
            .unwrap();
        queue.declare("twice", &options()).await.unwrap();
        poison_ids(&queue, "twice", &["same"]).await;
        let first = handles_of(&queue, "twice", &["same"]).await;
        poison_ids(&queue, "twice", &["same"]).await;
        let mut asked = first.clone();
        asked.extend([
            "not-a-number".to_owned(),
            "999999".to_owned(),
            first[0].clone(),
        ]);
        let taken = queue
            .poison_take("twice", &asked, &PoisonAction::Replay)
            .await
            .unwrap();
        assert_eq!(taken, first, "once, and nothing else");
        assert_eq!(poisoned_ids(&queue, "twice").await, ["same"]);
        let left = queue.poison_list("twice", 10).await.unwrap();
        assert_ne!(left[0].handle, first[0]);
        assert_eq!(queue.stats("twice").await.unwrap().waiting, 1);
        let error = queue
            .poison_take(
                "twice",
                &[left[0].handle.clone()],
                &PoisonAction::ReplayTo("amq.bad".into()),
            )
            .await
            .expect_err("an invalid target");
        assert!(matches!(error, Error::InvalidQueueName { .. }), "{error}");
        assert_eq!(queue.stats("twice").await.unwrap().poisoned, 1);
    }

    /// The receive itself skips a paused queue: a consumer opened before the pause gets
    /// nothing until the queue is resumed.
    #[tokio::test]
    async fn a_consumer_receives_nothing_from_a_paused_queue() {
        let dir = tempfile::tempdir().unwrap();
        let queue = SqliteQueue::open(dir.path().join("queue.db"))
            .await
            .unwrap();
        queue.declare("held", &options()).await.unwrap();
        let mut consumer = queue.consume("held", consume_options(4)).await.unwrap();
        queue.set_paused("held", true).await.unwrap();
        queue.send("held", "h1", b"x").await.unwrap();
        queue.send("other", "o1", b"x").await.unwrap();
        assert!(nothing_within(&mut consumer, Duration::from_millis(500)).await);
        let mut other = queue.consume("other", consume_options(4)).await.unwrap();
        next(&mut other).await.ack().await.unwrap();
        assert_eq!(queue.stats("held").await.unwrap().waiting, 1);
        queue.set_paused("held", false).await.unwrap();
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.received().id, "h1");
        assert_eq!(delivery.received().delivery_count, 1);
        delivery.ack().await.unwrap();
    }

    /// A queue file written before the registry: its first open registers the queues that
    /// hold messages (not their poison queues); later opens back-fill nothing more.
    #[tokio::test]
    async fn the_registry_is_back_filled_from_the_queues_holding_messages_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.db");
        {
            let file = rusqlite::Connection::open(&path).unwrap();
            file.execute_batch(
                "CREATE TABLE tablekit_queue (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL, id TEXT NOT NULL,
                    body BLOB NOT NULL, sent_at INTEGER NOT NULL, visible_at INTEGER NOT NULL,
                    dequeue_count INTEGER NOT NULL DEFAULT 0, pop_receipt TEXT, reason TEXT);
                 INSERT INTO tablekit_queue (queue, id, body, sent_at, visible_at, reason) VALUES
                    ('jobs', 'a', X'00', 0, 0, NULL), ('jobs', 'b', X'00', 0, 0, NULL),
                    ('mail', 'c', X'00', 0, 0, NULL),
                    ('gone-poison', 'd', X'00', 0, 0, 'no'),
                    ('mail-poison', 'e', X'00', 0, 0, 'no');",
            )
            .unwrap();
        }
        let queue = SqliteQueue::open(&path).await.unwrap();
        assert_eq!(
            queue.declared_queues().await.unwrap(),
            Some(vec!["jobs".to_owned(), "mail".to_owned()])
        );
        assert_eq!(queue.stats("jobs").await.unwrap().waiting, 2);
        assert_eq!(queue.stats("mail").await.unwrap().poisoned, 1);
        assert!(queue.exists("mail").await.unwrap());
        for undeclared in ["gone", "gone-poison", "jbos", "JOBS-POISON", "mail-poison"] {
            assert!(!queue.exists(undeclared).await.unwrap(), "{undeclared}");
        }
        assert!(matches!(
            queue.stats("gone").await,
            Err(Error::NotDeclared { .. })
        ));
        // The poison of a queue nobody declared still reads.
        assert_eq!(queue.poison_list("gone", 10).await.unwrap().len(), 1);
        // Sent to but never declared: not registered, on this open or the next.
        queue.send("typo", "t", b"x").await.unwrap();
        drop(queue);
        let queue = SqliteQueue::open(&path).await.unwrap();
        assert!(!queue.exists("typo").await.unwrap());
        assert_eq!(
            queue.declared_queues().await.unwrap(),
            Some(vec!["jobs".to_owned(), "mail".to_owned()])
        );
    }

    /// Two processes sharing the file (two connections) see each other's declarations.
    #[tokio::test]
    async fn declarations_are_shared_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.db");
        let (a, b) = (
            SqliteQueue::open(&path).await.unwrap(),
            SqliteQueue::open(&path).await.unwrap(),
        );
        assert_eq!(b.declared_queues().await.unwrap(), Some(Vec::new()));
        a.declare("from-a", &options()).await.unwrap();
        b.declare("from-b", &options()).await.unwrap();
        for queue in [&a, &b] {
            assert!(queue.exists("from-a").await.unwrap());
            assert!(queue.exists("from-b").await.unwrap());
            assert_eq!(queue.stats("from-a").await.unwrap().waiting, 0);
            assert_eq!(
                queue.declared_queues().await.unwrap(),
                Some(vec!["from-a".to_owned(), "from-b".to_owned()])
            );
        }
        let any = tablekit_workers::queue::AnyQueue::connect(&format!("sqlite:{}", path.display()))
            .await
            .unwrap();
        assert!(any.exists("from-b").await.unwrap());
        assert_eq!(any.declared_queues().await.unwrap().unwrap().len(), 2);
    }

    /// A reason whose bytes are not UTF-8 is flagged, filterable and grouped under its own
    /// label, in SQL; the page shows the queue's own record of each message.
    #[tokio::test]
    async fn undecodable_reasons_are_filtered_and_grouped_and_headers_shown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.db");
        let queue = SqliteQueue::open(&path).await.unwrap();
        queue.declare("bytes", &options()).await.unwrap();
        poison_ids(&queue, "bytes", &["fine"]).await;
        write_raw_poison(&path, "bytes");
        let page = queue
            .poison_page("bytes", &PoisonQuery::new(10, 10))
            .await
            .unwrap();
        let flags: Vec<bool> = page.messages.iter().map(|m| m.reason_undecodable).collect();
        assert_eq!(flags, [false, true]);
        assert_eq!(
            ids_passing(&queue, "bytes", PoisonFilter::new().undecodable_reason()).await,
            ["bad-\u{FFFD}"]
        );
        assert_eq!(
            ids_passing(
                &queue,
                "bytes",
                PoisonFilter::new().reason_group(UNDECODABLE_REASON_GROUP)
            )
            .await,
            ["bad-\u{FFFD}"]
        );
        let groups = queue
            .poison_reason_groups("bytes", &PoisonFilter::new())
            .await
            .unwrap();
        assert_eq!(
            groups,
            [
                ReasonGroup {
                    group: UNDECODABLE_REASON_GROUP.to_owned(),
                    count: 1,
                    example: "oops\u{FFFD}".to_owned()
                },
                ReasonGroup {
                    group: "no fine".to_owned(),
                    count: 1,
                    example: "no fine".to_owned()
                },
            ]
        );
        let fine = &page.messages[0];
        let names: Vec<&str> = fine.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["sent-at", "poisoned-at", "delivery-count"]);
        assert_eq!(fine.headers[2].1, "1");
        let whole = queue
            .poison_body("bytes", &page.messages[1].handle)
            .await
            .unwrap()
            .unwrap();
        assert!(whole.reason_undecodable);
        assert_eq!(
            whole.headers[0],
            ("sent-at".to_owned(), "1970-01-01T00:00:00.000Z".to_owned())
        );
        assert_eq!(
            whole.headers[2],
            ("delivery-count".to_owned(), "2".to_owned())
        );
    }

    /// Pages newest first go by the row numbers, so a cursor survives messages poisoned
    /// or taken meanwhile.
    #[tokio::test]
    async fn a_newest_first_cursor_survives_messages_poisoned_and_taken_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let queue = SqliteQueue::open(dir.path().join("queue.db"))
            .await
            .unwrap();
        queue.declare("moving", &options()).await.unwrap();
        poison_ids(&queue, "moving", &["a", "b", "c", "d", "e"]).await;
        let query = PoisonQuery::new(2, 0).newest_first(true);
        let first = queue.poison_page("moving", &query).await.unwrap();
        assert_eq!(ids(&first.messages), ["e", "d"]);
        poison_ids(&queue, "moving", &["f"]).await;
        let c = handles_of(&queue, "moving", &["c"]).await;
        queue
            .poison_take("moving", &c, &PoisonAction::Discard)
            .await
            .unwrap();
        let second = queue
            .poison_page("moving", &query.clone().after(first.next))
            .await
            .unwrap();
        assert_eq!(ids(&second.messages), ["b", "a"]);
        assert_eq!(second.next, None);
    }

    /// Pages of big bodies hold their previews only.
    #[tokio::test]
    async fn pages_of_two_megabyte_bodies_hold_their_previews() {
        let dir = tempfile::tempdir().unwrap();
        let queue = SqliteQueue::open(dir.path().join("queue.db"))
            .await
            .unwrap();
        let big = |i: usize| {
            format!(
                r#"{{"id":"x","kind":"big","version":1,"created_at":"2026-01-01T00:00:00Z","payload":{{"n":{i},"pad":"{}"}}}}"#,
                "y".repeat(2 << 20)
            )
            .into_bytes()
        };
        for i in 0..12 {
            queue
                .send("big", &format!("b{i:02}"), &big(i))
                .await
                .unwrap();
        }
        let mut consumer = queue.consume("big", consume_options(4)).await.unwrap();
        for _ in 0..12 {
            next(&mut consumer).await.poison("too big").await.unwrap();
        }
        consumer.close().await;
        let started = std::time::Instant::now();
        let pages = all_pages(&queue, "big", PoisonQuery::new(5, 64)).await;
        let elapsed = started.elapsed();
        let sizes: Vec<usize> = pages.iter().map(|p| p.messages.len()).collect();
        assert_eq!(sizes, [5, 5, 2]);
        for message in pages.iter().flat_map(|p| &p.messages) {
            assert_eq!(message.body.len(), 64);
            let i: usize = message.id[1..].parse().unwrap();
            assert_eq!(message.size, big(i).len());
            assert_eq!(message.operation, Some(("big".to_owned(), 1)));
        }
        assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
        let kinds = ids_passing(&queue, "big", PoisonFilter::new().kind("BIG")).await;
        assert_eq!(kinds.len(), 12);
    }
}

mod rabbitmq_only {
    use super::*;
    use tablekit_workers::queue::rabbit::RabbitQueue;

    #[tokio::test]
    async fn sending_to_an_undeclared_queue_is_refused_not_lost() {
        let Some(url) = support::amqp_url() else {
            return;
        };
        let queue = RabbitQueue::connect(&url).await.unwrap();
        let error = queue
            .send(&support::unique("undeclared"), "x", b"x")
            .await
            .expect_err("no such queue");
        assert!(matches!(error, Error::Refused { .. }), "{error}");
        // The publishing channel survives the refusal.
        let name = support::unique("after-refusal");
        queue.declare(&name, &options()).await.unwrap();
        queue.send(&name, "y", b"y").await.unwrap();
        assert_eq!(queue.stats(&name).await.unwrap().waiting, 1);
        queue.delete_queue(&name, &options()).await.unwrap();
    }

    /// What a reader meets when a worker was killed before declaring everything, or
    /// another process deleted the companions: a reader that did not declare the queue
    /// (so assumes the default retry delays) and one that did, both reading empty
    /// companions.
    #[tokio::test]
    async fn reads_of_a_queue_whose_companions_are_gone_count_them_empty() {
        let Some(url) = support::amqp_url() else {
            return;
        };
        let queue = RabbitQueue::connect(&url).await.unwrap();
        let name = support::unique("companions-gone");
        queue.declare(&name, &options()).await.unwrap();
        queue.send(&name, "w1", b"x").await.unwrap();
        let broker = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
            .await
            .unwrap();
        for companion in [
            format!("{name}-poison"),
            format!("{name}-retry-200"),
            format!("{name}-retry-400"),
        ] {
            let channel = broker.create_channel().await.unwrap();
            channel
                .queue_delete(
                    companion.as_str().into(),
                    lapin::options::QueueDeleteOptions::default(),
                )
                .await
                .unwrap();
            let _ = channel.close(200, "done".into()).await;
        }
        let _ = broker.close(200, "done".into()).await;
        let stranger = RabbitQueue::connect(&url).await.unwrap();
        for reader in [&queue, &stranger] {
            let stats = reader.stats(&name).await.unwrap();
            assert_eq!((stats.waiting, stats.poisoned), (1, 0), "{stats:?}");
            assert!(reader.poison_list(&name, 10).await.unwrap().is_empty());
            assert_eq!(reader.poison_replay(&name, None).await.unwrap(), 0);
        }
        queue.delete_queue(&name, &options()).await.unwrap();
    }

    /// Each read of a missing queue or companion closes a channel on the broker; readers
    /// at once on one connection still see the queue not declared and its poison queue
    /// empty, and the connection stays usable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_reads_of_missing_companions_stay_empty() {
        let Some(url) = support::amqp_url() else {
            return;
        };
        let queue = RabbitQueue::connect(&url).await.unwrap();
        let name = support::unique("missing-companions");
        let readers: Vec<_> = (0..8)
            .map(|_| {
                let (queue, name) = (queue.clone(), name.clone());
                tokio::spawn(async move {
                    for _ in 0..20 {
                        match queue.stats(&name).await {
                            Err(Error::NotDeclared { queue }) => assert_eq!(queue, name),
                            other => panic!("{other:?}"),
                        }
                        assert!(queue.poison_list(&name, 10).await.unwrap().is_empty());
                    }
                })
            })
            .collect();
        for reader in readers {
            reader.await.unwrap();
        }
        queue.declare(&name, &options()).await.unwrap();
        queue.send(&name, "after", b"x").await.unwrap();
        assert_eq!(queue.stats(&name).await.unwrap().waiting, 1);
        queue.delete_queue(&name, &options()).await.unwrap();
    }

    #[tokio::test]
    async fn the_broker_dead_letters_a_message_whose_consumers_keep_dying() {
        let Some(url) = support::amqp_url() else {
            return;
        };
        let queue = RabbitQueue::connect(&url).await.unwrap();
        let name = support::unique("delivery-limit");
        let options = QueueOptions {
            max_deliveries: 2,
            retry_delays: vec![Duration::from_millis(100)],
        };
        queue.declare(&name, &options).await.unwrap();
        queue.send(&name, "d1", b"doomed").await.unwrap();
        // x-delivery-limit = 2 allows 3 deliveries; each consumer dies without settling.
        for attempt in 1..=3 {
            let mut consumer = queue.consume(&name, consume_options(1)).await.unwrap();
            let delivery = next(&mut consumer).await;
            assert_eq!(delivery.received().delivery_count, attempt);
            drop(delivery);
            consumer.close().await;
        }
        let mut poisoned = Vec::new();
        for _ in 0..50 {
            poisoned = queue.poison_list(&name, 10).await.unwrap();
            if !poisoned.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(poisoned.len(), 1);
        assert_eq!(poisoned[0].id, "d1");
        assert_eq!(poisoned[0].reason, "delivery_limit");
        // The broker's record of the death, shown readably, and the sending time.
        let whole = queue
            .poison_body(&name, &poisoned[0].handle)
            .await
            .unwrap()
            .expect("still poisoned");
        let death = whole
            .headers
            .iter()
            .find(|(n, _)| n == "x-death[0]")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("an x-death entry in {:?}", whole.headers));
        assert!(
            death.starts_with("reason=delivery_limit, queue="),
            "{death}"
        );
        assert!(death.contains(", time=20"), "{death}");
        assert!(
            whole
                .headers
                .iter()
                .any(|(n, v)| n == "message-id" && v == "d1")
        );
        assert!(whole.sent_at.is_some());
        assert_eq!(whole.body, b"doomed");
        queue.delete_queue(&name, &options).await.unwrap();
    }

    /// A reason header whose bytes are not UTF-8 (another client poisoned the message) is
    /// flagged, filterable and grouped under its own label.
    #[tokio::test]
    async fn a_reason_header_that_is_not_utf8_is_flagged_and_grouped() {
        let Some(url) = support::amqp_url() else {
            return;
        };
        let queue = RabbitQueue::connect(&url).await.unwrap();
        let name = support::unique("undecodable");
        queue.declare(&name, &options()).await.unwrap();
        poison_ids(&queue, &name, &["fine"]).await;
        let broker = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
            .await
            .unwrap();
        let channel = broker.create_channel().await.unwrap();
        let mut headers = lapin::types::FieldTable::default();
        headers.insert(
            "x-tablekit-reason".into(),
            lapin::types::AMQPValue::LongString(b"bad \xfe reason".to_vec().into()),
        );
        channel
            .basic_publish(
                "".into(),
                poison_queue(&name).as_str().into(),
                lapin::options::BasicPublishOptions::default(),
                b"\xff body",
                lapin::BasicProperties::default()
                    .with_message_id("foreign".into())
                    .with_headers(headers),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        let _ = channel.close(200, "done".into()).await;
        let _ = broker.close(200, "done".into()).await;
        let page = queue
            .poison_page(&name, &PoisonQuery::new(10, 100))
            .await
            .unwrap();
        assert_eq!(ids(&page.messages), ["fine", "foreign"]);
        let foreign = &page.messages[1];
        assert!(foreign.reason_undecodable);
        assert_eq!(foreign.reason, "bad \u{FFFD} reason");
        assert_eq!(foreign.body, b"\xff body");
        assert_eq!(
            ids_passing(&queue, &name, PoisonFilter::new().undecodable_reason()).await,
            ["foreign"]
        );
        let groups = queue
            .poison_reason_groups(&name, &PoisonFilter::new())
            .await
            .unwrap();
        let labels: Vec<(&str, u64)> = groups.iter().map(|g| (g.group.as_str(), g.count)).collect();
        assert_eq!(labels, [(UNDECODABLE_REASON_GROUP, 1), ("no fine", 1)]);
        queue.delete_queue(&name, &options()).await.unwrap();
    }

    /// What AMQP cannot do is said, not faked.
    #[tokio::test]
    async fn what_amqp_cannot_do_is_unsupported_with_the_reason() {
        let Some(url) = support::amqp_url() else {
            return;
        };
        let queue = RabbitQueue::connect(&url).await.unwrap();
        let name = support::unique("unsupported");
        queue.declare(&name, &options()).await.unwrap();
        assert_eq!(queue.declared_queues().await.unwrap(), None);
        let error = queue
            .peek(&name, &PeekQuery::new(5))
            .await
            .expect_err("no peek");
        assert!(
            matches!(&error, Error::Unsupported(reason) if reason.contains("leaves a message in place")),
            "{error}"
        );
        let error = queue
            .poison_page(&name, &PoisonQuery::new(5, 0).newest_first(true))
            .await
            .expect_err("no newest first");
        assert!(
            matches!(&error, Error::Unsupported(reason) if reason.contains("front only")),
            "{error}"
        );
        queue.delete_queue(&name, &options()).await.unwrap();
    }
}

#[cfg(feature = "azure")]
mod azure_only {
    use super::*;
    use tablekit_workers::queue::azure::AzureQueue;

    fn connect() -> Option<(AzureQueue, String)> {
        let connection = support::azure_queues()?;
        Some((AzureQueue::connect(&connection).unwrap(), connection))
    }

    /// A poison queue deleted behind its queue (by another process) reads as empty.
    #[tokio::test]
    async fn reads_of_a_queue_whose_poison_queue_is_gone_count_it_empty() {
        let Some((queue, _)) = connect() else {
            return;
        };
        let name = support::azure_name("poison-gone");
        queue.declare(&name, &options()).await.unwrap();
        queue.send(&name, "w1", b"x").await.unwrap();
        // Deletes `<name>-poison` (and its own, never declared, poison queue).
        queue
            .delete_queue(&tablekit_workers::queue::poison_queue(&name))
            .await
            .unwrap();
        let stats = queue.stats(&name).await.unwrap();
        assert_eq!((stats.waiting, stats.poisoned), (1, 0), "{stats:?}");
        assert!(queue.poison_list(&name, 10).await.unwrap().is_empty());
        assert!(queue.poison_list(&name, 100).await.unwrap().is_empty());
        assert_eq!(queue.poison_replay(&name, None).await.unwrap(), 0);
        queue.delete_queue(&name).await.unwrap();
    }

    /// A delivery of `name`'s one message whose lease ran out (no renewal), and the fresh
    /// delivery of the same message to another consumer.
    async fn stale_and_fresh(
        queue: &AzureQueue,
        connection: &str,
        name: &str,
    ) -> (
        <AzureQueue as Queue>::Delivery,
        <AzureQueue as Queue>::Delivery,
        <AzureQueue as Queue>::Consumer,
    ) {
        // Without renewal, a handler slower than its lease loses it.
        let unrenewed = AzureQueue::options()
            .lease_renewal(false)
            .connect(connection)
            .unwrap();
        let short = ConsumeOptions {
            prefetch: 1,
            lease: Duration::from_secs(1),
        };
        let mut slow = unrenewed.consume(name, short).await.unwrap();
        let stale = next(&mut slow).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let mut fast = queue.consume(name, consume_options(1)).await.unwrap();
        let fresh = next(&mut fast).await;
        assert_eq!(fresh.received().delivery_count, 2);
        (stale, fresh, fast)
    }

    #[tokio::test]
    async fn a_stale_ack_after_the_lease_ran_out_is_refused() {
        let Some((queue, connection)) = connect() else {
            return;
        };
        let name = support::azure_name("stale-ack");
        queue.declare(&name, &options()).await.unwrap();
        queue.send(&name, "s1", b"x").await.unwrap();
        let (stale, fresh, _fast) = stale_and_fresh(&queue, &connection, &name).await;
        let error = stale.ack().await.expect_err("the lease ran out");
        assert!(error.is_retryable(), "{error}");
        assert_eq!(
            queue.stats(&name).await.unwrap().waiting,
            1,
            "the stale ack removed nothing"
        );
        fresh.ack().await.unwrap();
        assert_eq!(queue.stats(&name).await.unwrap().waiting, 0);
        queue.delete_queue(&name).await.unwrap();
    }

    /// As on the SQLite queue: a delivery that lost its lease, whose message another
    /// delivery settled, sends the message again when it retries.
    #[tokio::test]
    async fn a_retry_after_the_lease_was_lost_and_another_delivery_settled_sends_it_again() {
        let Some((queue, connection)) = connect() else {
            return;
        };
        let name = support::azure_name("stale-retry");
        queue.declare(&name, &options()).await.unwrap();
        queue.send(&name, "s1", b"work").await.unwrap();
        let (stale, fresh, mut fast) = stale_and_fresh(&queue, &connection, &name).await;
        fresh.ack().await.unwrap();
        assert_eq!(queue.stats(&name).await.unwrap().waiting, 0);

        stale.retry(Duration::ZERO).await.unwrap();
        let again = next(&mut fast).await;
        assert_eq!(again.received().id, "s1");
        assert_eq!(again.received().body, b"work");
        again.ack().await.unwrap();
        assert_eq!(queue.stats(&name).await.unwrap().waiting, 0);
        queue.delete_queue(&name).await.unwrap();
    }

    #[tokio::test]
    async fn a_long_handler_keeps_its_lease() {
        let Some((queue, _)) = connect() else { return };
        let name = support::azure_name("renewal");
        queue.declare(&name, &options()).await.unwrap();
        queue.send(&name, "long", b"x").await.unwrap();
        let lease = ConsumeOptions {
            prefetch: 1,
            lease: Duration::from_secs(1),
        };
        let mut first = queue.consume(&name, lease).await.unwrap();
        let held = next(&mut first).await;
        // Three leases long: renewed, so no other consumer receives it meanwhile.
        let mut second = queue.consume(&name, lease).await.unwrap();
        assert!(nothing_within(&mut second, Duration::from_secs(3)).await);
        assert_eq!(held.received().delivery_count, 1);
        held.ack().await.unwrap();
        assert!(nothing_within(&mut second, Duration::from_millis(1500)).await);
        assert_eq!(queue.stats(&name).await.unwrap().waiting, 0);
        queue.delete_queue(&name).await.unwrap();
    }

    #[tokio::test]
    async fn bodies_over_the_service_limit_travel_by_claim_check() {
        let Some((queue, _)) = connect() else { return };
        let name = support::azure_name("claim");
        queue.declare(&name, &options()).await.unwrap();
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        queue.send(&name, "big", &big).await.unwrap();
        queue
            .send(&name, "poisoned-big", &big[..100_000])
            .await
            .unwrap();
        let mut consumer = queue.consume(&name, consume_options(2)).await.unwrap();
        for _ in 0..2 {
            let delivery = next(&mut consumer).await;
            if delivery.received().id == "big" {
                assert_eq!(delivery.received().body, big);
                delivery.ack().await.unwrap();
            } else {
                assert_eq!(delivery.received().body, &big[..100_000]);
                delivery.poison("too big to handle").await.unwrap();
            }
        }
        let poisoned = queue.poison_list(&name, 10).await.unwrap();
        assert_eq!(poisoned.len(), 1);
        assert_eq!(poisoned[0].body, &big[..100_000]);
        assert_eq!(poisoned[0].reason, "too big to handle");
        assert_eq!(queue.poison_replay(&name, None).await.unwrap(), 1);
        let back = next(&mut consumer).await;
        assert_eq!(back.received().body, &big[..100_000]);
        back.ack().await.unwrap();
        // Acked bodies are deleted from the blob store.
        let blobs = tablekit_core::blob::BlobStore::azure(&format!(
            "UseDevelopmentStorage=true;Container={}",
            tablekit_workers::queue::azure::DEFAULT_CLAIM_CONTAINER
        ))
        .unwrap();
        assert!(blobs.list(&format!("{name}/")).await.unwrap().is_empty());
        queue.delete_queue(&name).await.unwrap();
    }

    #[tokio::test]
    async fn messages_never_expire_unless_a_time_to_live_is_set() {
        let Some((queue, connection)) = connect() else {
            return;
        };
        let name = support::azure_name("ttl");
        let short = AzureQueue::options()
            .message_ttl(Duration::from_secs(1))
            .connect(&connection)
            .unwrap();
        queue.declare(&name, &options()).await.unwrap();
        short.send(&name, "brief", b"x").await.unwrap();
        queue.send(&name, "kept", b"y").await.unwrap();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let mut consumer = queue.consume(&name, consume_options(4)).await.unwrap();
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.received().id, "kept");
        delivery.ack().await.unwrap();
        assert!(nothing_within(&mut consumer, Duration::from_millis(800)).await);
        queue.delete_queue(&name).await.unwrap();
    }

    #[tokio::test]
    async fn poison_lists_past_one_peek_and_replays_by_id() {
        let Some((queue, _)) = connect() else { return };
        let name = support::azure_name("many-poison");
        queue.declare(&name, &options()).await.unwrap();
        for i in 0..40 {
            queue.send(&name, &format!("p{i}"), b"x").await.unwrap();
        }
        let mut consumer = queue.consume(&name, consume_options(16)).await.unwrap();
        for _ in 0..40 {
            next(&mut consumer).await.poison("no").await.unwrap();
        }
        let listed = queue.poison_list(&name, 100).await.unwrap();
        assert_eq!(listed.len(), 40);
        assert_eq!(queue.poison_list(&name, 5).await.unwrap().len(), 5);
        // Listing hid nothing: every poisoned message is still there to replay.
        assert_eq!(queue.poison_replay(&name, Some("p7")).await.unwrap(), 1);
        let back = next(&mut consumer).await;
        assert_eq!(back.received().id, "p7");
        back.ack().await.unwrap();
        assert_eq!(queue.stats(&name).await.unwrap().poisoned, 39);
        queue.delete_queue(&name).await.unwrap();
    }

    #[tokio::test]
    async fn another_producers_text_is_delivered_as_the_body() {
        let Some((queue, _)) = connect() else { return };
        let name = support::azure_name("foreign");
        queue.declare(&name, &options()).await.unwrap();
        // An operation envelope a script put as plain text, as the Python SDK does.
        let text = r#"{"id":"8f1c","kind":"archive","version":1,"payload":{}}"#;
        queue.send_text(&name, text).await.unwrap();
        let mut consumer = queue.consume(&name, consume_options(1)).await.unwrap();
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.received().body, text.as_bytes());
        assert_eq!(delivery.received().delivery_count, 1);
        assert_ne!(delivery.received().id, "8f1c", "the service's message id");
        delivery.ack().await.unwrap();
        let too_long = "x".repeat(70_000);
        let error = queue
            .send_text(&name, &too_long)
            .await
            .expect_err("over 64 KiB");
        assert!(matches!(error, Error::Refused { .. }), "{error}");
        queue.delete_queue(&name).await.unwrap();
    }

    /// The account's queues are listed, a page at a time, poison queues left out; a peek
    /// reads the front only, at most 32; a poison message shows the service's record.
    #[tokio::test]
    async fn queues_are_listed_and_the_front_peeked() {
        let Some((queue, _)) = connect() else { return };
        let names: Vec<String> = (0..3)
            .map(|i| support::azure_name(&format!("listed{i}")))
            .collect();
        for name in &names {
            queue.declare(name, &options()).await.unwrap();
        }
        let listed = queue.declared_queues().await.unwrap().expect("a list");
        for name in &names {
            assert!(listed.contains(name), "{name}");
            assert!(!listed.contains(&poison_queue(name)));
        }
        let name = &names[0];
        for i in 0..40 {
            queue
                .send(name, &format!("w{i:02}"), &envelope(i))
                .await
                .unwrap();
        }
        let front = queue.peek(name, &PeekQuery::new(100)).await.unwrap();
        assert_eq!(front.len(), 32, "one peek's worth");
        assert_eq!(front[0].id, "w00");
        let error = queue
            .peek(name, &PeekQuery::new(5).newest_first(true))
            .await
            .expect_err("the front only");
        assert!(matches!(error, Error::Unsupported(_)), "{error}");

        poison_ids(&queue, &names[1], &["h1"]).await;
        let poisoned = queue.poison_list(&names[1], 10).await.unwrap();
        let header_names: Vec<&str> = poisoned[0]
            .headers
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(
            header_names,
            ["message-id", "insertion-time", "dequeue-count"]
        );
        assert_eq!(poisoned[0].headers[0].1, poisoned[0].handle);
        for name in &names {
            queue.delete_queue(name).await.unwrap();
        }
        let listed = queue.declared_queues().await.unwrap().expect("a list");
        assert!(!listed.contains(&names[0]));
    }

    #[tokio::test]
    async fn names_invalid_on_azure_are_refused_before_any_request() {
        // A closed port: any request would fail with Unavailable, not InvalidQueueName.
        let queue = AzureQueue::options()
            .reconnect_within(Duration::ZERO)
            .connect("UseDevelopmentStorage=true;QueueEndpoint=http://127.0.0.1:9/devstoreaccount1")
            .unwrap();
        for name in ["Upper", "under_score", "dot.ted", "ab", &"a".repeat(57)] {
            let error = queue.send(name, "x", b"x").await.expect_err(name);
            assert!(matches!(error, Error::InvalidQueueName { .. }), "{error}");
            let error = queue.declare(name, &options()).await.expect_err(name);
            assert!(matches!(error, Error::InvalidQueueName { .. }), "{error}");
        }
        let error = queue
            .send("valid-name", "x", b"x")
            .await
            .expect_err("no service");
        assert!(error.is_retryable(), "{error}");
    }

    #[tokio::test]
    async fn sending_to_an_undeclared_queue_is_refused_not_lost() {
        let Some((queue, _)) = connect() else { return };
        let error = queue
            .send(&support::azure_name("undeclared"), "x", b"x")
            .await
            .expect_err("no such queue");
        assert!(matches!(error, Error::Refused { .. }), "{error}");
    }

    #[tokio::test]
    async fn the_broker_string_selects_azure() {
        let Some((_, connection)) = connect() else {
            return;
        };
        let queue = tablekit_workers::queue::AnyQueue::connect(&format!("azure:{connection}"))
            .await
            .unwrap();
        let name = support::azure_name("any-queue");
        queue.declare(&name, &options()).await.unwrap();
        queue.send(&name, "a", b"x").await.unwrap();
        assert_eq!(queue.stats(&name).await.unwrap().waiting, 1);
        let error =
            tablekit_workers::queue::AnyQueue::connect("azure:AccountName=x;AccountKey=c2VjcmV0")
                .await
                .map(|_| ());
        assert!(error.is_ok(), "a well-formed string connects lazily");
        let error =
            tablekit_workers::queue::AnyQueue::connect("azure:AccountName=x;AccountKey=!!hidden!!")
                .await
                .expect_err("bad key");
        assert!(!error.to_string().contains("hidden"), "{error}");
        AzureQueue::connect(&connection)
            .unwrap()
            .delete_queue(&name)
            .await
            .unwrap();
    }
}

#[cfg(feature = "azure")]
mod azure_access_signatures {
    use super::*;
    use chrono::Utc;
    use tablekit_core::azure::sas::QueueSas;
    use tablekit_core::azure::{DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY};
    use tablekit_workers::queue::azure::{AzureQueue, DEVELOPMENT_QUEUE_ENDPOINT};

    fn with_token(endpoint: &str, token: &str) -> AzureQueue {
        AzureQueue::options()
            .reconnect_within(Duration::ZERO)
            .connect(&format!(
                "QueueEndpoint={endpoint};SharedAccessSignature={token}"
            ))
            .unwrap()
    }

    fn sign(queue: &str, permissions: &str, hours_from_now: i64) -> String {
        QueueSas::new(queue)
            .permissions(permissions)
            .start(Utc::now() - chrono::Duration::hours(48))
            .expiry(Utc::now() + chrono::Duration::hours(hours_from_now))
            .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)
            .unwrap()
    }

    fn denied(error: &Error, needle: &str) {
        assert!(
            matches!(error, Error::QueuePermissionDenied { .. }),
            "not QueuePermissionDenied: {error}"
        );
        assert!(!error.is_retryable(), "{error}");
        assert!(error.to_string().contains(needle), "{error}");
    }

    #[tokio::test]
    async fn a_queue_token_allows_what_it_names_and_refuses_the_rest_before_any_request() {
        // Signed with the emulator's well-known key: Azurite on its default port only.
        let Some(connection) = support::azure_queues() else {
            return;
        };
        if connection != "UseDevelopmentStorage=true" {
            support::skip("signs with the emulator's key: runs on Azurite only");
            return;
        }
        let owner = AzureQueue::connect(&connection).unwrap();
        let name = support::azure_name("sas");
        owner.declare(&name, &options()).await.unwrap();

        // A producer's token: add only.
        let producer = sign(&name, "a", 1);
        with_token(DEVELOPMENT_QUEUE_ENDPOINT, &producer)
            .send(&name, "via-token", b"x")
            .await
            .unwrap();
        assert_eq!(owner.stats(&name).await.unwrap().waiting, 1);

        // Outside the token: refused with nothing sent (a closed port would fail any
        // request with Unavailable instead).
        let offline = with_token("http://127.0.0.1:9/devstoreaccount1", &producer);
        let mut consumer = offline.consume(&name, consume_options(1)).await.unwrap();
        denied(
            &consumer.next().await.expect_err("receiving needs `p`"),
            "`p`",
        );
        denied(
            &offline.stats(&name).await.expect_err("counting needs `r`"),
            "`r`",
        );
        denied(
            &offline
                .delete_queue(&name)
                .await
                .expect_err("deleting needs `d`"),
            "`d`",
        );
        let expired = sign(&name, "raup", -1);
        denied(
            &with_token("http://127.0.0.1:9/devstoreaccount1", &expired)
                .send(&name, "late", b"x")
                .await
                .expect_err("expired"),
            "expired",
        );

        // A token for another queue: the service refuses it, with the same typed error.
        let elsewhere = sign(&support::azure_name("other"), "raup", 1);
        let error = with_token(DEVELOPMENT_QUEUE_ENDPOINT, &elsewhere)
            .send(&name, "wrong-queue", b"x")
            .await
            .expect_err("signed for another queue");
        assert!(
            matches!(error, Error::QueuePermissionDenied { .. }),
            "{error}"
        );

        // A consumer's token (read, add, update, process) receives and settles.
        let worker = with_token(DEVELOPMENT_QUEUE_ENDPOINT, &sign(&name, "raup", 1));
        worker.declare(&name, &options()).await.unwrap();
        let mut consumer = worker.consume(&name, consume_options(1)).await.unwrap();
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.received().id, "via-token");
        delivery.ack().await.unwrap();
        // The poison queue is another queue, outside this token: counting it is refused.
        let error = worker
            .stats(&name)
            .await
            .expect_err("the poison queue is elsewhere");
        assert!(
            matches!(error, Error::QueuePermissionDenied { .. }),
            "{error}"
        );
        assert_eq!(owner.stats(&name).await.unwrap().waiting, 0);
        owner.delete_queue(&name).await.unwrap();
    }
}
