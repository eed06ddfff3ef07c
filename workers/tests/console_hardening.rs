//! The console against hostile clients: host names that only start like loopback, ports
//! out of range and two `Host` headers; token guessing (one wrong answer a second per
//! address and four a second in all, `429` past the waiting bounds, and sixteen flooding
//! addresses never holding up the operator's right token), summarised in the log; weak
//! tokens refused at bind; sessions (the cookie holds no part of the token, `Secure`
//! behind TLS, signing out ends it); the viewer role (reads, may not act); a bad queue
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
use tablekit_workers::console::{self, ConsoleOptions};
use tablekit_workers::queue::{AnyQueue, Queue};
use tablekit_workers::{Error, WorkerConfig};

const TOKEN: &str = "a-console-token-0123456789";

const VIEWER_TOKEN: &str = "a-viewer-token-9876543210";

/// A console on a free loopback port over an empty store and SQLite queue.
async fn serve(token: Option<&str>, queues: Vec<String>) -> Served {
    serve_with(token, queues, |_| {}).await
}

/// [`serve`], with the options changed by `change`; the queues shown are declared first.
async fn serve_with(
    token: Option<&str>,
    queues: Vec<String>,
    change: impl FnOnce(&mut ConsoleOptions),
) -> Served {
    let store = AnyStore::create("memory:").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = AnyQueue::connect(&format!("sqlite:{}", dir.path().join("q.db").display()))
        .await
        .unwrap();
    for name in &queues {
        queue
            .declare(name, &WorkerConfig::new(name).queue_options())
            .await
            .unwrap();
    }
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), token.map(str::to_owned));
    options.refresh = 1;
    options.queues = queues;
    change(&mut options);
    support::console::serve(store, queue, options)
        .await
        .keeping(dir)
}

/// A client whose connections leave from `source` (a loopback address of its own).
fn client_from(source: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(std::net::IpAddr::from(source))
        .build()
        .unwrap()
}

/// The status of a GET naming `host` in its `Host` header, sent as written.
fn status_for_host(address: SocketAddr, host: &str) -> u16 {
    status_for_hosts(address, &[host])
}

