//! What an operator does to a queue's waiting messages from the console, on each backend:
//! a purge confirmed on the page removes what waited up to the newest message the page
//! saw (a delayed retry included), keeps a message sent after and one a consumer holds;
//! a delayed retry is retried now (a consumer then receives it at once) or deleted; each
//! form acts once; a viewer sees no button and is refused; a query value the page does not
//! know is refused by name; the API does the same in JSON. On RabbitMQ a purge empties the
//! queue and its retry queues, and one message cannot be named (the answer says why); on
//! Azure Queue Storage a purge clears the queue. Every outcome is read from the queue.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use tablekit_core::AnyStore;
use tablekit_workers::WorkerConfig;
use tablekit_workers::console::ConsoleOptions;
use tablekit_workers::queue::{
    AnyQueue, ConsumeOptions, Consumer, Delivery, PeekQuery, Queue, WaitingMessage,
};

use support::console::{Served, banner_of, client, field, form};

const OPERATOR: &str = "waiting-operator-token-0123456789";
const VIEWER: &str = "waiting-viewer-token-9876543210";

/// A console with an operator's and a viewer's token over `queue`, `name` recorded as
/// declared.
async fn serve(queue: AnyQueue, name: &str) -> Served {
    let store = AnyStore::create("memory:").await.unwrap();
    tablekit_workers::activity::record_declared(&store, name)
        .await
        .unwrap();
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), Some(OPERATOR.into()));
    options.viewer_token = Some(VIEWER.into());
    options.queues = vec![name.to_owned()];
    support::console::serve(store, queue, options).await
}

async fn declare(queue: &AnyQueue, name: &str) {
    queue
        .declare(name, &WorkerConfig::new(name).queue_options())
        .await
        .unwrap();
}

/// A GET as `token`: the status and the body.
async fn get_as(url: &str, token: &str) -> (u16, String) {
    let response = client().get(url).bearer_auth(token).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// A form POST as `token`: the status, and the `Location` of a redirect or else the body.
async fn post_as(url: &str, token: &str, fields: &[(String, String)]) -> (u16, String) {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    let response = client()
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    let location = response
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned());
    (
        response.status().as_u16(),
        location.unwrap_or(response.text().await.unwrap()),
    )
}

/// A JSON POST to the API as `token`: the status and the answer.
async fn api_post(url: &str, token: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let response = client()
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (
        response.status().as_u16(),
        serde_json::from_str(&response.text().await.unwrap()).unwrap_or(serde_json::Value::Null),
    )
}

/// The confirmation's form of `page` (`…/waiting?confirm=…`) as the operator sees it: its
/// hidden fields.
async fn confirmation(page: &str) -> Vec<(String, String)> {
    let (status, html) = get_as(page, OPERATOR).await;
    assert_eq!(status, 200, "{html}");
    let form = form(&html, "name=\"do\"");
    ["csrf", "nonce", "do", "through", "handle"]
        .into_iter()
        .filter(|name| form.contains(&format!("name=\"{name}\"")))
        .map(|name| (name.to_owned(), field(form, name)))
        .collect()
}

/// The banner of the page an action redirected to.
async fn outcome(base: &str, location: &str) -> (String, bool) {
    let (status, html) = get_as(&format!("{base}{location}"), OPERATOR).await;
    assert_eq!(status, 200, "{html}");
    banner_of(&html).unwrap_or_else(|| panic!("no banner at {location}: {html}"))
}

/// A consumer of `name` that takes one message at a time, each leased for ten minutes.
async fn one_at_a_time(queue: &AnyQueue, name: &str) -> <AnyQueue as Queue>::Consumer {
    queue
        .consume(
            name,
            ConsumeOptions {
                prefetch: 1,
                lease: Duration::from_secs(600),
            },
        )
        .await
        .unwrap()
}

async fn peek(queue: &AnyQueue, name: &str) -> Vec<WaitingMessage> {
    queue.peek(name, &PeekQuery::new(100)).await.unwrap()
}

