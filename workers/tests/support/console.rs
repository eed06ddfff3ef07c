//! A console served in the background for the console's tests, an HTTP client that
//! shows redirects instead of following them, and readers of the console's pages: their
//! forms, each button's nonce, the banner, a confirmation submitted as the page has it.

// Not every test binary uses every helper.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use tablekit_core::AnyStore;
use tablekit_workers::WorkerConfig;
use tablekit_workers::console::{self, ConsoleOptions};
use tablekit_workers::queue::{AnyQueue, ConsumeOptions, Consumer, Delivery, Queue};

/// A console serving in the background until dropped (with whatever it must outlive).
pub(crate) struct Served {
    pub(crate) url: String,
    pub(crate) address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _kept: Option<tempfile::TempDir>,
}

impl Served {
    /// Keeps `dir` (the queue's file, say) until the console stops.
    pub(crate) fn keeping(mut self, dir: tempfile::TempDir) -> Self {
        self._kept = Some(dir);
        self
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Binds a console over `store` and `broker` and serves it in the background.
pub(crate) async fn serve(store: AnyStore, broker: AnyQueue, options: ConsoleOptions) -> Served {
    let bound = console::bind(store, broker, options).await.unwrap();
    let address = bound.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(bound.serve(async move {
        let _ = stopped.await;
    }));
    Served {
        url: format!("http://{address}"),
        address,
        stop: Some(stop),
        _kept: None,
    }
}

/// An HTTP client that returns redirects as they are.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

// ---- HTTP ----

/// A GET: the status and the body.
pub(crate) async fn get(url: &str) -> (u16, String) {
    let response = client().get(url).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// A form POST with `extra` headers: the status, and the `Location` of a redirect or else
/// the body.
pub(crate) async fn post_with(
    url: &str,
    form: &[(&str, &str)],
    extra: &[(&str, &str)],
) -> (u16, String) {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let mut request = client()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let location = response
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned());
    (
        response.status().as_u16(),
        location.unwrap_or(response.text().await.unwrap()),
    )
}

/// A form POST: the status, and the `Location` of a redirect or else the body.
pub(crate) async fn post(url: &str, form: &[(&str, &str)]) -> (u16, String) {
    post_with(url, form, &[]).await
}

/// A form POST of owned pairs (a page's fields and a button).
pub(crate) async fn post_fields(url: &str, form: &[(String, String)]) -> (u16, String) {
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    post(url, &pairs).await
}

// ---- reading pages ----

/// An attribute value as the page carries it, its escapes undone.
pub(crate) fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The value of the first element with `name="<name>" value="…"`, unescaped.
pub(crate) fn field(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let at = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} field in {html}"));
    let rest = &html[at + marker.len()..];
    unescape(&rest[..rest.find('"').unwrap()])
}

/// The first form (`<form …>…</form>`) of the page whose markup contains `marker`.
pub(crate) fn form<'a>(html: &'a str, marker: &str) -> &'a str {
    let mut from = 0;
    while let Some(start) = html[from..].find("<form").map(|at| from + at) {
        let end = html[start..]
            .find("</form>")
            .map_or(html.len(), |at| start + at + 7);
        if html[start..end].contains(marker) {
            return &html[start..end];
        }
        from = end;
    }
    panic!("no form with {marker:?} in {html}")
}

/// The hidden fields of a form, in order, unescaped.
pub(crate) fn hidden_fields(form: &str) -> Vec<(String, String)> {
    let marker = "<input type=\"hidden\" name=\"";
    form.match_indices(marker)
        .map(|(at, _)| {
            let rest = &form[at + marker.len()..];
            let name_end = rest.find('"').unwrap();
            let name = rest[..name_end].to_owned();
            let rest = &rest[name_end..];
            let value_at = rest.find("value=\"").unwrap() + 7;
            let rest = &rest[value_at..];
            (name, unescape(&rest[..rest.find('"').unwrap()]))
        })
        .collect()
}

/// The hidden field `name` of the first form whose markup contains `marker`.
pub(crate) fn form_field(html: &str, marker: &str, name: &str) -> String {
    hidden_fields(form(html, marker))
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no {name} field in the form with {marker:?}"))
}

