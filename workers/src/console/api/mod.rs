//! The console's JSON API under `/api/`: the same data as its pages, for scripts, with the
//! same tokens and roles (a viewer reads; only an operator acts). Documented in
//! `docs/operations.md`.
//!
//! - `GET /api/status` — every queue's counts, the relay's backlog, the last audits;
//! - `GET /api/workers` — the worker processes, as their heartbeats tell;
//! - `GET /api/queues/<queue>/history?since=&until=` — a queue's deliveries per minute
//!   and per hour ([`super::activity`]);
//! - `GET /api/queues/<queue>/waiting?order=&limit=` — its waiting messages, peeked at
//!   ([`super::waiting`]);
//! - `POST /api/queues/<queue>/waiting/actions` with `{"action": "purge", "through": …}`
//!   or `{"action": "retry-now"|"delete", "handle": …}` — purges the waiting messages
//!   (up to the message `through`, where the backend numbers them), or retries now or
//!   deletes one: the answer says how many it removed or made deliverable;
//! - `GET /api/actions?after=` — the recent actions, newest first;
//! - `GET /api/poison/<queue>?kind=&id=&reason=&body=&group=&undecodable=1&order=newest&back=1&after=&limit=`
//!   — a page of poison (the same query as the poison page's)
//!   messages (each body's first bytes, as text or base64), with the cursor of the next;
//! - `GET /api/poison/<queue>/messages/<handle>` — one message whole;
//! - `POST /api/poison/<queue>/sets` with `{"action": "discard"|"replay"|"moveto",
//!   "to": …, "handles": […]}` or a filter (`"kind"`, `"id"`, `"reason"`, `"body"`) —
//!   the dry run: the exact set the action would touch, kept under a token;
//! - `GET /api/poison/<queue>/sets/<token>` — that set; `…/export` its messages whole as
//!   JSON lines;
//! - `POST /api/poison/<queue>/sets/<token>/confirm` — acts on that set, once: the answer
//!   says how many the backend took, and which.
//!
//! - `GET /api/openapi.json` — this API's description (OpenAPI 3.1).
//!
//! A POST must be `Content-Type: application/json`: a page of another site cannot send
//! one without the browser asking the console first (CORS), and the console allows no
//! other origin. Every answer is JSON, errors included ([`problem`]: RFC 9457's
//! `application/problem+json`): `401` without a right token (never a redirect), `403`
//! for a viewer's action, `404` for an unknown path or queue, `405`, `409` for a set whose
//! messages are gone, `415`, `422` for a query parameter that does not parse or is out of
//! range, naming it.

pub(super) mod problem;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::poison::{self, Place};
use super::{Shared, waiting};
use crate::activity::Resolution;
use crate::error::Error;
use crate::queue::{PeekQuery, Queue};
use problem::{Params, Problem};

