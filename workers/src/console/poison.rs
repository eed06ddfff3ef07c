//! The poison page of one queue: its messages listed (reason, deliveries, operation,
//! when poisoned, body), and replay or discard of one message, the selected ones, or all
//! after a confirmation naming the count — each form acting once.

use axum::body::Bytes;
use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::forms::{Admit, Form, Nonces, Outcome, admit_action};
use super::pages::ResultQuery;
use super::{MAX_LISTED, PoisonView, Shared, failure, html, view};
use crate::error::Error;
use crate::queue::Queue;

/// How many poison messages a page lists unless asked (`?limit=`, up to [`MAX_LISTED`]).
const DEFAULT_LISTED: usize = 32;

pub(super) async fn page(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    UrlQuery(query): UrlQuery<ResultQuery>,
) -> Response {
    // 32 by default: Azure Queue Storage shows that many without leasing any (a longer
    // list receives each message in turn and makes it visible again).
    let limit = query.limit.unwrap_or(DEFAULT_LISTED).clamp(1, MAX_LISTED);
    let view = async {
        crate::queue::check_queue_name(&queue)?;
        let total = match console.broker.stats(&queue).await {
            Ok(stats) => stats.poisoned,
            Err(Error::NotDeclared { .. }) => 0,
            Err(e) => return Err(e),
        };
        let messages = console.broker.poison_list(&queue, limit).await?;
        Ok::<_, Error>(PoisonView {
            queue: queue.clone(),
            total: total.max(messages.len() as u64),
            messages,
        })
    }
    .await;
    match view {
        Ok(v) => {
            let result = console.result(query.result.as_deref());
            html(
                StatusCode::OK,
                view::page(
                    &format!("Poison of {queue}"),
                    None,
                    view::poison(&v, console.access.csrf(), &Nonces::fresh(), result.as_ref()),
                ),
            )
        }
        Err(e) => failure(&e),
    }
}

pub(super) async fn action(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    body: Bytes,
) -> Response {
    let back = |nonce: &str| {
        Redirect::to(&format!(
            "/poison/{}?result={nonce}",
            view::urlencode(&queue)
        ))
        .into_response()
    };
    if let Err(e) = crate::queue::check_queue_name(&queue) {
        return failure(&e);
    }
    let form = Form::parse(&body);
    let nonce = match admit_action(&console, &form) {
        Admit::Refused(response) => return *response,
        Admit::Done(nonce) => return back(&nonce),
        Admit::Act(nonce) => nonce,
    };
    // One message's own button, else the action on the selection or on all.
    let (action, ids): (String, Vec<String>) = match form.get("one").and_then(|o| o.split_once(':'))
    {
        Some((verb, id)) => (format!("{verb}-one"), vec![id.to_owned()]),
        None => (
            form.get("action").unwrap_or_default().to_owned(),
            form.all("id").into_iter().map(str::to_owned).collect(),
        ),
    };
    if ids.iter().any(String::is_empty) {
        return html(
            StatusCode::BAD_REQUEST,
            view::page(
                "Refused",
                None,
                view::problem(
                    "This message has no id (another producer sent it): it can be replayed or discarded only with all the others.",
                ),
            ),
        );
    }
    let all = matches!(action.as_str(), "replay-all" | "discard-all");
    // Asks first, naming the count; asks again if more messages arrived since (the
    // confirmation carries the same nonce).
    let count = if all {
        match console.broker.stats(&queue).await {
            Ok(stats) => Some(stats.poisoned),
            Err(e) => return failure(&e),
        }
    } else {
        None
    };
    let confirmed: Option<u64> = form.get("confirmed").and_then(|c| c.parse().ok());
    if let Some(count) = count.filter(|count| confirmed.is_none_or(|c| *count > c)) {
        return html(
            StatusCode::OK,
            view::page(
                "Confirm",
                None,
                view::confirm(&queue, &action, count, console.access.csrf(), &nonce),
            ),
        );
    }
    let replay = action.starts_with("replay");
    if !matches!(
        action.as_str(),
        "replay-one"
            | "discard-one"
            | "replay-selected"
            | "discard-selected"
            | "replay-all"
            | "discard-all"
    ) {
        return html(
            StatusCode::BAD_REQUEST,
            view::page("Refused", None, view::problem("Unknown action.")),
        );
    }
    if !all && ids.is_empty() {
        return html(
            StatusCode::OK,
            view::page(
                "Nothing selected",
                None,
                view::problem("No message was selected: tick the messages first."),
            ),
        );
    }
    if !console.nonces.claim(&nonce) {
        return back(&nonce);
    }
    // The count so far is kept when a later step fails.
    let mut moved = 0;
    let outcome = async {
        if all {
            moved = if replay {
                console.broker.poison_replay(&queue, None).await?
            } else {
                console.broker.poison_discard(&queue, None).await?
            };
        } else {
            for id in &ids {
                moved += if replay {
                    console.broker.poison_replay(&queue, Some(id)).await?
                } else {
                    console.broker.poison_discard(&queue, Some(id)).await?
                };
            }
        }
        Ok::<_, Error>(())
    }
    .await;
    let verb = if replay { "Replayed" } else { "Discarded" };
    let messages = |n: usize| if n == 1 { "message" } else { "messages" };
    let result = match outcome {
        Ok(()) if !all && moved < ids.len() => Outcome::done(format!(
            "{verb} {moved} of {} {}; the others had already left the poison queue.",
            ids.len(),
            messages(ids.len())
        )),
        Ok(()) => Outcome::done(format!("{verb} {moved} {}.", messages(moved))),
        Err(e) => Outcome::failed(format!(
            "{verb} {moved} {}, then failed: {e}",
            messages(moved)
        )),
    };
    tracing::info!(queue = %queue, %action, result = %result.text, "console action");
    console.nonces.finish(&nonce, result);
    back(&nonce)
}
