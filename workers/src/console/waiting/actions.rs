//! What an operator does to a queue's waiting messages from its page: purge them, and
//! retry now or delete one delayed retry (Sidekiq's Retries and Scheduled tabs). Each is
//! confirmed on the page first (`?confirm=purge|retry-now|delete`), and the confirmation's
//! form is bound to what it shows, as a discard's is: its nonce to the queue and the
//! message (or, for a purge on a backend that numbers its messages, the newest message
//! the operator saw: a message sent after the confirmation is kept). The form acts once;
//! the outcome returns to the page and is recorded with the other actions.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};

use super::super::forms::{Admit, Form, admit_action};
use super::super::records::{ActionRecord, Touched};
use super::super::view::{Outcome, thousands, urlencode};
use super::super::{Console, Shared, failure, pages};
use crate::display::neutral;
use crate::queue::{PeekQuery, Queue, QueueStats, WaitingAction};

/// An action asked by its name, before a purge is bound to the newest message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::console) enum Asked {
    Purge,
    RetryNow(String),
    Delete(String),
}

impl Asked {
    /// The action `name` (`purge`, `retry-now`, `delete`) on the message `handle`
    /// (required but for a purge); `None` when they name none.
    pub(in crate::console) fn of(name: &str, handle: Option<&str>) -> Option<Self> {
        let handle = handle.filter(|h| !h.is_empty()).map(str::to_owned);
        match (name, handle) {
            ("purge", _) => Some(Asked::Purge),
            ("retry-now", Some(handle)) => Some(Asked::RetryNow(handle)),
            ("delete", Some(handle)) => Some(Asked::Delete(handle)),
            _ => None,
        }
    }
}

/// What a confirmation's nonce is bound to: the action's name, and the queue with the
/// message it names (a purge's newest message, if any).
fn binding(queue: &str, action: &WaitingAction) -> (&'static str, String) {
    let message = match action {
        WaitingAction::Purge { through } => through.as_deref().unwrap_or_default(),
        WaitingAction::RetryNow { handle } | WaitingAction::Delete { handle } => handle,
    };
    (action.name(), format!("{queue}\n{message}"))
}

/// The confirmation of `asked` on `queue`, shown above its waiting messages: what it
/// will do, and its form bound to that. A purge is bound to the newest message waiting
/// now where the backend reads the newest (the SQLite queue).
pub(in crate::console) async fn confirmation(
    console: &Console,
    queue: &str,
    asked: Asked,
    stats: Option<&QueueStats>,
) -> Markup {
    let action = match asked {
        Asked::Purge => {
            let newest = console
                .broker
                .peek(queue, &PeekQuery::new(1).newest_first(true))
                .await
                .ok()
                .and_then(|m| m.into_iter().next())
                .and_then(|m| m.handle);
            WaitingAction::Purge { through: newest }
        }
        Asked::RetryNow(handle) => WaitingAction::RetryNow { handle },
        Asked::Delete(handle) => WaitingAction::Delete { handle },
    };
    let (name, target) = binding(queue, &action);
    let nonce = console.nonces.issue(name, &target);
    let waiting = stats.map(|s| s.waiting);
    let back = format!("/queues/{}/waiting", urlencode(queue));
    html! {
        section.card.confirm #confirm {
            h2 { "Confirm" }
            @match &action {
                WaitingAction::Purge { through: Some(_) } => p {
                    "Purge the messages waiting in " code { (neutral(queue)) }
                    @if let Some(n) = waiting { " (" (thousands(n)) " now)" }
                    ", up to the newest one this page saw. A message sent after it is kept; one a consumer holds now stays. Purged messages are not kept anywhere."
                },
                WaitingAction::Purge { through: None } => p {
                    "Purge every message waiting in " code { (neutral(queue)) }
                    @if let Some(n) = waiting { " (" (thousands(n)) " now)" }
                    ", those sent before you confirm included: this backend cannot stop at the newest one this page saw. RabbitMQ keeps the messages its consumers hold; Azure Queue Storage clears them too. Purged messages are not kept anywhere."
                },
                WaitingAction::RetryNow { handle } => p {
                    "Make message " code { (neutral(handle)) } " of " code { (neutral(queue)) }
                    " deliverable now, rather than when its retry delay ends."
                },
                WaitingAction::Delete { handle } => p {
                    "Delete message " code { (neutral(handle)) } " of " code { (neutral(queue)) }
                    ", unless a consumer holds it when you confirm. It is not kept anywhere."
                },
            }
            form method="post" action=(back) {
                input type="hidden" name="csrf" value=(console.access.csrf());
                input type="hidden" name="nonce" value=(nonce);
                input type="hidden" name="do" value=(name);
                @match &action {
                    WaitingAction::Purge { through } => input type="hidden" name="through" value=(through.as_deref().unwrap_or_default());,
                    WaitingAction::RetryNow { handle } | WaitingAction::Delete { handle } => input type="hidden" name="handle" value=(handle);,
                }
                button.danger { "Confirm" } " "
                a href=(back) { "Cancel" }
            }
        }
    }
}