/// A problem with `status` of `kind` ([`problem::KINDS`]).
fn error(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Response {
    Problem::new(status, kind, message).into_response()
}

pub(super) fn failed(e: &Error) -> Response {
    Problem::of(e).into_response()
}

/// Answers `Err` with its problem.
macro_rules! or_answer {
    ($checked:expr) => {
        match $checked {
            Ok(value) => value,
            Err(problem) => return problem.into_response(),
        }
    };
}

/// The queue of a path, when tablekit declared it ([`super::Console::declared`]): else
/// `404`, naming the queues it could be — exactly those accepted.
async fn known_queue(console: &Shared, queue: &str) -> Result<(), Problem> {
    if console
        .is_declared(queue)
        .await
        .map_err(|e| Problem::of(&e))?
    {
        return Ok(());
    }
    let queues = console.declared().await.map_err(|e| Problem::of(&e))?;
    let why = match crate::queue::check_queue_name(queue) {
        Err(e) => e.to_string(),
        Ok(()) => format!(
            "no queue {queue:?} is declared by tablekit: it could be {}",
            if queues.is_empty() {
                "none (start a worker, or run `tablekit-worker declare --store …`)".to_owned()
            } else {
                queues.join(", ")
            }
        ),
    };
    Err(Problem::new(StatusCode::NOT_FOUND, "unknown-queue", why)
        .with("queues", serde_json::json!(queues)))
}

mod sets;
use sets::{confirm_set, export_set, get_set, make_set};

/// `GET /api/openapi.json`: this API's description.
pub(super) async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// The API's description (OpenAPI 3.1), checked against the router by a test.
pub(super) const OPENAPI: &str = include_str!("openapi.json");

/// The API's paths (under `/api`) and the methods each answers: the router is built from
/// this list, and a test checks it against [`OPENAPI`].
pub(super) const ROUTES: &[(&str, &[&str])] = &[
    ("/openapi.json", &["get"]),
    ("/status", &["get"]),
    ("/workers", &["get"]),
    ("/actions", &["get"]),
    ("/queues/{queue}/history", &["get"]),
    ("/queues/{queue}/waiting", &["get"]),
    ("/queues/{queue}/waiting/actions", &["post"]),
    ("/poison/{queue}", &["get"]),
    ("/poison/{queue}/messages/{handle}", &["get"]),
    ("/poison/{queue}/sets", &["post"]),
    ("/poison/{queue}/sets/{token}", &["get"]),
    ("/poison/{queue}/sets/{token}/export", &["get"]),
    ("/poison/{queue}/sets/{token}/confirm", &["post"]),
];

/// The handlers of a path of [`ROUTES`].
fn handlers(path: &str) -> axum::routing::MethodRouter<Shared> {
    use axum::routing::{get, post};
    match path {
        "/openapi.json" => get(openapi),
        "/status" => get(status),
        "/workers" => get(workers),
        "/actions" => get(actions),
        "/queues/{queue}/history" => get(history),
        "/queues/{queue}/waiting" => get(waiting_messages),
        "/queues/{queue}/waiting/actions" => post(sets::waiting_action),
        "/poison/{queue}" => get(poison_page),
        "/poison/{queue}/messages/{handle}" => get(poison_message),
        "/poison/{queue}/sets" => post(make_set),
        "/poison/{queue}/sets/{token}" => get(get_set),
        "/poison/{queue}/sets/{token}/export" => get(export_set),
        "/poison/{queue}/sets/{token}/confirm" => post(confirm_set),
        _ => get(not_found),
    }
}

/// The API's router, nested under `/api`: every answer JSON, a path it does not know
/// `404` and a method a path does not answer `405`, as problems.
pub(super) fn router() -> axum::Router<Shared> {
    ROUTES
        .iter()
        .fold(axum::Router::new(), |router, (path, _)| {
            router.route(path, handlers(path))
        })
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

/// `/api/…` that is no path of the API.
pub(super) async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "not-found",
        "no such path in the API: its paths are in /api/openapi.json",
    )
}

/// A path of the API asked with a method it does not answer.
pub(super) async fn method_not_allowed() -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "this path does not answer this method: see /api/openapi.json",
    )
}

/// `GET /api/status`.
pub(super) async fn status(State(console): State<Shared>) -> Response {
    match console.overview().await {
        Ok(o) => Json(o.status).into_response(),
        Err(e) => failed(&e),
    }
}

