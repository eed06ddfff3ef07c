//! What the poison page's buttons do.
//!
//! - **Replay** of one message or of the selected ones acts at once; a **discard** of one
//!   or of the selected ones, and anything on **all** the messages a filter passes, first
//!   keeps the exact set it would touch ([`super::sets`]) and shows it
//!   (`GET /poison/<queue>/confirm/<token>`: a page of its own, so that Back and reload
//!   never post anything again); its confirmation acts on that set and nothing else.
//! - Every button carries its own nonce, bound to its action and its target: the handle of
//!   its message, the handles its page listed, or the set it confirms
//!   ([`super::super::forms`]).
//! - The banner says what the backend did — how many of the messages asked for it took,
//!   and that the others were already gone — never what was asked.
//! - Every action is recorded with its client, queue, result and every message it touched
//!   ([`super::super::records`]); the operator comes back to the page, filter and page size
//!   they acted from.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::super::forms::{Admit, Form, admit_action, check_csrf, refusal, refusal_back};
use super::super::records::{ActionRecord, Touched};
use super::super::view::Outcome;
use super::super::{Console, Shared, failure, html, view as frame};
use super::place::{MAX_PAGE, MAX_SET, Place, checked_queue};
use super::sets;
use super::view::{self, confirm_binding, listed_target, one_action, one_target};
use crate::display::neutral;
use crate::error::{Error, Result};
use crate::queue::{PoisonAction, PoisonQuery, Queue};

/// What a form asks for.
struct Asked {
    /// `replay`, `discard` or `moveto`.
    verb: String,
    /// `one`, `selected` or `all`.
    scope: String,
    /// The button's nonce (none for a dry run of "all", which changes nothing).
    nonce: Option<String>,
    handles: Vec<String>,
}

/// Reads the button pressed: `one=<verb>:<nonce>:<handle>`, or
/// `action=<verb>-<scope>[:<nonce>]` with the ticked `h` boxes.
fn asked(form: &Form) -> Option<Asked> {
    if let Some(one) = form.get("one") {
        let (verb, rest) = one.split_once(':')?;
        let (nonce, handle) = rest.split_once(':')?;
        return Some(Asked {
            verb: verb.to_owned(),
            scope: "one".into(),
            nonce: Some(nonce.to_owned()),
            handles: vec![handle.to_owned()],
        });
    }
    let value = form.get("action")?;
    let (name, nonce) = match value.split_once(':') {
        Some((name, nonce)) => (name, Some(nonce.to_owned())),
        None => (value, None),
    };
    let (verb, scope) = name.split_once('-')?;
    Some(Asked {
        verb: verb.to_owned(),
        scope: scope.to_owned(),
        nonce,
        handles: form.all("h").into_iter().map(str::to_owned).collect(),
    })
}

fn back(queue: &str, place: &Place, nonce: &str, again: bool) -> Response {
    let mut to = view::link(queue, place, Some(nonce));
    if again {
        to.push_str("&again=1");
    }
    Redirect::to(&to).into_response()
}

