//! The console over the store's poison table, on SQLite, RabbitMQ and Azure Queue
//! Storage: what workers recorded and what the broker's own poison queue held are shown
//! as one list, readers at once take nothing off, a confirmed discard takes exactly its
//! set, and the workers' trims to their cap are shown. The table is on SQLite, and on
//! Azure Table Storage (Azurite) beside Azure's queues.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use tablekit_core::AnyStore;
use tablekit_workers::WorkerConfig;
use tablekit_workers::console::ConsoleOptions;
use tablekit_workers::queue::poison_table::{Retention, WithPoisonTable};
use tablekit_workers::queue::{AnyQueue, Queue};

use support::console::*;

async fn sqlite_store(dir: &tempfile::TempDir) -> AnyStore {
    AnyStore::create(&format!(
        "sqlite:{}?mode=rwc",
        dir.path().join("store.db").display()
    ))
    .await
    .unwrap()
}

/// 30 messages recorded by workers in the table and 2 left on the broker's poison queue;
/// four readers load the page while the operator confirms a discard of 10.
async fn one_list_and_an_exact_discard(broker: AnyQueue, name: &str, store: AnyStore) {
    let kept = WithPoisonTable::new(broker.clone(), store.clone());
    let seeded: Vec<(String, Vec<u8>, String)> = (0..30)
        .map(|i| {
            (
                format!("t{i:02}"),
                format!("{{\"n\":{i}}}").into_bytes(),
                format!("conflict on ord-{i}"),
            )
        })
        .collect();
    let as_refs: Vec<(&str, Vec<u8>, &str)> = seeded
        .iter()
        .map(|(id, body, reason)| (id.as_str(), body.clone(), reason.as_str()))
        .collect();
    seed_poison(&kept, name, &as_refs).await;
    // Left on the broker: a store failure, or the broker's own dead-lettering.
    seed_poison(
        &broker,
        name,
        &[
            ("b1", b"on the broker".to_vec(), "dead-lettered"),
            ("b2", b"on the broker".to_vec(), "dead-lettered"),
        ],
    )
    .await;
    assert_eq!(broker.stats(name).await.unwrap().poisoned, 2);
    assert_eq!(kept.stats(name).await.unwrap().poisoned, 32);

    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.queues = vec![name.to_owned()];
    let running = serve(store.clone(), broker.clone(), options).await;
    let base = running.url.clone();
    let page_url = format!("{base}/poison/{name}?limit=50");
    let (status, html) = get(&page_url).await;
    assert_eq!(status, 200, "{html}");
    // Swept in: one list of 32, nothing left on the broker's poison queue.
    assert_eq!(handles(&html).len(), 32, "{html}");
    assert!(html.contains("<code>b1</code>") && html.contains("<code>t29</code>"));
    assert_eq!(broker.stats(name).await.unwrap().poisoned, 0);
    assert_eq!(kept.stats(name).await.unwrap().poisoned, 32);

    // Readers at once see the same list, and leave it whole.
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let url = page_url.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                for _ in 0..3 {
                    let (status, html) = get(&url).await;
                    assert_eq!(status, 200);
                    seen.push(handles(&html).len());
                }
                seen
            })
        })
        .collect();
    let set: Vec<String> = handles(&html).into_iter().take(10).collect();
    let mut extra: Vec<(&str, &str)> = set.iter().map(|h| ("h", h.as_str())).collect();
    extra.push(("confirmed", "10"));
    let discard_selected = selected_button(&html, "discard");
    let (status, to_confirm) = post_fields(
        &format!("{base}/poison/{name}"),
        &poison_form(&html, ("action", &discard_selected), &extra),
    )
    .await;
    assert_eq!(status, 303, "{to_confirm}");
    let confirm = confirmation(&base, &to_confirm).await;
    assert!(
        confirm.html.contains("<strong>10 messages</strong>"),
        "{}",
        confirm.html
    );
    let (status, location) = confirm.submit(&base).await;
    assert_eq!(status, 303, "{location}");
    let (banner, _) = banner_at(&base, &location).await;
    assert!(banner.starts_with("Discarded 10 "), "{banner}");
    assert!(!banner.contains("already left"), "{banner}");
    for reader in readers {
        let seen = reader.await.unwrap();
        assert!(seen.iter().all(|n| (22..=32).contains(n)), "{seen:?}");
    }
    assert_eq!(kept.stats(name).await.unwrap().poisoned, 22);
    let (_, after) = get(&page_url).await;
    let left = handles(&after);
    assert_eq!(left.len(), 22);
    assert!(set.iter().all(|h| !left.contains(h)));

    // A message's page reads it from the table, with who poisoned it.
    let (status, message) = get(&format!("{base}/poison/{name}/message/{}", left[0])).await;
    assert_eq!(status, 200, "{message}");
    assert!(message.contains("poisoned by"), "{message}");

    // The workers' trims to their cap are shown on the page.
    assert!(after.contains("has been trimmed"), "{after}");
    let table = kept.table().expect("a poison table");
    let retention = Retention {
        max_messages: 20,
        ..Retention::default()
    };
    assert_eq!(table.trim(name, retention).await.unwrap(), 2);
    let (_, trimmed) = get(&page_url).await;
    assert_eq!(handles(&trimmed).len(), 20);
    assert!(
        trimmed.contains(", 2 (kept at most 20 messages, none older than 180 days)."),
        "{trimmed}"
    );
    drop(running);
}

