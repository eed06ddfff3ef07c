//! The console at scale, in Chromium: a poison queue of 10,000 messages on the SQLite
//! queue — 40 of them with 2 MB bodies, one whose id and reason are not UTF-8 — paged
//! through whole, filtered, grouped by reason, a bulk discard bound to the set its dry run
//! listed while the queue changes under it (confirmed on its own page, every message of
//! it in the action log), and a redrive into another queue. Each page
//! is checked to stay under 1 MB; sizes and times are printed (not asserted). Screenshots
//! go to `target/console-screenshots/scale-*.png`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::console::client;

use std::time::{Duration, Instant};

use fantoccini::Locator;
use tablekit_core::AnyStore;
use tablekit_workers::WorkerConfig;
use tablekit_workers::console::ConsoleOptions;
use tablekit_workers::queue::{AnyQueue, PoisonAction, Queue};

const QUEUE: &str = "scale";
const MESSAGES: usize = 10_000;
const BIG: usize = 40;
const BIG_BYTES: usize = 2 * 1024 * 1024;
const KINDS: [&str; 3] = ["archive-employee", "index-copy", "index-remove"];
const REASONS: [&str; 5] = [
    "timeout after 30 s",
    "NotFound: Current/D1",
    "handler panicked",
    "schema version 3 unknown",
    "PreconditionFailed",
];
/// The one message whose id and reason are not UTF-8.
const UNDECODABLE: usize = 5_000;
const MEGABYTE: usize = 1_000_000;

fn envelope(kind: &str, payload: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": uuid::Uuid::new_v4(),
        "kind": kind,
        "version": 1,
        "created_at": "2026-11-26T10:00:00Z",
        "payload": payload,
    }))
    .unwrap()
}

/// The message `i` of the seed: (id, body, reason) as bytes.
fn seeded(i: usize) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    if i == UNDECODABLE {
        return (
            b"bad-\xff\xfe-id".to_vec(),
            envelope(KINDS[0], &serde_json::json!({"n": i})),
            b"bad-bytes \xc3\x28 in the reason".to_vec(),
        );
    }
    let kind = KINDS[i % KINDS.len()];
    let reason = REASONS[i % REASONS.len()].as_bytes().to_vec();
    if i < BIG {
        let body = envelope(
            kind,
            &serde_json::json!({"n": i, "photo": "x".repeat(BIG_BYTES)}),
        );
        return (format!("big-{i}").into_bytes(), body, reason);
    }
    let body = envelope(
        kind,
        &serde_json::json!({"n": i, "tag": format!("needle-{i}-end")}),
    );
    (format!("msg-{i:05}").into_bytes(), body, reason)
}

/// How many of the seed `pass` counts.
fn expected(pass: impl Fn(usize) -> bool) -> usize {
    (0..MESSAGES)
        .filter(|&i| i != UNDECODABLE && pass(i))
        .count()
}