/// Whether `after` is an action record's id, as `next` gives them.
fn is_record_id(after: &str) -> bool {
    let (time, suffix) = after.split_once('-').unwrap_or_default();
    time.len() == 16
        && time.bytes().all(|b| b.is_ascii_digit())
        && suffix.len() == 8
        && suffix.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `GET /api/actions?after=&limit=`.
pub(super) async fn actions(State(console): State<Shared>, RawQuery(query): RawQuery) -> Response {
    #[derive(Serialize)]
    struct Page {
        actions: Vec<super::records::ActionRecord>,
        next: Option<String>,
    }
    let params = Params::of(query.as_deref());
    let limit = or_answer!(params.number("limit", 1, 500)).unwrap_or(50);
    let after = or_answer!(params.checked(
        "after",
        "the `next` of an earlier answer (an action's id)",
        is_record_id
    ));
    match console.records.recent(limit, after.as_deref()).await {
        Ok((actions, next)) => Json(Page { actions, next }).into_response(),
        Err(e) => failed(&e),
    }
}

/// A poison message as the API shows it.
#[derive(Serialize)]
struct Message {
    id: String,
    handle: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u32>,
    reason: String,
    delivery_count: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    poisoned_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sent_at: Option<chrono::DateTime<chrono::Utc>>,
    /// What the backend records beside the body.
    headers: Vec<(String, String)>,
    /// Whether the reason's bytes were not UTF-8 (shown with U+FFFD).
    reason_undecodable: bool,
    /// The whole body's length in bytes.
    size: usize,
    /// Whether `body` (or `body_base64`) is the whole body.
    whole: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_base64: Option<String>,
}

impl From<crate::queue::PoisonMessage> for Message {
    fn from(m: crate::queue::PoisonMessage) -> Self {
        let whole = m.is_whole();
        let (body, body_base64) = match String::from_utf8(m.body) {
            Ok(text) => (Some(text), None),
            Err(bytes) => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(bytes.as_bytes())),
            ),
        };
        Message {
            kind: m.operation.as_ref().map(|(k, _)| k.clone()),
            version: m.operation.as_ref().map(|(_, v)| *v),
            id: m.id,
            handle: m.handle,
            reason: m.reason,
            delivery_count: m.delivery_count,
            poisoned_at: m.poisoned_at,
            sent_at: m.sent_at,
            headers: m.headers,
            reason_undecodable: m.reason_undecodable,
            size: m.size,
            whole,
            body,
            body_base64,
        }
    }
}

/// The place a poison page's query asks for.
fn poison_place(params: &Params) -> Result<Place, Problem> {
    let filter = poison::filter_of(
        &params.text("kind")?.unwrap_or_default(),
        &params.text("id")?.unwrap_or_default(),
        &params.text("reason")?.unwrap_or_default(),
        &params.text("body")?.unwrap_or_default(),
    );
    let place = Place {
        filter,
        after: params.cursor("after")?,
        limit: params
            .number("limit", 1, poison::MAX_PAGE)?
            .unwrap_or(poison::DEFAULT_PAGE),
        newest_first: params.choice("order", &["oldest", "newest"])? == Some("newest"),
        backwards: params.flag("back")?,
    };
    Ok(place.grouped(
        &params.text("group")?.unwrap_or_default(),
        params.flag("undecodable")?,
    ))
}

/// `GET /api/poison/<queue>`.
pub(super) async fn poison_page(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    #[derive(Serialize)]
    struct Page {
        queue: String,
        messages: Vec<Message>,
        next: Option<String>,
    }
    let place = or_answer!(poison_place(&Params::of(query.as_deref())));
    or_answer!(known_queue(&console, &queue).await);
    console.sweep(&queue).await;
    let page = place.read(&console.broker, &queue, poison::PREVIEW).await;
    match page {
        Ok(page) => Json(Page {
            queue,
            messages: page.messages.into_iter().map(Message::from).collect(),
            next: page.next.as_deref().map(problem::cursor),
        })
        .into_response(),
        Err(e) => failed(&e),
    }
}

/// `GET /api/poison/<queue>/messages/<handle>`.
pub(super) async fn poison_message(
    State(console): State<Shared>,
    Path((queue, handle)): Path<(String, String)>,
) -> Response {
    or_answer!(known_queue(&console, &queue).await);
    match console.broker.poison_body(&queue, &handle).await {
        Ok(Some(m)) => Json(Message::from(m)).into_response(),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            "not-found",
            "this message is no longer in the poison queue",
        ),
        Err(e) => failed(&e),
    }
}

/// A history point as the API shows it.
#[derive(Serialize)]
struct ApiPoint {
    at: DateTime<Utc>,
    resolution: &'static str,
    processed: u64,
    failed: u64,
    poisoned: u64,
    redelivered: u64,
}

