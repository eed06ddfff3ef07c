//! One contract for every queue backend, run against RabbitMQ, the SQLite queue and Azure
//! Queue Storage (Azurite).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use tablekit_workers::Error;
use tablekit_workers::queue::{ConsumeOptions, Consumer, Delivery, Queue, QueueOptions};
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
/// declared (a broker that has declarations) or are empty (the SQLite queue, where every
/// queue exists); every other read of it and its companions is empty, not an error (a
/// reader can start before the first worker declares).
pub async fn reads_of_an_undeclared_queue_and_its_companions_are_empty<Q: Queue + Clone>(
    queue: Q,
    name: String,
) {
    match queue.stats(&name).await {
        Err(Error::NotDeclared { queue }) => assert_eq!(queue, name),
        Ok(stats) => assert_eq!(
            (stats.waiting, stats.leased, stats.poisoned),
            (0, 0, 0),
            "{stats:?}"
        ),
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

contract!(
    sent_messages_arrive_once_and_acked_ones_are_gone,
    a_retry_comes_back_after_its_delay_with_the_next_count,
    unsettled_deliveries_come_back_counted,
    poison_keeps_the_reason_and_replay_brings_messages_back,
    discard_deletes_poison_messages_for_good_and_twice_is_harmless,
    prefetch_bounds_the_deliveries_held_at_once,
    invalid_queue_names_are_refused_before_any_io,
    reads_of_an_undeclared_queue_and_its_companions_are_empty,
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
        queue.delete_queue(&name, &options).await.unwrap();
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

    #[tokio::test]
    async fn a_stale_ack_after_the_lease_ran_out_is_refused() {
        let Some((queue, _)) = connect() else { return };
        let name = support::azure_name("stale-ack");
        queue.declare(&name, &options()).await.unwrap();
        queue.send(&name, "s1", b"x").await.unwrap();
        // Without renewal, a handler slower than its lease loses it.
        let unrenewed = queue.clone().with_lease_renewal(false);
        let short = ConsumeOptions {
            prefetch: 1,
            lease: Duration::from_secs(1),
        };
        let mut slow = unrenewed.consume(&name, short).await.unwrap();
        let stale = next(&mut slow).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let mut fast = queue.consume(&name, consume_options(1)).await.unwrap();
        let fresh = next(&mut fast).await;
        assert_eq!(fresh.received().delivery_count, 2);
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
        let Some((queue, _)) = connect() else { return };
        let name = support::azure_name("ttl");
        let short = queue.clone().with_message_ttl(Some(Duration::from_secs(1)));
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

    #[tokio::test]
    async fn names_invalid_on_azure_are_refused_before_any_request() {
        // A closed port: any request would fail with Unavailable, not InvalidQueueName.
        let queue = AzureQueue::connect(
            "UseDevelopmentStorage=true;QueueEndpoint=http://127.0.0.1:9/devstoreaccount1",
        )
        .unwrap()
        .with_reconnect_within(Duration::ZERO);
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
        AzureQueue::connect(&format!(
            "QueueEndpoint={endpoint};SharedAccessSignature={token}"
        ))
        .unwrap()
        .with_reconnect_within(Duration::ZERO)
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