/// The action a confirmation's form names.
fn asked_by(form: &Form) -> Option<WaitingAction> {
    let handle = || {
        form.get("handle")
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
    };
    match form.get("do")? {
        "purge" => Some(WaitingAction::Purge {
            through: form
                .get("through")
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
        }),
        "retry-now" => handle().map(|handle| WaitingAction::RetryNow { handle }),
        "delete" => handle().map(|handle| WaitingAction::Delete { handle }),
        _ => None,
    }
}

/// `POST /queues/<queue>/waiting`: a confirmation's form, acting once.
pub(in crate::console) async fn act(
    State(console): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(queue): Path<String>,
    body: Bytes,
) -> Response {
    if let Err(e) = crate::queue::check_queue_name(&queue) {
        return failure(&e);
    }
    let form = Form::parse(&body);
    let page = format!("/queues/{}/waiting", urlencode(&queue));
    let Some(action) = asked_by(&form) else {
        if let Err(refused) = super::super::forms::check_csrf(&console, &form, client) {
            return *refused;
        }
        return super::super::forms::refusal(
            axum::http::StatusCode::BAD_REQUEST,
            "Unknown action: a waiting message is purged, retried now or deleted. Nothing was done.",
        );
    };
    let (name, target) = binding(&queue, &action);
    let nonce = match admit_action(&console, &form, client, form.get("nonce"), name, &target) {
        Admit::Refused(response) => return *response,
        Admit::Done(nonce) => {
            return Redirect::to(&format!("{page}?result={nonce}&again=1")).into_response();
        }
        Admit::Act(nonce) => nonce,
    };
    let verb = match &action {
        WaitingAction::Purge { .. } => "purged",
        WaitingAction::RetryNow { .. } => "retried now",
        WaitingAction::Delete { .. } => "deleted",
    };
    if let Err(refused) = pages::actionable(
        &console,
        &queue,
        &format!("The waiting messages of {{}} cannot be {verb} here: the console acts on the queues tablekit declared, never a poison or retry queue."),
    )
    .await
    {
        return refused;
    }
    if !console.nonces.claim(&nonce) {
        return Redirect::to(&format!("{page}?result={nonce}&again=1")).into_response();
    }
    let (outcome, _) = perform(&console, client, &queue, &action).await;
    console.nonces.finish(&nonce, outcome);
    Redirect::to(&format!("{page}?result={nonce}")).into_response()
}

/// Does `action` to `queue`'s waiting messages and records it with the other actions:
/// what the banner says, and what the backend answered. The page's form and the API both
/// act through it.
pub(in crate::console) async fn perform(
    console: &Console,
    client: SocketAddr,
    queue: &str,
    action: &WaitingAction,
) -> (Outcome, crate::error::Result<Option<u64>>) {
    let done = console.broker.act_on_waiting(queue, action).await;
    let outcome = outcome(queue, action, &done);
    let touched: Vec<Touched> = match action {
        WaitingAction::Purge { .. } => Vec::new(),
        WaitingAction::RetryNow { handle } | WaitingAction::Delete { handle } => vec![Touched {
            handle: handle.clone(),
            id: None,
            taken: matches!(done, Ok(Some(n)) if n > 0),
        }],
    };
    console
        .records
        .record(
            ActionRecord::new(client, Some(queue), action.name(), None, &outcome),
            &touched,
        )
        .await;
    (outcome, done)
}

/// What the banner says of an action's result.
fn outcome(
    queue: &str,
    action: &WaitingAction,
    done: &crate::error::Result<Option<u64>>,
) -> Outcome {
    let queue = neutral(queue);
    match (action, done) {
        (_, Err(e)) => Outcome::failed(format!(
            "Nothing was {} in {queue}: {e}",
            match action {
                WaitingAction::Purge { .. } => "purged",
                WaitingAction::RetryNow { .. } => "retried",
                WaitingAction::Delete { .. } => "deleted",
            }
        )),
        (WaitingAction::Purge { .. }, Ok(Some(1))) => {
            Outcome::done(format!("Purged 1 waiting message from {queue}."))
        }
        (WaitingAction::Purge { .. }, Ok(Some(n))) => Outcome::done(format!(
            "Purged {} waiting messages from {queue}.",
            thousands(*n)
        )),
        (WaitingAction::Purge { .. }, Ok(None)) => Outcome::done(format!(
            "Purged the waiting messages of {queue} (the backend does not say how many)."
        )),
        (WaitingAction::RetryNow { handle }, Ok(Some(n))) if *n > 0 => Outcome::done(format!(
            "Message {} of {queue} is deliverable now.",
            neutral(handle)
        )),
        (WaitingAction::RetryNow { handle }, Ok(_)) => Outcome::failed(format!(
            "Nothing was done: message {} of {queue} no longer waits out a retry delay (a consumer took it, or it was settled or deleted).",
            neutral(handle)
        )),
        (WaitingAction::Delete { handle }, Ok(Some(n))) if *n > 0 => {
            Outcome::done(format!("Deleted message {} of {queue}.", neutral(handle)))
        }
        (WaitingAction::Delete { handle }, Ok(_)) => Outcome::failed(format!(
            "Nothing was done: message {} of {queue} is no longer waiting (a consumer holds or took it, or it was deleted).",
            neutral(handle)
        )),
    }
}
