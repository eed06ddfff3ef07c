//! The console's action forms, over HTTP and in headless Chromium: each button's nonce is
//! bound to its action and message (another message's, a forged one, another console
//! process's are refused and nothing changes); the banner says what the backend did (a
//! message already gone is "0 of 1", a failure); an action returns to the page, filter and
//! page size it came from; a discard waits for its confirmation; a set is exported whole
//! before it is confirmed; every message a bulk action touches is in the action log and
//! the action on the page of recent actions; a message's page shows its body in its key
//! order and its time in UTC; a replay elsewhere names a declared queue that is not a
//! poison queue. And in Chromium, two discards with Back between them: the second acts,
//! the first's forms sent again from pages the browser kept do nothing. Screenshots go to
//! `target/console-screenshots/actions-*.png`.

// The features `tests/console.rs` needs (this file has no `[[test]]` entry of its own).
#![cfg(all(feature = "sqlite", feature = "rabbitmq", feature = "cli"))]
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use base64::Engine as _;
use chrono::{TimeZone, Utc};
use tablekit_core::AnyStore;
use tablekit_workers::WorkerConfig;
use tablekit_workers::console::ConsoleOptions;
use tablekit_workers::queue::{AnyQueue, PoisonAction, Queue, poison_queue};

use support::browser::{banner, browser, click, screenshot, wait_for};
use support::console::{
    Served, banner_at, banner_of, confirmation, field, form_field, get, handle_of, handles,
    insert_poison, next_link, nonce_of_button, one_button, pause_form, poison_form, poisoned_ids,
    post_fields, query_of, query_param, seed_poison, selected_button, sqlite_file, sqlite_queue,
};

/// A console on a free loopback port showing `queues`, its options changed by `tune`;
/// each of `queues` is recorded in the store's registry of declared queues, as a worker
/// of it does at its start (the console acts only on those the broker holds too).
async fn serve(queue: AnyQueue, queues: &[&str], tune: impl FnOnce(&mut ConsoleOptions)) -> Served {
    let store = AnyStore::create("memory:").await.unwrap();
    for name in queues {
        tablekit_workers::activity::record_declared(&store, name)
            .await
            .unwrap();
    }
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.queues = queues.iter().map(|q| (*q).to_owned()).collect();
    options.refresh = 1;
    tune(&mut options);
    support::console::serve(store, queue, options).await
}

async fn declare(queue: &AnyQueue, name: &str) {
    queue
        .declare(name, &WorkerConfig::new(name).queue_options())
        .await
        .unwrap();
}

async fn delete_rabbit_queues(queue: &AnyQueue, names: &[&str]) {
    if let AnyQueue::Rabbit(rabbit) = queue {
        for name in names {
            let _ = rabbit
                .delete_queue(name, &WorkerConfig::new(*name).queue_options())
                .await;
        }
    }
}

/// How many messages wait in `name`, once it says `expected` (a broker counts what it
/// was sent a moment later): 5 s at most.
async fn waiting(queue: &AnyQueue, name: &str, expected: u64) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let waiting = queue.stats(name).await.unwrap().waiting;
        if waiting == expected || std::time::Instant::now() > deadline {
            return waiting;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The HTML of the page a redirect leads to.
async fn page_at(base: &str, location: &str) -> String {
    let (status, html) = get(&format!("{base}{location}")).await;
    assert_eq!(status, 200, "{location}: {html}");
    html
}

const GONE_ONE: &str = "Discarded 0 of 1 message: it had already left the poison queue, or never was in it. Nothing was done.";

// ---- nonces ----

/// A nonce acts for its action on its message only: another message's, another
/// action's, a forged one and another console process's are refused (400) and nothing
/// changes; so are selected messages the page did not list, and a page's list altered.
async fn a_nonce_acts_only_for_its_action_and_message(queue: AnyQueue, name: &str) {
    seed_poison(
        &queue,
        name,
        &[("a", b"a".to_vec(), "r"), ("b", b"b".to_vec(), "r")],
    )
    .await;
    let running = serve(queue.clone(), &[name], |_| {}).await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/{name}");
    let (_, html) = get(&page_url).await;
    let (a, b) = (handle_of(&html, "a"), handle_of(&html, "b"));
    let replay_a = nonce_of_button(&html, "replay", &a);
    let discard_a = nonce_of_button(&html, "discard", &a);
    assert_ne!(replay_a, discard_a, "a nonce per button");
    assert_ne!(replay_a, nonce_of_button(&html, "replay", &b));
    let mut forged = replay_a.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == '0' { '1' } else { '0' });
    // Another console over the same queue: its nonces are not this one's.
    let other = serve(queue.clone(), &[name], |_| {}).await;
    let (_, other_html) = get(&format!("{}/poison/{name}", other.url)).await;
    let other_process = nonce_of_button(&other_html, "replay", &a);
    let untouched = || async {
        assert_eq!(poisoned_ids(&queue, name).await, ["a", "b"]);
        assert_eq!(waiting(&queue, name, 0).await, 0);
    };
    for (what, button) in [
        ("a's replay nonce for b", format!("replay:{replay_a}:{b}")),
        (
            "a's discard nonce to replay a",
            format!("replay:{discard_a}:{a}"),
        ),
        (
            "a's replay nonce to discard a",
            format!("discard:{replay_a}:{a}"),
        ),
        ("a forged nonce", format!("replay:{forged}:{a}")),
        (
            "another console's nonce",
            format!("replay:{other_process}:{a}"),
        ),
    ] {
        let (status, refused) =
            post_fields(&page_url, &poison_form(&html, ("one", &button), &[])).await;
        assert_eq!(status, 400, "{what}: {refused}");
        assert!(
            refused.contains("was not issued by this console for this action"),
            "{what}: {refused}"
        );
        assert!(refused.contains("Nothing was done"), "{what}: {refused}");
        untouched().await;
    }
    // A page of one message lists one alone: the other is not among its selected, and
    // its list cannot be altered to say so.
    let (_, one) = get(&format!("{page_url}?limit=1")).await;
    let alone = handles(&one);
    assert_eq!(alone.len(), 1);
    let (alone, other) = if alone[0] == a {
        (a.clone(), b.clone())
    } else {
        (b.clone(), a.clone())
    };
    let replay_selected = selected_button(&one, "replay");
    let (status, refused) = post_fields(
        &page_url,
        &poison_form(&one, ("action", &replay_selected), &[("h", &other)]),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.contains("was not listed on the page"), "{refused}");
    untouched().await;
    let mut altered = poison_form(&one, ("action", &replay_selected), &[("h", &other)]);
    for (name, value) in &mut altered {
        if name == "listed" {
            *value = serde_json::to_string(&[&a, &b]).unwrap();
        }
    }
    let (status, refused) = post_fields(&page_url, &altered).await;
    assert_eq!(status, 400, "{refused}");
    untouched().await;
    // The forms as the pages have them act.
    let (status, location) = post_fields(
        &page_url,
        &poison_form(&one, ("action", &replay_selected), &[("h", &alone)]),
    )
    .await;
    assert_eq!(status, 303, "{location}");
    assert_eq!(
        banner_at(base, &location).await,
        ("Replayed 1 message.".to_owned(), false)
    );
    let (status, location) = post_fields(
        &page_url,
        &poison_form(&html, ("one", &one_button(&html, "replay", &other)), &[]),
    )
    .await;
    assert_eq!(status, 303, "{location}");
    assert!(poisoned_ids(&queue, name).await.is_empty());
    assert_eq!(waiting(&queue, name, 2).await, 2);
}