/// The markers of the overview's forms, for [`form_field`]: the job form, the migration
/// form, the clearing of finished jobs, a repair's confirmation.
pub(crate) const JOB_FORM: &str = "name=\"index\"";
pub(crate) const MIGRATE_FORM: &str = "name=\"type\"";
pub(crate) const CLEAR_FORM: &str = "value=\"clear\"";
pub(crate) const REPAIR_CONFIRMATION: &str = "name=\"confirmed\"";

/// The marker of the pause form of `queue`'s row, for [`form_field`].
pub(crate) fn pause_form(queue: &str) -> String {
    format!("action=\"/queues/{queue}\"")
}

/// The `action` of a form, unescaped.
pub(crate) fn form_action(form: &str) -> String {
    let tag = &form[..form.find('>').unwrap()];
    let at = tag.find("action=\"").expect("a form action") + 8;
    let rest = &tag[at..];
    unescape(&rest[..rest.find('"').unwrap()])
}

/// The values of every `name="<name>"` element of a page (the buttons of that name),
/// unescaped.
pub(crate) fn button_values(html: &str, name: &str) -> Vec<String> {
    let marker = format!(" name=\"{name}\" value=\"");
    html.match_indices(&marker)
        .map(|(at, _)| {
            let rest = &html[at + marker.len()..];
            unescape(&rest[..rest.find('"').unwrap()])
        })
        .collect()
}

/// The value of the single-message button `verb` (`replay` or `discard`) of the message
/// `handle`: `<verb>:<nonce>:<handle>`.
pub(crate) fn one_button(html: &str, verb: &str, handle: &str) -> String {
    button_values(html, "one")
        .into_iter()
        .find(|value| {
            value
                .split_once(':')
                .and_then(|(v, rest)| Some((v, rest.split_once(':')?.1)))
                == Some((verb, handle))
        })
        .unwrap_or_else(|| panic!("no {verb} button of the message {handle} in {html}"))
}

/// The nonce of the single-message button `verb` of the message `handle`.
pub(crate) fn nonce_of_button(html: &str, verb: &str, handle: &str) -> String {
    let value = one_button(html, verb, handle);
    let nonce = value.split(':').nth(1).unwrap().to_owned();
    assert_nonce_shape(&nonce);
    nonce
}

