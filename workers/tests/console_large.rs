//! The console over a large deployment, on a debug build: a poison queue of 100,000
//! messages on the SQLite queue (60 with 3 MB bodies; ids of 10 KB, with line breaks,
//! bidi controls and `<script>`; reasons of 1 MB; 2,011 reasons `conflict on ord-N`; an
//! id and a reason that are not UTF-8), a queue of 5 waiting messages, a day of history
//! samples and a worker's heartbeat in a SQLite store. Every page and API answer is
//! fetched, checked to stay under 1 MB (the export and a whole body excepted: they are the
//! message itself), and its size and time printed with the process's peak memory (times
//! are figures for the notes, never asserted). In Chromium at 1400 px: the overview with
//! its charts, the poison page with its long ids folded, the message page; screenshots in
//! `target/console-screenshots/large-*.png`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use tablekit_core::AnyStore;
use tablekit_workers::WorkerConfig;
use tablekit_workers::activity::{Activity, Counts, write_sample_minutes};
use tablekit_workers::console::ConsoleOptions;
use tablekit_workers::queue::{AnyQueue, Queue};

use support::console::client;

const QUEUE: &str = "large";
const WAITING_QUEUE: &str = "jobs";
const MESSAGES: usize = 100_000;
const BIG: usize = 60;
const BIG_BYTES: usize = 3 * 1024 * 1024;
const CONFLICTS: usize = 2_011;
const MEGABYTE: usize = 1_000_000;

/// Whether the message `i` failed on a conflict (2,011 of them, each with its own order).
fn is_conflict(i: usize) -> bool {
    i >= 200 && i % 40 == 3 && (i - 200) / 40 < CONFLICTS
}

/// The message `i`: (id, body, reason) as bytes.
fn seeded(i: usize) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let kind = ["archive-employee", "index-copy", "index-remove"][i % 3];
    let envelope = |payload: serde_json::Value| {
        serde_json::to_vec(&serde_json::json!({
            "kind": kind, "version": 1, "id": format!("op-{i}"), "payload": payload,
        }))
        .unwrap()
    };
    match i {
        _ if i < BIG => (
            format!("big-{i}").into_bytes(),
            envelope(serde_json::json!({"photo": "x".repeat(BIG_BYTES)})),
            b"payload too large for the handler".to_vec(),
        ),
        100 => (
            format!("long-{}", "id\u{202E}<script>\n".repeat(700)).into_bytes(),
            envelope(serde_json::json!({"n": i})),
            b"an id of 10 KB".to_vec(),
        ),
        101 => (
            b"msg-101".to_vec(),
            envelope(serde_json::json!({"n": i})),
            "a reason of a megabyte: ".repeat(45_000).into_bytes(),
        ),
        102 => (
            b"bad-\xff\xfe-id".to_vec(),
            envelope(serde_json::json!({"n": i})),
            b"bad bytes \xc3\x28 in the reason".to_vec(),
        ),
        _ if is_conflict(i) => (
            format!("msg-{i:06}").into_bytes(),
            envelope(serde_json::json!({"n": i})),
            format!("conflict on ord-{}", (i - 200) / 40).into_bytes(),
        ),
        _ => (
            format!("msg-{i:06}").into_bytes(),
            envelope(serde_json::json!({"n": i, "tag": format!("needle-{i}-end")})),
            [
                "timeout after 30 s",
                "NotFound: Current/D1",
                "handler panicked",
            ][i % 3]
                .as_bytes()
                .to_vec(),
        ),
    }
}

/// Writes the poison messages straight into the queue's file, in one transaction.
fn insert(path: &std::path::Path) {
    let mut db = rusqlite::Connection::open(path).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    let tx = db.transaction().unwrap();
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO tablekit_queue (queue, id, body, sent_at, visible_at, dequeue_count, reason)
                 VALUES (?1, CAST(?2 AS TEXT), ?3, ?4, ?4, 5, CAST(?5 AS TEXT))",
            )
            .unwrap();
        let now = chrono::Utc::now().timestamp_micros();
        for (id, body, reason) in (0..MESSAGES).map(seeded) {
            insert
                .execute(rusqlite::params![
                    format!("{QUEUE}-poison"),
                    id,
                    body,
                    now,
                    reason
                ])
                .unwrap();
        }
    }
    tx.commit().unwrap();
}

/// The process's peak resident memory, as Linux counts it.
fn peak_memory() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Fetches `path`, checks its status, and prints its size and time.
async fn fetch(url: &str, path: &str, bound: Option<usize>) -> String {
    let started = Instant::now();
    let response = client().get(format!("{url}{path}")).send().await.unwrap();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    let took = started.elapsed();
    eprintln!(
        "  {:<58} {status} {:>9} bytes {:>6} ms",
        path.chars().take(58).collect::<String>(),
        body.len(),
        took.as_millis()
    );
    assert_eq!(
        status,
        200,
        "{path}: {}",
        body.chars().take(400).collect::<String>()
    );
    if let Some(bound) = bound {
        assert!(body.len() < bound, "{path}: {} bytes", body.len());
    }
    body
}