#[tokio::test]
async fn a_nonce_acts_only_for_its_action_and_message_over_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    a_nonce_acts_only_for_its_action_and_message(queue, "actions-nonce").await;
}

#[tokio::test]
async fn a_nonce_acts_only_for_its_action_and_message_over_rabbitmq() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let queue = AnyQueue::connect(&url).await.unwrap();
    let name = support::unique("actions-nonce");
    a_nonce_acts_only_for_its_action_and_message(queue.clone(), &name).await;
    delete_rabbit_queues(&queue, &[&name]).await;
}

// ---- banners ----

/// The banner says what the backend did: a message gone before its discard was
/// confirmed, or before its replay, is "0 of 1" and a failure; some of a set gone is
/// "n of m".
#[tokio::test]
async fn the_banner_of_an_action_on_messages_already_gone_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let name = "actions-gone";
    seed_poison(
        &queue,
        name,
        &[
            ("a", b"a".to_vec(), "r"),
            ("b", b"b".to_vec(), "r"),
            ("c", b"c".to_vec(), "r"),
        ],
    )
    .await;
    let running = serve(queue.clone(), &[name], |_| {}).await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/{name}");
    let (_, html) = get(&page_url).await;
    let (a, b, c) = (
        handle_of(&html, "a"),
        handle_of(&html, "b"),
        handle_of(&html, "c"),
    );
    let take = |handle: &str| {
        let (queue, handle) = (queue.clone(), handle.to_owned());
        async move {
            queue
                .poison_take(name, &[handle], &PoisonAction::Discard)
                .await
                .unwrap()
        }
    };

    // Discard a: confirmed after a left by another way.
    let (_, to_confirm) = post_fields(
        &page_url,
        &poison_form(&html, ("one", &one_button(&html, "discard", &a)), &[]),
    )
    .await;
    let confirm = confirmation(base, &to_confirm).await;
    assert_eq!(take(&a).await.len(), 1);
    let (status, location) = confirm.submit(base).await;
    assert_eq!(status, 303);
    let after = page_at(base, &location).await;
    assert_eq!(banner_of(&after), Some((GONE_ONE.to_owned(), true)));
    assert!(
        after.contains(&format!(
            "<div class=\"banner failed\" role=\"alert\">{GONE_ONE}"
        )),
        "a failure's banner: {after}"
    );

    // Replay b, gone since the page was drawn: nothing replayed, said as a failure.
    assert_eq!(take(&b).await.len(), 1);
    let (status, location) = post_fields(
        &page_url,
        &poison_form(&html, ("one", &one_button(&html, "replay", &b)), &[]),
    )
    .await;
    assert_eq!(status, 303);
    assert_eq!(
        banner_at(base, &location).await,
        (
            "Replayed 0 of 1 message: it had already left the poison queue, or never was in it. Nothing was done."
                .to_owned(),
            true
        )
    );
    assert_eq!(queue.stats(name).await.unwrap().waiting, 0);

    // Discard the three selected: a and b are gone, c goes.
    let (status, to_confirm) = post_fields(
        &page_url,
        &poison_form(
            &html,
            ("action", &selected_button(&html, "discard")),
            &[("h", &a), ("h", &b), ("h", &c)],
        ),
    )
    .await;
    assert_eq!(status, 303, "{to_confirm}");
    let confirm = confirmation(base, &to_confirm).await;
    assert!(confirm.html.contains("<strong>3 messages</strong>"));
    assert_eq!(
        confirm.html.matches("no id, or already gone").count(),
        2,
        "{}",
        confirm.html
    );
    assert_eq!(poisoned_ids(&queue, name).await, ["c"], "nothing yet");
    let (_, location) = confirm.submit(base).await;
    assert_eq!(
        banner_at(base, &location).await,
        (
            "Discarded 1 of 3 messages; the other 2 had already left the poison queue, or never was in it."
                .to_owned(),
            false
        )
    );
    assert!(poisoned_ids(&queue, name).await.is_empty());
}

// ---- the place ----

