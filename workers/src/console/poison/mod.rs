//! The poison page of one queue, bounded whatever the queue holds:
//!
//! - a page at a time (`?after=` from the page before, `?limit=` up to [`MAX_PAGE`]),
//!   filtered by operation kind, id, reason or body text, with the reasons grouped and
//!   counted;
//! - each body cut to [`PREVIEW`] bytes, the whole body one link away
//!   (`/poison/<queue>/body/<handle>`);
//! - replay (to the message's queue or another), or discard, of one message or the
//!   selected ones; and of all the messages the filter passes, after a dry run that lists
//!   them and keeps that exact set: the confirmation acts on it and nothing else
//!   ([`sets`]).
//!
//! Each form acts once; each action is logged with its client and message ids.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query as UrlQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

use super::forms::{Admit, Form, Nonces, admit_action};
use super::view::Outcome;
use super::{Shared, failure, html, view as frame};
use crate::display::neutral;
use crate::error::{Error, Result};
use crate::queue::{PoisonAction, PoisonFilter, PoisonQuery, Queue};

pub(super) mod sets;
mod view;

/// How many messages a page lists unless asked.
pub(super) const DEFAULT_PAGE: usize = 50;
/// The most messages a page lists.
pub(super) const MAX_PAGE: usize = 100;
/// The most bytes of a body a page shows.
pub(super) const PREVIEW: usize = 800;
/// The most messages one bulk action takes.
pub(super) const MAX_SET: usize = 100_000;
/// How many messages a dry run names (the rest counted).
const NAMED: usize = 100;
/// How many messages an action's log line names (the rest counted).
const LOGGED: usize = 20;

/// A page's query: the filter, the page, and an action's result.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub(super) struct PageQuery {
    result: Option<String>,
    limit: Option<usize>,
    after: Option<String>,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    body: String,
}

impl PageQuery {
    fn filter(&self) -> PoisonFilter {
        filter_of(&self.kind, &self.id, &self.reason, &self.body)
    }
}

fn filter_of(kind: &str, id: &str, reason: &str, body: &str) -> PoisonFilter {
    PoisonFilter::new()
        .kind(kind.trim())
        .id(id)
        .reason(reason)
        .body(body)
}

/// What a poison page shows.
pub(super) struct PoisonView {
    queue: String,
    /// Messages in the poison queue.
    total: u64,
    /// Those the filter passes (the reasons' counts added up).
    matching: u64,
    filter: PoisonFilter,
    reasons: Vec<(String, u64)>,
    page: crate::queue::PoisonPage,
    after: Option<String>,
    limit: usize,
    paused: bool,
}

pub(super) async fn page(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    UrlQuery(query): UrlQuery<PageQuery>,
) -> Response {
    let limit = query.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    let filter = query.filter();
    let shown = async {
        crate::queue::check_queue_name(&queue)?;
        let total = match console.broker.stats(&queue).await {
            Ok(stats) => stats.poisoned,
            Err(Error::NotDeclared { .. }) => 0,
            Err(e) => return Err(e),
        };
        let reasons = console.broker.poison_reasons(&queue, &filter).await?;
        let page = console
            .broker
            .poison_page(
                &queue,
                &PoisonQuery::new(limit, PREVIEW)
                    .filter(filter.clone())
                    .after(query.after.clone().filter(|a| !a.is_empty())),
            )
            .await?;
        Ok::<_, Error>(PoisonView {
            queue: queue.clone(),
            total,
            matching: reasons.iter().map(|(_, n)| n).sum(),
            filter: filter.clone(),
            reasons,
            page,
            after: query.after.clone().filter(|a| !a.is_empty()),
            limit,
            paused: console.broker.paused(&queue).await.unwrap_or(false),
        })
    }
    .await;
    match shown {
        Ok(v) => {
            let result = console.result(query.result.as_deref());
            html(
                StatusCode::OK,
                frame::page(
                    &format!("Poison of {}", neutral(&queue)),
                    None,
                    view::poison(&v, console.access.csrf(), &Nonces::fresh(), result.as_ref()),
                ),
            )
        }
        Err(e) => failure(&e),
    }
}

