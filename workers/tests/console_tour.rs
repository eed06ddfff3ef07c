//! A tour of the operator's console on each queue backend — the SQLite queue, RabbitMQ and
//! Azure Queue Storage (Azurite) — as an operator and as a viewer, in headless Chromium and
//! through the JSON API.
//!
//! Per backend: three messages poisoned (two reasons of one group, `conflict on ord-#`,
//! and a timeout) and one left waiting; a day of history and a worker's heartbeat in the
//! store. The operator signs in, sees the role, the history chart and the worker; the
//! waiting page (the message on SQLite and Azure, the backend's refusal on RabbitMQ); the
//! poison page's reason groups, a group's two messages, one message's page (headers, the
//! body in its key order, the time in UTC); discards it through its confirmation after
//! exporting it, and signs out. The viewer sees every page without a button, and every
//! action it sends is refused (403) with nothing changed. The JSON API answers the same,
//! a set acts once, and both the page of actions and the API list what the operator did.
//! Every outcome is read from the queue itself. Screenshots go to
//! `target/console-screenshots/tour-<backend>-<step>.png`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use chrono::Utc;
use fantoccini::{Client, Locator};
use serde_json::Value;
use tablekit_core::AnyStore;
use tablekit_derive::Entity;
use tablekit_patterns::index::IndexedTable;
use tablekit_workers::WorkerConfig;
use tablekit_workers::activity::{self, Activity, Counts};
use tablekit_workers::console::ConsoleOptions;
use tablekit_workers::queue::{AnyQueue, Queue};

use support::browser::{self, banner, screenshot, wait_for};
use support::console::{client, poisoned_ids, seed_poison};

/// The operator's token.
const OPERATOR: &str = "tour-operator-token-0123456789";
/// The viewer's token.
const VIEWER: &str = "tour-viewer-token-9876543210";
/// The worker process whose heartbeat the store holds.
const WORKER: &str = "tour-worker";
/// The message left waiting.
const WAITING: &str = "m-waiting";
/// The poisoned messages: (id, reason).
const POISONED: [(&str, &str); 3] = [
    ("m-ord-17", "conflict on ord-17"),
    ("m-ord-9001", "conflict on ord-9001"),
    ("m-timeout", "timeout after 30 s"),
];
/// The group of the two conflicts.
const GROUP: &str = "conflict on ord-#";
/// What each minute of the day of history counts.
const MINUTE: Counts = Counts {
    processed: 5,
    failed: 1,
    poisoned: 1,
    redelivered: 2,
};

/// A registered type, so that the overview offers its job forms (to an operator).
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "TourStaff",
    kind = "TourMember",
    partition_key = "{team}",
    row_key = "m_{id:04}",
    crate = "tablekit_core"
)]
#[index(name = "by_email", partition_key = "{team}", row_key = "email_{email}")]
struct TourMember {
    team: String,
    id: u32,
    email: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Rabbit,
    #[cfg(feature = "azure")]
    Azure,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Rabbit => "rabbitmq",
            #[cfg(feature = "azure")]
            Backend::Azure => "azure",
        }
    }

    /// Whether the backend shows waiting messages without taking them.
    fn peeks(self) -> bool {
        self != Backend::Rabbit
    }
}

/// An operation's envelope, its payload's keys out of alphabetical order.
fn envelope(id: &str) -> String {
    format!(
        r#"{{"kind":"archive-employee","version":1,"id":"{id}","payload":{{"zeta":1,"alpha":2}}}}"#
    )
}

// ---- the queue, read directly ----

/// The queue's counts once they are `(waiting, poisoned)` (a broker's counts may trail
/// for a moment), else a failure naming what they were.
async fn counts_become(queue: &AnyQueue, name: &str, waiting: u64, poisoned: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let stats = queue.stats(name).await.unwrap();
        if (stats.waiting, stats.poisoned) == (waiting, poisoned) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name}: {} waiting and {} poisoned, not {waiting} and {poisoned}",
            stats.waiting,
            stats.poisoned
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---- HTTP with a token ----