/// An action comes back to where the operator was: the filter (kind, id, reason, body),
/// the page (`after`) and its size (`limit`), with its result — a replay at once, a
/// discard and anything on "all" after their confirmation, the same form again too.
#[tokio::test]
async fn an_action_returns_to_the_page_filter_and_page_size_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let (name, elsewhere) = ("actions-place", "actions-place-elsewhere");
    declare(&queue, name).await;
    declare(&queue, elsewhere).await;
    let alpha = (0..10).map(|i| {
        (
            format!("alpha-{i:02}").into_bytes(),
            format!("{{\"tag\":\"needle-{i}\"}}").into_bytes(),
            b"alpha failure".to_vec(),
        )
    });
    let beta = (0..5).map(|i| {
        (
            format!("beta-{i:02}").into_bytes(),
            format!("{{\"tag\":\"needle-{i}\"}}").into_bytes(),
            b"beta failure".to_vec(),
        )
    });
    insert_poison(
        &sqlite_file(&dir),
        name,
        Utc::now(),
        alpha.chain(beta).collect::<Vec<_>>(),
    );
    let running = serve(queue.clone(), &[name, elsewhere], |_| {}).await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/{name}");
    let first = format!("/poison/{name}?id=alpha&reason=ALPHA&body=needle&limit=3");
    let (_, html) = get(&format!("{base}{first}")).await;
    assert!(html.contains("10 pass the filter"), "{html}");
    let second = next_link(&html).expect("a second page");
    let after = query_param(&second, "after").expect("a cursor");
    let html = page_at(base, &second).await;
    let listed = handles(&html);
    assert_eq!(listed.len(), 3);
    // Where every redirect must lead back to.
    let place = |location: &str, nonce: &str, again: bool| {
        let mut expected: Vec<(String, String)> = [
            ("id", "alpha"),
            ("reason", "ALPHA"),
            ("body", "needle"),
            ("limit", "3"),
            ("after", after.as_str()),
            ("result", nonce),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        if again {
            expected.push(("again".into(), "1".into()));
        }
        assert!(
            location.starts_with(&format!("/poison/{name}?")),
            "{location}"
        );
        let mut got = query_of(location);
        got.sort();
        expected.sort();
        assert_eq!(got, expected, "{location}");
    };

    // Replay one: at once, back to the second page.
    let replay = one_button(&html, "replay", &listed[0]);
    let form = poison_form(&html, ("one", &replay), &[]);
    let (status, location) = post_fields(&page_url, &form).await;
    assert_eq!(status, 303);
    place(&location, replay.split(':').nth(1).unwrap(), false);
    let shown = page_at(base, &location).await;
    assert_eq!(
        banner_of(&shown),
        Some(("Replayed 1 message.".to_owned(), false))
    );
    assert_eq!(
        handles(&shown)[..2],
        listed[1..],
        "the same page, the replayed message gone"
    );
    // The same form again: the same place, and nothing done.
    let (_, again) = post_fields(&page_url, &form).await;
    place(&again, replay.split(':').nth(1).unwrap(), true);
    assert_eq!(queue.stats(name).await.unwrap().waiting, 1);

    // Discard one of the selected: after its confirmation, back to the second page.
    let (status, to_confirm) = post_fields(
        &page_url,
        &poison_form(
            &html,
            ("action", &selected_button(&html, "discard")),
            &[("h", &listed[1])],
        ),
    )
    .await;
    assert_eq!(status, 303, "{to_confirm}");
    let confirm = confirmation(base, &to_confirm).await;
    // Its Cancel goes back there too.
    assert!(
        confirm.html.contains(&format!(
            "href=\"/poison/{name}?id=alpha&amp;reason=ALPHA&amp;body=needle&amp;limit=3&amp;after={after}\">Cancel</a>"
        )),
        "{}",
        confirm.html
    );
    let (_, location) = confirm.submit(base).await;
    place(&location, &confirm.nonce(), false);
    assert_eq!(
        banner_at(base, &location).await,
        ("Discarded 1 message.".to_owned(), false)
    );

    // Replay one of the selected to another queue: at once, back there.
    let moveto = selected_button(&html, "moveto");
    let (status, location) = post_fields(
        &page_url,
        &poison_form(
            &html,
            ("action", &moveto),
            &[("h", &listed[2]), ("to", elsewhere)],
        ),
    )
    .await;
    assert_eq!(status, 303, "{location}");
    place(&location, moveto.split_once(':').unwrap().1, false);
    assert_eq!(
        banner_at(base, &location).await,
        (format!("Replayed 1 message to {elsewhere}."), false)
    );
    assert_eq!(queue.stats(elsewhere).await.unwrap().waiting, 1);

    // Discard all the filter passes, from the second page: the 7 alpha messages left,
    // then back there.
    let (_, to_confirm) = post_fields(
        &page_url,
        &poison_form(&html, ("action", "discard-all"), &[]),
    )
    .await;
    let confirm = confirmation(base, &to_confirm).await;
    assert!(
        confirm.html.contains("<strong>7 messages</strong>"),
        "{}",
        confirm.html
    );
    let (_, location) = confirm.submit(base).await;
    place(&location, &confirm.nonce(), false);
    assert_eq!(
        banner_at(base, &location).await,
        ("Discarded 7 messages.".to_owned(), false)
    );
    let left = poisoned_ids(&queue, name).await;
    assert_eq!(left.len(), 5, "{left:?}");
    assert!(left.iter().all(|id| id.starts_with("beta-")), "{left:?}");

    // Newest first: the order is kept as well.
    let (_, newest) = get(&format!("{page_url}?order=newest&limit=2")).await;
    let newest_handles = handles(&newest);
    assert_eq!(newest_handles.len(), 2);
    let (_, location) = post_fields(
        &page_url,
        &poison_form(
            &newest,
            ("one", &one_button(&newest, "replay", &newest_handles[0])),
            &[],
        ),
    )
    .await;
    assert_eq!(query_param(&location, "order").as_deref(), Some("newest"));
    assert_eq!(query_param(&location, "limit").as_deref(), Some("2"));
}

// ---- confirmations and exports ----

/// A confirmation sent again (a double click, a page the browser kept) does nothing and
/// says so on the page the operator confirmed from: the same filter, page and page size,
/// as its first sending.
#[tokio::test]
async fn a_confirmation_sent_again_returns_to_the_place_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let name = "actions-again";
    declare(&queue, name).await;
    insert_poison(
        &sqlite_file(&dir),
        name,
        Utc::now(),
        (0..6)
            .map(|i| {
                (
                    format!("again-{i}").into_bytes(),
                    b"{}".to_vec(),
                    b"again".to_vec(),
                )
            })
            .collect::<Vec<_>>(),
    );
    let running = serve(queue.clone(), &[name], |_| {}).await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/{name}");
    let (_, first) = get(&format!("{page_url}?reason=again&limit=2")).await;
    let second = next_link(&first).expect("a second page");
    let html = page_at(base, &second).await;
    let handle = handles(&html).remove(0);
    let (_, to_confirm) = post_fields(
        &page_url,
        &poison_form(&html, ("one", &one_button(&html, "discard", &handle)), &[]),
    )
    .await;
    let confirm = confirmation(base, &to_confirm).await;
    let (status, location) = confirm.submit(base).await;
    assert_eq!(status, 303);
    assert_eq!(
        query_param(&location, "after"),
        query_param(&second, "after")
    );
    let (status, again) = confirm.submit(base).await;
    assert_eq!(status, 303);
    assert_eq!(
        again,
        format!("{location}&again=1"),
        "the same place, again"
    );
    assert_eq!(queue.stats(name).await.unwrap().poisoned, 5);
}

