//! The API's sets: a dry run binds the exact messages an action would touch under a
//! token, which is read, exported and confirmed once (`/api/poison/<queue>/sets…`).

use std::net::SocketAddr;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::super::Shared;
use super::super::poison::{self, Place};
use super::super::waiting::actions::perform;
use super::problem::Problem;
use super::{error, failed, known_queue};
use crate::queue::{PoisonAction, WaitingAction};

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

/// `415` unless the request is JSON (see [`is_json`]).
fn json_only(headers: &HeaderMap) -> Result<(), Box<Response>> {
    if is_json(headers) {
        return Ok(());
    }
    Err(Box::new(error(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported-media-type",
        "send the request as Content-Type: application/json",
    )))
}

/// The request's JSON body, or `422` saying why it does not read.
fn json_body<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, Box<Response>> {
    serde_json::from_slice(body).map_err(|e| {
        Box::new(error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-request",
            format!("the request: {e}"),
        ))
    })
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
    if let Err(refused) = json_only(&headers) {
        return *refused;
    }
    or_answer!(known_queue(&console, &queue).await);
    let request: SetRequest = match json_body(&body) {
        Ok(request) => request,
        Err(refused) => return *refused,
    };
    let action = match request.action.as_str() {
        "replay" => PoisonAction::Replay,
        "discard" => PoisonAction::Discard,
        "moveto" => {
            let to = request.to.as_deref().unwrap_or_default().trim();
            if let Err(message) = poison::destination_problem(&console, to).await {
                return error(StatusCode::UNPROCESSABLE_ENTITY, "invalid-request", message);
            }
            PoisonAction::ReplayTo(to.to_owned())
        }
        other => {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid-request",
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
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid-request",
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
        Ok(bound) if !bound.gone.is_empty() => Problem::new(
            StatusCode::CONFLICT,
            "gone",
            format!(
                "{} of the {} messages named are no longer in the poison queue: nothing was kept; list the page again",
                bound.gone.len(),
                bound.handles.len()
            ),
        )
        .with("gone", serde_json::json!(bound.gone))
        .into_response(),
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
            "not-found",
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
    if let Err(refused) = json_only(&headers) {
        return *refused;
    }
    let Some(bound) = console.sets.take(&token, &queue) else {
        return error(
            StatusCode::NOT_FOUND,
            "not-found",
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
    let taken = match taken {
        Ok(taken) => taken,
        // The backend failed: what it took before is taken, and the answer says so.
        Err(e) => {
            return Problem::of(&e)
                .with("result", serde_json::json!(outcome.text))
                .into_response();
        }
    };
    if taken.is_empty() && !bound.handles.is_empty() {
        return Problem::new(
            StatusCode::CONFLICT,
            "gone",
            format!(
                "none of the {} messages of the set was in the poison queue any more: nothing was done",
                bound.handles.len()
            ),
        )
        .with("gone", serde_json::json!(bound.handles))
        .into_response();
    }
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
            "not-found",
            "no such set: unknown, expired (15 minutes) or already confirmed",
        );
    }
    poison::export(state, Path((queue, token))).await
}

/// What `POST /api/queues/<queue>/waiting/actions` asks.
#[derive(Deserialize)]
struct WaitingRequest {
    action: String,
    #[serde(default)]
    through: Option<String>,
    #[serde(default)]
    handle: Option<String>,
}

/// `POST /api/queues/<queue>/waiting/actions`: purges the waiting messages, or retries
/// now or deletes one, once; `409` when the message named no longer waits.
pub(super) async fn waiting_action(
    State(console): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    #[derive(Serialize)]
    struct Done {
        action: &'static str,
        /// How many messages it removed or made deliverable (absent when the backend
        /// does not say).
        #[serde(skip_serializing_if = "Option::is_none")]
        count: Option<u64>,
        result: String,
    }
    if let Err(refused) = json_only(&headers) {
        return *refused;
    }
    or_answer!(known_queue(&console, &queue).await);
    let request: WaitingRequest = match json_body(&body) {
        Ok(request) => request,
        Err(refused) => return *refused,
    };
    let handle = request.handle.filter(|h| !h.is_empty());
    let action = match (request.action.as_str(), handle) {
        ("purge", _) => WaitingAction::Purge {
            through: request.through.filter(|t| !t.is_empty()),
        },
        ("retry-now", Some(handle)) => WaitingAction::RetryNow { handle },
        ("delete", Some(handle)) => WaitingAction::Delete { handle },
        ("retry-now" | "delete", None) => {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid-request",
                format!("{} names one message: send its \"handle\"", request.action),
            );
        }
        (other, _) => {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid-request",
                format!(
                    "unknown action {:?}: purge, retry-now or delete",
                    other.chars().take(40).collect::<String>()
                ),
            );
        }
    };
    let (outcome, done) = perform(&console, client, &queue, &action).await;
    match done {
        Err(e) => Problem::of(&e)
            .with("result", serde_json::json!(outcome.text))
            .into_response(),
        Ok(Some(0)) if !matches!(action, WaitingAction::Purge { .. }) => {
            Problem::new(StatusCode::CONFLICT, "gone", outcome.text).into_response()
        }
        Ok(count) => Json(Done {
            action: action.name(),
            count,
            result: outcome.text,
        })
        .into_response(),
    }
}