/// One message's whole body, as the queue holds it (served as plain text).
pub(super) async fn body(
    State(console): State<Shared>,
    Path((queue, handle)): Path<(String, String)>,
) -> Response {
    if let Err(e) = crate::queue::check_queue_name(&queue) {
        return failure(&e);
    }
    match console.broker.poison_body(&queue, &handle).await {
        Ok(Some(message)) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                (header::CONTENT_DISPOSITION, "inline"),
            ],
            message.body,
        )
            .into_response(),
        Ok(None) => html(
            StatusCode::NOT_FOUND,
            frame::page(
                "Gone",
                None,
                frame::problem("This message is no longer in the poison queue."),
            ),
        ),
        Err(e) => failure(&e),
    }
}

fn refused(status: StatusCode, message: &str) -> Response {
    html(
        status,
        frame::page("Refused", None, frame::problem(message)),
    )
}

/// What a form asks for.
struct Asked {
    /// `replay`, `discard` or `moveto`.
    verb: String,
    /// `one`, `selected` or `all`.
    scope: String,
    handles: Vec<String>,
}

fn asked(form: &Form) -> Option<Asked> {
    if let Some((verb, handle)) = form.get("one").and_then(|o| o.split_once(':')) {
        return Some(Asked {
            verb: verb.to_owned(),
            scope: "one".into(),
            handles: vec![handle.to_owned()],
        });
    }
    let (verb, scope) = form.get("action")?.split_once('-')?;
    Some(Asked {
        verb: verb.to_owned(),
        scope: scope.to_owned(),
        handles: form.all("h").into_iter().map(str::to_owned).collect(),
    })
}