/// What is wrong with the queue a replay sends to, if anything: it must be one tablekit
/// declared that the broker holds ([`Console::declared`]) — never a poison or retry queue,
/// a pause marker, or another client's queue. The answer names the queues it could be:
/// exactly those accepted.
pub(crate) async fn destination_problem(
    console: &Console,
    to: &str,
) -> std::result::Result<(), String> {
    let problem = if let Err(e) = crate::queue::check_queue_name(to) {
        format!("Name the queue to replay to: {e}.")
    } else if to.ends_with(crate::queue::POISON_SUFFIX) {
        "A poison queue takes no replays: name the queue whose workers should take the messages."
            .to_owned()
    } else if crate::queue::is_derived_queue(to) {
        format!(
            "{} is a queue tablekit derives from another (a retry delay, a pause marker): name the queue whose workers should take the messages.",
            neutral(to)
        )
    } else {
        match console.is_declared(to).await {
            Ok(true) => return Ok(()),
            Ok(false) => format!(
                "{} is not a queue tablekit declared: nothing sent to it would be read by its workers. Start a worker of it (or run `tablekit-worker declare --store …`) first, or name a declared queue.",
                neutral(to)
            ),
            Err(e) => return Err(format!("Which queues exist is unknown: {e}")),
        }
    };
    let queues = match console.declared().await {
        Ok(queues) => queues,
        Err(e) => return Err(format!("{problem} Which queues exist is unknown: {e}")),
    };
    if queues.is_empty() {
        Err(problem)
    } else {
        Err(format!(
            "{problem} It could be: {}.",
            queues
                .iter()
                .map(|q| neutral(q).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// The page a poison page's form came from, with what was typed (`to`) and ticked
/// (`h`) there: where a refusal sends the operator back.
fn came_from(queue: &str, place: &Place, form: &Form) -> String {
    let mut link = view::link(queue, place, None);
    let mut extra = form_urlencoded::Serializer::new(String::new());
    if let Some(to) = form.get("to").filter(|t| !t.is_empty()) {
        extra.append_pair("to", to);
    }
    for handle in form.all("h").into_iter().take(super::MAX_PAGE) {
        extra.append_pair("sel", handle);
    }
    let extra = extra.finish();
    if !extra.is_empty() {
        link.push(if link.contains('?') { '&' } else { '?' });
        link.push_str(&extra);
    }
    link
}

/// `POST /poison/<queue>`: a button of the poison page.
pub(crate) async fn action(
    State(console): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(queue): Path<String>,
    body: Bytes,
) -> Response {
    if let Err(e) = checked_queue(&queue) {
        return failure(&e);
    }
    let form = Form::parse(&body);
    let place = Place::of_form(&form);
    let Some(asked) = asked(&form).filter(|a| {
        matches!(a.verb.as_str(), "replay" | "discard" | "moveto")
            && matches!(a.scope.as_str(), "one" | "selected" | "all")
            && !(a.scope == "one" && a.verb == "moveto")
    }) else {
        if let Err(refused) = check_csrf(&console, &form, client) {
            return *refused;
        }
        return refusal_back(
            StatusCode::BAD_REQUEST,
            "Unknown action: nothing was done.",
            &came_from(&queue, &place, &form),
        );
    };
    if let Err(refused) = check_csrf(&console, &form, client) {
        return *refused;
    }
    // What the form asks is checked before its nonce is spent: a refusal leaves the form
    // able to act once it is put right (Back, tick, retype, send).
    if asked.scope != "all" && asked.handles.is_empty() {
        return refusal_back(
            StatusCode::BAD_REQUEST,
            "No message was selected: tick the messages first.",
            &came_from(&queue, &place, &form),
        );
    }
    let action = match asked.verb.as_str() {
        "replay" => PoisonAction::Replay,
        "discard" => PoisonAction::Discard,
        _ => {
            let to = form.get("to").unwrap_or_default().trim();
            if let Err(problem) = destination_problem(&console, to).await {
                return refusal_back(
                    StatusCode::BAD_REQUEST,
                    &problem,
                    &came_from(&queue, &place, &form),
                );
            }
            PoisonAction::ReplayTo(to.to_owned())
        }
    };
    // The button's nonce, checked against what it was issued for.
    let nonce = match asked.scope.as_str() {
        "all" => None,
        scope => {
            let (action, target) = if scope == "one" {
                (
                    one_action(&asked.verb),
                    one_target(&queue, &asked.handles[0]),
                )
            } else {
                let listed = form.get("listed").unwrap_or_default();
                let allowed: Vec<String> = serde_json::from_str(listed).unwrap_or_default();
                if let Some(stray) = asked.handles.iter().find(|h| !allowed.contains(h)) {
                    return refusal_back(
                        StatusCode::BAD_REQUEST,
                        &format!(
                            "The message {} was not listed on the page this form came from: nothing was done.",
                            neutral(stray)
                        ),
                        &came_from(&queue, &place, &form),
                    );
                }
                (
                    format!("{}-selected", asked.verb),
                    listed_target(&queue, listed),
                )
            };
            match admit_action(
                &console,
                &form,
                client,
                asked.nonce.as_deref(),
                &action,
                &target,
            ) {
                Admit::Refused(response) => return *response,
                Admit::Done(nonce) => return back(&queue, &place, &nonce, true),
                Admit::Act(nonce) => Some(nonce),
            }
        }
    };
    // A replay of one message or of the selected ones acts now; a discard, and anything
    // on "all", is confirmed on a page of its own.
    let confirm_first = asked.scope == "all" || action == PoisonAction::Discard;
    if !confirm_first {
        let Some(nonce) = nonce else {
            return refusal(StatusCode::BAD_REQUEST, "The form has no action nonce.");
        };
        if !console.nonces.claim(&nonce) {
            return back(&queue, &place, &nonce, true);
        }
        // The ids, for the records (at most a page of messages, each read by its handle).
        let ids = match named(
            &console,
            &queue,
            action.clone(),
            place.clone(),
            &asked.handles,
        )
        .await
        {
            Ok(bound) => bound.ids,
            Err(_) => Vec::new(),
        };
        let (outcome, _) = act(
            &console,
            client,
            &queue,
            &asked.verb,
            &asked.scope,
            &action,
            &asked.handles,
            &ids,
        )
        .await;
        console.nonces.finish(&nonce, outcome);
        return back(&queue, &place, &nonce, false);
    }
    let bound = if asked.scope == "all" {
        dry_run(&console, &queue, action, place.clone()).await
    } else {
        named(&console, &queue, action, place.clone(), &asked.handles).await
    };
    match bound {
        Ok(mut bound) => {
            bound.verb = asked.verb;
            bound.scope = asked.scope;
            let token = console.sets.keep(bound);
            Redirect::to(&format!(
                "/poison/{}/confirm/{token}",
                frame::urlencode(&queue)
            ))
            .into_response()
        }
        Err(e) => failure(&e),
    }
}

/// `GET /poison/<queue>/confirm/<token>`: what a confirmation would touch.
pub(crate) async fn confirm_page(
    State(console): State<Shared>,
    Path((queue, token)): Path<(String, String)>,
) -> Response {
    match console.sets.peek(&token, &queue) {
        Some(bound) => {
            let (action, target) = confirm_binding(&queue, &token);
            let nonce = console.nonces.issue(&action, &target);
            html(
                StatusCode::OK,
                frame::page(
                    "Confirm",
                    None,
                    view::confirm(&bound, &token, console.access.csrf(), &nonce),
                ),
            )
        }
        None => html(
            StatusCode::NOT_FOUND,
            frame::page("Confirmed already", None, view::confirmation_gone(&queue)),
        ),
    }
}

/// `POST /poison/<queue>/confirm/<token>`: the confirmation, acting on the set kept.
pub(crate) async fn confirmed(
    State(console): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path((queue, token)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let form = Form::parse(&body);
    // Where the operator came from, for every answer (the set's own, when it is kept).
    let place = Place::of_form(&form);
    let (action, target) = confirm_binding(&queue, &token);
    let nonce = match admit_action(&console, &form, client, form.get("nonce"), &action, &target) {
        Admit::Refused(response) => return *response,
        Admit::Done(nonce) => {
            return back(&queue, &place, &nonce, true);
        }
        Admit::Act(nonce) => nonce,
    };
    if !console.nonces.claim(&nonce) {
        return back(&queue, &place, &nonce, true);
    }
    let Some(bound) = console.sets.take(&token, &queue) else {
        let outcome = Outcome::failed(
            "Nothing was done: this confirmation is unknown, expired (15 minutes) or already used. The page shows what is in the poison queue now.",
        );
        console.nonces.finish(&nonce, outcome);
        return back(&queue, &place, &nonce, false);
    };
    let (outcome, _) = act(
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
    console.nonces.finish(&nonce, outcome);
    back(&queue, &bound.back, &nonce, false)
}

/// Takes `handles` off the poison queue with `action`, records what happened, and says
/// what the backend did (with the handles it took).
#[allow(clippy::too_many_arguments)]
// Built without any queue backend, `AnyQueue` has no value: what follows a call to it
// never runs.
#[cfg_attr(
    not(any(feature = "sqlite", feature = "rabbitmq", feature = "azure")),
    allow(unused_variables, unreachable_code)
)]
pub(crate) async fn act(
    console: &Console,
    client: SocketAddr,
    queue: &str,
    verb: &str,
    scope: &str,
    action: &PoisonAction,
    handles: &[String],
    ids: &[String],
) -> (Outcome, Result<Vec<String>>) {
    // Through the desk of the role asking: a viewer's request is refused there too.
    let desk = crate::queue::desk::Desk::new(console.broker.clone(), super::super::view::role());
    let taken = desk.take(queue, handles, action).await;
    let (done, to) = match action {
        PoisonAction::Replay => ("Replayed", String::new()),
        PoisonAction::ReplayTo(to) => ("Replayed", format!(" to {}", neutral(to))),
        _ => ("Discarded", String::new()),
    };
    let outcome = outcome_of(done, &to, handles.len(), taken.as_ref().map(Vec::len));
    let taken_set: std::collections::HashSet<&str> = match &taken {
        Ok(taken) => taken.iter().map(String::as_str).collect(),
        Err(_) => std::collections::HashSet::new(),
    };
    let touched: Vec<Touched> = handles
        .iter()
        .enumerate()
        .map(|(i, handle)| Touched {
            handle: handle.clone(),
            id: ids.get(i).filter(|id| !id.is_empty()).cloned(),
            taken: taken_set.contains(handle.as_str()),
        })
        .collect();
    let record = ActionRecord::new(
        client,
        Some(queue),
        &format!("{verb}-{scope}"),
        match action {
            PoisonAction::ReplayTo(to) => Some(to.clone()),
            _ => None,
        },
        &outcome,
    );
    console.records.record(record, &touched).await;
    (outcome, taken)
}

/// What an action did, from the backend's answer: `taken` of `asked`, or its failure.
fn outcome_of(
    done: &str,
    to: &str,
    asked: usize,
    taken: std::result::Result<usize, &Error>,
) -> Outcome {
    let messages = |n: usize| if n == 1 { "message" } else { "messages" };
    let n = |n: usize| frame::thousands(n as u64);
    match taken {
        Ok(0) => Outcome::failed(format!(
            "{done} 0 of {} {}{to}: {} already left the poison queue, or never was in it. Nothing was done.",
            n(asked),
            messages(asked),
            if asked == 1 { "it had" } else { "they had" }
        )),
        Ok(taken) if taken < asked => Outcome::done(format!(
            "{done} {} of {} {}{to}; the other {} had already left the poison queue, or never was in it.",
            n(taken),
            n(asked),
            messages(asked),
            n(asked - taken)
        )),
        Ok(taken) => Outcome::done(format!("{done} {} {}{to}.", n(taken), messages(taken))),
        Err(e) => Outcome::failed(format!(
            "{done} of {} {}{to} failed: {e}. Messages taken before the failure stay taken; the page shows what is left.",
            n(asked),
            messages(asked)
        )),
    }
}

/// The set of named messages (one, or the selected ones) for a confirmation: each looked
/// up, so that the confirmation shows their ids, and those already gone are said to be.
pub(crate) async fn named(
    console: &Console,
    queue: &str,
    action: PoisonAction,
    back: Place,
    handles: &[String],
) -> Result<sets::Bound> {
    let mut ids = Vec::with_capacity(handles.len());
    let mut groups = sets::GroupCounts::default();
    let mut gone = Vec::new();
    for handle in handles.iter().take(MAX_PAGE) {
        match console.broker.poison_body(queue, handle).await? {
            Some(message) => {
                ids.push(message.id.chars().take(200).collect());
                groups.add(&message);
            }
            None => {
                ids.push(String::new());
                gone.push(handle.clone());
            }
        }
    }
    Ok(sets::Bound {
        queue: queue.to_owned(),
        action,
        filter: back.filter.clone(),
        handles: handles.iter().take(MAX_PAGE).cloned().collect(),
        ids,
        verb: String::new(),
        scope: String::new(),
        reasons: groups.most_first(),
        back,
        gone,
    })
}

/// Lists every message the filter of `back` passes (handles and ids, no bodies): the set
/// a bulk action is bound to, and its reasons counted.
pub(crate) async fn dry_run(
    console: &Console,
    queue: &str,
    action: PoisonAction,
    back: Place,
) -> Result<sets::Bound> {
    let filter = back.filter.clone();
    let mut handles = Vec::new();
    let mut ids = Vec::new();
    let mut groups = sets::GroupCounts::default();
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
            groups.add(&message);
            handles.push(message.handle);
            // Kept for the dry run's list and the records: their start is enough.
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
    Ok(sets::Bound {
        queue: queue.to_owned(),
        action,
        filter,
        handles,
        ids,
        verb: String::new(),
        scope: String::new(),
        // Counted from the set's own messages as it was read: every one, and no other.
        reasons: groups.most_first(),
        back,
        gone: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_says_what_the_backend_did() {
        let o = outcome_of("Discarded", "", 1, Ok(0));
        assert!(o.failed);
        assert!(
            o.text.starts_with("Discarded 0 of 1 message:"),
            "{}",
            o.text
        );
        let o = outcome_of("Discarded", "", 3, Ok(2));
        assert!(!o.failed);
        assert!(
            o.text.starts_with("Discarded 2 of 3 messages;"),
            "{}",
            o.text
        );
        let o = outcome_of("Replayed", " to jobs", 2, Ok(2));
        assert_eq!(o.text, "Replayed 2 messages to jobs.");
    }

    #[test]
    fn a_button_names_its_verb_nonce_and_handle() {
        let form = Form::parse(b"one=discard%3Aabc.def.01%3Ah%3Awith%3Acolons");
        let asked = super::asked(&form).expect("a button");
        assert_eq!(asked.verb, "discard");
        assert_eq!(asked.nonce.as_deref(), Some("abc.def.01"));
        assert_eq!(asked.handles, vec!["h:with:colons".to_owned()]);
        let form = Form::parse(b"action=replay-selected%3An1&h=1&h=2");
        let asked = super::asked(&form).expect("a button");
        assert_eq!(
            (asked.verb.as_str(), asked.scope.as_str()),
            ("replay", "selected")
        );
        assert_eq!(asked.nonce.as_deref(), Some("n1"));
        assert_eq!(asked.handles.len(), 2);
        let form = Form::parse(b"action=discard-all");
        assert_eq!(super::asked(&form).and_then(|a| a.nonce), None);
    }
}