/// A GET with `token` as a Bearer: the status, the content type and the body.
async fn get_as(url: &str, token: &str) -> (u16, String, String) {
    let response = client().get(url).bearer_auth(token).send().await.unwrap();
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, kind, response.text().await.unwrap())
}

/// A GET of the JSON API with `token`: the status and the JSON.
async fn api_get(url: &str, token: &str) -> (u16, Value) {
    let (status, kind, body) = get_as(url, token).await;
    let expected = if status < 400 {
        "application/json"
    } else {
        "application/problem+json"
    };
    assert!(kind.starts_with(expected), "{url}: {status} {kind}: {body}");
    (status, serde_json::from_str(&body).unwrap())
}

/// A POST of the JSON API with `token`, as `Content-Type: application/json` or not: the
/// status and the JSON.
async fn api_post(url: &str, token: &str, body: &str, json: bool) -> (u16, Value) {
    let mut request = client().post(url).bearer_auth(token).body(body.to_owned());
    if json {
        request = request.header("content-type", "application/json");
    } else {
        request = request.header("content-type", "text/plain");
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}

/// The status of a GET carrying the session cookie `session` (redirects not followed).
async fn status_with_session(base: &str, path: &str, session: &str) -> u16 {
    client()
        .get(format!("{base}{path}"))
        .header("cookie", format!("tablekit_console={session}"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A form POST with `token` as a Bearer: the status and the body (or a redirect's
/// `Location`).
async fn post_form_as(url: &str, token: &str, form: &[(&str, &str)]) -> (u16, String) {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let response = client()
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    match response.headers().get("location") {
        Some(location) => (status, location.to_str().unwrap().to_owned()),
        None => (status, response.text().await.unwrap()),
    }
}

/// A path segment, percent-encoded.
fn path_segment(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// The messages of an export (JSON lines).
fn export_lines(body: &str) -> Vec<Value> {
    body.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

// ---- the browser ----

/// The text of the first element `css` finds (found again when the overview's refresh
/// replaced it in between).
async fn find_text(client: &Client, css: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found = match client.find(Locator::Css(css)).await {
            Ok(element) => element.text().await,
            Err(e) => Err(e),
        };
        match found {
            Ok(text) => return text,
            Err(e) if std::time::Instant::now() > deadline => panic!("no {css}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

async fn count(client: &Client, css: &str) -> usize {
    client.find_all(Locator::Css(css)).await.unwrap().len()
}

async fn path_of(client: &Client) -> String {
    let url = client.current_url().await.unwrap();
    match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    }
}

/// Signs in through the `/login` form, and waits for the overview.
async fn sign_in(client: &Client, base: &str, token: &str) {
    client.goto(&format!("{base}/login")).await.unwrap();
    let form = client
        .form(Locator::Css("form[action='/login']"))
        .await
        .unwrap();
    form.set_by_name("token", token).await.unwrap();
    browser::click(client, "form[action='/login'] button").await;
    client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Id("live"))
        .await
        .unwrap();
    assert_eq!(path_of(client).await, "/");
}

/// The role the page's header shows.
async fn role_shown(client: &Client) -> String {
    find_text(client, "header .role").await
}

/// The tour on one backend; `name` is a queue of its own.
async fn tour(queue: AnyQueue, name: &str, backend: Backend) {
    let Some(chromium) = browser::browser(1400, 1000).await else {
        return;
    };
    let b = backend.name();
    let shot = |step: &str| format!("tour-{b}-{step}");

    // ---- 1. the queue and the store ----
    let poisoned: Vec<(&str, Vec<u8>, &str)> = POISONED
        .iter()
        .map(|(id, reason)| (*id, envelope(id).into_bytes(), *reason))
        .collect();
    seed_poison(&queue, name, &poisoned).await;
    queue
        .send(name, WAITING, envelope(WAITING).as_bytes())
        .await
        .unwrap();
    counts_become(&queue, name, 1, 3).await;

    let store = AnyStore::create("memory:").await.unwrap();
    let now = Utc::now();
    let written = activity::write_sample_minutes(&store, name, WORKER, now, 1440, |_| MINUTE)
        .await
        .unwrap();
    assert_eq!(written, 1440);
    let worker = Activity::options().process_id(WORKER).build(store.clone());
    worker.queue(name).add(Counts {
        processed: 3,
        ..Counts::default()
    });
    worker.heartbeat_at(Utc::now()).await.unwrap();
    IndexedTable::<TourMember, _>::options()
        .build(store.clone())
        .unwrap()
        .create()
        .await
        .unwrap();

    // ---- 2. the console ----
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), Some(OPERATOR.into()));
    options.viewer_token = Some(VIEWER.into());
    options.queues = vec![name.to_owned()];
    options.refresh = 1;
    let running = support::console::serve(store.clone(), queue.clone(), options).await;
    let base = running.url.as_str();
    let client = &chromium.client;

    // ---- 3. the operator, in Chromium ----
    sign_in(client, base, OPERATOR).await;
    assert_eq!(role_shown(client).await, "signed in as operator");
    assert!(count(client, "#history svg.tk-chart").await >= 1);
    // The day's totals under the chart: 1,440 minutes written (1,439 if a minute turned
    // since).
    let caption = find_text(client, "#history figcaption").await;
    assert!(
        caption.contains("7,200 processed, 1,440 failed, 1,440 poisoned, 2,880 redelivered")
            || caption.contains("7,195 processed, 1,439 failed, 1,439 poisoned, 2,878 redelivered"),
        "{caption}"
    );
    wait_for(client, |html| {
        html.contains("id=\"workers\"") && html.contains(WORKER)
    })
    .await;
    let workers = find_text(client, "#workers").await;
    assert!(workers.contains(WORKER), "{workers}");
    let queues = find_text(client, "#queues").await;
    assert!(queues.contains(name), "{queues}");
    // An operator's overview acts: the queue's pause form, the job forms.
    assert_eq!(count(client, "form.pause").await, 1);
    assert!(count(client, "form[action='/jobs']").await >= 1);
    screenshot(client, &shot("overview")).await;

    // The waiting message.
    client
        .goto(&format!("{base}/queues/{name}/waiting"))
        .await
        .unwrap();
    let waiting = find_text(client, "#waiting").await;
    assert!(waiting.contains("1 waiting."), "{waiting}");
    if backend.peeks() {
        assert_eq!(
            count(client, "table.waiting tbody tr").await,
            1,
            "{waiting}"
        );
        assert!(waiting.contains(WAITING), "{waiting}");
        assert!(waiting.contains("archive-employee v1"), "{waiting}");
    } else {
        assert_eq!(count(client, "table.waiting").await, 0, "{waiting}");
        assert!(
            waiting.contains("This queue's backend cannot show its messages without taking them"),
            "{waiting}"
        );
    }
    screenshot(client, &shot("waiting")).await;

    // The poison page: its reasons grouped.
    client.goto(&format!("{base}/poison/{name}")).await.unwrap();
    let summary = find_text(client, "section.card > p.muted").await;
    assert!(summary.contains("3 in the poison queue"), "{summary}");
    assert_eq!(count(client, "tr.message").await, 3);
    browser::click(client, "details.reasons summary").await;
    let group_row =
        format!("//details[contains(@class,'reasons')]//tr[td//a[normalize-space()='{GROUP}']]");
    let row = client.find(Locator::XPath(&group_row)).await.unwrap();
    assert!(row.is_displayed().await.unwrap(), "the details are open");
    let counted = row
        .find(Locator::Css("td.num"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(counted, "2", "{GROUP}");
    let groups = find_text(client, "details.reasons table").await;
    assert!(groups.contains("timeout after # s"), "{groups}");
    screenshot(client, &shot("reasons")).await;
    row.find(Locator::Css("a"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(client, |html| html.contains("class=\"filtered\"")).await;
    assert_eq!(count(client, "tr.message").await, 2);
    let listed = find_text(client, "table.messages").await;
    assert!(
        listed.contains("conflict on ord-17") && listed.contains("conflict on ord-9001"),
        "{listed}"
    );
    assert!(!listed.contains("timeout"), "{listed}");
    screenshot(client, &shot("group")).await;

    // One message's page.
    let open = client.find(Locator::Css("a.open")).await.unwrap();
    let message_path = open.attr("href").await.unwrap().unwrap();
    open.click().await.unwrap();
    client
        .wait()
        .for_element(Locator::Css("section.message"))
        .await
        .unwrap();
    let id = find_text(client, "table.facts td.ident code").await;
    let (_, reason) = POISONED
        .iter()
        .find(|(i, _)| *i == id)
        .unwrap_or_else(|| panic!("{id} is not one of the messages poisoned"));
    assert!(reason.starts_with("conflict on ord-"), "{id}: {reason}");
    assert_eq!(find_text(client, "table.failures td.reason").await, *reason);
    assert!(count(client, "table.headers tr").await > 0, "its headers");
    let pretty = find_text(client, "pre.body.whole:not(.raw)").await;
    let (zeta, alpha) = (
        pretty.find("\"zeta\": 1").expect("zeta"),
        pretty.find("\"alpha\": 2").expect("alpha"),
    );
    assert!(zeta < alpha, "zeta before alpha: {pretty}");
    assert_eq!(find_text(client, "pre.body.raw").await, envelope(&id));
    let poisoned_at = find_text(client, "table.failures tbody td.nowrap").await;
    assert!(poisoned_at.ends_with(" UTC"), "{poisoned_at}");
    screenshot(client, &shot("message")).await;

    // Discard it: its confirmation, its export, then the confirmation's button.
    browser::click(client, "form.actions button[name='one'][value^='discard:']").await;
    client
        .wait()
        .for_element(Locator::Css("button[name='confirm']"))
        .await
        .unwrap();
    assert!(path_of(client).await.contains("/confirm/"));
    let ids = find_text(client, "ol.ids").await;
    assert_eq!(ids, id);
    counts_become(&queue, name, 1, 3).await;
    let export = client
        .find(Locator::Css("a.export"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    let (status, kind, body) = get_as(&format!("{base}{export}"), OPERATOR).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(kind, "application/x-ndjson");
    let lines = export_lines(&body);
    assert_eq!(lines.len(), 1, "{body}");
    assert_eq!(lines[0]["id"], id.as_str());
    assert_eq!(lines[0]["reason"], *reason);
    assert_eq!(lines[0]["kind"], "archive-employee");
    assert_eq!(lines[0]["body"].as_str(), Some(envelope(&id).as_str()));
    screenshot(client, &shot("confirm")).await;
    browser::click(client, "button[name='confirm']").await;
    banner(client, "Discarded 1 message.").await;
    counts_become(&queue, name, 1, 2).await;
    let left = poisoned_ids(&queue, name).await;
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(!left.contains(&id), "{left:?}");
    let (status, _, _) = get_as(&format!("{base}{message_path}"), OPERATOR).await;
    assert_eq!(status, 404, "its page is gone");
    screenshot(client, &shot("discarded")).await;

    // Sign out: the session ends (its cookie opens nothing any more), and the next page
    // asks to sign in.
    let session = client
        .get_named_cookie("tablekit_console")
        .await
        .unwrap()
        .value()
        .to_owned();
    assert_eq!(status_with_session(base, "/", &session).await, 200);
    browser::click(client, "form.signout button").await;
    wait_for(client, |html| html.contains("name=\"token\"")).await;
    client.goto(&format!("{base}/poison/{name}")).await.unwrap();
    assert_eq!(path_of(client).await, "/login");
    assert_eq!(
        count(client, "form[action='/login'] input[name='token']").await,
        1
    );
    assert_eq!(count(client, "header .role").await, 0);
    assert_eq!(status_with_session(base, "/", &session).await, 303);
    assert_eq!(
        status_with_session(base, "/api/status", &session).await,
        401,
        "the API answers a lost session 401, never a redirect"
    );
    screenshot(client, &shot("signed-out")).await;

    // ---- 4. the viewer ----
    sign_in(client, base, VIEWER).await;
    assert_eq!(role_shown(client).await, "signed in as viewer");
    wait_for(client, |html| html.contains(WORKER)).await;
    assert!(count(client, "#history svg.tk-chart").await >= 1);
    for css in [
        "form.pause",
        "form[action='/jobs']",
        "button[name='one']",
        "button[name='pause']",
    ] {
        assert_eq!(count(client, css).await, 0, "the viewer's overview: {css}");
    }
    screenshot(client, &shot("viewer-overview")).await;
    let csrf = client
        .find(Locator::Css("form.signout input[name='csrf']"))
        .await
        .unwrap()
        .attr("value")
        .await
        .unwrap()
        .unwrap();
    client.goto(&format!("{base}/poison/{name}")).await.unwrap();
    assert_eq!(role_shown(client).await, "signed in as viewer");
    assert_eq!(count(client, "tr.message").await, 2);
    for css in [
        "button[name='one']",
        "button[name='action']",
        "input[name='h']",
    ] {
        assert_eq!(
            count(client, css).await,
            0,
            "the viewer's poison page: {css}"
        );
    }
    screenshot(client, &shot("viewer-poison")).await;
    let open = client
        .find(Locator::Css("a.open"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    client.goto(&format!("{base}{open}")).await.unwrap();
    assert_eq!(role_shown(client).await, "signed in as viewer");
    assert_eq!(count(client, "section.message").await, 1);
    assert_eq!(count(client, "form.actions").await, 0);
    assert_eq!(count(client, "button[name='one']").await, 0);
    client
        .goto(&format!("{base}/queues/{name}/waiting"))
        .await
        .unwrap();
    assert_eq!(role_shown(client).await, "signed in as viewer");
    assert!(find_text(client, "#waiting").await.contains("1 waiting."));
    client.goto(&format!("{base}/workers")).await.unwrap();
    assert_eq!(role_shown(client).await, "signed in as viewer");
    assert!(find_text(client, "#workers").await.contains(WORKER));

    // The viewer's actions, sent with the page's CSRF token and an operator's buttons:
    // each refused, nothing changed.
    let (_, _, operator_page) = get_as(&format!("{base}/poison/{name}"), OPERATOR).await;
    let handle = support::console::handles(&operator_page)[0].clone();
    let refused = [
        (
            format!("{base}/poison/{name}"),
            vec![
                ("csrf", csrf.clone()),
                (
                    "one",
                    support::console::one_button(&operator_page, "replay", &handle),
                ),
            ],
        ),
        (
            format!("{base}/poison/{name}"),
            vec![
                ("csrf", csrf.clone()),
                (
                    "one",
                    support::console::one_button(&operator_page, "discard", &handle),
                ),
            ],
        ),
        (
            format!("{base}/poison/{name}"),
            vec![("csrf", csrf.clone()), ("action", "discard-all".to_owned())],
        ),
        (
            format!("{base}/queues/{name}"),
            vec![
                ("csrf", csrf.clone()),
                (
                    "nonce",
                    support::console::form_field(
                        &get_as(&format!("{base}/"), OPERATOR).await.2,
                        &support::console::pause_form(name),
                        "nonce",
                    ),
                ),
                ("pause", "pause".to_owned()),
            ],
        ),
    ];
    for (url, form) in &refused {
        let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (status, text) = post_form_as(url, VIEWER, &pairs).await;
        assert_eq!(status, 403, "{url} {form:?}: {text}");
        assert!(text.contains("signed in as viewer"), "{text}");
    }
    counts_become(&queue, name, 1, 2).await;
    assert_eq!(poisoned_ids(&queue, name).await, left);
    assert!(!queue.paused(name).await.unwrap(), "not paused");

    // ---- 5. the JSON API ----
    let api = format!("{base}/api");
    let (status, state) = api_get(&format!("{api}/status"), VIEWER).await;
    assert_eq!(status, 200, "{state}");
    let row = state["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == name)
        .unwrap_or_else(|| panic!("{name} in {state}"));
    assert_eq!(row["waiting"], 1, "{row}");
    assert_eq!(row["poisoned"], 2, "{row}");
    let (status, workers) = api_get(&format!("{api}/workers"), VIEWER).await;
    assert_eq!(status, 200, "{workers}");
    assert!(
        workers
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["id"] == WORKER),
        "{workers}"
    );
    let (status, history) = api_get(&format!("{api}/queues/{name}/history"), VIEWER).await;
    assert_eq!(status, 200, "{history}");
    let minutes: Vec<&Value> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["resolution"] == "minute")
        .collect();
    assert!(minutes.len() >= 1439, "{} minute points", minutes.len());
    assert!(
        minutes
            .iter()
            .all(|p| p["processed"] == 5 && p["failed"] == 1 && p["redelivered"] == 2),
        "{history}"
    );
    let (status, peeked) = api_get(&format!("{api}/queues/{name}/waiting"), VIEWER).await;
    if backend.peeks() {
        assert_eq!(status, 200, "{peeked}");
        let peeked = peeked.as_array().unwrap();
        assert_eq!(peeked.len(), 1, "{peeked:?}");
        assert_eq!(peeked[0]["id"], WAITING);
        assert_eq!(peeked[0]["kind"], "archive-employee");
        assert_eq!(peeked[0]["version"], 1);
    } else {
        assert!(status >= 400, "{status}: {peeked}");
        let error = peeked["detail"].as_str().unwrap_or_default();
        assert!(error.contains("RabbitMQ cannot show"), "{peeked}");
    }
    let (status, page) = api_get(&format!("{api}/poison/{name}"), VIEWER).await;
    assert_eq!(status, 200, "{page}");
    let messages = page["messages"].as_array().unwrap();
    let mut listed: Vec<&str> = messages.iter().map(|m| m["id"].as_str().unwrap()).collect();
    listed.sort_unstable();
    assert_eq!(listed, left, "{page}");
    let timeout = messages
        .iter()
        .find(|m| m["id"] == "m-timeout")
        .unwrap_or_else(|| panic!("the timeout in {page}"));
    assert_eq!(timeout["reason"], "timeout after 30 s");
    assert_eq!(timeout["kind"], "archive-employee");
    let h = timeout["handle"].as_str().unwrap().to_owned();
    let one = format!("{api}/poison/{name}/messages/{}", path_segment(&h));
    let (status, whole) = api_get(&one, VIEWER).await;
    assert_eq!(status, 200, "{whole}");
    assert_eq!(whole["id"], "m-timeout");
    assert_eq!(whole["whole"], true);
    assert_eq!(whole["body"].as_str(), Some(envelope("m-timeout").as_str()));
    assert!(!whole["headers"].as_array().unwrap().is_empty(), "{whole}");

    // A set: made by the operator only, exported, confirmed once.
    let sets = format!("{api}/poison/{name}/sets");
    let asked = serde_json::json!({"action": "discard", "handles": [h]}).to_string();
    let (status, refused) = api_post(&sets, VIEWER, &asked, true).await;
    assert_eq!(status, 403, "{refused}");
    let (status, refused) = api_post(&sets, OPERATOR, &asked, false).await;
    assert_eq!(status, 415, "{refused}");
    assert_eq!(refused["status"], 415, "{refused}");
    assert!(refused["detail"].is_string(), "{refused}");
    let (status, set) = api_post(&sets, OPERATOR, &asked, true).await;
    assert_eq!(status, 201, "{set}");
    let token = set["token"].as_str().unwrap().to_owned();
    assert_eq!(set["count"], 1, "{set}");
    assert_eq!(set["handles"], serde_json::json!([h]));
    assert_eq!(set["ids"], serde_json::json!(["m-timeout"]));
    assert_eq!(set["action"], "discard");
    let (status, kept) = api_get(&format!("{sets}/{token}"), VIEWER).await;
    assert_eq!((status, &kept["handles"]), (200, &set["handles"]), "{kept}");
    let (status, kind, body) = get_as(&format!("{sets}/{token}/export"), VIEWER).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(kind, "application/x-ndjson");
    let lines = export_lines(&body);
    assert_eq!(lines.len(), 1, "{body}");
    assert_eq!(lines[0]["id"], "m-timeout");
    assert_eq!(lines[0]["handle"], h.as_str());
    assert_eq!(
        lines[0]["body"].as_str(),
        Some(envelope("m-timeout").as_str())
    );
    let confirm = format!("{sets}/{token}/confirm");
    let (status, refused) = api_post(&confirm, VIEWER, "{}", true).await;
    assert_eq!(status, 403, "{refused}");
    let (status, refused) = api_post(&confirm, OPERATOR, "{}", false).await;
    assert_eq!(status, 415, "{refused}");
    // Neither touched the set nor the queue.
    assert_eq!(api_get(&format!("{sets}/{token}"), VIEWER).await.0, 200);
    counts_become(&queue, name, 1, 2).await;
    let (status, done) = api_post(&confirm, OPERATOR, "{}", true).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["asked"], 1, "{done}");
    assert_eq!(done["taken"], serde_json::json!([h]), "{done}");
    assert_eq!(done["failed"], false, "{done}");
    assert_eq!(done["result"], "Discarded 1 message.", "{done}");
    counts_become(&queue, name, 1, 1).await;
    let rest = poisoned_ids(&queue, name).await;
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert!(rest[0].starts_with("m-ord-") && rest[0] != id, "{rest:?}");
    let (status, again) = api_post(&confirm, OPERATOR, "{}", true).await;
    assert_eq!(status, 404, "{again}");
    assert!(
        again["detail"]
            .as_str()
            .is_some_and(|e| e.contains("nothing was done")),
        "{again}"
    );
    counts_become(&queue, name, 1, 1).await;
    assert_eq!(poisoned_ids(&queue, name).await, rest);
    assert_eq!(api_get(&format!("{sets}/{token}"), VIEWER).await.0, 404);
    let (status, gone) = api_get(&one, VIEWER).await;
    assert_eq!(status, 404, "{gone}");

    // ---- 6. the actions done ----
    let (status, actions) = api_get(&format!("{api}/actions"), VIEWER).await;
    assert_eq!(status, 200, "{actions}");
    let ours: Vec<&Value> = actions["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["queue"] == name)
        .collect();
    assert_eq!(ours.len(), 2, "{actions}");
    // Newest first: the API's set, then the page's discard.
    for (action, record, id) in [
        ("discard-selected", ours[0], "m-timeout"),
        ("discard-one", ours[1], id.as_str()),
    ] {
        assert_eq!(record["action"], action, "{record}");
        assert_eq!(record["role"], "operator", "{record}");
        assert_eq!((&record["asked"], &record["taken"]), (&1.into(), &1.into()));
        assert_eq!(record["result"], "Discarded 1 message.", "{record}");
        assert_eq!(record["ids"], serde_json::json!([id]), "{record}");
    }
    client.goto(&format!("{base}/actions")).await.unwrap();
    assert_eq!(role_shown(client).await, "signed in as viewer");
    let rows = client
        .find_all(Locator::Css("table.actions tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    for (row, action) in rows.iter().zip(["discard-selected", "discard-one"]) {
        let text = row.text().await.unwrap();
        assert!(
            text.contains(action) && text.contains("operator") && text.contains(name),
            "{text}"
        );
        assert!(text.contains("Discarded 1 message."), "{text}");
    }
    screenshot(client, &shot("actions")).await;
    chromium.client.clone().close().await.unwrap();
}

#[tokio::test]
async fn a_tour_of_the_console_over_the_sqlite_queue() {
    let dir = tempfile::tempdir().unwrap();
    let queue = support::console::sqlite_queue(&dir).await;
    tour(queue, &support::unique("tour"), Backend::Sqlite).await;
}

#[tokio::test]
async fn a_tour_of_the_console_over_rabbitmq() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let queue = AnyQueue::connect(&url).await.unwrap();
    let name = support::unique("tour");
    tour(queue.clone(), &name, Backend::Rabbit).await;
    if let AnyQueue::Rabbit(rabbit) = &queue {
        let _ = rabbit
            .delete_queue(&name, &WorkerConfig::new(&name).queue_options())
            .await;
    }
}

#[cfg(feature = "azure")]
#[tokio::test]
async fn a_tour_of_the_console_over_azure_queue_storage() {
    let Some(connection) = support::azure_queues() else {
        return;
    };
    let queue = AnyQueue::connect(&format!("azure:{connection}"))
        .await
        .unwrap();
    let name = support::azure_name("tour");
    tour(queue.clone(), &name, Backend::Azure).await;
    if let AnyQueue::Azure(azure) = &queue {
        let _ = azure.delete_queue(&name).await;
    }
}

// ---- what the tour found: the console's contract, where the source departs from it ----

/// A console with tokens over a SQLite queue whose poison queue holds the three messages
/// of the tour; a discard of the timeout kept as a set by the operator (its token).
async fn a_set_to_confirm() -> (support::console::Served, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let queue = support::console::sqlite_queue(&dir).await;
    let name = support::unique("tour-set");
    let poisoned: Vec<(&str, Vec<u8>, &str)> = POISONED
        .iter()
        .map(|(id, reason)| (*id, envelope(id).into_bytes(), *reason))
        .collect();
    seed_poison(&queue, &name, &poisoned).await;
    let store = AnyStore::create("memory:").await.unwrap();
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), Some(OPERATOR.into()));
    options.viewer_token = Some(VIEWER.into());
    options.queues = vec![name.clone()];
    let running = support::console::serve(store, queue, options)
        .await
        .keeping(dir);
    let (_, page) = api_get(
        &format!("{}/api/poison/{name}?id=m-timeout", running.url),
        VIEWER,
    )
    .await;
    let handle = page["messages"][0]["handle"].as_str().unwrap().to_owned();
    let asked = serde_json::json!({"action": "discard", "handles": [handle]}).to_string();
    let (status, set) = api_post(
        &format!("{}/api/poison/{name}/sets", running.url),
        OPERATOR,
        &asked,
        true,
    )
    .await;
    assert_eq!(status, 201, "{set}");
    let token = set["token"].as_str().unwrap().to_owned();
    (running, name, token)
}

/// A viewer's pages show no buttons (docs/operations.md, "Who may use it"): the page of a
/// confirmation shows the set and its export to a viewer, without the button that would
/// confirm it (which the guard would refuse).
#[tokio::test]
async fn a_viewer_sees_a_confirmation_without_its_button() {
    let (running, name, token) = a_set_to_confirm().await;
    let base = running.url.as_str();
    let path = format!("/poison/{name}/confirm/{token}");
    let (status, _, operator) = get_as(&format!("{base}{path}"), OPERATOR).await;
    assert_eq!(status, 200, "{operator}");
    assert!(operator.contains("name=\"confirm\""), "{operator}");
    let (status, _, page) = get_as(&format!("{base}{path}"), VIEWER).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("signed in as <strong>viewer</strong>"),
        "{page}"
    );
    assert!(page.contains("<code>m-timeout</code>"), "the set: {page}");
    assert!(page.contains("class=\"export\""), "its export: {page}");
    assert!(
        !page.contains("name=\"confirm\""),
        "a viewer's confirmation page offers the button that confirms: {page}"
    );
}

/// The JSON API answers its errors as problems (RFC 9457; docs/operations.md, "The
/// console's JSON API"): the export of a set unknown, expired or confirmed too.
#[tokio::test]
async fn the_apis_export_of_a_set_gone_answers_json() {
    let (running, name, token) = a_set_to_confirm().await;
    let sets = format!("{}/api/poison/{name}/sets", running.url);
    let (status, done) = api_post(&format!("{sets}/{token}/confirm"), OPERATOR, "{}", true).await;
    assert_eq!(status, 200, "{done}");
    for gone in [token.as_str(), "0123456789abcdef0123456789abcdef"] {
        let (status, kind, body) = get_as(&format!("{sets}/{gone}/export"), OPERATOR).await;
        assert_eq!(status, 404, "{body}");
        assert!(
            kind.starts_with("application/problem+json"),
            "the API's export of a set gone answers {kind}: {body}"
        );
        let error: Value = serde_json::from_str(&body).unwrap();
        assert!(error["detail"].is_string(), "{error}");
        assert_eq!(error["status"], 404, "{error}");
    }
}