/// A discard, of one message or of the selected ones, acts only once its confirmation
/// is sent: nothing is gone before, whatever its page is shown again; then once.
#[tokio::test]
async fn a_single_discard_waits_for_its_confirmation() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let name = "actions-one";
    seed_poison(
        &queue,
        name,
        &[("one-a", b"a".to_vec(), "r"), ("one-b", b"b".to_vec(), "r")],
    )
    .await;
    let running = serve(queue.clone(), &[name], |_| {}).await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/{name}");
    let (_, html) = get(&page_url).await;
    let a = handle_of(&html, "one-a");
    let (status, to_confirm) = post_fields(
        &page_url,
        &poison_form(&html, ("one", &one_button(&html, "discard", &a)), &[]),
    )
    .await;
    assert_eq!(status, 303);
    assert!(
        to_confirm.starts_with(&format!("/poison/{name}/confirm/")),
        "{to_confirm}"
    );
    // Shown twice (a reload), exported: nothing is gone.
    let confirm = confirmation(base, &to_confirm).await;
    let again = confirmation(base, &to_confirm).await;
    assert_ne!(confirm.nonce(), again.nonce(), "a nonce per page drawn");
    assert!(
        confirm
            .html
            .contains("Confirming deletes it for good — this one and no other."),
        "one message is an it: {}",
        confirm.html
    );
    assert!(confirm.html.contains("<code>one-a</code>"));
    assert!(!confirm.html.contains("<code>one-b</code>"));
    assert!(
        confirm.html.contains("Discard 1 message</button>"),
        "{}",
        confirm.html
    );
    assert!(
        confirm
            .html
            .contains(&format!("href=\"{}\"", confirm.export()))
    );
    let (status, _) = get(&format!("{base}{}", confirm.export())).await;
    assert_eq!(status, 200);
    assert_eq!(poisoned_ids(&queue, name).await, ["one-a", "one-b"]);
    // A confirmation needs the CSRF token as well.
    let (status, _) = post_fields(
        &format!("{base}{}", confirm.action),
        &[("nonce".to_owned(), confirm.nonce())],
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(poisoned_ids(&queue, name).await, ["one-a", "one-b"]);

    let (status, location) = confirm.submit(base).await;
    assert_eq!(status, 303);
    assert_eq!(
        banner_at(base, &location).await,
        ("Discarded 1 message.".to_owned(), false)
    );
    assert_eq!(poisoned_ids(&queue, name).await, ["one-b"]);
    // The other page's form, sent after: the set is used; nothing is done.
    let (status, location) = again.submit(base).await;
    assert_eq!(status, 303);
    let (text, failed) = banner_at(base, &location).await;
    assert!(text.starts_with("Nothing was done"), "{text}");
    assert!(failed);
    // A reload of the confirmation's page: there is nothing to confirm.
    let (status, page) = get(&format!("{base}{to_confirm}")).await;
    assert_eq!(status, 404);
    assert!(page.contains("Nothing to confirm"), "{page}");
    assert_eq!(poisoned_ids(&queue, name).await, ["one-b"]);
}

/// The export of a set: one JSON line per message, whole — a 3 MB body as text, a body
/// that is not UTF-8 in base64 — with its id, handle, reason, deliveries, time and
/// headers; exporting confirms nothing, and a set used is exported no more.
#[tokio::test]
async fn an_export_gives_each_message_of_the_set_whole_and_confirms_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let name = "actions-export";
    let big_text = format!(
        "{{\"photo\":\"{}\",\"end\":true}}",
        "é".repeat(3 * 1024 * 1024 / 2)
    );
    assert!(big_text.len() > 3 * 1024 * 1024);
    let binary = b"\xff\xfe\x00 not text \x80".to_vec();
    let big_binary: Vec<u8> = (0..3 * 1024 * 1024)
        .map(|i| (i % 251) as u8 | 0x80)
        .collect();
    assert!(std::str::from_utf8(&big_binary).is_err());
    let small = br#"{"zeta":1,"alpha":2}"#.to_vec();
    let messages = [
        ("big-text", big_text.clone().into_bytes()),
        ("binary", binary.clone()),
        ("big-binary", big_binary.clone()),
        ("small", small.clone()),
    ];
    seed_poison(
        &queue,
        name,
        &messages
            .iter()
            .map(|(id, body)| (*id, body.clone(), "export me"))
            .collect::<Vec<_>>(),
    )
    .await;
    let running = serve(queue.clone(), &[name], |_| {}).await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/{name}");
    let (_, html) = get(&page_url).await;
    let all = handles(&html);
    assert_eq!(all.len(), 4);
    let export = |link: String| async move {
        let response = support::console::client()
            .get(format!("{base}{link}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{link}");
        assert_eq!(
            response.headers()["content-type"],
            "application/x-ndjson",
            "{link}"
        );
        let disposition = response.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            disposition.starts_with("attachment; filename=\"poison-actions-export"),
            "{disposition}"
        );
        let text = response.text().await.unwrap();
        text.lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .collect::<Vec<_>>()
    };
    let check = |lines: &[serde_json::Value]| {
        assert_eq!(lines.len(), 4, "one line per message");
        for (line, (id, body)) in lines.iter().zip(&messages) {
            assert_eq!(line["id"], *id);
            assert!(all.contains(&line["handle"].as_str().unwrap().to_owned()));
            assert_eq!(line["reason"], "export me");
            assert_eq!(line["delivery_count"], 1);
            chrono::DateTime::parse_from_rfc3339(line["poisoned_at"].as_str().unwrap())
                .expect("when it was poisoned");
            let headers = line["headers"].as_array().expect("its headers");
            assert!(
                headers
                    .iter()
                    .any(|h| h[0] == "delivery-count" && h[1] == "1"),
                "{headers:?}"
            );
            match std::str::from_utf8(body) {
                Ok(text) => {
                    assert_eq!(line["body"].as_str(), Some(text), "{id} whole, as text");
                    assert!(line.get("body_base64").is_none());
                }
                Err(_) => {
                    assert!(line.get("body").is_none(), "{id}");
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(line["body_base64"].as_str().unwrap())
                        .unwrap();
                    assert!(decoded == *body, "{id} whole, in base64");
                }
            }
        }
    };

    // The selected four, named.
    let (status, to_confirm) = post_fields(
        &page_url,
        &poison_form(
            &html,
            ("action", &selected_button(&html, "discard")),
            &all.iter().map(|h| ("h", h.as_str())).collect::<Vec<_>>(),
        ),
    )
    .await;
    assert_eq!(status, 303, "{to_confirm}");
    let selected = confirmation(base, &to_confirm).await;
    assert!(
        selected.html.contains("Export these 4 messages"),
        "{}",
        selected.html
    );
    check(&export(selected.export()).await);
    // All the filter passes: the same four.
    let (_, to_confirm_all) = post_fields(
        &page_url,
        &poison_form(&html, ("action", "discard-all"), &[]),
    )
    .await;
    let every = confirmation(base, &to_confirm_all).await;
    check(&export(every.export()).await);
    // Exporting confirmed nothing; the confirmations still stand.
    assert_eq!(poisoned_ids(&queue, name).await.len(), 4);
    confirmation(base, &to_confirm).await;

    let (_, location) = selected.submit(base).await;
    assert_eq!(
        banner_at(base, &location).await,
        ("Discarded 4 messages.".to_owned(), false)
    );
    assert!(poisoned_ids(&queue, name).await.is_empty());
    let (status, page) = get(&format!("{base}{}", selected.export())).await;
    assert_eq!(status, 404, "a used set is exported no more");
    assert!(page.contains("Nothing to confirm"), "{page}");
    // The other set is still kept; its messages are gone: an empty export.
    assert!(export(every.export()).await.is_empty());
}

// ---- records ----