/// The value of a page's "selected" button `verb` (`replay`, `discard`, `moveto`):
/// `<verb>-selected:<nonce>`.
pub(crate) fn selected_button(html: &str, verb: &str) -> String {
    let prefix = format!("{verb}-selected:");
    let value = button_values(html, "action")
        .into_iter()
        .find(|v| v.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {verb}-selected button in {html}"));
    assert_nonce_shape(&value[prefix.len()..]);
    value
}

/// A nonce is `<hex time>.<16 hex>.<64 hex mac>`.
pub(crate) fn assert_nonce_shape(nonce: &str) {
    let parts: Vec<&str> = nonce.split('.').collect();
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    assert!(
        parts.len() == 3
            && hex(parts[0])
            && parts[1].len() == 16
            && hex(parts[1])
            && parts[2].len() == 64
            && hex(parts[2]),
        "not a nonce: {nonce:?}"
    );
}

/// The hidden fields of the poison page's form: `csrf`, `listed` and the place (`kind`,
/// `fid`, `reason`, `body`, `after`, `limit`).
pub(crate) fn poison_fields(html: &str) -> Vec<(String, String)> {
    hidden_fields(form(html, "<form id=\"poison\""))
}

/// The poison page's form as its button `name=value` sends it, with `extra` fields (the
/// ticked `h` boxes, the `to` queue).
pub(crate) fn poison_form(
    html: &str,
    button: (&str, &str),
    extra: &[(&str, &str)],
) -> Vec<(String, String)> {
    let mut form = poison_fields(html);
    for (name, value) in extra {
        form.push(((*name).to_owned(), (*value).to_owned()));
    }
    form.push((button.0.to_owned(), button.1.to_owned()));
    form
}

/// The handles of the messages a poison page lists, in order.
pub(crate) fn handles(html: &str) -> Vec<String> {
    html.match_indices("data-handle=\"")
        .map(|(at, m)| {
            let rest = &html[at + m.len()..];
            unescape(&rest[..rest.find('"').unwrap()])
        })
        .collect()
}

/// The handle of the message shown with `id` on a poison page.
pub(crate) fn handle_of(html: &str, id: &str) -> String {
    let at = html
        .find(&format!("<code>{id}</code>"))
        .unwrap_or_else(|| panic!("no message {id} in {html}"));
    let row = html[..at]
        .rfind("data-handle=\"")
        .expect("the message's row");
    let rest = &html[row + 13..];
    unescape(&rest[..rest.find('"').unwrap()])
}

/// The next page's link of a poison page, unescaped.
pub(crate) fn next_link(html: &str) -> Option<String> {
    let marker = "class=\"next\" href=\"";
    let at = html.find(marker)?;
    let rest = &html[at + marker.len()..];
    Some(unescape(&rest[..rest.find('"').unwrap()]))
}

/// A page's result banner: its text, and whether it is a failure's.
pub(crate) fn banner_of(html: &str) -> Option<(String, bool)> {
    let at = html.find("<div class=\"banner")?;
    let rest = &html[at..];
    let failed = rest.starts_with("<div class=\"banner failed\"");
    let start = rest.find('>').unwrap() + 1;
    let end = rest.find("</div>").unwrap();
    Some((unescape(&rest[start..end]), failed))
}

/// The query pairs of a link (`/path?a=1&b=2`), decoded.
pub(crate) fn query_of(link: &str) -> Vec<(String, String)> {
    let query = link.split_once('?').map_or("", |(_, q)| q);
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// One query parameter of a link.
pub(crate) fn query_param(link: &str, name: &str) -> Option<String> {
    query_of(link)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

// ---- confirmations ----

/// A confirmation page as the console served it: what it lists, and its form.
pub(crate) struct Confirmation {
    /// The page.
    pub(crate) html: String,
    /// Where its form posts (`/poison/<queue>/confirm/<token>`).
    pub(crate) action: String,
    /// Its hidden fields (`csrf`, `nonce`).
    pub(crate) fields: Vec<(String, String)>,
}

impl Confirmation {
    /// The confirmation's nonce.
    pub(crate) fn nonce(&self) -> String {
        self.fields
            .iter()
            .find(|(k, _)| k == "nonce")
            .map(|(_, v)| v.clone())
            .expect("a nonce")
    }

    /// Its export's link (`…/confirm/<token>/export`).
    pub(crate) fn export(&self) -> String {
        format!("{}/export", self.action)
    }

    /// Sends its form as its button does: the status and the redirect's `Location`.
    pub(crate) async fn submit(&self, base: &str) -> (u16, String) {
        let mut form = self.fields.clone();
        form.push(("confirm".into(), "yes".into()));
        post_fields(&format!("{base}{}", self.action), &form).await
    }
}

/// The confirmation page at `path` (a redirect's `Location`), which must be one.
pub(crate) async fn confirmation(base: &str, path: &str) -> Confirmation {
    assert!(
        path.contains("/confirm/"),
        "not a confirmation's page: {path}"
    );
    let (status, html) = get(&format!("{base}{path}")).await;
    assert_eq!(status, 200, "{html}");
    let form = form(&html, "name=\"confirm\"");
    let (action, fields) = (form_action(form), hidden_fields(form));
    assert_eq!(action, path, "the form confirms the set its page shows");
    assert_nonce_shape(
        &fields
            .iter()
            .find(|(k, _)| k == "nonce")
            .expect("the confirmation's nonce")
            .1,
    );
    Confirmation {
        html,
        action,
        fields,
    }
}

/// Confirms the confirmation page at `path` as its button does: the `Location` it sends
/// the operator to.
pub(crate) async fn confirm(base: &str, path: &str) -> String {
    let (status, location) = confirmation(base, path).await.submit(base).await;
    assert_eq!(status, 303, "{location}");
    location
}

/// The banner of the page a redirect's `Location` leads to.
pub(crate) async fn banner_at(base: &str, location: &str) -> (String, bool) {
    let (status, html) = get(&format!("{base}{location}")).await;
    assert_eq!(status, 200, "{html}");
    banner_of(&html).unwrap_or_else(|| panic!("no banner at {location}: {html}"))
}

// ---- seeding ----

/// Declares `name` and puts messages in its poison queue, each `(id, body, reason)`, as a
/// worker poisons them.
pub(crate) async fn seed_poison<Q: Queue>(
    queue: &Q,
    name: &str,
    messages: &[(&str, Vec<u8>, &str)],
) {
    queue
        .declare(name, &WorkerConfig::new(name).queue_options())
        .await
        .unwrap();
    for (id, body, _) in messages {
        queue.send(name, id, body).await.unwrap();
    }
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
    for _ in messages {
        let delivery = tokio::time::timeout(Duration::from_secs(10), consumer.next())
            .await
            .expect("a delivery")
            .unwrap()
            .unwrap();
        let reason = messages
            .iter()
            .find(|(id, _, _)| *id == delivery.received().id)
            .map(|(_, _, reason)| *reason)
            .unwrap();
        delivery.poison(reason).await.unwrap();
    }
    consumer.close().await;
}

/// The ids of the messages in `name`'s poison queue, sorted.
pub(crate) async fn poisoned_ids<Q: Queue>(queue: &Q, name: &str) -> Vec<String> {
    let mut ids: Vec<String> = queue
        .poison_list(name, usize::MAX)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    ids.sort();
    ids
}

/// The SQLite queue in a file of `dir` (`q.db`).
#[cfg(feature = "sqlite")]
pub(crate) async fn sqlite_queue(dir: &tempfile::TempDir) -> AnyQueue {
    AnyQueue::connect(&format!("sqlite:{}", sqlite_file(dir).display()))
        .await
        .unwrap()
}

/// The file of [`sqlite_queue`].
pub(crate) fn sqlite_file(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("q.db")
}

/// Writes poison messages of `queue` straight into the SQLite queue's file, as another
/// producer could, in one transaction: each `(id, body, reason)`, delivered 5 times,
/// poisoned at `poisoned_at`.
#[cfg(feature = "sqlite")]
pub(crate) fn insert_poison(
    path: &std::path::Path,
    queue: &str,
    poisoned_at: chrono::DateTime<chrono::Utc>,
    rows: impl IntoIterator<Item = (Vec<u8>, Vec<u8>, Vec<u8>)>,
) {
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
        let at = poisoned_at.timestamp_micros();
        for (id, body, reason) in rows {
            insert
                .execute(rusqlite::params![
                    tablekit_workers::queue::poison_queue(queue),
                    id,
                    body,
                    at,
                    reason
                ])
                .unwrap();
        }
    }
    tx.commit().unwrap();
}

/// Loads `scale` poison messages of `queue` into `table` through `record`, eight writers at
/// once, as the measurements at scale do: four reason shapes (one of them hostile markup),
/// two operation kinds, ids `m0000000`…; prints how long it took.
pub(crate) async fn load_poison(
    table: &tablekit_workers::queue::poison_table::PoisonTable<AnyStore>,
    queue: &str,
    scale: usize,
) {
    let started = std::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..8 {
        let table = table.clone();
        let queue = queue.to_owned();
        tasks.spawn(async move {
            for i in (worker..scale).step_by(8) {
                let reason = match i % 4 {
                    0 => format!("conflict on ord-{i}"),
                    1 => "timeout after 30 s".to_owned(),
                    2 => format!("entity {i} missing"),
                    _ => format!("<script>alert({i})</script> hostile"),
                };
                let kind = if i % 7 == 0 { "audit" } else { "archive" };
                let body = format!(
                    r#"{{"id":"00000000-0000-0000-0000-{i:012}","kind":"{kind}","version":1,"created_at":"2026-01-01T00:00:00Z","payload":{{"n":{i}}}}}"#
                );
                let record = tablekit_workers::queue::poison_table::PoisonRecord {
                    id: format!("m{i:07}"),
                    body: body.into_bytes(),
                    reason,
                    reason_undecodable: false,
                    delivery_count: 5,
                    poisoned_at: chrono::Utc::now(),
                    sent_at: None,
                    headers: vec![("x-load".into(), i.to_string())],
                    origin: "worker",
                    raw: Default::default(),
                };
                table.record(&queue, &record).await.unwrap();
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    #[allow(clippy::print_stdout)]
    {
        println!(
            "loaded {scale} poison messages in {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
}