/// The status of a GET with one `Host` header for each of `hosts`, sent as written (with
/// the token, for a console that has it).
fn status_for_hosts(address: SocketAddr, hosts: &[&str]) -> u16 {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let hosts: String = hosts.iter().map(|h| format!("Host: {h}\r\n")).collect();
    write!(
        stream,
        "GET / HTTP/1.1\r\n{hosts}Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
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
            "localhost:99999",
            "localhost:65536",
            "localhost:0",
            "127.0.0.1:+80",
        ] {
            assert_eq!(status_for_host(address, host), 403, "{host}");
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn two_host_headers_are_refused_400_by_every_console() {
    let open = serve(None, Vec::new()).await;
    let guarded = serve(Some(TOKEN), Vec::new()).await;
    let (open_address, guarded_address) = (open.address, guarded.address);
    tokio::task::spawn_blocking(move || {
        for address in [open_address, guarded_address] {
            assert_eq!(status_for_hosts(address, &["localhost"]), 200);
            for hosts in [
                ["localhost", "evil.example"],
                ["evil.example", "localhost"],
                ["localhost", "localhost"],
            ] {
                assert_eq!(status_for_hosts(address, &hosts), 400, "{hosts:?}");
            }
        }
    })
    .await
    .unwrap();
}

/// One wrong guess from `http` by the sign-in form or a `Bearer` header, by turns: the
/// answer's status and `Retry-After`.
async fn guess(http: &reqwest::Client, url: &str, turn: usize) -> (u16, Option<String>) {
    let wrong = format!("a-console-token-{turn:010}");
    let request = match turn % 2 {
        0 => http
            .post(format!("{url}/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={wrong}")),
        _ => http.get(format!("{url}/")).bearer_auth(&wrong),
    };
    let response = request.send().await.unwrap();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (response.status().as_u16(), retry_after)
}

#[tokio::test]
async fn wrong_tokens_of_one_address_are_answered_one_a_second_the_rest_refused_429() {
    let running = serve(Some(TOKEN), Vec::new()).await;
    let guesser = client_from([127, 0, 1, 1]);
    let started = Instant::now();
    let (answered, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut guesses = tokio::task::JoinSet::new();
    for turn in 0..12 {
        let (guesser, url) = (guesser.clone(), running.url.clone());
        let (answered, refused) = (answered.clone(), refused.clone());
        guesses.spawn(async move {
            match guess(&guesser, &url, turn).await {
                (303 | 401, _) => answered.fetch_add(1, Ordering::SeqCst),
                (429, retry_after) => {
                    assert_eq!(retry_after.as_deref(), Some("1"));
                    refused.fetch_add(1, Ordering::SeqCst)
                }
                (status, _) => panic!("a wrong token: {status}"),
            };
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The right token, from an address that did not guess, does not wait.
    let asked = Instant::now();
    let right = client_from([127, 0, 1, 2])
        .get(format!("{}/", running.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(right.status().as_u16(), 200);
    assert!(
        asked.elapsed() < Duration::from_millis(500),
        "{:?}",
        asked.elapsed()
    );
    // One answered at once; then at most four wait their turn (one a second, the first
    // of them counted while it is answered), the others refused at once, their tokens not
    // compared.
    let refused_at_once = refused.load(Ordering::SeqCst);
    assert!(
        matches!(refused_at_once, 7 | 8),
        "{refused_at_once} refused at once"
    );
    tokio::time::sleep_until((started + Duration::from_millis(2900)).into()).await;
    let by_then = answered.load(Ordering::SeqCst);
    assert!(by_then <= 3, "{by_then} wrong tokens answered within 2.9 s");
    while let Some(done) = guesses.join_next().await {
        done.unwrap();
    }
    assert_eq!(answered.load(Ordering::SeqCst), 12 - refused_at_once);
    assert_eq!(refused.load(Ordering::SeqCst), refused_at_once);
    assert!(started.elapsed() >= Duration::from_secs(3));
}

#[tokio::test]
async fn wrong_tokens_from_many_addresses_are_answered_four_a_second_in_all() {
    let running = serve(Some(TOKEN), Vec::new()).await;
    let started = Instant::now();
    let answered = Arc::new(AtomicUsize::new(0));
    let mut guesses = tokio::task::JoinSet::new();
    for turn in 0..12u8 {
        let (url, answered) = (running.url.clone(), answered.clone());
        guesses.spawn(async move {
            let guesser = client_from([127, 0, 2, 1 + turn]);
            let (status, _) = guess(&guesser, &url, usize::from(turn)).await;
            assert!(matches!(status, 303 | 401), "a wrong token: {status}");
            answered.fetch_add(1, Ordering::SeqCst);
        });
    }
    // Twelve addresses guessing once each: one answer every 250 ms in all.
    tokio::time::sleep_until((started + Duration::from_millis(900)).into()).await;
    let by_then = answered.load(Ordering::SeqCst);
    assert!(by_then <= 4, "{by_then} wrong tokens answered within 0.9 s");
    while let Some(done) = guesses.join_next().await {
        done.unwrap();
    }
    assert!(started.elapsed() >= Duration::from_millis(2750));
}

#[tokio::test]
async fn a_cookie_is_a_session_id_never_compared_as_a_token() {
    let running = serve(Some(TOKEN), Vec::new()).await;
    // The token itself in the cookie is no session: signed out, at once, every time.
    for _ in 0..20 {
        let asked = Instant::now();
        let response = client()
            .get(format!("{}/", running.url))
            .header("cookie", format!("tablekit_console={TOKEN}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 303);
        assert_eq!(response.headers()["location"], "/login");
        assert!(asked.elapsed() < Duration::from_millis(500));
    }
}

#[tokio::test]
async fn past_the_waiting_cap_wrong_guesses_are_refused_429_at_once() {
    let running = serve(Some(TOKEN), Vec::new()).await;
    let refused = Arc::new(AtomicUsize::new(0));
    let mut guesses = tokio::task::JoinSet::new();
    let guesser = client_from([127, 0, 3, 1]);
    for turn in 0..24 {
        let (guesser, url, refused) = (guesser.clone(), running.url.clone(), refused.clone());
        guesses.spawn(async move {
            if let (429, retry_after) = guess(&guesser, &url, 1 + 2 * turn).await {
                assert_eq!(retry_after.as_deref(), Some("1"));
                refused.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    // Four of this address wait for their turn; the others are refused at once, their
    // tokens not compared.
    let deadline = Instant::now() + Duration::from_secs(10);
    while refused.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no guess was refused with 429");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    guesses.abort_all();
}

#[tokio::test]
async fn weak_tokens_are_refused_when_the_console_binds() {
    let store = AnyStore::create("memory:").await.unwrap();
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
        // Sixty-four bits: hopeless to guess only at a pace that would slow the operator.
        ("0123456789abcdef".to_owned(), "openssl rand -hex 32"),
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

/// A client whose connections leave from `source`.
fn client_from_ip(source: std::net::IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(source)
        .build()
        .unwrap()
}

/// What a flood did while the operator asked.
struct Flood {
    /// The operator's slowest answer.
    slowest: Duration,
    /// Wrong tokens answered (at their slots).
    answered_wrong: usize,
    /// Wrong tokens refused `429` at once.
    refused: usize,
    /// How long the flood lasted.
    lasted: Duration,
}

/// Floods the console at `url` with wrong tokens from each of `flooders` (eight requests
/// in flight each, each asking again as soon as it is answered, a breath after a `429`)
/// while the operator, from `operator`, asks twenty times with the right token, each
/// `extra` header sent too: every one of the operator's answers must be `200`.
async fn flood_while_the_operator_asks(
    url: &str,
    flooders: &[std::net::IpAddr],
    operator: std::net::IpAddr,
    extra: Option<(&'static str, &'static str)>,
) -> Flood {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (refused, answered_wrong) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let flood_started = Instant::now();
    let mut flood = tokio::task::JoinSet::new();
    for (client, address) in flooders.iter().enumerate() {
        let http = client_from_ip(*address);
        for lane in 0..8usize {
            let (http, url, stop) = (http.clone(), url.to_owned(), stop.clone());
            let (refused, answered_wrong) = (refused.clone(), answered_wrong.clone());
            flood.spawn(async move {
                let mut turn = lane;
                while !stop.load(Ordering::SeqCst) {
                    let wrong = format!("a-console-token-{client:04}{turn:06}");
                    let mut request = match turn % 2 {
                        0 => http.get(format!("{url}/")).bearer_auth(&wrong),
                        _ => http
                            .post(format!("{url}/login"))
                            .header("content-type", "application/x-www-form-urlencoded")
                            .body(format!("token={wrong}")),
                    };
                    if let Some((name, value)) = extra {
                        request = request.header(name, value);
                    }
                    turn += 8;
                    let Ok(response) = request.send().await else {
                        continue;
                    };
                    match response.status().as_u16() {
                        429 => {
                            refused.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(25)).await;
                        }
                        303 | 401 | 403 => {
                            answered_wrong.fetch_add(1, Ordering::SeqCst);
                        }
                        other => panic!("a wrong token answered {other}"),
                    }
                }
            });
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let http = client_from_ip(operator);
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let asked = Instant::now();
        let mut request = http.get(format!("{url}/")).bearer_auth(TOKEN);
        if let Some((name, value)) = extra {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        let took = asked.elapsed();
        assert_eq!(
            response.status().as_u16(),
            200,
            "the operator's right token"
        );
        assert!(
            took < Duration::from_secs(1),
            "the right token took {took:?}"
        );
        slowest = slowest.max(took);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    stop.store(true, Ordering::SeqCst);
    flood.abort_all();
    let flood = Flood {
        slowest,
        answered_wrong: answered_wrong.load(Ordering::SeqCst),
        refused: refused.load(Ordering::SeqCst),
        lasted: flood_started.elapsed(),
    };
    eprintln!(
        "during a {:?} flood from {} addresses: the operator's slowest answer {:?}; {} wrong tokens answered, {} refused 429",
        flood.lasted,
        flooders.len(),
        flood.slowest,
        flood.answered_wrong,
        flood.refused
    );
    assert!(flood.refused > 0, "no flooder was refused 429");
    assert!(flood.answered_wrong > 0, "no wrong token was answered");
    // Four wrong answers a second in all.
    let bound = 4 * (flood.lasted.as_secs() as usize + 2);
    assert!(
        flood.answered_wrong <= bound,
        "{} wrong tokens answered in {:?}",
        flood.answered_wrong,
        flood.lasted
    );
    flood
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_flooding_clients_never_hold_up_the_operators_right_token() {
    let logs = support::logs();
    let running = serve(Some(TOKEN), Vec::new()).await;
    let flooders: Vec<std::net::IpAddr> = (0..16u8)
        .map(|n| std::net::IpAddr::from([127, 0, 0, 2 + n]))
        .collect();
    flood_while_the_operator_asks(
        &running.url,
        &flooders,
        std::net::IpAddr::from([127, 0, 0, 1]),
        None,
    )
    .await;
    // The log tells of it in a few summary lines, never one line per request.
    let deadline = Instant::now() + Duration::from_secs(15);
    let summaries = loop {
        let text = logs.text();
        let summaries: Vec<String> = text
            .lines()
            .filter(|l| {
                l.contains("(too many tokens waiting (429)) from") && l.contains("127.0.0.")
            })
            .map(str::to_owned)
            .collect();
        if summaries.iter().any(|l| l.contains(" more) since ")) {
            break summaries;
        }
        assert!(
            Instant::now() < deadline,
            "no summary of the flood in the log:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(summaries.len() <= 4, "{summaries:#?}");
    assert!(
        summaries.iter().all(|l| l.contains("WARN")),
        "{summaries:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wrong_tokens_from_the_operators_own_address_never_hold_up_its_right_token() {
    // Behind a proxy, or on one host: the flood and the operator share one address.
    let running = serve(Some(TOKEN), Vec::new()).await;
    let shared = std::net::IpAddr::from([127, 0, 0, 1]);
    let flooders = vec![shared; 12];
    flood_while_the_operator_asks(&running.url, &flooders, shared, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_ipv6_loopback_a_flood_never_holds_up_the_operators_right_token() {
    let running = serve_with(Some(TOKEN), Vec::new(), |options| {
        options.bind = "[::1]:0".parse().unwrap();
    })
    .await;
    let url = format!("http://{}", running.address);
    let loopback: std::net::IpAddr = "::1".parse().unwrap();
    flood_while_the_operator_asks(&url, &[loopback, loopback], loopback, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn behind_a_trusted_proxy_the_operator_is_served_and_records_name_the_forwarded_client() {
    let running = serve_with(Some(TOKEN), vec!["index".to_owned()], |options| {
        options.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
    })
    .await;
    // Every request comes from the proxy's address, each naming its client.
    let proxy = std::net::IpAddr::from([127, 0, 0, 1]);
    let flooders = vec![proxy; 16];
    flood_while_the_operator_asks(
        &running.url,
        &flooders,
        proxy,
        Some(("x-forwarded-for", "198.51.100.7")),
    )
    .await;
    // An action through the proxy is recorded with the client it forwarded.
    let http = client_from_ip(proxy);
    let cookie = {
        let response = http
            .post(format!("{}/login", running.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("forwarded", "for=\"[2001:db8::7]:4711\"")
            .body(format!("token={TOKEN}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 303);
        set_cookie(&response)
    };
    let (clients, actions) = pause_index_through(
        &http,
        &running.url,
        Some(&cookie),
        ("forwarded", "for=\"[2001:db8::7]:4711\""),
    )
    .await;
    assert_eq!(clients, vec!["[2001:db8::7]:4711"], "{actions}");
}

/// Pauses the queue `index` from the overview through `http` (signed in with `cookie`
/// on a console with a token, else on loopback), sending the forwarding header `claim`:
/// the clients of the actions recorded since, and the API's answer.
async fn pause_index_through(
    http: &reqwest::Client,
    url: &str,
    cookie: Option<&str>,
    claim: (&str, &str),
) -> (Vec<String>, serde_json::Value) {
    let with_cookie = |request: reqwest::RequestBuilder| match cookie {
        Some(cookie) => request.header("cookie", cookie),
        None => request,
    };
    let page = with_cookie(http.get(format!("{url}/")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let marker = support::console::pause_form("index");
    let csrf = support::console::form_field(&page, &marker, "csrf");
    let nonce = support::console::form_field(&page, &marker, "nonce");
    let paused = with_cookie(http.post(format!("{url}/queues/index")))
        .header("content-type", "application/x-www-form-urlencoded")
        .header(claim.0, claim.1)
        .body(format!("csrf={csrf}&nonce={nonce}&pause=pause"))
        .send()
        .await
        .unwrap();
    assert_eq!(paused.status().as_u16(), 303);
    let mut actions = http.get(format!("{url}/api/actions"));
    if cookie.is_some() {
        actions = actions.bearer_auth(TOKEN);
    }
    let actions: serde_json::Value = actions
        .send()
        .await
        .unwrap()
        .text()
        .await
        .map(|text| serde_json::from_str(&text).unwrap())
        .unwrap();
    let clients = actions["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["client"].as_str().map(str::to_owned))
        .collect();
    (clients, actions)
}

#[tokio::test]
async fn a_request_from_outside_the_trusted_proxies_is_its_own_client_whatever_it_claims() {
    let running = serve_with(None, vec!["index".to_owned()], |options| {
        options.trusted_proxies = vec!["10.0.0.0/8".parse().unwrap()];
    })
    .await;
    let http = client_from([127, 0, 0, 9]);
    let (clients, actions) = pause_index_through(
        &http,
        &running.url,
        None,
        ("x-forwarded-for", "198.51.100.7"),
    )
    .await;
    let client = clients.first().cloned().unwrap_or_default();
    assert!(client.starts_with("127.0.0.9:"), "{actions}");
}

/// Signs in with `token` by the form: the answer.
async fn sign_in(url: &str, token: &str) -> reqwest::Response {
    client()
        .post(format!("{url}/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap()
}

/// The `Set-Cookie` header of an answer.
fn set_cookie(response: &reqwest::Response) -> String {
    response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// The console's CSRF token, read from a page the operator's token opens.
async fn csrf_token(url: &str) -> String {
    let page = client()
        .get(format!("{url}/"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let start = page
        .find("name=\"csrf\" value=\"")
        .unwrap_or_else(|| panic!("no CSRF token in {page}"))
        + "name=\"csrf\" value=\"".len();
    page[start..].split('"').next().unwrap().to_owned()
}

/// A POST of `form` with `cookie`: the answer.
async fn post_with_cookie(url: &str, cookie: &str, form: &str) -> reqwest::Response {
    client()
        .post(url)
        .header("cookie", cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form.to_owned())
        .send()
        .await
        .unwrap()
}

/// The status of a GET of `path` with `cookie`.
async fn status_with_cookie(url: &str, path: &str, cookie: &str) -> u16 {
    client()
        .get(format!("{url}{path}"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn the_cookie_holds_no_part_of_the_token_and_signing_out_makes_it_useless() {
    let running = serve(Some(TOKEN), Vec::new()).await;
    let url = &running.url;
    let response = sign_in(url, TOKEN).await;
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(response.headers()["location"], "/");
    let header = set_cookie(&response);
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(header.contains(attribute), "{header}");
    }
    assert!(!header.contains("Secure"), "not behind TLS: {header}");
    let cookie = header.split(';').next().unwrap().to_owned();
    let id = cookie.strip_prefix("tablekit_console=").unwrap();
    assert_eq!(id.len(), 64, "{id}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    for window in TOKEN.as_bytes().windows(6) {
        let part = std::str::from_utf8(window).unwrap();
        assert!(!id.contains(part), "{part:?} of the token in {header}");
    }
    assert_eq!(status_with_cookie(url, "/", &cookie).await, 200);
    // Signing out needs the console's CSRF token: without it nothing changes.
    let csrf = csrf_token(url).await;
    let refused = post_with_cookie(&format!("{url}/logout"), &cookie, "csrf=stale").await;
    assert_eq!(refused.status().as_u16(), 403);
    assert_eq!(status_with_cookie(url, "/", &cookie).await, 200);
    let signed_out =
        post_with_cookie(&format!("{url}/logout"), &cookie, &format!("csrf={csrf}")).await;
    assert_eq!(signed_out.status().as_u16(), 303);
    assert_eq!(signed_out.headers()["location"], "/login");
    let cleared = set_cookie(&signed_out);
    assert!(
        cleared.starts_with("tablekit_console=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    // The old cookie is no session any more: signed out, as with no cookie at all.
    assert_eq!(status_with_cookie(url, "/", &cookie).await, 303);
    assert_eq!(status_with_cookie(url, "/live", &cookie).await, 401);
    // A bearer token still opens the console directly.
    assert_eq!(csrf_token(url).await, csrf);
}

#[tokio::test]
async fn behind_tls_the_cookie_is_secure() {
    let running = serve_with(Some(TOKEN), Vec::new(), |o| o.behind_tls = true).await;
    let header = set_cookie(&sign_in(&running.url, TOKEN).await);
    assert!(header.contains("; Secure"), "{header}");
    assert!(header.contains("HttpOnly") && header.contains("SameSite=Strict"));
}

#[tokio::test]
async fn a_viewer_reads_every_page_and_may_not_act() {
    let running = serve_with(Some(TOKEN), Vec::new(), |o| {
        o.viewer_token = Some(VIEWER_TOKEN.to_owned());
    })
    .await;
    let url = &running.url;
    let csrf = csrf_token(url).await;
    // By a bearer header.
    for path in ["/", "/live", "/poison/index"] {
        let response = client()
            .get(format!("{url}{path}"))
            .bearer_auth(VIEWER_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
    }
    for path in ["/jobs", "/queues/index", "/poison/index"] {
        let response = client()
            .post(format!("{url}{path}"))
            .bearer_auth(VIEWER_TOKEN)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("csrf={csrf}&kind=audit"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 403, "{path}");
        let text = response.text().await.unwrap();
        assert!(text.contains("signed in as viewer"), "{path}: {text}");
    }
    // Signed in by the form.
    let cookie = set_cookie(&sign_in(url, VIEWER_TOKEN).await)
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(status_with_cookie(url, "/", &cookie).await, 200);
    let refused = post_with_cookie(&format!("{url}/jobs"), &cookie, &format!("csrf={csrf}")).await;
    assert_eq!(refused.status().as_u16(), 403);
    // The viewer may sign out.
    let signed_out =
        post_with_cookie(&format!("{url}/logout"), &cookie, &format!("csrf={csrf}")).await;
    assert_eq!(signed_out.status().as_u16(), 303);
    assert_eq!(status_with_cookie(url, "/", &cookie).await, 303);
    // The operator's POST passes the guard (the form's own checks answer it).
    let operator = client()
        .post(format!("{url}/jobs"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("kind=audit")
        .send()
        .await
        .unwrap();
    let text = operator.text().await.unwrap();
    assert!(!text.contains("signed in as viewer"), "{text}");
}

#[tokio::test]
async fn a_viewer_token_without_a_token_or_equal_to_it_is_refused_at_bind() {
    let store = AnyStore::create("memory:").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = AnyQueue::connect(&format!("sqlite:{}", dir.path().join("q.db").display()))
        .await
        .unwrap();
    for (token, says) in [(None, "no token"), (Some(VIEWER_TOKEN), "different")] {
        let mut options =
            ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), token.map(str::to_owned));
        options.viewer_token = Some(VIEWER_TOKEN.to_owned());
        let refused = console::bind(store.clone(), queue.clone(), options)
            .await
            .expect_err("a viewer token refused");
        assert!(refused.to_string().contains(says), "{refused}");
    }
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

#[tokio::test]
async fn every_answer_carries_a_request_id_and_pages_are_gzipped_for_clients_that_ask() {
    let running = serve(Some(TOKEN), Vec::new()).await;
    let page = client()
        .get(format!("{}/", running.url))
        .bearer_auth(TOKEN)
        .header("accept-encoding", "gzip")
        .header("x-request-id", "from-the-client-1")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    assert_eq!(page.headers()["content-encoding"], "gzip");
    assert_eq!(page.headers()["x-request-id"], "from-the-client-1");
    // A refusal carries a fresh one.
    let refused = client()
        .get(format!("{}/api/status", running.url))
        .send()
        .await
        .unwrap();
    let id = refused.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(id.len(), 36, "a UUID: {id}");
}
