//! The console against hostile clients: host names that only start like loopback, token
//! guessing from many clients at once (one wrong answer a second in all, `429` past the
//! waiting cap, the right token never held up), weak tokens refused at bind, a bad queue
//! name answered as the client's fault, and a lost session: the refresh answered `401`
//! and, in Chromium, a notice in place of the live part instead of a nested sign-in page.
//! The layout in Chromium at 800 pixels: no sideways scroll, numbers under their headers.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::browser;
use support::console::{Served, client};

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tablekit_core::AnyStore;
use tablekit_workers::Error;
use tablekit_workers::console::{self, ConsoleOptions};
use tablekit_workers::queue::AnyQueue;

const TOKEN: &str = "a-console-token-0123456789";

/// A console on a free loopback port over an empty store and SQLite queue.
async fn serve(token: Option<&str>, queues: Vec<String>) -> Served {
    let store = AnyStore::connect("memory:").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = AnyQueue::connect(&format!("sqlite:{}", dir.path().join("q.db").display()))
        .await
        .unwrap();
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), token.map(str::to_owned));
    options.refresh = 1;
    options.queues = queues;
    support::console::serve(store, queue, options)
        .await
        .keeping(dir)
}

/// The status of a GET naming `host` in its `Host` header, sent as written.
fn status_for_host(address: SocketAddr, host: &str) -> u16 {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"))
}

#[tokio::test]
async fn host_names_that_only_start_like_loopback_are_refused() {
    let running = serve(None, Vec::new()).await;
    let address = running.address;
    tokio::task::spawn_blocking(move || {
        for host in ["localhost", "127.0.0.1:9465", "[::1]:9465"] {
            assert_eq!(status_for_host(address, host), 200, "{host}");
        }
        for host in [
            "[::1].evil.example",
            "[::1]:9465.evil.example",
            "localhost:9465@evil.example",
            "localhost.evil.example",
            "localhost:80:80",
        ] {
            assert_eq!(status_for_host(address, host), 403, "{host}");
        }
    })
    .await
    .unwrap();
}

/// One wrong guess by the sign-in form, a `Bearer` header or a cookie, by turns: the
/// answer's status and `Retry-After`.
async fn guess(url: &str, turn: usize) -> (u16, Option<String>) {
    let wrong = format!("a-console-token-{turn:010}");
    let request = match turn % 3 {
        0 => client()
            .post(format!("{url}/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={wrong}")),
        1 => client().get(format!("{url}/")).bearer_auth(&wrong),
        _ => client()
            .get(format!("{url}/"))
            .header("cookie", format!("tablekit_console={wrong}")),
    };
    let response = request.send().await.unwrap();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (response.status().as_u16(), retry_after)
}