pub(super) async fn action(
    State(console): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(queue): Path<String>,
    body: Bytes,
) -> Response {
    if let Err(e) = crate::queue::check_queue_name(&queue) {
        return failure(&e);
    }
    let form = Form::parse(&body);
    // The filter the page showed: what "all" covers, and where the result is shown.
    let filter = filter_of(
        form.get("kind").unwrap_or_default(),
        form.get("fid").unwrap_or_default(),
        form.get("reason").unwrap_or_default(),
        form.get("body").unwrap_or_default(),
    );
    let back = |nonce: &str| {
        Redirect::to(&view::link(
            &queue,
            &filter,
            DEFAULT_PAGE,
            None,
            Some(nonce),
        ))
        .into_response()
    };
    let nonce = match admit_action(&console, &form) {
        Admit::Refused(response) => return *response,
        Admit::Done(nonce) => return back(&nonce),
        Admit::Act(nonce) => nonce,
    };
    let Some(asked) = asked(&form).filter(|a| {
        matches!(a.verb.as_str(), "replay" | "discard" | "moveto")
            && matches!(a.scope.as_str(), "one" | "selected" | "all")
    }) else {
        return refused(StatusCode::BAD_REQUEST, "Unknown action.");
    };
    let action = match asked.verb.as_str() {
        "replay" => PoisonAction::Replay,
        "discard" => PoisonAction::Discard,
        _ => {
            let to = form.get("to").unwrap_or_default().trim();
            if let Err(e) = crate::queue::check_queue_name(to) {
                return refused(
                    StatusCode::BAD_REQUEST,
                    &format!("Name the queue to replay to: {e}"),
                );
            }
            if to.ends_with(crate::queue::POISON_SUFFIX) {
                return refused(
                    StatusCode::BAD_REQUEST,
                    "A poison queue takes no replays: name the queue whose workers should take the messages.",
                );
            }
            match console.broker.stats(to).await {
                Ok(_) => {}
                Err(Error::NotDeclared { .. }) => {
                    return refused(
                        StatusCode::BAD_REQUEST,
                        &format!(
                            "The queue {} is not declared: start a worker of it (or declare it) first, so that nothing sent to it is lost.",
                            neutral(to)
                        ),
                    );
                }
                Err(e) => return failure(&e),
            }
            PoisonAction::ReplayTo(to.to_owned())
        }
    };
    let (handles, ids) = if asked.scope == "all" {
        // The confirmation of a dry run acts on the set it listed; anything else is a
        // dry run.
        match form.get("set").filter(|s| !s.is_empty()) {
            Some(token) => match console.sets.take(token, &queue) {
                Some(bound) if bound.action == action && bound.filter == filter => {
                    (bound.handles, bound.ids)
                }
                _ => {
                    return refused(
                        StatusCode::BAD_REQUEST,
                        "This confirmation is unknown, expired or already used: go back to the poison page and start again.",
                    );
                }
            },
            None => {
                return match dry_run(&console, &queue, action, filter).await {
                    Ok((bound, reasons)) => {
                        let named = bound.ids.len().min(NAMED);
                        let count = bound.handles.len();
                        let shown_ids: Vec<String> = bound.ids[..named].to_vec();
                        let filter = bound.filter.clone();
                        let action = bound.action.clone();
                        let token = console.sets.keep(bound);
                        html(
                            StatusCode::OK,
                            frame::page(
                                "Confirm",
                                None,
                                view::confirm(&view::Confirm {
                                    queue: &queue,
                                    action: &action,
                                    verb: &asked.verb,
                                    filter: &filter,
                                    count,
                                    ids: &shown_ids,
                                    reasons: &reasons,
                                    token: &token,
                                    csrf: console.access.csrf(),
                                    nonce: &nonce,
                                }),
                            ),
                        )
                    }
                    Err(e) => failure(&e),
                };
            }
        }
    } else {
        if asked.handles.is_empty() {
            return refused(
                StatusCode::BAD_REQUEST,
                "No message was selected: tick the messages first.",
            );
        }
        (asked.handles.clone(), Vec::new())
    };
    if !console.nonces.claim(&nonce) {
        return back(&nonce);
    }
    let taken = console.broker.poison_take(&queue, &handles, &action).await;
    let (verb, to) = match &action {
        PoisonAction::Replay => ("Replayed", String::new()),
        PoisonAction::ReplayTo(to) => ("Replayed", format!(" to {}", neutral(to))),
        _ => ("Discarded", String::new()),
    };
    let messages = |n: usize| if n == 1 { "message" } else { "messages" };
    let n = |n: usize| frame::thousands(n as u64);
    let outcome = match &taken {
        Ok(taken) if taken.len() < handles.len() => Outcome::done(format!(
            "{verb} {} of {} {}{to}; the others had already left the poison queue.",
            n(taken.len()),
            n(handles.len()),
            messages(handles.len())
        )),
        Ok(taken) => Outcome::done(format!(
            "{verb} {} {}{to}.",
            n(taken.len()),
            messages(taken.len())
        )),
        Err(e) => Outcome::failed(format!(
            "{verb} of {} {}{to} failed: {e}. Messages taken before the failure stay taken; the page shows what is left.",
            n(handles.len()),
            messages(handles.len())
        )),
    };
    // The log names the messages: their handles, and their ids when the dry run listed
    // them (a handle alone may be a row number).
    let listed = |values: &[String]| -> String {
        values
            .iter()
            .take(LOGGED)
            .map(|v| neutral(&v.chars().take(200).collect::<String>()).into_owned())
            .collect::<Vec<_>>()
            .join(",")
    };
    tracing::info!(
        client = %client,
        queue = %neutral(&queue),
        action = %format!("{}-{}", asked.verb, asked.scope),
        messages = handles.len(),
        handles = %listed(&handles),
        ids = %listed(&ids),
        left_out = handles.len().saturating_sub(LOGGED),
        result = %neutral(&outcome.text),
        "console action"
    );
    console.nonces.finish(&nonce, outcome);
    back(&nonce)
}

/// Lists every message `filter` passes (handles and ids, no bodies): the set a bulk action
/// is bound to, and its reasons counted.
async fn dry_run(
    console: &Shared,
    queue: &str,
    action: PoisonAction,
    filter: PoisonFilter,
) -> Result<(sets::Bound, Vec<(String, u64)>)> {
    let mut handles = Vec::new();
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = console
            .broker
            .poison_page(
                queue,
                &PoisonQuery::new(1000, 0)
                    .filter(filter.clone())
                    .after(after.take()),
            )
            .await?;
        for message in page.messages {
            handles.push(message.handle);
            // Kept for the dry run's list and the log: their start is enough.
            ids.push(message.id.chars().take(200).collect());
        }
        if handles.len() > MAX_SET {
            return Err(Error::Config(format!(
                "more than {MAX_SET} messages pass this filter: narrow it (by kind, id, reason or body) and act on each part"
            )));
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let reasons = console.broker.poison_reasons(queue, &filter).await?;
    Ok((
        sets::Bound {
            queue: queue.to_owned(),
            action,
            filter,
            handles,
            ids,
        },
        reasons,
    ))
}
