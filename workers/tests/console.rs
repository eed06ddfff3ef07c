//! The operator's console: its access rules over HTTP (token, host, CSRF, origin, a nonce
//! per button acting once, a discard and anything on "all" only through its confirmation,
//! escaping), its jobs (run, kept, taken up after a restart; a repair through a
//! confirmation with its own nonce), pausing a queue's consumers, and the whole page in
//! headless Chromium over the SQLite queue and RabbitMQ: poisoned messages seeded (hostile
//! bodies among them), one replayed and then processed, one discarded after its
//! confirmation, no hostile body run, screenshots kept in `target/console-screenshots/`.
//! The action forms in detail are in `console_actions.rs`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use tablekit_core::{AnyStore, Entity, TableStore};
use tablekit_derive::Entity;
use tablekit_patterns::index::IndexedTable;
use tablekit_workers::archive::ArchiveOperation;
use tablekit_workers::console::jobs::{JOBS_TABLE, Job, JobKind, JobState};
use tablekit_workers::console::{self, ConsoleOptions};
use tablekit_workers::queue::{AnyQueue, ConsumeOptions, Consumer, Delivery, PoisonAction, Queue};
use tablekit_workers::{Envelope, Error, WorkerConfig, cli};

use support::browser::{banner, browser, screenshot};
use support::console::{
    CLEAR_FORM, JOB_FORM, MIGRATE_FORM, REPAIR_CONFIRMATION, Served, banner_at, client,
    confirmation, field, form_field, get, handle_of, one_button, pause_form, poison_form,
    poisoned_ids, post_fields, post_with as post, seed_poison, sqlite_queue,
};

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Staff",
    kind = "Member",
    partition_key = "{team}",
    row_key = "m_{id:04}",
    crate = "tablekit_core"
)]
#[index(name = "by_email", partition_key = "{team}", row_key = "email_{email}")]
struct Member {
    team: String,
    id: u32,
    email: String,
}

/// `Member` as a later version of the program declares it.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Staff",
    kind = "Member",
    version = 2,
    partition_key = "{team}",
    row_key = "m_{id:04}",
    crate = "tablekit_core"
)]
#[index(name = "by_email", partition_key = "{team}", row_key = "email_{email}")]
struct MemberV2 {
    team: String,
    id: u32,
    email: String,
}

async fn serve(store: AnyStore, broker: AnyQueue, mut options: ConsoleOptions) -> Served {
    if options.bind.port() == 9465 {
        options.bind = "127.0.0.1:0".parse().unwrap();
    }
    options.refresh = 1;
    support::console::serve(store, broker, options).await
}

#[tokio::test]
async fn off_loopback_the_console_refuses_to_start_without_a_token() {
    let store = AnyStore::create("memory:").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let any: SocketAddr = "0.0.0.0:0".parse().unwrap();
    let refused = console::bind(store.clone(), queue.clone(), ConsoleOptions::new(any, None))
        .await
        .expect_err("no token off loopback");
    assert!(matches!(refused, Error::Config(_)), "{refused}");
    assert!(refused.to_string().contains("token"), "{refused}");
    let short = console::bind(
        store,
        queue,
        ConsoleOptions::new(any, Some("0123456789abcdef".into())),
    )
    .await
    .expect_err("a 64-bit token");
    assert!(short.to_string().contains("128"), "{short}");
}