/// `GET /api/queues/<queue>/history?since=&until=`.
pub(super) async fn history(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let params = Params::of(query.as_deref());
    let now = Utc::now();
    let until = or_answer!(params.time("until")).unwrap_or(now);
    let since = or_answer!(params.time("since")).unwrap_or(now - Duration::days(30));
    if since > until {
        return Problem::parameter("since", "`since` is after `until`").into_response();
    }
    or_answer!(known_queue(&console, &queue).await);
    match crate::activity::history(&console.store, &queue, since, until).await {
        Ok(points) => Json(
            points
                .iter()
                .map(|p| ApiPoint {
                    at: p.at,
                    resolution: match p.resolution {
                        Resolution::Minute => "minute",
                        Resolution::Hour => "hour",
                    },
                    processed: p.counts.processed,
                    failed: p.counts.failed,
                    poisoned: p.counts.poisoned,
                    redelivered: p.counts.redelivered,
                })
                .collect::<Vec<_>>(),
        )
        .into_response(),
        Err(e) => failed(&e),
    }
}

/// `GET /api/workers`.
pub(super) async fn workers(State(console): State<Shared>) -> Response {
    #[derive(Serialize)]
    struct ApiWorker<'a> {
        id: &'a str,
        host: &'a str,
        pid: u32,
        version: &'a str,
        queues: &'a [String],
        concurrency: u64,
        in_flight: u64,
        processed_per_second: f64,
        started_at: DateTime<Utc>,
        heartbeat_at: DateTime<Utc>,
        stopped_at: Option<DateTime<Utc>>,
        silent: bool,
    }
    match crate::activity::workers(&console.store).await {
        Ok(workers) => Json(
            workers
                .iter()
                .map(|w| ApiWorker {
                    id: &w.id,
                    host: &w.host,
                    pid: w.pid,
                    version: &w.version,
                    queues: &w.queues,
                    concurrency: w.concurrency,
                    in_flight: w.in_flight,
                    processed_per_second: w.processed_per_second,
                    started_at: w.started_at,
                    heartbeat_at: w.heartbeat_at,
                    stopped_at: w.stopped_at,
                    silent: w.silent,
                })
                .collect::<Vec<_>>(),
        )
        .into_response(),
        Err(e) => failed(&e),
    }
}

/// A waiting message as the API shows it.
#[derive(Serialize)]
struct ApiWaiting<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    handle: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sent_at: Option<DateTime<Utc>>,
    attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_attempt: Option<DateTime<Utc>>,
    leased: bool,
}

/// `GET /api/queues/<queue>/waiting?order=&limit=`.
pub(super) async fn waiting_messages(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let params = Params::of(query.as_deref());
    let newest = or_answer!(params.choice("order", &["oldest", "newest"])) == Some("newest");
    let limit =
        or_answer!(params.number("limit", 1, crate::queue::MAX_PEEK)).unwrap_or(waiting::SHOWN);
    or_answer!(known_queue(&console, &queue).await);
    let query = PeekQuery::new(limit).newest_first(newest);
    match console.broker.peek(&queue, &query).await {
        Ok(messages) => Json(
            messages
                .iter()
                .map(|m| ApiWaiting {
                    id: &m.id,
                    handle: m.handle.as_deref(),
                    kind: m.kind.as_ref().map(|(k, _)| k.as_str()),
                    version: m.kind.as_ref().map(|(_, v)| *v),
                    sent_at: m.sent_at,
                    attempts: m.attempts,
                    next_attempt: m.next_attempt,
                    leased: m.leased,
                })
                .collect::<Vec<_>>(),
        )
        .into_response(),
        Err(e) => failed(&e),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The router is built from [`ROUTES`]; the description lists exactly those paths
    /// and methods (what each answers is checked over HTTP in `tests/console_api.rs`).
    #[test]
    fn the_description_lists_every_route_and_no_other() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
        let mut documented: Vec<(String, String)> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .keys()
                    .map(|method| (path.clone(), method.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut routed: Vec<(String, String)> = ROUTES
            .iter()
            .flat_map(|(path, methods)| {
                methods
                    .iter()
                    .map(move |m| (format!("/api{path}"), (*m).to_owned()))
            })
            .collect();
        documented.sort();
        routed.sort();
        assert_eq!(documented, routed);
        // Every kind of problem the handlers answer is described.
        let kinds = doc["components"]["schemas"]["Problem"]["properties"]["type"]["description"]
            .as_str()
            .unwrap();
        for kind in problem::KINDS {
            assert!(kinds.contains(kind), "{kind}");
        }
    }
}