/// The action log file holds one JSON line per message an action touched — every one of
/// a bulk discard of 1,499 — each with its record, time, client, role, queue, action,
/// handle, id and result; the page of recent actions shows each action's summary, newest
/// first.
#[tokio::test]
async fn every_message_of_a_bulk_action_is_in_the_action_log() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let name = "actions-log";
    declare(&queue, name).await;
    insert_poison(
        &sqlite_file(&dir),
        name,
        Utc::now(),
        (0..1500)
            .map(|i| {
                (
                    format!("bulk-{i:04}").into_bytes(),
                    b"{}".to_vec(),
                    b"bulk".to_vec(),
                )
            })
            .collect::<Vec<_>>(),
    );
    let log_path = dir.path().join("actions.jsonl");
    let running = serve(queue.clone(), &[name], |o| {
        o.action_log = Some(log_path.clone());
    })
    .await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/{name}");
    let handles_before: Vec<String> = queue
        .poison_list(name, usize::MAX)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.handle)
        .collect();
    assert_eq!(handles_before.len(), 1500);

    // Replay one, then discard all the others.
    let (_, html) = get(&page_url).await;
    let first = handle_of(&html, "bulk-0000");
    let (status, _) = post_fields(
        &page_url,
        &poison_form(&html, ("one", &one_button(&html, "replay", &first)), &[]),
    )
    .await;
    assert_eq!(status, 303);
    let (_, to_confirm) = post_fields(
        &page_url,
        &poison_form(&html, ("action", "discard-all"), &[]),
    )
    .await;
    let confirm = confirmation(base, &to_confirm).await;
    assert!(
        confirm.html.contains("<strong>1,499 messages</strong>"),
        "{}",
        confirm.html
    );
    let (_, location) = confirm.submit(base).await;
    assert_eq!(
        banner_at(base, &location).await,
        ("Discarded 1,499 messages.".to_owned(), false)
    );
    assert!(poisoned_ids(&queue, name).await.is_empty());

    let log = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1500, "one line per message touched");
    for line in &lines {
        for key in [
            "record", "at", "client", "role", "queue", "action", "handle", "result",
        ] {
            assert!(line.get(key).is_some(), "{key} in {line}");
        }
        assert_eq!(line["queue"], name);
        assert_eq!(line["role"], "operator");
        assert_eq!(line["result"], "taken");
        assert!(
            line["client"].as_str().unwrap().starts_with("127.0.0.1:"),
            "{line}"
        );
        chrono::DateTime::parse_from_rfc3339(line["at"].as_str().unwrap()).unwrap();
    }
    assert_eq!(lines[0]["action"], "replay-one");
    assert_eq!(lines[0]["handle"], first.as_str());
    let bulk = &lines[1..];
    assert!(bulk.iter().all(|l| l["action"] == "discard-all"));
    let record = bulk[0]["record"].as_str().unwrap().to_owned();
    assert!(
        bulk.iter().all(|l| l["record"] == record.as_str()),
        "one record"
    );
    assert_ne!(lines[0]["record"], record.as_str());
    let logged: Vec<&str> = bulk.iter().map(|l| l["handle"].as_str().unwrap()).collect();
    assert_eq!(
        logged,
        handles_before[1..],
        "every message of the set, in order"
    );
    for (i, line) in bulk.iter().enumerate() {
        assert_eq!(line["id"], format!("bulk-{:04}", i + 1), "{line}");
    }

    // The page of recent actions: newest first, each with its counts and where its
    // per-message lines are.
    let (status, actions) = get(&format!("{base}/actions")).await;
    assert_eq!(status, 200);
    let discard = actions
        .find(">discard-all<")
        .unwrap_or_else(|| panic!("{actions}"));
    let replay = actions
        .find(">replay-one<")
        .unwrap_or_else(|| panic!("{actions}"));
    assert!(discard < replay, "newest first");
    let row = &actions[discard..replay];
    assert!(row.contains(name), "{row}");
    assert_eq!(
        row.matches("<td class=\"num\">1,499</td>").count(),
        2,
        "{row}"
    );
    assert!(row.contains("Discarded 1,499 messages."), "{row}");
    assert!(
        row.contains(&format!("{} (record {record})", log_path.display())),
        "{row}"
    );
    assert!(actions[replay..].contains("Replayed 1 message."));
}

// ---- the message page ----

/// A message's page: its body whole, pretty in its own key order and raw, its failure
/// with the time in UTC, its headers, and buttons that act; the poison page shows the
/// time in UTC too, the reasons folded.
#[tokio::test]
async fn a_messages_page_shows_its_body_in_key_order_and_its_time_in_utc() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let name = "actions-message";
    declare(&queue, name).await;
    let poisoned_at = Utc.with_ymd_and_hms(2026, 3, 4, 5, 6, 7).unwrap();
    insert_poison(
        &sqlite_file(&dir),
        name,
        poisoned_at,
        [
            (
                b"ordered".to_vec(),
                br#"{"zeta":1,"alpha":2}"#.to_vec(),
                b"NotFound: Current/D1".to_vec(),
            ),
            (b"other".to_vec(), b"plain".to_vec(), b"other".to_vec()),
        ],
    );
    let running = serve(queue.clone(), &[name], |_| {}).await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/{name}");
    let (_, html) = get(&page_url).await;
    // The poison page: the reasons folded, the time in UTC with how long ago under it.
    assert!(html.contains("<details class=\"reasons\">"), "{html}");
    assert!(!html.contains("<details class=\"reasons\" open"), "{html}");
    assert!(
        html.contains(
            "<time datetime=\"2026-03-04T05:06:07+00:00\" title=\"2026-03-04 05:06:07 UTC\">2026-03-04 05:06:07<br><span class=\"muted\">"
        ),
        "{html}"
    );
    assert!(html.contains("days ago</span></time>"), "{html}");
    let handle = handle_of(&html, "ordered");
    let message_url = format!("{page_url}/message/{handle}");
    assert!(html.contains(&format!("href=\"/poison/{name}/message/{handle}\"")));

    let (status, page) = get(&message_url).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("2026-03-04 05:06:07 UTC"), "{page}");
    assert!(page.contains("days ago"), "{page}");
    assert!(page.contains("NotFound: Current/D1"), "{page}");
    assert!(
        page.contains("<td class=\"num\">5</td>"),
        "5 deliveries: {page}"
    );
    let pretty = page
        .find("Body (JSON, keys in their order)")
        .expect("the body, pretty");
    let raw = page.find("Body as sent").expect("the body, raw");
    let (zeta, alpha) = (
        page[pretty..].find("&quot;zeta&quot;: 1").expect("zeta") + pretty,
        page[pretty..].find("&quot;alpha&quot;: 2").expect("alpha") + pretty,
    );
    assert!(zeta < alpha && alpha < raw, "zeta before alpha: {page}");
    assert!(
        page[raw..].contains("{&quot;zeta&quot;:1,&quot;alpha&quot;:2}"),
        "{page}"
    );
    assert!(page.contains("delivery-count"), "its headers: {page}");
    // Its buttons act on it.
    nonce_of_button(&page, "discard", &handle);
    let csrf = field(&page, "csrf");
    let (status, location) = post_fields(
        &page_url,
        &[
            ("csrf".to_owned(), csrf),
            ("one".to_owned(), one_button(&page, "replay", &handle)),
        ],
    )
    .await;
    assert_eq!(status, 303, "{location}");
    assert_eq!(
        banner_at(base, &location).await,
        ("Replayed 1 message.".to_owned(), false)
    );
    assert_eq!(poisoned_ids(&queue, name).await, ["other"]);
    let (status, page) = get(&message_url).await;
    assert_eq!(status, 404);
    assert!(page.contains("no longer in the poison queue"), "{page}");
}