fn ids(messages: &[WaitingMessage]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

/// The handle of the message `id` among those waiting.
async fn handle_of(queue: &AnyQueue, name: &str, id: &str) -> String {
    peek(queue, name)
        .await
        .into_iter()
        .find(|m| m.id == id)
        .and_then(|m| m.handle)
        .unwrap_or_else(|| panic!("{id} does not wait"))
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_purge_removes_what_the_page_saw_and_keeps_what_came_after_or_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let queue = support::console::sqlite_queue(&dir).await;
    let name = "orders";
    declare(&queue, name).await;
    for id in ["m1", "m2", "m3", "m4", "m5"] {
        queue.send(name, id, b"{}").await.unwrap();
    }
    // m1 waits out a retry delay of an hour; a consumer holds m2.
    let mut consumer = one_at_a_time(&queue, name).await;
    let first = consumer.next().await.unwrap().unwrap();
    assert_eq!(first.received().id, "m1");
    first.retry(Duration::from_secs(3600)).await.unwrap();
    let held = consumer.next().await.unwrap().unwrap();
    assert_eq!(held.received().id, "m2");

    let served = serve(queue.clone(), name).await;
    let page = format!("{}/queues/{name}/waiting", served.url);
    let (_, html) = get_as(&page, OPERATOR).await;
    assert!(html.contains("Purge waiting…"), "{html}");
    let fields = confirmation(&format!("{page}?confirm=purge")).await;
    let through = fields.iter().find(|(k, _)| k == "through").unwrap();
    assert_eq!(
        through.1,
        handle_of(&queue, name, "m5").await,
        "bound to the newest seen"
    );
    // A message sent after the confirmation was shown is kept.
    queue.send(name, "m6", b"{}").await.unwrap();
    let (status, location) = post_as(&page, OPERATOR, &fields).await;
    assert_eq!(status, 303, "{location}");
    assert_eq!(
        outcome(&served.url, &location).await,
        ("Purged 4 waiting messages from orders.".to_owned(), false)
    );
    assert_eq!(ids(&peek(&queue, name).await), ["m2", "m6"]);
    // The same form again does nothing, and says so.
    queue.send(name, "m7", b"{}").await.unwrap();
    let (_, again) = post_as(&page, OPERATOR, &fields).await;
    assert!(again.contains("again=1"), "{again}");
    let (text, failed) = outcome(&served.url, &again).await;
    assert!(failed && text.starts_with("Nothing was done"), "{text}");
    assert_eq!(ids(&peek(&queue, name).await), ["m2", "m6", "m7"]);
    // The held message is still the consumer's to settle.
    held.ack().await.unwrap();
    assert_eq!(ids(&peek(&queue, name).await), ["m6", "m7"]);
    // The action is on the page of recent actions.
    let (_, actions) = get_as(&format!("{}/actions", served.url), OPERATOR).await;
    assert!(actions.contains("purge"), "{actions}");
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_delayed_retry_is_retried_now_or_deleted_once_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let queue = support::console::sqlite_queue(&dir).await;
    let name = "orders";
    declare(&queue, name).await;
    queue.send(name, "later", b"{}").await.unwrap();
    queue.send(name, "doomed", b"{}").await.unwrap();
    {
        let mut consumer = one_at_a_time(&queue, name).await;
        for _ in 0..2 {
            let delivery = consumer.next().await.unwrap().unwrap();
            delivery.retry(Duration::from_secs(3600)).await.unwrap();
        }
        consumer.close().await;
    }
    let served = serve(queue.clone(), name).await;
    let page = format!("{}/queues/{name}/waiting", served.url);
    let (_, html) = get_as(&page, OPERATOR).await;
    assert!(
        html.contains("delayed retry") && html.contains("Retry now…"),
        "{html}"
    );

    // Retry now: a consumer receives it at once.
    let later = handle_of(&queue, name, "later").await;
    let fields = confirmation(&format!("{page}?confirm=retry-now&handle={later}")).await;
    let (_, location) = post_as(&page, OPERATOR, &fields).await;
    let (text, failed) = outcome(&served.url, &location).await;
    assert!(!failed && text.contains("deliverable now"), "{text}");
    let waiting = peek(&queue, name).await;
    let shown = waiting.iter().find(|m| m.id == "later").unwrap();
    assert_eq!(shown.next_attempt, None);
    let mut consumer = queue
        .consume(name, ConsumeOptions::default())
        .await
        .unwrap();
    let delivery = tokio::time::timeout(Duration::from_secs(5), consumer.next())
        .await
        .expect("received at once")
        .unwrap()
        .unwrap();
    assert_eq!(delivery.received().id, "later");
    delivery.ack().await.unwrap();
    consumer.close().await;

    // Delete: gone; a second confirmation of the same message does nothing, and says so.
    let doomed = handle_of(&queue, name, "doomed").await;
    let confirm = format!("{page}?confirm=delete&handle={doomed}");
    let (first, second) = (confirmation(&confirm).await, confirmation(&confirm).await);
    let (_, location) = post_as(&page, OPERATOR, &first).await;
    let (text, failed) = outcome(&served.url, &location).await;
    assert!(!failed && text.starts_with("Deleted message"), "{text}");
    assert!(peek(&queue, name).await.is_empty());
    let (_, location) = post_as(&page, OPERATOR, &second).await;
    let (text, failed) = outcome(&served.url, &location).await;
    assert!(failed && text.contains("no longer waiting"), "{text}");
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_viewer_sees_no_action_and_is_refused_and_bad_values_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let queue = support::console::sqlite_queue(&dir).await;
    let name = "orders";
    declare(&queue, name).await;
    queue.send(name, "m1", b"{}").await.unwrap();
    let served = serve(queue.clone(), name).await;
    let page = format!("{}/queues/{name}/waiting", served.url);
    // The overview says how long the oldest message has waited.
    let (_, overview) = get_as(&format!("{}/", served.url), VIEWER).await;
    assert!(
        overview.contains("<td class=\"num oldest\"><span title=\"since "),
        "{overview}"
    );
    // The charts show the last hour a minute a bin, when asked; the day by default.
    assert!(
        overview.contains("<strong>last 24 h</strong>"),
        "{overview}"
    );
    let (status, hour) = get_as(&format!("{}/?window=1h", served.url), VIEWER).await;
    assert_eq!(status, 200);
    assert!(
        hour.contains("<strong>last hour</strong>") && hour.contains("per minute"),
        "{hour}"
    );
    let (status, wrong) = get_as(&format!("{}/?window=2h", served.url), VIEWER).await;
    assert_eq!(status, 400);
    assert!(wrong.contains("`window`"), "{wrong}");
    let (status, html) = get_as(&format!("{page}?confirm=purge"), VIEWER).await;
    assert_eq!(status, 200);
    assert!(
        !html.contains("Purge waiting") && !html.contains("name=\"do\""),
        "{html}"
    );
    // The operator's form, sent with the viewer's token: refused, nothing done.
    let fields = confirmation(&format!("{page}?confirm=purge")).await;
    let (status, _) = post_as(&page, VIEWER, &fields).await;
    assert_eq!(status, 403);
    let (status, body) = api_post(
        &format!("{}/api/queues/{name}/waiting/actions", served.url),
        VIEWER,
        serde_json::json!({"action": "purge"}),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(ids(&peek(&queue, name).await), ["m1"]);
    // Values the page does not know are refused by name.
    for (query, parameter) in [
        ("order=sideways", "`order`"),
        ("limit=0", "`limit`"),
        ("limit=-1", "`limit`"),
        ("limit=zzz", "`limit`"),
        ("confirm=zap", "`confirm`"),
        ("confirm=delete", "`confirm`"),
    ] {
        let (status, html) = get_as(&format!("{page}?{query}"), OPERATOR).await;
        assert_eq!(status, 400, "{query}");
        assert!(html.contains(parameter), "{query}: {html}");
    }
    // A form that names no action changes nothing.
    let mut unknown = fields.clone();
    unknown.retain(|(k, _)| k != "do");
    unknown.push(("do".into(), "zap".into()));
    let (status, _) = post_as(&page, OPERATOR, &unknown).await;
    assert_eq!(status, 400);
    assert_eq!(ids(&peek(&queue, name).await), ["m1"]);
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn the_api_purges_and_names_a_message_gone() {
    let dir = tempfile::tempdir().unwrap();
    let queue = support::console::sqlite_queue(&dir).await;
    let name = "orders";
    declare(&queue, name).await;
    for id in ["a", "b", "c"] {
        queue.send(name, id, b"{}").await.unwrap();
    }
    let served = serve(queue.clone(), name).await;
    let url = format!("{}/api/queues/{name}/waiting/actions", served.url);
    let b = handle_of(&queue, name, "b").await;
    let (status, body) = api_post(
        &url,
        OPERATOR,
        serde_json::json!({"action": "purge", "through": b}),
    )
    .await;
    assert_eq!((status, body["count"].as_u64()), (200, Some(2)), "{body}");
    assert_eq!(ids(&peek(&queue, name).await), ["c"]);
    let (status, body) = api_post(
        &url,
        OPERATOR,
        serde_json::json!({"action": "delete", "handle": b}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        body["type"].as_str().map(|t| t.ends_with("gone")),
        Some(true),
        "{body}"
    );
    let (status, body) = api_post(&url, OPERATOR, serde_json::json!({"action": "zap"})).await;
    assert_eq!(status, 422, "{body}");
    let (status, body) = api_post(&url, OPERATOR, serde_json::json!({"action": "retry-now"})).await;
    assert_eq!(status, 422, "{body}");
    let (status, body) = api_post(
        &format!("{}/api/queues/jbos/waiting/actions", served.url),
        OPERATOR,
        serde_json::json!({"action": "purge"}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(ids(&peek(&queue, name).await), ["c"]);
}

#[cfg(feature = "rabbitmq")]
#[tokio::test]
async fn rabbitmq_purges_the_queue_and_its_retry_queues_and_names_no_message() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let queue = AnyQueue::connect(&url).await.unwrap();
    let name = support::unique("purge");
    declare(&queue, &name).await;
    for id in ["r1", "r2", "r3"] {
        queue.send(&name, id, b"{}").await.unwrap();
    }
    // One waits out a retry delay in a retry queue.
    {
        let mut consumer = one_at_a_time(&queue, &name).await;
        let delivery = consumer.next().await.unwrap().unwrap();
        delivery.retry(Duration::from_secs(30)).await.unwrap();
        consumer.close().await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while queue.stats(&name).await.unwrap().waiting != 3 {
        assert!(std::time::Instant::now() < deadline, "three waiting");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let served = serve(queue.clone(), &name).await;
    let page = format!("{}/queues/{name}/waiting", served.url);
    let fields = confirmation(&format!("{page}?confirm=purge")).await;
    assert_eq!(
        fields
            .iter()
            .find(|(k, _)| k == "through")
            .map(|(_, v)| v.as_str()),
        Some(""),
        "RabbitMQ names no newest message"
    );
    let (_, html) = get_as(&format!("{page}?confirm=purge"), OPERATOR).await;
    assert!(html.contains("cannot stop at the newest"), "{html}");
    let (_, location) = post_as(&page, OPERATOR, &fields).await;
    let (text, failed) = outcome(&served.url, &location).await;
    assert_eq!(
        (text.as_str(), failed),
        (
            format!("Purged 3 waiting messages from {name}.").as_str(),
            false
        )
    );
    assert_eq!(queue.stats(&name).await.unwrap().waiting, 0);
    let (status, body) = api_post(
        &format!("{}/api/queues/{name}/waiting/actions", served.url),
        OPERATOR,
        serde_json::json!({"action": "retry-now", "handle": "1"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("AMQP names no message"),
        "{body}"
    );
    if let AnyQueue::Rabbit(rabbit) = &queue {
        let _ = rabbit
            .delete_queue(&name, &WorkerConfig::new(&name).queue_options())
            .await;
    }
}

#[cfg(feature = "azure")]
#[tokio::test]
async fn azure_queue_storage_clears_the_queue() {
    let Some(connection) = support::azure_queues() else {
        return;
    };
    let queue = AnyQueue::connect(&format!("azure:{connection}"))
        .await
        .unwrap();
    let name = support::azure_name("purge");
    declare(&queue, &name).await;
    for id in ["z1", "z2"] {
        queue.send(&name, id, b"{}").await.unwrap();
    }
    let served = serve(queue.clone(), &name).await;
    let page = format!("{}/queues/{name}/waiting", served.url);
    // Its messages are listed, without the actions it cannot do to one of them.
    let (_, html) = get_as(&page, OPERATOR).await;
    assert!(
        html.contains("z1") && html.contains("Purge waiting…"),
        "{html}"
    );
    assert!(
        !html.contains("Delete…") && !html.contains("Retry now…"),
        "{html}"
    );
    let fields = confirmation(&format!("{page}?confirm=purge")).await;
    let (_, location) = post_as(&page, OPERATOR, &fields).await;
    let (text, failed) = outcome(&served.url, &location).await;
    assert!(!failed && text.contains("does not say how many"), "{text}");
    assert_eq!(queue.stats(&name).await.unwrap().waiting, 0);
    if let AnyQueue::Azure(azure) = &queue {
        let _ = azure.delete_queue(&name).await;
    }
}