#[tokio::test]
async fn with_a_token_every_request_carries_it_and_the_login_sets_it() {
    let store = AnyStore::create("memory:").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let token = "a-console-token-0123456789";
    let running = serve(
        store,
        queue,
        ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), Some(token.into())),
    )
    .await;
    let url = &running.url;
    // Without it: to the login form; the data is not served.
    let response = client().get(format!("{url}/")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(response.headers()["location"], "/login");
    let (status, _) = get(&format!("{url}/live")).await;
    assert_eq!(
        status, 401,
        "a refresh is told the session is gone, not sent to a page"
    );
    // With it, as a bearer token.
    let response = client()
        .get(format!("{url}/"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert!(
        response.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    let wrong = client()
        .get(format!("{url}/"))
        .bearer_auth("a-console-token-012345678X")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 303);
    // The login form: a wrong token is refused, the right one sets the cookie.
    let (status, location) = post(&format!("{url}/login"), &[("token", "nope")], &[]).await;
    assert_eq!((status, location.as_str()), (303, "/login?failed=1"));
    let response = client()
        .post(format!("{url}/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap();
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let page = client()
        .get(format!("{url}/"))
        .header("cookie", pair)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    // A POST without the token is refused outright.
    let (status, _) = post(&format!("{url}/jobs"), &[("kind", "audit")], &[]).await;
    assert_eq!(status, 403);
}

/// Every action is a POST with the console's CSRF token and its button's own nonce; a
/// replay acts at once and once per form (the same form again says nothing was done); a
/// discard, and anything on "all", acts once its confirmation is sent, once; hostile text
/// is shown as text on the page and on the confirmation.
#[tokio::test]
async fn actions_need_the_csrf_token_and_run_once_per_form_and_bodies_are_escaped() {
    let store = AnyStore::create("memory:").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let name = "console-actions";
    let hostile_id = "\"><img src=x onerror=alert(2)>";
    seed_poison(
        &queue,
        name,
        &[
            ("s1", b"<script>alert(1)</script>".to_vec(), "<b>bad</b>"),
            (hostile_id, b"{\"kind\":\"x\"}".to_vec(), "hostile id"),
            ("s3", b"plain".to_vec(), "plain"),
            ("s4", b"plain".to_vec(), "plain"),
        ],
    )
    .await;
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.queues = vec![name.to_owned()];
    let running = serve(store, queue.clone(), options).await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/{name}");
    let waiting = || async { queue.stats(name).await.unwrap().waiting };

    // Escaped: the hostile text shows as text.
    let (status, html) = get(&page_url).await;
    assert_eq!(status, 200);
    for raw in ["<script>alert(1)", "<img src=x", "<b>bad"] {
        assert!(!html.contains(raw), "{raw} reached the page unescaped");
    }
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;b&gt;bad&lt;/b&gt;"));
    let escaped_id = "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;";

    // A loopback console answers loopback host names only (DNS rebinding).
    let rebound = client()
        .get(&page_url)
        .header("host", "attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status().as_u16(), 403);

    let csrf = field(&html, "csrf");
    let s1 = handle_of(&html, "s1");
    let replay_s1 = one_button(&html, "replay", &s1);
    // No CSRF token, a wrong one, another origin: refused, nothing changes.
    let (status, _) = post(&page_url, &[("one", replay_s1.as_str())], &[]).await;
    assert_eq!(status, 403);
    let (status, _) = post(
        &page_url,
        &[("csrf", "0000"), ("one", replay_s1.as_str())],
        &[],
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = post(
        &page_url,
        &[("csrf", &csrf), ("one", replay_s1.as_str())],
        &[("origin", "http://attacker.example")],
    )
    .await;
    assert_eq!(status, 403);
    // The right CSRF token without the button's nonce: refused.
    let (status, refused) = post(
        &page_url,
        &[("csrf", &csrf), ("one", &format!("replay::{s1}"))],
        &[],
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.contains("no action nonce"), "{refused}");
    assert_eq!(poisoned_ids(&queue, name).await.len(), 4);
    // GET never acts.
    let mut query = form_urlencoded::Serializer::new(String::new());
    query
        .append_pair("one", &replay_s1)
        .append_pair("csrf", &csrf);
    let _ = get(&format!("{page_url}?{}", query.finish())).await;
    assert_eq!(poisoned_ids(&queue, name).await.len(), 4);
    assert_eq!(waiting().await, 0);

    // Replay one: it acts at once and comes back to the page with its result; the same
    // form again (a double click, a resubmitted reload) shows the first result, says
    // nothing was done, and does nothing.
    let replay_form = poison_form(&html, ("one", &replay_s1), &[]);
    let (status, location) = post_fields(&page_url, &replay_form).await;
    assert_eq!(status, 303, "{location}");
    let nonce = replay_s1.split(':').nth(1).unwrap();
    assert_eq!(location, format!("/poison/{name}?result={nonce}"));
    assert_eq!(
        banner_at(base, &location).await,
        ("Replayed 1 message.".to_owned(), false)
    );
    assert_eq!(poisoned_ids(&queue, name).await.len(), 3);
    assert_eq!(waiting().await, 1);
    let (status, again) = post_fields(&page_url, &replay_form).await;
    assert_eq!(
        (status, again.as_str()),
        (303, format!("{location}&again=1").as_str())
    );
    let (text, failed) = banner_at(base, &again).await;
    assert_eq!(
        text,
        "Nothing was done: this form had already acted, and acts once. What it did then: Replayed 1 message."
    );
    assert!(failed, "shown as a failure");
    assert_eq!(poisoned_ids(&queue, name).await.len(), 3);
    assert_eq!(waiting().await, 1);

    // Discard one: a confirmation first, naming the message (escaped); nothing is gone
    // before it is sent.
    let hostile = handle_of(&html, escaped_id);
    let (status, to_confirm) = post_fields(
        &page_url,
        &poison_form(&html, ("one", &one_button(&html, "discard", &hostile)), &[]),
    )
    .await;
    assert_eq!(status, 303, "{to_confirm}");
    assert_eq!(poisoned_ids(&queue, name).await.len(), 3, "nothing yet");
    let confirm = confirmation(base, &to_confirm).await;
    assert!(
        confirm
            .html
            .contains("Confirming deletes it for good — this one and no other."),
        "{}",
        confirm.html
    );
    assert!(confirm.html.contains(&format!("<code>{escaped_id}</code>")));
    assert!(!confirm.html.contains("<img src=x"), "{}", confirm.html);
    let (status, location) = confirm.submit(base).await;
    assert_eq!(status, 303);
    assert_eq!(
        location,
        format!("/poison/{name}?result={}", confirm.nonce())
    );
    assert_eq!(
        banner_at(base, &location).await,
        ("Discarded 1 message.".to_owned(), false)
    );
    assert!(
        !poisoned_ids(&queue, name)
            .await
            .contains(&hostile_id.to_owned())
    );
    assert_eq!(poisoned_ids(&queue, name).await.len(), 2);
    // The confirmation sent again does nothing; its page, reloaded, is gone.
    let (status, again) = confirm.submit(base).await;
    assert_eq!(
        (status, again.as_str()),
        (303, format!("{location}&again=1").as_str())
    );
    assert!(
        banner_at(base, &again)
            .await
            .0
            .starts_with("Nothing was done: this form had already acted")
    );
    let (status, gone) = get(&format!("{base}{to_confirm}")).await;
    assert_eq!(status, 404);
    assert!(gone.contains("Nothing to confirm"), "{gone}");
    assert_eq!(poisoned_ids(&queue, name).await.len(), 2);

    // Replay all: a dry run naming the count, then its confirmation acts once.
    let (_, html) = get(&page_url).await;
    let (status, to_confirm) = post_fields(
        &page_url,
        &poison_form(&html, ("action", "replay-all"), &[]),
    )
    .await;
    assert_eq!(status, 303, "{to_confirm}");
    let confirm = confirmation(base, &to_confirm).await;
    assert!(confirm.html.contains("Dry run"), "{}", confirm.html);
    assert!(
        confirm.html.contains("<strong>2 messages</strong>"),
        "{}",
        confirm.html
    );
    assert_eq!(
        poisoned_ids(&queue, name).await.len(),
        2,
        "nothing before the confirmation"
    );
    let (status, location) = confirm.submit(base).await;
    assert_eq!(status, 303);
    assert_eq!(
        banner_at(base, &location).await,
        ("Replayed 2 messages.".to_owned(), false)
    );
    assert!(poisoned_ids(&queue, name).await.is_empty());
    assert_eq!(waiting().await, 3, "s1, s3 and s4");
    // They are back in the queue, each with a fresh count.
    let mut consumer = queue
        .consume(name, ConsumeOptions::default())
        .await
        .unwrap();
    for _ in 0..3 {
        let delivery = tokio::time::timeout(Duration::from_secs(10), consumer.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(delivery.received().delivery_count, 1, "a fresh count");
        delivery.ack().await.unwrap();
    }
    consumer.close().await;
    // A message poisoned since is not replayed by the same confirmation sent again.
    seed_poison(&queue, name, &[("late", b"late".to_vec(), "late")]).await;
    let (status, again) = confirm.submit(base).await;
    assert_eq!(
        (status, again.as_str()),
        (303, format!("{location}&again=1").as_str())
    );
    assert_eq!(poisoned_ids(&queue, name).await, ["late"]);
    assert_eq!(waiting().await, 0);
}

/// A queue whose messages no consumer has taken for the threshold: the overview warns,
/// naming the queue (escaped), its messages, since when and what to run; and stops once a
/// consumer takes them.
#[tokio::test]
async fn the_overview_warns_of_a_queue_whose_messages_no_consumer_takes() {
    let store = AnyStore::create("memory:").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let name = "orders<b>x</b>";
    queue
        .declare(name, &WorkerConfig::new(name).queue_options())
        .await
        .unwrap();
    for id in ["a", "b", "c"] {
        queue.send(name, id, b"{}").await.unwrap();
    }
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.queues = vec![name.to_owned(), "index".into()];
    options.unconsumed_after = Duration::from_secs(2);
    let running = serve(store, queue.clone(), options).await;
    let live = || async { get(&format!("{}/live", running.url)).await.1 };
    let page = live().await;
    assert!(
        !page.contains("no consumer has taken"),
        "within the threshold: {page}"
    );
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let escaped = "orders&lt;b&gt;x&lt;/b&gt;";
    for page in [live().await, get(&format!("{}/", running.url)).await.1] {
        assert!(
            page.contains(&format!(
                "Queue `{escaped}` holds 3 messages that no consumer has taken since "
            )),
            "{page}"
        );
        assert!(
            page.contains(&format!(
                "Start a worker for it: tablekit-worker run --queue {escaped}"
            )),
            "{page}"
        );
        assert!(!page.contains("<b>x</b>"), "the name is escaped: {page}");
        assert_eq!(page.matches("no consumer has taken").count(), 1, "{page}");
    }
    // A consumer takes them: the warning goes.
    let mut consumer = queue
        .consume(
            name,
            ConsumeOptions {
                prefetch: 16,
                lease: Duration::from_secs(30),
            },
        )
        .await
        .unwrap();
    for _ in 0..3 {
        let delivery = tokio::time::timeout(Duration::from_secs(10), consumer.next())
            .await
            .expect("a delivery")
            .unwrap()
            .unwrap();
        delivery.ack().await.unwrap();
    }
    consumer.close().await;
    let page = live().await;
    assert!(!page.contains("no consumer has taken"), "{page}");
}

/// Over RabbitMQ the broker counts the consumers: the overview shows them, and warns once
/// it has seen none attached to a queue holding messages for the threshold.
#[tokio::test]
async fn over_rabbitmq_the_overview_counts_consumers_and_warns_after_none_for_a_while() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let store = AnyStore::create("memory:").await.unwrap();
    let queue = AnyQueue::connect(&url).await.unwrap();
    let name = support::unique("console-unconsumed");
    queue
        .declare(&name, &WorkerConfig::new(&name).queue_options())
        .await
        .unwrap();
    for id in ["a", "b"] {
        queue.send(&name, id, b"{}").await.unwrap();
    }
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.queues = vec![name.clone()];
    options.unconsumed_after = Duration::from_secs(1);
    let running = serve(store, queue.clone(), options).await;
    let live = || async { get(&format!("{}/live", running.url)).await.1 };
    let page = live().await;
    assert!(page.contains("none attached"), "{page}");
    assert!(!page.contains("no consumer attached since"), "{page}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let page = live().await;
    assert!(
        page.contains(&format!(
            "Queue `{name}` holds 2 messages and has had no consumer attached since "
        )) && page.contains(&format!("tablekit-worker run --queue {name}")),
        "{page}"
    );
    let consumer = queue
        .consume(&name, ConsumeOptions::default())
        .await
        .unwrap();
    let page = live().await;
    assert!(page.contains("1 attached"), "{page}");
    assert!(!page.contains("no consumer attached since"), "{page}");
    consumer.close().await;
    if let AnyQueue::Rabbit(rabbit) = &queue {
        let _ = rabbit
            .delete_queue(&name, &WorkerConfig::new(&name).queue_options())
            .await;
    }
}

#[tokio::test]
async fn jobs_run_in_the_background_and_a_stopped_consoles_job_is_taken_up() {
    let store = AnyStore::create("memory:").await.unwrap();
    let members = IndexedTable::<Member, _>::options()
        .build(store.clone())
        .unwrap();
    members.create().await.unwrap();
    for id in 0..30 {
        members
            .insert(&Member {
                team: format!("t{}", id % 3),
                id,
                email: format!("m{id}@example.com"),
            })
            .await
            .unwrap();
    }
    // A copy lost: the repair puts it back.
    let copies = store
        .query_all("Staff", tablekit_core::Query::new())
        .await
        .unwrap();
    let copy = copies
        .iter()
        .find(|e| e.row_key.starts_with("email_"))
        .unwrap()
        .clone();
    store
        .delete(
            "Staff",
            &copy.partition_key,
            &copy.row_key,
            tablekit_core::IfMatch::Any,
        )
        .await
        .unwrap();

    // A job a console left running a minute ago: taken up when a console starts.
    let left = Job {
        id: "0000000000001-abcdef".into(),
        kind: JobKind::Repair,
        table: "Staff".into(),
        index: None,
        state: JobState::Running,
        scanned: 7,
        drift: 0,
        estimate: None,
        started: chrono::Utc::now() - chrono::Duration::minutes(2),
        heartbeat: chrono::Utc::now() - chrono::Duration::minutes(1),
        finished: None,
        resumed: 0,
        owner: String::new(),
        report: None,
        migration: None,
        entity_kind: None,
        error: None,
    };
    store.create_table_if_not_exists(JOBS_TABLE).await.unwrap();
    store
        .insert(
            JOBS_TABLE,
            Entity::new("job", left.id.clone())
                .with("State", serde_json::to_string(&left).unwrap()),
        )
        .await
        .unwrap();
    // With the marker a running job has beside its record.
    store
        .insert(JOBS_TABLE, Entity::new("running", left.id.clone()))
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.migrations.register::<MemberV2>();
    let running = serve(store.clone(), queue, options).await;
    let job = wait_for_job(&store, &left.id).await;
    assert_eq!(job.state, JobState::Done, "{job:?}");
    assert_eq!(job.resumed, 1);
    let report = job.report.unwrap();
    assert_eq!((report.missing, report.repaired), (1, 1), "{report:?}");

    // An audit started from the page: its progress and result are on the page.
    let (_, html) = get(&format!("{}/", running.url)).await;
    assert!(html.contains("<option value=\"Staff\">"), "{html}");
    assert!(
        html.contains("by_email"),
        "the index is offered for backfill"
    );
    // Each form of the overview has its own nonce, bound to what it does: the job form's
    // does not start a migration.
    let (job, migrate, clear) = (
        form_field(&html, JOB_FORM, "nonce"),
        form_field(&html, MIGRATE_FORM, "nonce"),
        form_field(&html, CLEAR_FORM, "nonce"),
    );
    assert!(job != migrate && job != clear && migrate != clear);
    let (status, refused) = post(
        &format!("{}/jobs", running.url),
        &[
            ("csrf", &field(&html, "csrf")),
            ("nonce", &job),
            ("kind", "migrate"),
            ("type", "Staff:Member"),
        ],
        &[],
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    let (status, location) = post(
        &format!("{}/jobs", running.url),
        &[
            ("csrf", &field(&html, "csrf")),
            ("nonce", &form_field(&html, JOB_FORM, "nonce")),
            ("kind", "audit"),
            ("table", "Staff"),
            ("index", ""),
        ],
        &[],
    )
    .await;
    assert_eq!(status, 303);
    let (_, page) = get(&format!("{}{location}", running.url)).await;
    assert!(page.contains("Started: audit of Staff."), "{page}");
    let live = live_until(&running.url, |live| {
        live.matches("data-state=\"done\"").count() == 2
    })
    .await;
    assert!(live.contains("clean"), "{live}");
    assert!(live.contains("<progress value=\"1\" max=\"1\">"), "{live}");

    // A migration of the registered type to its current version.
    let (_, html) = get(&format!("{}/", running.url)).await;
    assert!(html.contains("<option value=\"Staff:Member\">"), "{html}");
    let (status, location) = post(
        &format!("{}/jobs", running.url),
        &[
            ("csrf", &field(&html, "csrf")),
            ("nonce", &form_field(&html, MIGRATE_FORM, "nonce")),
            ("kind", "migrate"),
            ("type", "Staff:Member"),
        ],
        &[],
    )
    .await;
    assert_eq!(status, 303);
    let (_, page) = get(&format!("{}{location}", running.url)).await;
    assert!(
        page.contains("Started: migrate of Member of Staff."),
        "{page}"
    );
    let live = live_until(&running.url, |live| {
        assert!(!live.contains("failed:"), "{live}");
        live.contains("30 rewritten")
    })
    .await;
    assert!(live.contains("by stored version: v1 30"), "{live}");
    // Every job ended: no running marker is left for the next look to read.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !store
        .query_all(
            JOBS_TABLE,
            tablekit_core::Query::with_filter(tablekit_core::filter::partition_key().eq("running")),
        )
        .await
        .unwrap()
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "running markers left");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stored = store
        .get("Staff", "t0", "m_0000", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.properties.get("EntityVersion"),
        Some(&tablekit_core::Value::Int32(2))
    );
}

/// The overview's live part, once `done` says it shows what the test waits for (20 s at
/// most).
async fn live_until(url: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, live) = get(&format!("{url}/live")).await;
        if done(&live) {
            return live;
        }
        assert!(std::time::Instant::now() < deadline, "{live}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_for_job(store: &AnyStore, id: &str) -> Job {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let entity = store
            .get(JOBS_TABLE, "job", id, None)
            .await
            .unwrap()
            .unwrap();
        let job: Job = match entity.properties.get("State") {
            Some(tablekit_core::Value::String(s)) => serde_json::from_str(s).unwrap(),
            other => panic!("{other:?}"),
        };
        if job.state != JobState::Running {
            return job;
        }
        assert!(std::time::Instant::now() < deadline, "{job:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---- the browser ----

async fn in_the_browser(queue: AnyQueue, name: &str, backend: &str) {
    let Some(browser) = browser(1280, 1000).await else {
        return;
    };
    let client = &browser.client;
    let store = AnyStore::create("memory:").await.unwrap();
    store.create_table_if_not_exists("Current").await.unwrap();
    store
        .insert(
            "Current",
            Entity::new("D1", "empid_000001").with("Name", "Ada"),
        )
        .await
        .unwrap();
    let good = Envelope::new(&ArchiveOperation {
        source_table: "Current".into(),
        target_table: "Archive".into(),
        partition_key: "D1".into(),
        row_key: "empid_000001".into(),
    })
    .unwrap();
    let good_id = good.id.to_string();
    let long = serde_json::json!({
        "kind": "report", "lines": (0..60).map(|i| format!("line {i}")).collect::<Vec<_>>()
    });
    seed_poison(
        &queue,
        name,
        &[
            (
                good_id.as_str(),
                good.to_bytes().unwrap(),
                "the Archive table was being deleted (409 TableBeingDeleted)",
            ),
            (
                "hostile-script",
                b"<script>window.__pwned = 1</script>".to_vec(),
                "malformed operation envelope: expected value at line 1 column 1",
            ),
            (
                "\"><img src=x onerror=\"window.__pwned=2\">",
                b"\"><img src=x onerror=\"window.__pwned=3\">".to_vec(),
                "<img src=x onerror=\"window.__pwned=4\">",
            ),
            (
                "long-body",
                long.to_string().into_bytes(),
                "a long body, folded",
            ),
        ],
    )
    .await;
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.queues = vec![name.to_owned(), "index".into()];
    let running = serve(store.clone(), queue.clone(), options).await;

    // A registered type, so the jobs can run: an audit started from the page.
    let members = IndexedTable::<Member, _>::options()
        .build(store.clone())
        .unwrap();
    members.create().await.unwrap();
    for id in 0..25 {
        members
            .insert(&Member {
                team: format!("t{}", id % 5),
                id,
                email: format!("m{id}@example.com"),
            })
            .await
            .unwrap();
    }
    client.goto(&format!("{}/", running.url)).await.unwrap();
    client
        .find(fantoccini::Locator::Css("button[value='audit']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    banner(client, "Started: audit of Staff.").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while client
        .find(fantoccini::Locator::Css("#jobs tr[data-state='done']"))
        .await
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the audit job did not finish"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let queues = client
        .find(fantoccini::Locator::Css("#queues"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(queues.contains(name), "{queues}");
    screenshot(client, &format!("overview-{backend}")).await;

    client
        .goto(&format!("{}/poison/{name}", running.url))
        .await
        .unwrap();
    let pwned = client
        .execute("return window.__pwned === undefined;", vec![])
        .await
        .unwrap();
    assert_eq!(pwned, serde_json::Value::Bool(true), "a hostile body ran");
    let rows = client
        .find_all(fantoccini::Locator::Css("tr.message"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 4);
    let text = client
        .find(fantoccini::Locator::Css("table.messages"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("<script>window.__pwned = 1</script>"),
        "shown as text: {text}"
    );
    assert!(text.contains("archive v1"), "the operation's kind: {text}");
    assert!(text.contains("TableBeingDeleted"), "{text}");
    screenshot(client, &format!("poison-{backend}")).await;

    // Replay the good message: it leaves the poison queue and a worker processes it.
    client
        .find(fantoccini::Locator::XPath(&format!(
            "//tr[contains(@class,'message')][.//code[text()='{good_id}']]//button[starts-with(@value,'replay:')]"
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    banner(client, "Replayed 1 message.").await;
    assert!(!poisoned_ids(&queue, name).await.contains(&good_id));
    let registry = cli::registry(store.clone());
    let config = WorkerConfig::new(name);
    let mut consumer = queue
        .consume(name, ConsumeOptions::default())
        .await
        .unwrap();
    let delivery = tokio::time::timeout(Duration::from_secs(10), consumer.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(delivery.received().id, good_id);
    let report = tablekit_workers::handle_delivery(delivery, &registry, &config).await;
    assert_eq!(report.processed, 1, "{report:?}");
    consumer.close().await;
    assert!(
        store
            .get("Archive", "D1", "empid_000001", None)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .get("Current", "D1", "empid_000001", None)
            .await
            .unwrap()
            .is_none()
    );

    // Discard the script body: its confirmation first, then its button.
    client
        .find(fantoccini::Locator::XPath(
            "//tr[contains(@class,'message')][.//code[text()='hostile-script']]//button[starts-with(@value,'discard:')]",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    support::browser::wait_for(client, |html| {
        html.contains("name=\"confirm\"") && html.contains("<code>hostile-script</code>")
    })
    .await;
    assert!(
        poisoned_ids(&queue, name)
            .await
            .contains(&"hostile-script".to_owned()),
        "nothing is discarded before the confirmation"
    );
    screenshot(client, &format!("confirm-discard-{backend}")).await;
    support::browser::click(client, "form button[name='confirm']").await;
    banner(client, "Discarded 1 message.").await;
    let left = poisoned_ids(&queue, name).await;
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(!left.contains(&"hostile-script".to_owned()));
    // A reload of the result page does not act again.
    client.refresh().await.unwrap();
    banner(client, "Discarded 1 message.").await;
    assert_eq!(poisoned_ids(&queue, name).await.len(), 2);

    // "Select all" checks every message's box of the page, and unchecks them again.
    let checked = async |client: &fantoccini::Client| -> Vec<bool> {
        let boxes = client
            .find_all(fantoccini::Locator::Css("input[type='checkbox'][name='h']"))
            .await
            .unwrap();
        let mut states = Vec::new();
        for b in boxes {
            states.push(b.prop("checked").await.unwrap().as_deref() == Some("true"));
        }
        states
    };
    let all = client
        .find(fantoccini::Locator::Css("input#all"))
        .await
        .unwrap();
    assert!(!checked(client).await.is_empty(), "the page has boxes");
    all.click().await.unwrap();
    assert!(
        checked(client).await.iter().all(|c| *c),
        "every box checked"
    );
    all.click().await.unwrap();
    assert!(
        checked(client).await.iter().all(|c| !*c),
        "every box unchecked"
    );

    // Unfold the long body.
    client
        .find(fantoccini::Locator::Css("details.body summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let pwned = client
        .execute("return window.__pwned === undefined;", vec![])
        .await
        .unwrap();
    assert_eq!(pwned, serde_json::Value::Bool(true), "a hostile body ran");
    screenshot(client, &format!("poison-after-actions-{backend}")).await;
    browser.client.clone().close().await.unwrap();
}

#[tokio::test]
async fn in_chromium_over_the_sqlite_queue() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    in_the_browser(queue, "archive", "sqlite").await;
}

#[tokio::test]
async fn in_chromium_over_rabbitmq() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let queue = AnyQueue::connect(&url).await.unwrap();
    let name = support::unique("console-archive");
    in_the_browser(queue.clone(), &name, "rabbitmq").await;
    if let AnyQueue::Rabbit(rabbit) = &queue {
        let _ = rabbit
            .delete_queue(&name, &WorkerConfig::new(&name).queue_options())
            .await;
    }
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Visitors",
    kind = "Visitor",
    partition_key = "{site}",
    row_key = "v_{id:04}",
    crate = "tablekit_core"
)]
#[index(
    name = "by_city",
    table = "VisitorsByCity",
    partition_key = "{city}",
    row_key = "{id:04}"
)]
struct Visitor {
    site: String,
    id: u32,
    city: String,
}

/// `run --console`: the console served by a worker process, its convergence read from the
/// process's own metrics.
#[tokio::test]
async fn a_worker_serves_the_console_with_its_copy_lag() {
    let dir = tempfile::tempdir().unwrap();
    let store_arg = format!("sqlite:{}", dir.path().join("store.db").display());
    let broker = format!("sqlite:{}", dir.path().join("queue.db").display());
    let store = AnyStore::create(&store_arg).await.unwrap();
    // The worker started below runs the relay that publishes the copies.
    let visitors = IndexedTable::<Visitor, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .unwrap();
    visitors.create().await.unwrap();
    let (metrics, console) = (support::free_port(), support::free_port());
    let mut worker = std::process::Command::new(env!("CARGO_BIN_EXE_tablekit-worker"))
        .args([
            "run", "--queue", "index", "--broker", &broker, "--store", &store_arg,
        ])
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics}")])
        .args(["--console", &format!("127.0.0.1:{console}")])
        .args([
            "--relay-interval",
            "1",
            "--relay-grace-ms",
            "0",
            "--stats-interval",
            "1",
        ])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for id in 0..20 {
        visitors
            .insert(&Visitor {
                site: "s1".into(),
                id,
                city: ["Oslo", "Lima"][id as usize % 2].into(),
            })
            .await
            .unwrap();
    }
    let relay = format!("-{}</td>", worker.id());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let live = loop {
        if let Ok(response) = client()
            .get(format!("http://127.0.0.1:{console}/live"))
            .send()
            .await
        {
            let live = response.text().await.unwrap();
            // The copies' lag, and the worker's relay with its drain.
            if live.contains("Visitors · by_city")
                && live.contains("<td class=\"num\">20</td>")
                && live.contains(&relay)
            {
                break live;
            }
            assert!(std::time::Instant::now() < deadline, "{live}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the console did not answer"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(live.contains("mean lag"), "{live}");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    let status = worker.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[cfg(feature = "azure")]
#[tokio::test]
async fn in_chromium_over_azure_queue_storage() {
    let Some(connection) = support::azure_queues() else {
        return;
    };
    let queue = AnyQueue::connect(&format!("azure:{connection}"))
        .await
        .unwrap();
    let name = support::azure_name("console");
    in_the_browser(queue.clone(), &name, "azure").await;
    if let AnyQueue::Azure(azure) = &queue {
        let _ = azure.delete_queue(&name).await;
    }
}

/// "Discard all" is bound to the set its dry run listed: a message poisoned after the
/// dry run is left alone, one gone since is reported, a forged count never acts, a
/// confirmation's nonce confirms its own set only, and a confirmation acts once.
#[tokio::test]
async fn a_confirmation_holds_for_the_set_it_listed() {
    let store = AnyStore::create("memory:").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let name = "console-confirm";
    seed_poison(
        &queue,
        name,
        &[
            ("c1", b"1".to_vec(), "r"),
            ("c2", b"2".to_vec(), "r"),
            ("c3", b"3".to_vec(), "r"),
        ],
    )
    .await;
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.queues = vec![name.to_owned()];
    let running = serve(store, queue.clone(), options).await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/{name}");
    let (_, html) = get(&page_url).await;
    // A forged count is not a confirmation: "all" only makes a dry run, and acts on
    // nothing.
    let (status, to_confirm) = post_fields(
        &page_url,
        &poison_form(
            &html,
            ("action", "discard-all"),
            &[("confirmed", "999999"), ("set", "0123")],
        ),
    )
    .await;
    assert_eq!(status, 303, "{to_confirm}");
    assert!(
        to_confirm.starts_with(&format!("/poison/{name}/confirm/")),
        "{to_confirm}"
    );
    let dry_run = confirmation(base, &to_confirm).await;
    assert!(
        dry_run.html.contains("<strong>3 messages</strong>"),
        "{}",
        dry_run.html
    );
    for id in ["c1", "c2", "c3"] {
        assert!(
            dry_run.html.contains(&format!("<code>{id}</code>")),
            "{id} listed"
        );
    }
    assert_eq!(poisoned_ids(&queue, name).await.len(), 3);
    // After the dry run: c3 leaves, c4 arrives.
    let c3 = handle_of(&html, "c3");
    queue
        .poison_take(name, &[c3], &PoisonAction::Discard)
        .await
        .unwrap();
    seed_poison(&queue, name, &[("c4", b"4".to_vec(), "r")]).await;
    // A second dry run (c1, c2, c4): its nonce does not confirm the first's set, nor its
    // own set under another queue.
    let (_, html) = get(&page_url).await;
    let (_, to_confirm_later) = post_fields(
        &page_url,
        &poison_form(&html, ("action", "discard-all"), &[]),
    )
    .await;
    let later = confirmation(base, &to_confirm_later).await;
    assert!(later.html.contains("<strong>3 messages</strong>"));
    let crossed = [
        ("csrf", field(&dry_run.html, "csrf")),
        ("nonce", later.nonce()),
        ("confirm", "yes".to_owned()),
    ]
    .map(|(k, v)| (k.to_owned(), v));
    let (status, refused) = post_fields(&format!("{base}{}", dry_run.action), &crossed).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.contains("Nothing was done"), "{refused}");
    let elsewhere = later.action.replace(name, "console-confirm-other");
    let mut moved = later.fields.clone();
    moved.push(("confirm".into(), "yes".into()));
    let (status, _) = post_fields(&format!("{base}{elsewhere}"), &moved).await;
    assert_eq!(status, 400);
    assert_eq!(poisoned_ids(&queue, name).await, ["c1", "c2", "c4"]);

    // The first confirmation: c1 and c2 go, c3 is reported gone, c4 was never seen.
    let (status, location) = dry_run.submit(base).await;
    assert_eq!(status, 303);
    assert_eq!(
        banner_at(base, &location).await,
        (
            "Discarded 2 of 3 messages; the other 1 had already left the poison queue, or never was in it."
                .to_owned(),
            false
        )
    );
    assert_eq!(
        poisoned_ids(&queue, name).await,
        ["c4"],
        "c4 was never seen"
    );
    // The set acts once: the same form again does nothing; its page and its export are
    // gone.
    let (status, again) = dry_run.submit(base).await;
    assert_eq!(
        (status, again.as_str()),
        (303, format!("{location}&again=1").as_str())
    );
    assert_eq!(poisoned_ids(&queue, name).await, ["c4"]);
    let (status, page) = get(&format!("{base}{to_confirm}")).await;
    assert_eq!(status, 404);
    assert!(page.contains("Nothing to confirm"), "{page}");
    let (status, _) = get(&format!("{base}{}", dry_run.export())).await;
    assert_eq!(status, 404);
    // A token never kept, with a real confirmation's nonce: refused.
    let forged = format!("/poison/{name}/confirm/{}", "0".repeat(32));
    let (status, _) = post_fields(&format!("{base}{forged}"), &moved).await;
    assert_eq!(status, 400);
    assert_eq!(poisoned_ids(&queue, name).await, ["c4"]);

    // The second dry run still acts on its own set: c4 only is left of it.
    let (status, location) = later.submit(base).await;
    assert_eq!(status, 303);
    assert_eq!(
        banner_at(base, &location).await.0,
        "Discarded 1 of 3 messages; the other 2 had already left the poison queue, or never was in it."
    );
    assert!(poisoned_ids(&queue, name).await.is_empty());
}

/// A repair writes to its table: it starts only after a confirmation that says so. The
/// finished jobs (and a record that no longer reads as a job) are cleared on request;
/// a running job stays.
#[tokio::test]
async fn a_repair_asks_first_and_finished_jobs_are_cleared() {
    let store = AnyStore::create("memory:").await.unwrap();
    let members = IndexedTable::<Member, _>::options()
        .build(store.clone())
        .unwrap();
    members.create().await.unwrap();
    members
        .insert(&Member {
            team: "t".into(),
            id: 1,
            email: "m1@example.com".into(),
        })
        .await
        .unwrap();
    store.create_table_if_not_exists(JOBS_TABLE).await.unwrap();
    store
        .insert(
            JOBS_TABLE,
            Entity::new("job", "0000000000002-junk00").with("State", "{not a job"),
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    let running = serve(store.clone(), queue, options).await;
    let jobs_url = format!("{}/jobs", running.url);
    let (_, html) = get(&format!("{}/", running.url)).await;
    let (csrf, nonce) = (
        form_field(&html, JOB_FORM, "csrf"),
        form_field(&html, JOB_FORM, "nonce"),
    );
    let repair = [
        ("csrf", csrf.as_str()),
        ("nonce", nonce.as_str()),
        ("kind", "repair"),
        ("table", "Staff"),
    ];
    let (status, confirm) = post(&jobs_url, &repair, &[]).await;
    assert_eq!(status, 200);
    assert!(confirm.contains("writes to the table"), "{confirm}");
    let recorded = |store: AnyStore| async move {
        store
            .query_all(
                JOBS_TABLE,
                tablekit_core::Query::with_filter(tablekit_core::filter::partition_key().eq("job")),
            )
            .await
            .unwrap()
            .len()
    };
    assert_eq!(
        recorded(store.clone()).await,
        1,
        "no job before the confirmation"
    );
    // The job form's nonce does not confirm a repair: the confirmation carries its own,
    // bound to its table.
    let with_the_forms_nonce = [repair.as_slice(), &[("confirmed", "yes")]].concat();
    let (status, refused) = post(&jobs_url, &with_the_forms_nonce, &[]).await;
    assert_eq!(status, 400, "{refused}");
    let repair_nonce = form_field(&confirm, REPAIR_CONFIRMATION, "nonce");
    assert_ne!(repair_nonce, nonce);
    let confirmed = |table: &'static str| {
        [
            ("csrf", csrf.clone()),
            ("nonce", repair_nonce.clone()),
            ("table", table.to_owned()),
            ("confirmed", "yes".to_owned()),
            ("kind", "repair".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect::<Vec<_>>()
    };
    let (status, _) = post_fields(&jobs_url, &confirmed("Visitors")).await;
    assert_eq!(status, 400, "the confirmation of another table");
    assert_eq!(recorded(store.clone()).await, 1, "no job yet");
    let (status, location) = post_fields(&jobs_url, &confirmed("Staff")).await;
    assert_eq!(status, 303);
    assert_eq!(
        banner_at(&running.url, &location).await,
        ("Started: repair of Staff.".to_owned(), false)
    );
    // The confirmation sent again starts nothing.
    let (status, again) = post_fields(&jobs_url, &confirmed("Staff")).await;
    assert_eq!(
        (status, again.as_str()),
        (303, format!("{location}&again=1").as_str())
    );
    assert!(
        banner_at(&running.url, &again)
            .await
            .0
            .starts_with("Nothing was done: this form had already acted")
    );
    assert_eq!(recorded(store.clone()).await, 2, "one repair");
    live_until(&running.url, |live| live.contains("data-state=\"done\"")).await;

    // A job that does not start says so in the failure's banner, not the success's.
    let (_, html) = get(&format!("{}/", running.url)).await;
    let (_, location) = post(
        &jobs_url,
        &[
            ("csrf", csrf.as_str()),
            ("nonce", form_field(&html, JOB_FORM, "nonce").as_str()),
            ("kind", "backfill"),
            ("table", "Staff"),
            ("index", ""),
        ],
        &[],
    )
    .await;
    let (_, page) = get(&format!("{}{location}", running.url)).await;
    assert!(
        page.contains("<div class=\"banner failed\" role=\"alert\">The job did not start"),
        "{page}"
    );

    // Clear: the done repair and the junk record go; a running job stays.
    let running_job = Job {
        id: "0000000000003-runs00".into(),
        kind: JobKind::Audit,
        table: "Staff".into(),
        index: None,
        state: JobState::Running,
        scanned: 0,
        drift: 0,
        estimate: None,
        started: chrono::Utc::now(),
        heartbeat: chrono::Utc::now() + chrono::Duration::hours(1),
        finished: None,
        resumed: 0,
        owner: "another console".into(),
        report: None,
        migration: None,
        entity_kind: None,
        error: None,
    };
    store
        .insert(
            JOBS_TABLE,
            Entity::new("job", running_job.id.clone())
                .with("State", serde_json::to_string(&running_job).unwrap()),
        )
        .await
        .unwrap();
    let (_, html) = get(&format!("{}/", running.url)).await;
    let (status, location) = post(
        &jobs_url,
        &[
            ("csrf", csrf.as_str()),
            ("nonce", form_field(&html, CLEAR_FORM, "nonce").as_str()),
            ("kind", "clear"),
        ],
        &[],
    )
    .await;
    assert_eq!(status, 303);
    let (_, page) = get(&format!("{}{location}", running.url)).await;
    assert!(page.contains("Cleared 2 finished jobs."), "{page}");
    assert_eq!(recorded(store.clone()).await, 1, "the running job stays");
}

/// Pausing a queue's consumers from the overview, and resuming them, each with its row's
/// form, once per form; refused for a queue the console does not show, a queue not
/// declared (any more), and a poison queue.
#[tokio::test]
async fn a_queues_consumers_are_paused_and_resumed_from_the_overview() {
    let store = AnyStore::create("memory:").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let name = "console-pause";
    let (gone, hidden) = ("console-pause-gone", "console-pause-hidden");
    let poison = tablekit_workers::queue::poison_queue(name);
    for declared in [name, gone, hidden] {
        queue
            .declare(declared, &WorkerConfig::new(declared).queue_options())
            .await
            .unwrap();
    }
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.queues = vec![name.to_owned(), gone.to_owned(), poison.clone()];
    let running = serve(store, queue.clone(), options).await;
    let url = |queue: &str| format!("{}/queues/{queue}", running.url);
    for (word, paused) in [("pause", true), ("resume", false)] {
        let (_, html) = get(&format!("{}/", running.url)).await;
        let form = [
            ("csrf", form_field(&html, &pause_form(name), "csrf")),
            ("nonce", form_field(&html, &pause_form(name), "nonce")),
            ("pause", word.to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v));
        let (status, location) = post_fields(&url(name), &form).await;
        assert_eq!(status, 303, "{location}");
        assert_eq!(queue.paused(name).await.unwrap(), paused);
        let (_, page) = get(&format!("{}{location}", running.url)).await;
        assert_eq!(page.contains("badge bad\">paused"), paused, "{page}");
        // The same form again does nothing (a resume in between would be undone else).
        queue.set_paused(name, !paused).await.unwrap();
        let (status, again) = post_fields(&url(name), &form).await;
        assert_eq!(
            (status, again.as_str()),
            (303, format!("{location}&again=1").as_str())
        );
        assert_eq!(queue.paused(name).await.unwrap(), !paused, "not again");
        queue.set_paused(name, paused).await.unwrap();
    }

    let (_, html) = get(&format!("{}/", running.url)).await;
    let csrf = field(&html, "csrf");
    let of_row = |queue: &str| form_field(&html, &pause_form(queue), "nonce");
    // A queue declared when the page was drawn, and not any more: refused, naming the
    // queues that can be paused.
    let gone_nonce = of_row(gone);
    rusqlite::Connection::open(support::console::sqlite_file(&dir))
        .unwrap()
        .execute(
            "DELETE FROM tablekit_queue_declared WHERE queue = ?1",
            [gone],
        )
        .unwrap();
    let (status, refused) = post(
        &url(gone),
        &[("csrf", &csrf), ("nonce", &gone_nonce), ("pause", "pause")],
        &[],
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.contains("cannot be paused here"), "{refused}");
    assert!(refused.contains("It could be: console-pause"), "{refused}");
    assert!(!queue.paused(gone).await.unwrap());
    // A poison queue has no pause form, nor has a queue the console does not show: a
    // form naming one (with another row's nonce) is refused, and nothing is paused.
    assert!(!html.contains(&pause_form(&poison)), "{html}");
    assert!(!html.contains(&pause_form(hidden)), "{html}");
    for other in [poison.as_str(), hidden] {
        let (status, refused) = post(
            &url(other),
            &[
                ("csrf", &csrf),
                ("nonce", &of_row(name)),
                ("pause", "pause"),
            ],
            &[],
        )
        .await;
        assert_eq!(status, 400, "{other}: {refused}");
        assert!(refused.contains("Nothing was done"), "{refused}");
        assert!(!queue.paused(other).await.unwrap(), "{other}");
    }
    assert!(!queue.paused(name).await.unwrap());
}

/// Every action is logged with its client and the messages it named; an id cannot forge
/// a line of that log.
#[tokio::test]
async fn an_action_is_logged_with_its_client_and_message_ids() {
    let logs = support::logs();
    let store = AnyStore::create("memory:").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let name = "console-log";
    seed_poison(
        &queue,
        name,
        &[
            ("evil\nINFO forged line", b"1".to_vec(), "r"),
            ("plain-2", b"2".to_vec(), "r"),
        ],
    )
    .await;
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.queues = vec![name.to_owned()];
    let running = serve(store, queue.clone(), options).await;
    let page_url = format!("{}/poison/{name}", running.url);
    let (_, html) = get(&page_url).await;
    let (_, to_confirm) = post_fields(
        &page_url,
        &poison_form(&html, ("action", "discard-all"), &[]),
    )
    .await;
    let confirmation = confirmation(&running.url, &to_confirm).await;
    let (status, _) = confirmation.submit(&running.url).await;
    assert_eq!(status, 303);
    let logs = logs.text();
    let line = logs
        .lines()
        .find(|l| l.contains("console action") && l.contains("queue=console-log"))
        .unwrap_or_else(|| panic!("no action logged:\n{logs}"));
    assert!(line.contains("client=127.0.0.1:"), "{line}");
    assert!(line.contains("action=discard-all"), "{line}");
    assert!(line.contains("asked=2 taken=2"), "{line}");
    assert!(line.contains("evil\\nINFO forged line"), "{line}");
    assert!(line.contains("plain-2"), "{line}");
    assert!(line.contains("Discarded 2 messages."), "{line}");
    // Without an action log file, one line per message under its own target.
    let per_message: Vec<&str> = logs
        .lines()
        .filter(|l| {
            l.contains(tablekit_workers::console::records::ACTIONS_TARGET)
                && l.contains("\"queue\":\"console-log\"")
        })
        .collect();
    assert_eq!(per_message.len(), 2, "{logs}");
    for line in &per_message {
        assert!(line.contains("\"action\":\"discard-all\""), "{line}");
        assert!(line.contains("\"result\":\"taken\""), "{line}");
        assert!(line.contains("\"client\":\"127.0.0.1:"), "{line}");
    }
    assert!(
        per_message
            .iter()
            .any(|l| l.contains("\"id\":\"evil\\nINFO forged line\"")),
        "{per_message:?}"
    );
    assert!(
        !logs.lines().any(|l| l.starts_with("INFO forged")),
        "a forged line:\n{logs}"
    );
}

/// A type with a change feed, for the feeds' pages.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "FeedShown",
    kind = "FeedShown",
    partition_key = "{team}",
    row_key = "{id:04}",
    crate = "tablekit_core"
)]
#[feed(shares = 2)]
struct FeedShown {
    team: String,
    id: u32,
    note: String,
}

#[tokio::test]
async fn the_feeds_pages_show_each_group_its_shares_lag_and_parked_changes_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::create(&format!("sqlite:{}", dir.path().join("t.db").display()))
        .await
        .unwrap();
    let queue = AnyQueue::connect(&format!("sqlite:{}", dir.path().join("q.db").display()))
        .await
        .unwrap();
    let table = IndexedTable::<FeedShown, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .unwrap();
    table.create().await.unwrap();
    for id in 0..5 {
        let note = if id == 3 {
            "<script>alert(1)</script>".to_owned()
        } else {
            format!("n{id}")
        };
        table
            .insert(&FeedShown {
                team: "a".into(),
                id,
                note,
            })
            .await
            .unwrap();
    }
    let relay = tablekit_patterns::index::Relay::options().alone().build(
        store.clone(),
        std::sync::Arc::new(tablekit_patterns::index::InlineSink::new(
            tablekit_patterns::index::handlers(store.clone(), None),
        )),
    );
    relay.run_once().await.unwrap();
    // The group handles four, parks the hostile one.
    let group =
        tablekit_patterns::feed::Group::new(store.clone(), "FeedShown", "billing", 2).unwrap();
    let changes = group.poll().await.unwrap();
    assert_eq!(changes.len(), 5);
    for change in &changes {
        if change.event.entity.get("note").and_then(|v| v.as_str())
            == Some("<script>alert(1)</script>")
        {
            tablekit_patterns::feed::park(&store, "FeedShown", "billing", change, "<b>refused</b>")
                .await
                .unwrap();
        }
    }
    group.checkpoint(&changes[..4]).await.unwrap();

    let running = serve(
        store,
        queue,
        ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None),
    )
    .await;
    let base = running.url.as_str();
    let (status, html) = get(&format!("{base}/feeds")).await;
    assert_eq!(status, 200);
    assert!(
        html.contains("FeedShown") && html.contains("billing"),
        "{html}"
    );
    assert!(html.contains("/feeds/FeedShown/billing"));
    let (status, html) = get(&format!("{base}/feeds/FeedShown/billing")).await;
    assert_eq!(status, 200);
    assert!(html.contains("Parked changes"));
    assert!(
        !html.contains("<script>alert(1)") && !html.contains("<b>refused"),
        "escaped"
    );
    assert!(html.contains("&lt;b&gt;refused&lt;/b&gt;"));
    // One share holds the four handled changes' checkpoint; one change is behind.
    assert!(html.contains("1 changes behind"), "{html}");
    let (status, _) = get(&format!("{base}/feeds/FeedShown/nobody")).await;
    assert_eq!(status, 404);
    let (status, _) = get(&format!("{base}/feeds/Nothing/billing")).await;
    assert_eq!(status, 404);
}