// ---- queues to replay to and to pause ----

/// A replay elsewhere names a declared queue that is not a poison queue: a typo, a
/// poison queue in any case, an empty or reserved name are refused (400) naming the
/// queues it could be, and the messages stay; a declared queue takes them.
async fn a_replay_elsewhere_needs_a_declared_queue(
    queue: AnyQueue,
    name: &str,
    typo: &str,
    target: &str,
) {
    seed_poison(
        &queue,
        name,
        &[("m1", b"1".to_vec(), "r"), ("m2", b"2".to_vec(), "r")],
    )
    .await;
    declare(&queue, target).await;
    let running = serve(queue.clone(), &[name, target], |_| {}).await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/{name}");
    let (_, html) = get(&page_url).await;
    let listed = handles(&html);
    let moveto = selected_button(&html, "moveto");
    let shouted = format!("{}-POISON", name.to_uppercase());
    for to in [
        typo,
        shouted.as_str(),
        &poison_queue(name),
        &poison_queue(target),
        "",
        "amq.reserved",
    ] {
        let mut extra: Vec<(&str, &str)> = listed.iter().map(|h| ("h", h.as_str())).collect();
        extra.push(("to", to));
        for button in [moveto.as_str(), "moveto-all"] {
            let (status, refused) =
                post_fields(&page_url, &poison_form(&html, ("action", button), &extra)).await;
            assert_eq!(status, 400, "{button} to {to:?}: {refused}");
            assert!(refused.contains("It could be: "), "{to:?}: {refused}");
            assert!(refused.contains(target), "{to:?}: {refused}");
            if to == typo || to == shouted {
                assert!(
                    refused.contains("is not a queue tablekit declared"),
                    "{to:?}: {refused}"
                );
            }
            if to.ends_with("-poison") {
                assert!(
                    refused.contains("A poison queue takes no replays"),
                    "{to:?}: {refused}"
                );
            }
        }
        assert_eq!(poisoned_ids(&queue, name).await, ["m1", "m2"], "{to:?}");
        assert_eq!(waiting(&queue, target, 0).await, 0);
    }
    // The refusal leads back to the page with the typed name and the ticked messages.
    let mut extra: Vec<(&str, &str)> = listed.iter().map(|h| ("h", h.as_str())).collect();
    extra.push(("to", typo));
    let (_, refused) =
        post_fields(&page_url, &poison_form(&html, ("action", &moveto), &extra)).await;
    let back = refused
        .split("class=\"back\" href=\"")
        .nth(1)
        .map(|rest| support::console::unescape(&rest[..rest.find('"').unwrap()]))
        .unwrap_or_else(|| panic!("no way back in {refused}"));
    assert_eq!(query_param(&back, "to").as_deref(), Some(typo), "{back}");
    let (status, again) = get(&format!("{base}{back}")).await;
    assert_eq!(status, 200);
    assert!(
        again.contains(&format!(
            "name=\"to\" placeholder=\"another queue\" size=\"14\" value=\"{typo}\""
        )),
        "{again}"
    );
    for handle in &listed {
        assert!(
            again.contains(&format!("name=\"h\" value=\"{handle}\" checked")),
            "{handle}: {again}"
        );
    }
    let mut extra: Vec<(&str, &str)> = listed.iter().map(|h| ("h", h.as_str())).collect();
    extra.push(("to", target));
    let (status, location) =
        post_fields(&page_url, &poison_form(&html, ("action", &moveto), &extra)).await;
    assert_eq!(status, 303, "{location}");
    assert_eq!(
        banner_at(base, &location).await,
        (format!("Replayed 2 messages to {target}."), false)
    );
    assert!(poisoned_ids(&queue, name).await.is_empty());
    assert_eq!(waiting(&queue, target, 2).await, 2);
}

#[tokio::test]
async fn a_replay_elsewhere_needs_a_declared_queue_over_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    a_replay_elsewhere_needs_a_declared_queue(queue, "jobs", "jbos", "jobs-retry").await;
}

/// On RabbitMQ the broker holds queues tablekit derives (`<queue>-retry-<ms>`, the pause
/// marker) and queues other clients declared: a replay into any of them is refused, and
/// the refusal lists exactly the queues a replay may name.
#[tokio::test]
async fn a_replay_into_a_retry_queue_or_a_queue_tablekit_never_declared_is_refused_over_rabbitmq() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let queue = AnyQueue::connect(&url).await.unwrap();
    let name = support::unique("jobs");
    let foreign = support::unique("other-client");
    seed_poison(&queue, &name, &[("m1", b"1".to_vec(), "r")]).await;
    // A queue another client declared on the same broker.
    let other = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
        .await
        .unwrap();
    let channel = other.create_channel().await.unwrap();
    channel
        .queue_declare(
            foreign.as_str().into(),
            lapin::options::QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await
        .unwrap();
    let running = serve(queue.clone(), &[&name], |_| {}).await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/{name}");
    let (_, html) = get(&page_url).await;
    let listed = handles(&html);
    let moveto = selected_button(&html, "moveto");
    let retry = format!("{name}-retry-1000");
    assert!(
        queue.exists(&retry).await.unwrap(),
        "the broker holds {retry}"
    );
    for to in [retry.as_str(), foreign.as_str()] {
        let mut extra: Vec<(&str, &str)> = listed.iter().map(|h| ("h", h.as_str())).collect();
        extra.push(("to", to));
        let (status, refused) =
            post_fields(&page_url, &poison_form(&html, ("action", &moveto), &extra)).await;
        assert_eq!(status, 400, "{to}: {refused}");
        assert!(
            refused.contains(&format!("It could be: {name}.</p>")),
            "exactly the queues accepted: {refused}"
        );
        assert_eq!(poisoned_ids(&queue, &name).await, ["m1"], "{to}");
    }
    let _ = channel
        .queue_delete(
            foreign.as_str().into(),
            lapin::options::QueueDeleteOptions::default(),
        )
        .await;
    delete_rabbit_queues(&queue, &[&name]).await;
}