#[tokio::test]
async fn wrong_tokens_are_answered_one_a_second_across_all_clients_and_the_right_one_at_once() {
    let running = serve(Some(TOKEN), Vec::new()).await;
    let started = Instant::now();
    let answered = Arc::new(AtomicUsize::new(0));
    let mut guesses = tokio::task::JoinSet::new();
    for turn in 0..12 {
        let (url, answered) = (running.url.clone(), answered.clone());
        guesses.spawn(async move {
            let (status, _) = guess(&url, turn).await;
            assert!(matches!(status, 303 | 401), "a wrong token: {status}");
            answered.fetch_add(1, Ordering::SeqCst);
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The right token does not wait behind the wrong ones.
    let right = client()
        .get(format!("{}/", running.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(right.status().as_u16(), 200);
    assert!(
        answered.load(Ordering::SeqCst) < 12,
        "every guess answered first"
    );
    // Twelve guesses from the form, headers and cookies together: in three seconds, at
    // most four of them (one at once, then one a second) have their answer.
    tokio::time::sleep_until((started + Duration::from_secs(3)).into()).await;
    let by_then = answered.load(Ordering::SeqCst);
    assert!(by_then <= 4, "{by_then} wrong tokens answered within 3 s");
    guesses.abort_all();
}

#[tokio::test]
async fn past_the_waiting_cap_wrong_guesses_are_refused_429_at_once() {
    let running = serve(Some(TOKEN), Vec::new()).await;
    let refused = Arc::new(AtomicUsize::new(0));
    let mut guesses = tokio::task::JoinSet::new();
    for turn in 0..24 {
        let (url, refused) = (running.url.clone(), refused.clone());
        guesses.spawn(async move {
            if let (429, retry_after) = guess(&url, 1 + 3 * turn).await {
                assert_eq!(retry_after.as_deref(), Some("1"));
                refused.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    // Sixteen wait for their turn; the others are refused at once (before the fix, every
    // one was answered as a wrong token within the second).
    let deadline = Instant::now() + Duration::from_secs(10);
    while refused.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no guess was refused with 429");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    guesses.abort_all();
}

#[tokio::test]
async fn weak_tokens_are_refused_when_the_console_binds() {
    let store = AnyStore::connect("memory:").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = AnyQueue::connect(&format!("sqlite:{}", dir.path().join("q.db").display()))
        .await
        .unwrap();
    let any: SocketAddr = "0.0.0.0:0".parse().unwrap();
    for (weak, says) in [
        (" ".repeat(16), "whitespace"),
        ("abcdefgh\tijklmnop".to_owned(), "whitespace"),
        ("x".repeat(40), "different characters"),
        ("abcabcabcabcabcabc".to_owned(), "different characters"),
    ] {
        let refused = console::bind(
            store.clone(),
            queue.clone(),
            ConsoleOptions::new(any, Some(weak.clone())),
        )
        .await
        .expect_err("a weak token");
        assert!(matches!(refused, Error::Config(_)), "{weak:?}: {refused}");
        assert!(refused.to_string().contains(says), "{weak:?}: {refused}");
    }
}

#[tokio::test]
async fn an_invalid_queue_name_is_the_clients_fault() {
    let running = serve(None, Vec::new()).await;
    let response = client()
        .get(format!("{}/poison/amq.bad", running.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
}

#[tokio::test]
async fn without_the_session_the_refresh_is_answered_401_and_a_page_goes_to_the_sign_in() {
    let running = serve(Some(TOKEN), Vec::new()).await;
    let url = &running.url;
    let live = client().get(format!("{url}/live")).send().await.unwrap();
    assert_eq!(live.status().as_u16(), 401);
    let scripted = client()
        .get(format!("{url}/"))
        .header("x-tablekit-fetch", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(scripted.status().as_u16(), 401);
    let page = client().get(format!("{url}/")).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 303);
    assert_eq!(page.headers()["location"], "/login");
    // The live part itself carries the marker the script looks for.
    let live = client()
        .get(format!("{url}/live"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(live.status().as_u16(), 200);
    assert_eq!(live.headers()["x-tablekit-live"], "1");
}

// ---- in Chromium ----

#[tokio::test]
async fn in_chromium_a_lost_session_shows_a_notice_instead_of_a_nested_sign_in_page() {
    let Some(browser) = browser::browser(1280, 1000).await else {
        return;
    };
    let client = &browser.client;
    let running = serve(Some(TOKEN), Vec::new()).await;
    client
        .goto(&format!("{}/login", running.url))
        .await
        .unwrap();
    let form = client.form(fantoccini::Locator::Css("form")).await.unwrap();
    form.set_by_name("token", TOKEN).await.unwrap();
    client
        .find(fantoccini::Locator::Css("form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    client
        .wait()
        .for_element(fantoccini::Locator::Id("live"))
        .await
        .unwrap();
    client.delete_cookie("tablekit_console").await.unwrap();
    // The next refresh (every second) finds the session gone.
    let notice = client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(fantoccini::Locator::Id("signed-out"))
        .await
        .unwrap();
    let text = notice.text().await.unwrap();
    assert!(text.contains("Signed out"), "{text}");
    let link = notice.find(fantoccini::Locator::Css("a")).await.unwrap();
    assert_eq!(link.attr("href").await.unwrap().as_deref(), Some("/login"));
    // Two more refreshes' time: nothing is pasted in.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let nested: Vec<_> = client
        .find_all(fantoccini::Locator::Css(
            "#live input[type=password], #live form[action='/login']",
        ))
        .await
        .unwrap();
    assert!(nested.is_empty(), "{}", client.source().await.unwrap());
    assert_eq!(
        client
            .find_all(fantoccini::Locator::Id("signed-out"))
            .await
            .unwrap()
            .len(),
        1
    );
    browser.client.clone().close().await.unwrap();
}

#[tokio::test]
async fn in_chromium_at_800_pixels_the_overview_fits_and_numbers_sit_under_their_headers() {
    let Some(browser) = browser::browser(800, 900).await else {
        return;
    };
    let client = &browser.client;
    // Long queue names: they wrap rather than widen the page.
    let long = format!("orders-{}", "x".repeat(90));
    let running = serve(None, vec![long, "index".into()]).await;
    client.goto(&format!("{}/", running.url)).await.unwrap();
    client
        .wait()
        .for_element(fantoccini::Locator::Css("#live th.num"))
        .await
        .unwrap();
    let measured = client
        .execute(
            "return [document.documentElement.scrollWidth, window.innerWidth,
                     getComputedStyle(document.querySelector('#live th.num')).textAlign,
                     getComputedStyle(document.querySelector('#live td.num')).textAlign];",
            Vec::new(),
        )
        .await
        .unwrap();
    let measured = measured.as_array().unwrap();
    let (scroll_width, inner_width) =
        (measured[0].as_u64().unwrap(), measured[1].as_u64().unwrap());
    assert!(inner_width <= 800, "the window is {inner_width} wide");
    assert!(
        scroll_width <= inner_width,
        "the page is {scroll_width} px wide in a {inner_width} px window"
    );
    assert_eq!(measured[2], "right", "a numeric header");
    assert_eq!(measured[3], "right", "a numeric cell");
    browser.client.clone().close().await.unwrap();
}