/// Writes poison messages straight into the queue's file, as another producer could, in
/// one transaction.
fn insert(path: &std::path::Path, rows: impl Iterator<Item = (Vec<u8>, Vec<u8>, Vec<u8>)>) {
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
        for (id, body, reason) in rows {
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

/// A page's body, its size and how long it took.
async fn fetch(url: &str) -> (String, Duration) {
    let started = Instant::now();
    let response = client().get(url).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200, "{url}");
    let body = response.text().await.unwrap();
    (body, started.elapsed())
}

/// The handles of the messages a page lists.
fn handles(html: &str) -> Vec<String> {
    html.match_indices("data-handle=\"")
        .map(|(at, m)| {
            let rest = &html[at + m.len()..];
            rest[..rest.find('"').unwrap()].to_owned()
        })
        .collect()
}

/// The next page's link, unescaped.
fn next_link(html: &str) -> Option<String> {
    let marker = "class=\"next\" href=\"";
    let at = html.find(marker)?;
    let rest = &html[at + marker.len()..];
    Some(rest[..rest.find('"').unwrap()].replace("&amp;", "&"))
}

/// `12,345`.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_poison_messages_in_chromium() {
    let Some(browser) = support::browser::browser(1280, 1000).await else {
        return;
    };
    let client = &browser.client;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    let queue = AnyQueue::connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    queue
        .declare(QUEUE, &WorkerConfig::new(QUEUE).queue_options())
        .await
        .unwrap();
    let started = Instant::now();
    insert(&path, (0..MESSAGES).map(seeded));
    eprintln!(
        "seeded {MESSAGES} poison messages ({BIG} of {BIG_BYTES} bytes) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let store = AnyStore::create("memory:").await.unwrap();
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.queues = vec![QUEUE.to_owned()];
    let action_log = dir.path().join("actions.jsonl");
    options.action_log = Some(action_log.clone());
    let served = support::console::serve(store, queue.clone(), options).await;
    let url = served.url.clone();
    let page = format!("{url}/poison/{QUEUE}");

    // The first page: under a megabyte with 2 MB bodies in it.
    let (html, took) = fetch(&page).await;
    eprintln!(
        "first page: {} bytes in {} ms",
        html.len(),
        took.as_millis()
    );
    assert!(html.len() < MEGABYTE, "{} bytes", html.len());
    assert!(html.contains(&format!("{} in the poison queue", thousands(MESSAGES))));
    assert!(html.contains(&format!("of {} bytes", thousands(seeded(0).1.len()))));

    // Every message is reachable: 100 pages of 100, each under a megabyte.
    let started = Instant::now();
    let mut seen = std::collections::HashSet::new();
    let mut next = Some(format!("/poison/{QUEUE}?limit=100"));
    let (mut pages, mut largest) = (0, 0);
    while let Some(link) = next {
        let (html, _) = fetch(&format!("{url}{link}")).await;
        assert!(html.len() < MEGABYTE, "{link}: {} bytes", html.len());
        largest = largest.max(html.len());
        pages += 1;
        for handle in handles(&html) {
            assert!(seen.insert(handle), "a message on two pages");
        }
        next = next_link(&html);
    }
    eprintln!(
        "paged through {} messages in {pages} pages of 100 in {} ms (largest page {largest} bytes)",
        seen.len(),
        started.elapsed().as_millis()
    );
    assert_eq!(seen.len(), MESSAGES);

    // In the browser: the first page, the next.
    client.goto(&page).await.unwrap();
    support::browser::screenshot(client, "scale-first-page").await;
    let first = client.source().await.unwrap();
    support::browser::click(client, "nav.pager a.next").await;
    support::browser::wait_for(client, |html| html.contains("First page")).await;
    let second = client.source().await.unwrap();
    assert!(
        handles(&first)
            .iter()
            .all(|h| !handles(&second).contains(h))
    );

    // Filter by kind: the count and the reasons grouped with theirs.
    client.goto(&page).await.unwrap();
    let kind = client
        .find(Locator::Css("form.filter select[name='kind']"))
        .await
        .unwrap();
    kind.select_by_value("index-copy").await.unwrap();
    support::browser::click(client, "form.filter button").await;
    let copies = expected(|i| i % 3 == 1);
    support::browser::wait_for(client, |html| {
        html.contains(&format!("{} pass the filter", thousands(copies)))
    })
    .await;
    // The reasons are folded until asked for.
    let reasons = client.find(Locator::Css("details.reasons")).await.unwrap();
    assert_eq!(
        reasons.prop("open").await.unwrap().as_deref(),
        Some("false"),
        "the reasons are folded by default"
    );
    support::browser::click(client, "details.reasons summary").await;
    let timeouts = expected(|i| i % 3 == 1 && i % 5 == 0);
    let count = client
        .find(Locator::XPath(
            "//details[contains(@class,'reasons')]//tr[td[contains(@class,'reason')][contains(., 'timeout after')]]/td[contains(@class,'num')]",
        ))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(count, thousands(timeouts), "the timeouts counted");
    support::browser::screenshot(client, "scale-filtered-by-kind").await;

    // Filter by body text: one message.
    let (html, took) = fetch(&format!("{page}?body=needle-4321-end")).await;
    eprintln!("body filter: {} ms", took.as_millis());
    assert_eq!(handles(&html).len(), 1);
    assert!(html.contains("1 pass the filter"));

    // The undecodable message: listed lossily, and replayed alone.
    client
        .goto(&format!("{page}?reason=bad-bytes"))
        .await
        .unwrap();
    let text = client
        .find(Locator::Css("table.messages"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("bad-\u{fffd}\u{fffd}-id"), "{text}");
    support::browser::click(client, "button[value^='replay:']").await;
    support::browser::banner(client, "Replayed 1 message.").await;
    assert_eq!(queue.stats(QUEUE).await.unwrap().waiting, 1);

    // A 2 MB body: cut on the page, whole behind its link.
    let (html, _) = fetch(&format!("{page}?id=big-7")).await;
    assert!(html.len() < MEGABYTE);
    let at = html.find("/body/").expect("the whole body's link");
    let start = html[..at].rfind('"').unwrap() + 1;
    let end = at + html[at..].find('"').unwrap();
    let raw = client_get_bytes(&format!("{url}{}", &html[start..end])).await;
    // The whole body: as long as the seed's (its id is random, its length is not) and
    // whole JSON.
    assert_eq!(raw.len(), seeded(7).1.len(), "the whole body's length");
    let whole: serde_json::Value = serde_json::from_slice(&raw).expect("whole JSON");
    assert_eq!(whole["payload"]["n"], 7);

    // "Discard all" bound to what its dry run listed, while the queue changes.
    client
        .goto(&format!("{page}?reason=timeout"))
        .await
        .unwrap();
    let listed = client.source().await.unwrap();
    let timeouts = expected(|i| i % 5 == 0);
    support::browser::click(client, "button[value='discard-all']").await;
    support::browser::wait_for(client, |html| html.contains("Dry run")).await;
    let dry_run = client.source().await.unwrap();
    assert!(
        dry_run.contains(&format!(
            "<strong>{} messages</strong>",
            thousands(timeouts)
        )),
        "the dry run names the set"
    );
    support::browser::screenshot(client, "scale-dry-run").await;
    // Meanwhile: two of the set leave, two new ones with the same reason arrive.
    let gone: Vec<String> = handles(&listed).into_iter().take(2).collect();
    assert_eq!(
        queue
            .poison_take(QUEUE, &gone, &PoisonAction::Discard)
            .await
            .unwrap()
            .len(),
        2
    );
    insert(
        &path,
        (0..2).map(|i| {
            (
                format!("late-{i}").into_bytes(),
                b"late".to_vec(),
                REASONS[0].as_bytes().to_vec(),
            )
        }),
    );
    support::browser::click(client, "form button[name='confirm']").await;
    support::browser::banner(
        client,
        &format!(
            "Discarded {} of {} messages; the other 2 had already left the poison queue, or never was in it.",
            thousands(timeouts - 2),
            thousands(timeouts)
        ),
    )
    .await;
    // Back where the operator was: the same filter.
    let at = client.current_url().await.unwrap();
    assert_eq!(
        support::console::query_param(at.as_str(), "reason").as_deref(),
        Some("timeout"),
        "{at}"
    );
    let (html, _) = fetch(&format!("{page}?reason=timeout")).await;
    let mut left: Vec<_> = html
        .match_indices("<code>late-")
        .map(|(at, _)| &html[at + 6..at + 12])
        .collect();
    left.sort_unstable();
    assert_eq!(
        left,
        ["late-0", "late-1"],
        "only the two never seen are left"
    );
    support::browser::screenshot(client, "scale-after-bound-discard").await;
    // The action log: one line per message the set named, the two gone among them.
    let log = std::fs::read_to_string(&action_log).unwrap();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &serde_json::Value| l["action"] == "discard-all")
        .collect();
    assert_eq!(lines.len(), timeouts, "one line per message of the set");
    let gone_lines: Vec<&str> = lines
        .iter()
        .filter(|l| l["result"] == "gone")
        .map(|l| l["handle"].as_str().unwrap())
        .collect();
    assert_eq!(gone_lines, gone, "the two taken before the confirmation");
    assert_eq!(
        lines.iter().filter(|l| l["result"] == "taken").count(),
        timeouts - 2
    );

    // A forged count never acts: "all" only makes a dry run, a page of its own.
    let before = queue.stats(QUEUE).await.unwrap().poisoned;
    let (html, _) = fetch(&page).await;
    let mut form = support::console::poison_fields(&html);
    form.push(("action".into(), "discard-all".into()));
    form.push(("confirmed".into(), "999999".into()));
    let (status, location) = support::console::post_fields(&page, &form).await;
    assert_eq!(status, 303);
    assert!(
        location.starts_with(&format!("/poison/{QUEUE}/confirm/")),
        "{location}"
    );
    assert_eq!(queue.stats(QUEUE).await.unwrap().poisoned, before);

    // Redrive: every index-remove message into another queue.
    let target = "scale-redrive";
    queue
        .declare(target, &WorkerConfig::new(target).queue_options())
        .await
        .unwrap();
    client
        .goto(&format!("{page}?kind=index-remove"))
        .await
        .unwrap();
    let removes = expected(|i| i % 3 == 2 && i % 5 != 0);
    client
        .find(Locator::Css("input[name='to']"))
        .await
        .unwrap()
        .send_keys(target)
        .await
        .unwrap();
    support::browser::click(client, "button[value='moveto-all']").await;
    support::browser::wait_for(client, |html| html.contains("Dry run")).await;
    assert_eq!(
        queue.stats(target).await.unwrap().waiting,
        0,
        "nothing before the confirmation"
    );
    support::browser::click(client, "form button[name='confirm']").await;
    support::browser::banner(
        client,
        &format!("Replayed {} messages to {target}.", thousands(removes)),
    )
    .await;
    assert_eq!(queue.stats(target).await.unwrap().waiting, removes as u64);
    support::browser::screenshot(client, "scale-after-redrive").await;

    // At 800 px the poison page fits: wide tables scroll inside their card.
    client.set_window_size(800, 900).await.unwrap();
    client.goto(&format!("{page}?limit=100")).await.unwrap();
    let measured = client
        .execute(
            "return [document.documentElement.scrollWidth, window.innerWidth];",
            Vec::new(),
        )
        .await
        .unwrap();
    let (scroll_width, inner_width) =
        (measured[0].as_u64().unwrap(), measured[1].as_u64().unwrap());
    assert!(inner_width <= 800, "the window is {inner_width} wide");
    assert!(
        scroll_width <= inner_width,
        "the poison page is {scroll_width} px wide in a {inner_width} px window"
    );
    drop(served);
    browser.client.clone().close().await.unwrap();
}

async fn client_get_bytes(url: &str) -> Vec<u8> {
    let response = client().get(url).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200, "{url}");
    response.bytes().await.unwrap().to_vec()
}