#[tokio::test]
async fn a_replay_elsewhere_needs_a_declared_queue_over_rabbitmq() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let queue = AnyQueue::connect(&url).await.unwrap();
    let name = support::unique("jobs");
    let target = format!("{name}-retry");
    let typo = format!("{name}-typo");
    a_replay_elsewhere_needs_a_declared_queue(queue.clone(), &name, &typo, &target).await;
    delete_rabbit_queues(&queue, &[&name, &target]).await;
}

/// A refusal names the queues the form could name instead, and only those: for a pause,
/// the queues the console shows that are declared, never a poison queue; for a replay
/// elsewhere, the declared queues (the SQLite queue lists them).
#[tokio::test]
async fn a_refusal_names_only_the_queues_it_could_be() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let (name, gone, ghost) = ("jobs", "jobs-gone", "ghost");
    seed_poison(&queue, name, &[("m1", b"1".to_vec(), "r")]).await;
    declare(&queue, gone).await;
    let poison = poison_queue(name);
    let running = serve(queue.clone(), &[name, gone, ghost, &poison], |_| {}).await;
    let base = running.url.as_str();
    let (_, overview) = get(&format!("{base}/")).await;
    let nonce = form_field(&overview, &pause_form(gone), "nonce");
    rusqlite::Connection::open(sqlite_file(&dir))
        .unwrap()
        .execute(
            "DELETE FROM tablekit_queue_declared WHERE queue = ?1",
            [gone],
        )
        .unwrap();
    let (status, refused) = post_fields(
        &format!("{base}/queues/{gone}"),
        &[
            ("csrf".to_owned(), field(&overview, "csrf")),
            ("nonce".to_owned(), nonce),
            ("pause".to_owned(), "pause".to_owned()),
        ],
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused.contains("It could be: jobs.</p>"),
        "only the declared queue shown that is not a poison queue: {refused}"
    );

    let page_url = format!("{base}/poison/{name}");
    let (_, html) = get(&page_url).await;
    let m1 = handles(&html).remove(0);
    let (status, refused) = post_fields(
        &page_url,
        &poison_form(
            &html,
            ("action", &selected_button(&html, "moveto")),
            &[("h", &m1), ("to", "jbos")],
        ),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused.contains("It could be: jobs.</p>"),
        "only the declared queue: {refused}"
    );
    assert_eq!(poisoned_ids(&queue, name).await, ["m1"]);
}

// ---- Back, in Chromium ----

/// Goes Back until the poison page of `name` shows again (the script reloads a page the
/// browser restores from its back-forward cache): whether a used confirmation's page was
/// passed on the way, and said there was nothing to confirm.
async fn back_to_the_poison_page(client: &fantoccini::Client, name: &str) -> bool {
    let mut passed_a_used_confirmation = false;
    for _ in 0..5 {
        client.back().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let url = client.current_url().await.unwrap();
        if url.path().contains("/confirm/") {
            wait_for(client, |html| html.contains("Nothing to confirm")).await;
            passed_a_used_confirmation = true;
            continue;
        }
        if url.path() == format!("/poison/{name}")
            && url.query().is_some_and(|q| !q.contains("result="))
        {
            return passed_a_used_confirmation;
        }
    }
    panic!(
        "Back never led to the poison page: {}",
        client.current_url().await.unwrap()
    );
}

/// The page shows `source`, as a browser keeps a page it restores (without the
/// console's script reloading it).
async fn restore(client: &fantoccini::Client, source: &str) {
    client
        .execute(
            "document.open(); document.write(arguments[0]); document.close();",
            vec![serde_json::Value::String(source.to_owned())],
        )
        .await
        .unwrap();
}

/// The button `verb` of the row of `handle`.
async fn click_row(client: &fantoccini::Client, handle: &str, verb: &str) {
    client
        .find(fantoccini::Locator::XPath(&format!(
            "//tr[@data-handle='{handle}']//button[starts-with(@value,'{verb}:')]"
        )))
        .await
        .unwrap_or_else(|e| panic!("no {verb} button of {handle}: {e}"))
        .click()
        .await
        .unwrap();
}

/// Discard row A, Back to the poison page, discard row B: B is discarded, each action
/// came back to the third page, and A's forms sent again from pages the browser kept do
/// nothing.
#[tokio::test]
async fn two_discards_with_back_between_them_in_chromium() {
    let Some(browser) = browser(1280, 1000).await else {
        return;
    };
    let client = &browser.client;
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let name = "actions-back";
    declare(&queue, name).await;
    insert_poison(
        &sqlite_file(&dir),
        name,
        Utc::now() - chrono::Duration::minutes(5),
        (1..=300)
            .map(|i| {
                (
                    format!("row-{i:03}").into_bytes(),
                    format!("{{\"row\":{i}}}").into_bytes(),
                    ["timeout after 30 s", "NotFound: Current/D1"][i % 2]
                        .as_bytes()
                        .to_vec(),
                )
            })
            .collect::<Vec<_>>(),
    );
    let running = serve(queue.clone(), &[name], |_| {}).await;
    let base = running.url.clone();
    // The third page of 100: rows 201 to 300.
    let mut third = format!("/poison/{name}?limit=100");
    for _ in 0..2 {
        third = next_link(&page_at(&base, &third).await).expect("a next page");
    }
    let after = query_param(&third, "after").expect("a cursor");
    let on_the_third_page = async |client: &fantoccini::Client| {
        let url = client.current_url().await.unwrap();
        assert_eq!(
            query_param(url.as_str(), "after").as_deref(),
            Some(after.as_str()),
            "back on the third page: {url}"
        );
        assert_eq!(query_param(url.as_str(), "limit").as_deref(), Some("100"));
        let html = client.source().await.unwrap();
        assert!(html.contains("<code>row-201</code>"), "{html}");
        assert!(!html.contains("<code>row-200</code>"), "{html}");
    };
    let left = async || queue.stats(name).await.unwrap().poisoned;

    client.goto(&format!("{base}{third}")).await.unwrap();
    wait_for(client, |html| html.contains("<code>row-300</code>")).await;
    let page_three = client.source().await.unwrap();
    let (a, b) = (
        handle_of(&page_three, "row-210"),
        handle_of(&page_three, "row-250"),
    );
    screenshot(client, "actions-back-third-page").await;

    // Discard A: its button, its confirmation's page, its confirmation.
    click_row(client, &a, "discard").await;
    wait_for(client, |html| {
        html.contains("name=\"confirm\"") && html.contains("<code>row-210</code>")
    })
    .await;
    assert_eq!(left().await, 300, "nothing before the confirmation");
    let confirmation_of_a = client.source().await.unwrap();
    screenshot(client, "actions-back-confirm-a").await;
    click(client, "form button[name='confirm']").await;
    banner(client, "Discarded 1 message.").await;
    on_the_third_page(client).await;
    assert_eq!(left().await, 299);
    assert!(
        !poisoned_ids(&queue, name)
            .await
            .contains(&"row-210".to_owned())
    );
    screenshot(client, "actions-back-after-a").await;

    // Back, through A's used confirmation, to the poison page: drawn again, A gone.
    assert!(
        back_to_the_poison_page(client, name).await,
        "Back passed A's confirmation, with nothing to confirm"
    );
    wait_for(client, |html| {
        html.contains("<code>row-250</code>") && !html.contains("<code>row-210</code>")
    })
    .await;
    screenshot(client, "actions-back-restored").await;

    // Discard B the same way.
    click_row(client, &b, "discard").await;
    wait_for(client, |html| {
        html.contains("name=\"confirm\"") && html.contains("<code>row-250</code>")
    })
    .await;
    click(client, "form button[name='confirm']").await;
    banner(client, "Discarded 1 message.").await;
    on_the_third_page(client).await;
    let ids = poisoned_ids(&queue, name).await;
    assert_eq!(ids.len(), 298);
    assert!(!ids.contains(&"row-250".to_owned()), "B is gone");
    assert!(!ids.contains(&"row-210".to_owned()), "A is gone");
    screenshot(client, "actions-back-after-b").await;

    // A's confirmation as the browser kept its page, sent again: nothing is done.
    restore(client, &confirmation_of_a).await;
    click(client, "form button[name='confirm']").await;
    banner(
        client,
        "Nothing was done: this form had already acted, and acts once. What it did then: Discarded 1 message.",
    )
    .await;
    assert_eq!(left().await, 298);
    screenshot(client, "actions-back-confirmation-again").await;

    // A's Discard on the third page as the browser kept it: a confirmation of a message
    // already gone, which discards nothing and says so.
    restore(client, &page_three).await;
    click_row(client, &a, "discard").await;
    wait_for(client, |html| {
        html.contains("name=\"confirm\"") && html.contains("no id, or already gone")
    })
    .await;
    click(client, "form button[name='confirm']").await;
    banner(client, GONE_ONE).await;
    on_the_third_page(client).await;
    assert_eq!(left().await, 298);
    screenshot(client, "actions-back-discard-again").await;
    browser.client.clone().close().await.unwrap();
}