/// The handle of the first message a page links to.
fn first_handle(html: &str) -> String {
    let marker = format!("/poison/{QUEUE}/message/");
    let at = html.find(&marker).expect("a message link") + marker.len();
    let rest = &html[at..];
    rest[..rest.find('"').unwrap()].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_poison_messages_and_a_day_of_history() {
    let Some(browser) = support::browser::browser(1400, 1000).await else {
        return;
    };
    let client = &browser.client;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    let queue = AnyQueue::connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    for name in [QUEUE, WAITING_QUEUE] {
        queue
            .declare(name, &WorkerConfig::new(name).queue_options())
            .await
            .unwrap();
    }
    let started = Instant::now();
    insert(&path);
    for i in 0..5 {
        queue
            .send(
                WAITING_QUEUE,
                &format!("wait-{i}"),
                br#"{"kind":"archive-employee","version":1}"#,
            )
            .await
            .unwrap();
    }
    eprintln!(
        "seeded {MESSAGES} poison messages ({BIG} of {BIG_BYTES} bytes) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Rows written by hand carry no operation kind: opening the file again fills them in,
    // as the first open after an upgrade does.
    let started = Instant::now();
    let queue = AnyQueue::connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    eprintln!(
        "reopened, the kinds of {MESSAGES} rows filled in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // A store in memory: the console then reads the SQLite queue's own poison queue (what
    // this test measures at scale), as it does for a store no other process reads. The
    // poison table at scale is measured in `poison_table.rs`.
    let store = AnyStore::create("memory:").await.unwrap();
    // A day of history, and a worker's heartbeat.
    let now = chrono::Utc::now();
    for name in [QUEUE, WAITING_QUEUE] {
        let written = write_sample_minutes(&store, name, "worker-a", now, 1440, |at| {
            let m = u64::try_from(at.timestamp() / 60).unwrap_or(0);
            Counts {
                processed: 200 + m % 97,
                failed: m % 7,
                poisoned: u64::from(m % 50 == 0),
                redelivered: m % 5,
            }
        })
        .await
        .unwrap();
        assert_eq!(written, 1440);
    }
    let activity = Activity::options()
        .process_id("worker-a")
        .build(store.clone());
    activity.queue(QUEUE);
    activity.heartbeat_at(now).await.unwrap();

    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.queues = vec![QUEUE.to_owned(), WAITING_QUEUE.to_owned()];
    options.action_log = Some(dir.path().join("actions.jsonl"));
    let served = support::console::serve(store, queue.clone(), options).await;
    let url = served.url.clone();

    eprintln!("pages and answers (debug build):");
    let overview = fetch(&url, "/", Some(MEGABYTE)).await;
    assert!(
        overview.contains("tk-chart"),
        "the overview draws the history"
    );
    fetch(&url, "/live", Some(MEGABYTE)).await;
    let first = fetch(&url, &format!("/poison/{QUEUE}"), Some(MEGABYTE)).await;
    assert!(first.contains("100,000 in the poison queue"));
    fetch(&url, &format!("/poison/{QUEUE}?limit=100"), Some(MEGABYTE)).await;
    let newest = fetch(
        &url,
        &format!("/poison/{QUEUE}?limit=100&order=newest"),
        Some(MEGABYTE),
    )
    .await;
    assert!(newest.contains("msg-099999"), "newest first");
    let last = fetch(
        &url,
        &format!("/poison/{QUEUE}?limit=100&back=1"),
        Some(MEGABYTE),
    )
    .await;
    assert!(
        last.contains("msg-099999") && last.contains("msg-099900"),
        "the last page"
    );
    let long = fetch(&url, &format!("/poison/{QUEUE}?id=long-"), Some(MEGABYTE)).await;
    let reasons = fetch(&url, &format!("/poison/{QUEUE}/reasons"), Some(MEGABYTE)).await;
    assert!(
        reasons.contains("conflict on ord-#"),
        "the conflicts grouped"
    );
    let group = fetch(
        &url,
        &format!("/poison/{QUEUE}?group=conflict%20on%20ord-%23"),
        Some(MEGABYTE),
    )
    .await;
    assert!(
        group.contains(&format!("{} pass the filter", "2,011")),
        "every conflict"
    );
    fetch(
        &url,
        &format!("/poison/{QUEUE}?undecodable=1"),
        Some(MEGABYTE),
    )
    .await;
    let big = fetch(&url, &format!("/poison/{QUEUE}?id=big-7"), Some(MEGABYTE)).await;
    let big_handle = first_handle(&big);
    fetch(
        &url,
        &format!("/poison/{QUEUE}/message/{big_handle}"),
        Some(MEGABYTE),
    )
    .await;
    let reason_page = fetch(&url, &format!("/poison/{QUEUE}?id=msg-101"), Some(MEGABYTE)).await;
    let reason_handle = first_handle(&reason_page);
    fetch(
        &url,
        &format!("/poison/{QUEUE}/message/{reason_handle}"),
        Some(MEGABYTE),
    )
    .await;
    fetch(
        &url,
        &format!("/queues/{WAITING_QUEUE}/waiting"),
        Some(MEGABYTE),
    )
    .await;
    fetch(
        &url,
        &format!("/queues/{WAITING_QUEUE}/waiting?order=newest"),
        Some(MEGABYTE),
    )
    .await;
    let workers = fetch(&url, "/workers", Some(MEGABYTE)).await;
    assert!(workers.contains("worker-a"));
    fetch(&url, "/actions", Some(MEGABYTE)).await;
    fetch(&url, "/api/status", Some(MEGABYTE)).await;
    fetch(
        &url,
        &format!("/api/poison/{QUEUE}?limit=100"),
        Some(MEGABYTE),
    )
    .await;
    let history = fetch(
        &url,
        &format!("/api/queues/{QUEUE}/history"),
        Some(MEGABYTE),
    )
    .await;
    assert!(
        history.matches("\"minute\"").count() >= 1439,
        "a day of minutes"
    );
    fetch(&url, "/api/workers", Some(MEGABYTE)).await;
    fetch(
        &url,
        &format!("/api/queues/{WAITING_QUEUE}/waiting"),
        Some(MEGABYTE),
    )
    .await;

    // A dry run of every message: its confirmation page, and its export (the set's
    // messages whole: 180 MB of bodies, streamed).
    let started = Instant::now();
    let html = fetch(&url, &format!("/poison/{QUEUE}"), None).await;
    let mut form = support::console::poison_fields(&html);
    form.push(("action".into(), "discard-all".into()));
    let (status, location) =
        support::console::post_fields(&format!("{url}/poison/{QUEUE}"), &form).await;
    assert_eq!(status, 303, "{location}");
    eprintln!(
        "  dry run of {MESSAGES} messages (POST, then its page): {} ms",
        started.elapsed().as_millis()
    );
    let confirm = fetch(&url, &location, Some(MEGABYTE)).await;
    assert!(
        confirm.contains("<strong>100,000 messages</strong>"),
        "the whole set"
    );
    let started = Instant::now();
    let export = client_bytes(&format!("{url}{location}/export")).await;
    eprintln!(
        "  export of the set: {} bytes, {} lines in {} ms",
        export.len(),
        export.iter().filter(|b| **b == b'\n').count(),
        started.elapsed().as_millis()
    );
    assert_eq!(export.iter().filter(|b| **b == b'\n').count(), MESSAGES);
    assert_eq!(
        queue.stats(QUEUE).await.unwrap().poisoned,
        MESSAGES as u64,
        "nothing taken"
    );
    eprintln!(
        "peak memory of the test process (console, seeding, client): {}",
        peak_memory()
    );

    // In Chromium at 1400 px: the overview, the poison page of the long id (folded, the
    // reason column kept wide), the message page.
    client.goto(&format!("{url}/")).await.unwrap();
    support::browser::screenshot(client, "large-overview").await;
    client
        .goto(&format!("{url}/poison/{QUEUE}?id=long-"))
        .await
        .unwrap();
    support::browser::screenshot(client, "large-long-id").await;
    let measured = client
        .execute(
            "const r = document.querySelector('table.messages td.reason');
             return [document.documentElement.scrollWidth, window.innerWidth,
                     r ? r.getBoundingClientRect().width : 0];",
            Vec::new(),
        )
        .await
        .unwrap();
    let (scroll, inner, reason) = (
        measured[0].as_f64().unwrap(),
        measured[1].as_f64().unwrap(),
        measured[2].as_f64().unwrap(),
    );
    assert!(
        scroll <= inner,
        "the page is {scroll} px wide in a {inner} px window"
    );
    assert!(
        reason >= 250.0,
        "the reason column is {reason} px wide beside a 10 KB id"
    );
    assert!(long.contains("long-"), "the long id is listed");
    client
        .goto(&format!("{url}/poison/{QUEUE}/message/{big_handle}"))
        .await
        .unwrap();
    support::browser::screenshot(client, "large-message").await;
    client.goto(&format!("{url}/workers")).await.unwrap();
    support::browser::screenshot(client, "large-workers").await;
    drop(served);
    browser.client.clone().close().await.unwrap();
}

async fn client_bytes(url: &str) -> Vec<u8> {
    let response = client().get(url).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200, "{url}");
    response.bytes().await.unwrap().to_vec()
}
