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
//! A POST must be `Content-Type: application/json`: a page of another site cannot send
//! one without the browser asking the console first (CORS), and the console allows no
//! other origin. Errors are `{"error": "…"}` with the status of their kind.

use std::net::SocketAddr;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query as UrlQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::poison::{self, Place};
use super::{Shared, failure_status, waiting};
use crate::activity::Resolution;
use crate::error::Error;
use crate::queue::{PeekQuery, PoisonAction, Queue};

/// An error as JSON, with the status of its kind.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    #[derive(Serialize)]
    struct Failure {
        error: String,
    }
    (
        status,
        Json(Failure {
            error: message.into(),
        }),
    )
        .into_response()
}

pub(super) fn failed(e: &Error) -> Response {
    error(failure_status(e.kind()), e.to_string())
}

/// `GET /api/status`.
pub(super) async fn status(State(console): State<Shared>) -> Response {
    match console.overview().await {
        Ok(o) => Json(o.status).into_response(),
        Err(e) => failed(&e),
    }
}

#[derive(Deserialize)]
pub(super) struct After {
    after: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/actions`.
pub(super) async fn actions(
    State(console): State<Shared>,
    UrlQuery(query): UrlQuery<After>,
) -> Response {
    #[derive(Serialize)]
    struct Page {
        actions: Vec<super::records::ActionRecord>,
        next: Option<String>,
    }
    match console
        .records
        .recent(
            query.limit.unwrap_or(50).clamp(1, 500),
            query.after.as_deref().filter(|a| !a.is_empty()),
        )
        .await
    {
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

/// `GET /api/poison/<queue>`.
pub(super) async fn poison_page(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    UrlQuery(query): UrlQuery<poison::PageQuery>,
) -> Response {
    #[derive(Serialize)]
    struct Page {
        queue: String,
        messages: Vec<Message>,
        next: Option<String>,
    }
    if let Err(e) = crate::queue::check_queue_name(&queue) {
        return failed(&e);
    }
    let page = query
        .place()
        .read(&console.broker, &queue, poison::PREVIEW)
        .await;
    match page {
        Ok(page) => Json(Page {
            queue,
            messages: page.messages.into_iter().map(Message::from).collect(),
            next: page.next,
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
    if let Err(e) = crate::queue::check_queue_name(&queue) {
        return failed(&e);
    }
    match console.broker.poison_body(&queue, &handle).await {
        Ok(Some(m)) => Json(Message::from(m)).into_response(),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            "this message is no longer in the poison queue",
        ),
        Err(e) => failed(&e),
    }
}

/// What a dry run asks for.
#[derive(Deserialize)]
struct SetRequest {
    action: String,
    #[serde(default)]
    to: Option<String>,
    /// The messages named; without them, every message the filter passes.
    #[serde(default)]
    handles: Option<Vec<String>>,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    body: String,
}

/// A set as the API shows it.
#[derive(Serialize)]
struct SetView {
    token: String,
    queue: String,
    action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    to: Option<String>,
    count: usize,
    handles: Vec<String>,
    ids: Vec<String>,
    reasons: Vec<(String, u64)>,
}

fn set_view(token: String, bound: &poison::sets::Bound) -> SetView {
    SetView {
        token,
        queue: bound.queue.clone(),
        action: bound.verb.clone(),
        to: match &bound.action {
            PoisonAction::ReplayTo(to) => Some(to.clone()),
            _ => None,
        },
        count: bound.handles.len(),
        handles: bound.handles.clone(),
        ids: bound.ids.clone(),
        reasons: bound.reasons.clone(),
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        })
}

/// `POST /api/poison/<queue>/sets`: the dry run.
pub(super) async fn make_set(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !is_json(&headers) {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the request as Content-Type: application/json",
        );
    }
    if let Err(e) = crate::queue::check_queue_name(&queue) {
        return failed(&e);
    }
    let request: SetRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("the request: {e}")),
    };
    let action = match request.action.as_str() {
        "replay" => PoisonAction::Replay,
        "discard" => PoisonAction::Discard,
        "moveto" => {
            let to = request.to.as_deref().unwrap_or_default().trim();
            if let Err(message) = poison::destination_problem(&console, to).await {
                return error(StatusCode::BAD_REQUEST, message);
            }
            PoisonAction::ReplayTo(to.to_owned())
        }
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "unknown action {:?}: replay, discard or moveto",
                    other.chars().take(40).collect::<String>()
                ),
            );
        }
    };
    let place = Place {
        filter: poison::filter_of(&request.kind, &request.id, &request.reason, &request.body),
        after: None,
        limit: poison::DEFAULT_PAGE,
        newest_first: false,
        backwards: false,
    };
    let (bound, scope) = match &request.handles {
        Some(handles) if handles.len() > poison::MAX_PAGE => {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "name at most {} messages, or give a filter",
                    poison::MAX_PAGE
                ),
            );
        }
        Some(handles) => (
            poison::named(&console, &queue, action, place, handles).await,
            "selected",
        ),
        None => (
            poison::dry_run(&console, &queue, action, place).await,
            "all",
        ),
    };
    match bound {
        Ok(mut bound) => {
            bound.verb = request.action;
            bound.scope = scope.to_owned();
            let token = console.sets.keep(bound.clone());
            (StatusCode::CREATED, Json(set_view(token, &bound))).into_response()
        }
        Err(e) => failed(&e),
    }
}

/// `GET /api/poison/<queue>/sets/<token>`.
pub(super) async fn get_set(
    State(console): State<Shared>,
    Path((queue, token)): Path<(String, String)>,
) -> Response {
    match console.sets.peek(&token, &queue) {
        Some(bound) => Json(set_view(token, &bound)).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "no such set: unknown, expired (15 minutes) or already confirmed",
        ),
    }
}

/// `POST /api/poison/<queue>/sets/<token>/confirm`: acts on the set, once.
pub(super) async fn confirm_set(
    State(console): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path((queue, token)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    #[derive(Serialize)]
    struct Done {
        asked: usize,
        taken: Vec<String>,
        result: String,
        failed: bool,
    }
    if !is_json(&headers) {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the request as Content-Type: application/json",
        );
    }
    let Some(bound) = console.sets.take(&token, &queue) else {
        return error(
            StatusCode::NOT_FOUND,
            "no such set: unknown, expired (15 minutes) or already confirmed; nothing was done",
        );
    };
    let (outcome, taken) = poison::act(
        &console,
        client,
        &queue,
        &bound.verb,
        &bound.scope,
        &bound.action,
        &bound.handles,
        &bound.ids,
    )
    .await;
    Json(Done {
        asked: bound.handles.len(),
        taken,
        result: outcome.text,
        failed: outcome.failed,
    })
    .into_response()
}

/// `GET /api/poison/<queue>/sets/<token>/export`: the set's messages as JSON lines, or a
/// JSON error when the set is gone.
pub(super) async fn export_set(
    state: State<Shared>,
    Path((queue, token)): Path<(String, String)>,
) -> Response {
    if state.sets.peek(&token, &queue).is_none() {
        return error(
            StatusCode::NOT_FOUND,
            "no such set: unknown, expired (15 minutes) or already confirmed",
        );
    }
    poison::export(state, Path((queue, token))).await
}

#[derive(Deserialize)]
pub(super) struct Window {
    /// RFC 3339; default 30 days ago.
    since: Option<DateTime<Utc>>,
    /// RFC 3339; default now.
    until: Option<DateTime<Utc>>,
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
    UrlQuery(window): UrlQuery<Window>,
) -> Response {
    let now = Utc::now();
    let until = window.until.unwrap_or(now);
    let since = window.since.unwrap_or(now - Duration::days(30));
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
    UrlQuery(order): UrlQuery<waiting::Order>,
) -> Response {
    if let Err(e) = crate::queue::check_queue_name(&queue) {
        return failed(&e);
    }
    let query =
        PeekQuery::new(order.limit().unwrap_or(waiting::SHOWN)).newest_first(order.newest_first());
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