#[tokio::test]
async fn the_console_shows_one_list_and_discards_exactly_over_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let broker = AnyQueue::connect(&format!("sqlite:{}", dir.path().join("q.db").display()))
        .await
        .unwrap();
    let store = sqlite_store(&dir).await;
    one_list_and_an_exact_discard(broker, "table-console", store).await;
}

#[tokio::test]
async fn the_console_shows_one_list_and_discards_exactly_over_rabbitmq() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let broker = AnyQueue::connect(&url).await.unwrap();
    let name = support::unique("table-console");
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    one_list_and_an_exact_discard(broker.clone(), &name, store).await;
    if let AnyQueue::Rabbit(rabbit) = &broker {
        let _ = rabbit
            .delete_queue(&name, &WorkerConfig::new(name.as_str()).queue_options())
            .await;
    }
}

#[cfg(feature = "azure")]
#[tokio::test]
async fn the_console_shows_one_list_and_discards_exactly_over_azure_queues() {
    let Some(connection) = support::azure_queues() else {
        return;
    };
    let broker = AnyQueue::connect(&format!("azure:{connection}"))
        .await
        .unwrap();
    let name = support::azure_name("table-console");
    // The poison table on Azure Table Storage too: Azurite's, under tables of its own.
    let prefix = uuid::Uuid::new_v4().simple().to_string();
    let store = AnyStore::create(&format!(
        "azure:{connection};TablePrefix=t{}",
        &prefix[..10]
    ))
    .await
    .unwrap();
    one_list_and_an_exact_discard(broker.clone(), &name, store).await;
    if let AnyQueue::Azure(azure) = &broker {
        let _ = azure.delete_queue(&name).await;
    }
}

/// Publishes a message `id` with `headers` to `queue`, confirmed, as a client outside
/// tablekit does.
async fn publish(
    channel: &lapin::Channel,
    queue: &str,
    id: &str,
    headers: &[(&str, lapin::types::AMQPValue)],
) {
    let mut table = lapin::types::FieldTable::default();
    for (name, value) in headers {
        table.insert((*name).into(), value.clone());
    }
    channel
        .basic_publish(
            "".into(),
            queue.into(),
            lapin::options::BasicPublishOptions::default(),
            b"{}",
            lapin::BasicProperties::default()
                .with_message_id(id.into())
                .with_headers(table),
        )
        .await
        .unwrap()
        .await
        .unwrap();
}

/// A client outside tablekit dead-letters a message with its reason as AMQP bytes (a
/// byte array): the console shows that reason, swept into the table, not "dead-lettered
/// by the broker".
#[tokio::test]
async fn a_reason_sent_as_amqp_bytes_shows_as_sent_over_rabbitmq() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let broker = AnyQueue::connect(&url).await.unwrap();
    let name = support::unique("bytes-reason");
    broker
        .declare(&name, &WorkerConfig::new(name.as_str()).queue_options())
        .await
        .unwrap();
    let connection = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    // As an outside client: its reason as AMQP bytes; and one whose reason and a header
    // are bytes that are not UTF-8.
    use lapin::types::AMQPValue::{ByteArray, LongString};
    let poison = tablekit_workers::queue::poison_queue(&name);
    publish(
        &channel,
        &poison,
        "outside",
        &[(
            "x-tablekit-reason",
            ByteArray(b"timeout after 30 s".to_vec().into()),
        )],
    )
    .await;
    publish(
        &channel,
        &poison,
        "odd",
        &[
            (
                "x-tablekit-reason",
                LongString(b"bad \xfe reason".to_vec().into()),
            ),
            ("x-trace", LongString(b"t-\x80\x81".to_vec().into())),
        ],
    )
    .await;
    let _ = channel.close(200, "done".into()).await;
    let _ = connection.close(200, "done".into()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    let store_for_check = store.clone();
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.queues = vec![name.clone()];
    let running = serve(store, broker.clone(), options).await;
    let (status, html) = get(&format!("{}/poison/{name}", running.url)).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("<code>outside</code>"), "{html}");
    assert!(html.contains("timeout after 30 s"), "{html}");
    assert!(!html.contains("dead-lettered by the broker"), "{html}");
    drop(running);
    // Swept into the table, the odd one's bytes are kept and exported exactly.
    let kept = WithPoisonTable::new(broker.clone(), store_for_check);
    let table = kept.table().expect("a poison table");
    let page = table
        .page(&name, &tablekit_workers::queue::PoisonQuery::new(10, 0))
        .await
        .unwrap();
    let odd = page.messages.iter().find(|m| m.id == "odd").expect("swept");
    let whole = table.message(&name, &odd.handle).await.unwrap().unwrap();
    let line: serde_json::Value =
        serde_json::from_slice(&tablekit_workers::queue::desk::export_line(&whole)).unwrap();
    let b64 = |bytes: &[u8]| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(bytes)
    };
    assert_eq!(line["raw"]["reason"], b64(b"bad \xfe reason"), "{line}");
    let place = whole
        .headers
        .iter()
        .position(|(name, _)| name == "x-trace")
        .expect("the header");
    let kept_bytes = line["raw"]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry[0] == place)
        .unwrap_or_else(|| panic!("no bytes of x-trace in {line}"));
    assert_eq!(kept_bytes[1], b64(b"t-\x80\x81"), "{line}");
    if let AnyQueue::Rabbit(rabbit) = &broker {
        let _ = rabbit
            .delete_queue(&name, &WorkerConfig::new(name.as_str()).queue_options())
            .await;
    }
}
