//! The console's tour at scale, run by hand: a poison table holding
//! `TABLEKIT_TOUR_SCALE` messages (100,000 by default) beside each queue backend — the
//! SQLite queue and RabbitMQ with a SQLite store, Azure Queue Storage with Azure Table
//! Storage (Azurite) — toured in headless Chromium by the operator: the overview, the
//! poison pages (first, next, newest first, last, reasons, a reason group, a kind, a text
//! filter), a message's page, the waiting page, and a discard of ten through its
//! confirmation, read back from the table. Each page's time (the server's answer and the
//! browser's load) and size are printed for the issue's note; screenshots go to
//! `target/console-screenshots/scale-<backend>-<step>.png`.
//!
//! `cargo test -p tablekit-workers --all-features --test console_tour_scale -- --ignored --nocapture --test-threads 1`

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

mod support;

use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use tablekit_core::AnyStore;
use tablekit_workers::WorkerConfig;
use tablekit_workers::console::ConsoleOptions;
use tablekit_workers::queue::poison_table::WithPoisonTable;
use tablekit_workers::queue::{AnyQueue, Queue};

use support::browser::{self, screenshot};

const OPERATOR: &str = "scale-operator-token-0123456789abcdef";

fn scale() -> usize {
    std::env::var("TABLEKIT_TOUR_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

fn envelope(kind: &str, n: usize) -> String {
    format!(
        r#"{{"id":"00000000-0000-0000-0000-{n:012}","kind":"{kind}","version":1,"created_at":"2026-01-01T00:00:00Z","payload":{{"n":{n},"note":"<b>hostile</b> \u202e"}}}}"#
    )
}

/// `100,000`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One step's figures.
struct Step {
    name: &'static str,
    server_ms: f64,
    browser_ms: f64,
    bytes: usize,
}

/// Times `path` as the server answers it (a GET with the operator's token) and as the
/// browser loads it, keeps its screenshot, and answers the page's source.
async fn visit(
    client: &Client,
    base: &str,
    backend: &str,
    name: &'static str,
    path: &str,
    steps: &mut Vec<Step>,
) -> String {
    let at = Instant::now();
    let response = support::console::client()
        .get(format!("{base}{path}"))
        .bearer_auth(OPERATOR)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    let server_ms = at.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(status, 200, "{path}: {body}");
    let at = Instant::now();
    client.goto(&format!("{base}{path}")).await.unwrap();
    let browser_ms = at.elapsed().as_secs_f64() * 1000.0;
    screenshot(client, &format!("scale-{backend}-{name}")).await;
    steps.push(Step {
        name,
        server_ms,
        browser_ms,
        bytes: body.len(),
    });
    client.source().await.unwrap()
}

/// The first link whose markup has `class="<class>"`, unescaped.
fn link_of(html: &str, class: &str) -> String {
    let marker = format!("class=\"{class}\" href=\"");
    let at = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {class} link in {html}"));
    let rest = &html[at + marker.len()..];
    support::console::unescape(&rest[..rest.find('"').unwrap()])
}

async fn tour(broker: AnyQueue, store: AnyStore, name: &str, backend: &str) {
    let Some(chromium) = browser::browser(1400, 1000).await else {
        return;
    };
    let scale = scale();
    let kept = WithPoisonTable::new(broker.clone(), store.clone());
    let table = kept.table().expect("a poison table").clone();
    broker
        .declare(name, &WorkerConfig::new(name).queue_options())
        .await
        .unwrap();
    tablekit_workers::activity::record_declared(&store, name)
        .await
        .unwrap();
    support::console::load_poison(&table, name, scale).await;
    for i in 0..200 {
        broker
            .send(name, &format!("w{i:04}"), envelope("archive", i).as_bytes())
            .await
            .unwrap();
    }
    assert_eq!(table.count(name).await.unwrap(), scale as u64);

    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), Some(OPERATOR.into()));
    options.queues = vec![name.to_owned()];
    let running = support::console::serve(store.clone(), broker.clone(), options).await;
    let base = running.url.as_str();
    let client = &chromium.client;
    client.goto(&format!("{base}/login")).await.unwrap();
    let form = client
        .form(Locator::Css("form[action='/login']"))
        .await
        .unwrap();
    form.set_by_name("token", OPERATOR).await.unwrap();
    browser::click(client, "form[action='/login'] button").await;
    client
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Id("live"))
        .await
        .unwrap();

    let mut steps = Vec::new();
    let poison = format!("/poison/{name}");
    visit(client, base, backend, "overview", "/", &mut steps).await;
    let first = visit(client, base, backend, "poison", &poison, &mut steps).await;
    assert!(first.contains(&thousands(scale)), "the count shown");
    assert!(!first.contains("<script>alert"), "escaped");
    let next = link_of(&first, "next");
    visit(client, base, backend, "next-page", &next, &mut steps).await;
    visit(
        client,
        base,
        backend,
        "newest-first",
        &format!("{poison}?order=newest"),
        &mut steps,
    )
    .await;
    visit(
        client,
        base,
        backend,
        "last-page",
        &format!("{poison}?back=1"),
        &mut steps,
    )
    .await;
    visit(
        client,
        base,
        backend,
        "reasons",
        &format!("{poison}/reasons"),
        &mut steps,
    )
    .await;
    visit(
        client,
        base,
        backend,
        "group",
        &format!("{poison}?group=timeout+after+%23+s"),
        &mut steps,
    )
    .await;
    visit(
        client,
        base,
        backend,
        "kind",
        &format!("{poison}?kind=audit"),
        &mut steps,
    )
    .await;
    visit(
        client,
        base,
        backend,
        "text-filter",
        &format!("{poison}?reason=hostile"),
        &mut steps,
    )
    .await;
    let handles = support::console::handles(&first);
    visit(
        client,
        base,
        backend,
        "message",
        &format!("{poison}/message/{}", handles[3]),
        &mut steps,
    )
    .await;
    visit(
        client,
        base,
        backend,
        "waiting",
        &format!("/queues/{name}/waiting"),
        &mut steps,
    )
    .await;

    let purge = visit(
        client,
        base,
        backend,
        "purge-confirm",
        &format!("/queues/{name}/waiting?confirm=purge"),
        &mut steps,
    )
    .await;
    assert!(purge.contains("name=\"do\" value=\"purge\""), "{purge}");

    // A discard of ten, ticked on the first page and confirmed.
    client.goto(&format!("{base}{poison}")).await.unwrap();
    for handle in handles.iter().take(10) {
        browser::click(client, &format!("input[name='h'][value='{handle}']")).await;
    }
    let at = Instant::now();
    browser::click(client, "button[value^='discard-selected:']").await;
    client
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css("form button.danger"))
        .await
        .unwrap();
    let to_confirm = at.elapsed().as_secs_f64() * 1000.0;
    screenshot(client, &format!("scale-{backend}-confirm")).await;
    let at = Instant::now();
    browser::click(client, "form button.danger").await;
    browser::banner(client, "Discarded 10 messages.").await;
    let confirmed = at.elapsed().as_secs_f64() * 1000.0;
    screenshot(client, &format!("scale-{backend}-discarded")).await;
    assert_eq!(table.count(name).await.unwrap(), scale as u64 - 10);
    for handle in handles.iter().take(10) {
        assert!(table.message(name, handle).await.unwrap().is_none());
    }
    assert!(table.message(name, &handles[10]).await.unwrap().is_some());

    println!("\n{backend}, {scale} poison messages:");
    println!(
        "{:<14} {:>10} {:>11} {:>9}",
        "page", "server ms", "browser ms", "KB"
    );
    for s in &steps {
        println!(
            "{:<14} {:>10.0} {:>11.0} {:>9.1}",
            s.name,
            s.server_ms,
            s.browser_ms,
            s.bytes as f64 / 1024.0
        );
    }
    println!("{:<14} {:>10} {:>11.0}", "to confirm", "", to_confirm);
    println!("{:<14} {:>10} {:>11.0}", "confirmed", "", confirmed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement at scale, run by hand"]
async fn the_tour_at_scale_over_the_sqlite_queue() {
    let dir = tempfile::tempdir().unwrap();
    let broker = support::console::sqlite_queue(&dir).await;
    let store = AnyStore::create(&format!(
        "sqlite:{}?mode=rwc",
        dir.path().join("store.db").display()
    ))
    .await
    .unwrap();
    tour(broker, store, "scale", "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement at scale, run by hand"]
async fn the_tour_at_scale_over_rabbitmq() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let broker = AnyQueue::connect(&url).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::create(&format!(
        "sqlite:{}?mode=rwc",
        dir.path().join("store.db").display()
    ))
    .await
    .unwrap();
    let name = support::unique("scale");
    tour(broker.clone(), store, &name, "rabbitmq").await;
    if let AnyQueue::Rabbit(rabbit) = &broker {
        let _ = rabbit
            .delete_queue(&name, &WorkerConfig::new(name.as_str()).queue_options())
            .await;
    }
}

/// Azure Queue Storage with the poison table on a SQLite store (a worker's store may be
/// any): the scale of the other backends.
#[cfg(feature = "azure")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement at scale, run by hand"]
async fn the_tour_at_scale_over_azure_queues_with_a_sqlite_store() {
    let Some(connection) = support::azure_queues() else {
        return;
    };
    let broker = AnyQueue::connect(&format!("azure:{connection}"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::create(&format!(
        "sqlite:{}?mode=rwc",
        dir.path().join("store.db").display()
    ))
    .await
    .unwrap();
    let name = support::azure_name("scale");
    tour(broker.clone(), store, &name, "azure-queues").await;
    if let AnyQueue::Azure(azure) = &broker {
        let _ = azure.delete_queue(&name).await;
    }
}

/// Azure Queue Storage with the poison table on Azure Table Storage, both Azurite's
/// (which records about 25 poison messages a second: run it with a smaller
/// `TABLEKIT_TOUR_SCALE`).
#[cfg(feature = "azure")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement at scale, run by hand"]
async fn the_tour_at_scale_over_azure_storage() {
    let Some(connection) = support::azure_queues() else {
        return;
    };
    let broker = AnyQueue::connect(&format!("azure:{connection}"))
        .await
        .unwrap();
    let prefix = uuid::Uuid::new_v4().simple().to_string();
    let store = AnyStore::create(&format!(
        "azure:{connection};TablePrefix=s{}",
        &prefix[..10]
    ))
    .await
    .unwrap();
    let name = support::azure_name("scale");
    tour(broker.clone(), store, &name, "azurite").await;
    if let AnyQueue::Azure(azure) = &broker {
        let _ = azure.delete_queue(&name).await;
    }
}