/// Without `--queue`, the overview shows the queues the SQLite queue's registry lists and
/// those the workers recorded history for, beside `index` and `archive` — each once, and
/// never a poison queue.
#[tokio::test]
async fn without_named_queues_the_overview_shows_the_declared_and_the_served_ones() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    declare(&queue, "orders-declared").await;
    let store = AnyStore::create("memory:").await.unwrap();
    tablekit_workers::activity::write_sample_minutes(
        &store,
        "served-elsewhere",
        "worker-1",
        Utc::now(),
        3,
        |_| tablekit_workers::activity::Counts {
            processed: 1,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), None);
    options.refresh = 1;
    let served = support::console::serve(store, queue, options).await;
    let (status, html) = get(&format!("{}/", served.url)).await;
    assert_eq!(status, 200);
    for name in ["index", "archive", "orders-declared", "served-elsewhere"] {
        assert_eq!(
            html.matches(&format!("href=\"/poison/{name}\"")).count(),
            // The row, and its history chart's caption.
            2,
            "{name} once in the queues and once in the history:\n{html}"
        );
    }
    assert!(!html.contains("orders-declared-poison"));
}

#[tokio::test]
async fn the_poison_pages_refuse_query_values_they_do_not_know_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    seed_poison(&queue, "jobs", &[("m1", b"1".to_vec(), "r")]).await;
    let running = serve(queue.clone(), &["jobs"], |_| {}).await;
    let base = running.url.as_str();
    for (path, parameter) in [
        ("/poison/jobs?order=sideways", "`order`"),
        ("/poison/jobs?limit=0", "`limit`"),
        ("/poison/jobs?limit=zzz", "`limit`"),
        ("/poison/jobs?limit=-1", "`limit`"),
        ("/poison/jobs?back=2", "`back`"),
        ("/poison/jobs?order=newest&order=oldest", "`order`"),
        ("/poison/jobs/reasons?skip=-1", "`skip`"),
    ] {
        let (status, html) = get(&format!("{base}{path}")).await;
        assert_eq!(status, 400, "{path}: {html}");
        assert!(html.contains(parameter), "{path}: {html}");
    }
    for path in [
        "/poison/jobs?order=newest&limit=100&back=1",
        "/poison/jobs/reasons?skip=0",
    ] {
        let (status, html) = get(&format!("{base}{path}")).await;
        assert_eq!(status, 200, "{path}: {html}");
    }
}

/// A dry run of "all" lists the set's reason groups, every message counted: the large
/// group of many distinct reasons first, and what the list leaves out said with its count.
#[tokio::test]
async fn a_dry_run_counts_every_reason_group_of_its_set_and_says_what_it_leaves_out() {
    let dir = tempfile::tempdir().unwrap();
    let queue = sqlite_queue(&dir).await;
    let names = [
        "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
        "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi",
        "chi",
    ];
    let mut seeded: Vec<(String, Vec<u8>, String)> = (0..30)
        .map(|i| {
            (
                format!("c{i}"),
                b"{}".to_vec(),
                format!("conflict on ord-{}", 100 + i),
            )
        })
        .collect();
    seeded.extend(
        names
            .iter()
            .map(|n| (format!("x-{n}"), b"{}".to_vec(), format!("broken {n}"))),
    );
    let as_refs: Vec<(&str, Vec<u8>, &str)> = seeded
        .iter()
        .map(|(id, body, reason)| (id.as_str(), body.clone(), reason.as_str()))
        .collect();
    seed_poison(&queue, "jobs", &as_refs).await;
    let running = serve(queue.clone(), &["jobs"], |_| {}).await;
    let base = running.url.as_str();
    let page_url = format!("{base}/poison/jobs");
    let (_, html) = get(&page_url).await;
    let (status, to_confirm) = post_fields(
        &page_url,
        &poison_form(&html, ("action", "discard-all"), &[]),
    )
    .await;
    assert_eq!(status, 303, "{to_confirm}");
    let confirm = confirmation(base, &to_confirm).await;
    let page = &confirm.html;
    assert!(page.contains("<strong>52 messages</strong>"), "{page}");
    // The group of 30 distinct reasons first, with all 30.
    let first_row = page.split("<td class=\"reason\">").nth(1).unwrap();
    assert!(
        first_row.starts_with("conflict on ord-#</td><td class=\"num\">30</td>"),
        "{page}"
    );
    // 23 groups: 20 listed, the other 3 said, with their messages.
    assert!(
        page.contains("… and 3 more reasons</td><td class=\"num\">3</td>"),
        "{page}"
    );
    assert_eq!(poisoned_ids(&queue, "jobs").await.len(), 52);
}
