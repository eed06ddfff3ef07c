//! A queue's waiting messages, peeked at without taking them
//! (`/queues/<queue>/waiting?order=oldest|newest`; the API serves the same as JSON at
//! `/api/queues/<queue>/waiting`): each one's id, operation kind, age, deliveries so far,
//! and when a delayed retry becomes deliverable — or that a consumer holds it now. An
//! operator purges the waiting messages, and retries now or deletes one of them, each
//! behind a confirmation ([`actions`]).
//!
//! Where the backend allows ([`Queue::peek`]): the SQLite queue shows either end of the
//! queue, delayed and leased messages included; Azure Queue Storage shows the front only
//! (its peek reads the oldest 32, and cannot tell delayed ones); RabbitMQ cannot (AMQP has
//! no read that leaves a message where it is), and the page says so.

pub(super) mod actions;

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::api::problem::{Params, Problem};
use super::view::{ago, thousands, urlencode};
use super::{Shared, failure, html as page_of, view};
use crate::display::neutral;
use crate::error::Error;
use crate::queue::{PeekQuery, Queue, WaitingMessage};

/// How many waiting messages a page shows.
pub(super) const SHOWN: usize = 50;

/// What the page's query asks, read as strictly as the API reads its own: the order, how
/// many, an action to confirm (`confirm=purge|retry-now|delete`, the last two with the
/// message's `handle`), and the outcome of the last action (`result`, `again`).
struct Asked {
    newest: bool,
    limit: usize,
    confirm: Option<actions::Asked>,
    result: Option<String>,
    again: bool,
}

impl Asked {
    fn of(query: Option<&str>) -> Result<Self, Problem> {
        let params = Params::of(query);
        let confirm = match params.choice("confirm", &["purge", "retry-now", "delete"])? {
            None => None,
            Some(name) => Some(
                actions::Asked::of(name, params.text("handle")?.as_deref()).ok_or_else(|| {
                    Problem::parameter(
                        "handle",
                        format!("`confirm` is {name}, which names one message: give its `handle`"),
                    )
                })?,
            ),
        };
        Ok(Asked {
            newest: params.choice("order", &["oldest", "newest"])? == Some("newest"),
            limit: params
                .number("limit", 1, crate::queue::MAX_PEEK)?
                .unwrap_or(SHOWN),
            confirm,
            result: params.text("result")?,
            again: params.text("again")?.is_some(),
        })
    }
}

/// `GET /queues/<queue>/waiting`.
pub(super) async fn page(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    if let Err(e) = crate::queue::check_queue_name(&queue) {
        return failure(&e);
    }
    let Asked {
        newest,
        limit,
        confirm,
        result,
        again,
    } = match Asked::of(raw.as_deref()) {
        Ok(asked) => asked,
        Err(problem) => return super::forms::query_refused(&problem),
    };
    let query = PeekQuery::new(limit).newest_first(newest);
    let (peeked, stats) = futures::join!(
        console.broker.peek(&queue, &query),
        console.broker.stats(&queue)
    );
    let stats = stats.ok();
    let result = console.result(result.as_deref(), again);
    let confirmation = match confirm {
        Some(action) if view::may_act() => {
            Some(actions::confirmation(&console, &queue, action, stats.as_ref()).await)
        }
        _ => None,
    };
    page_of(
        StatusCode::OK,
        view::page(
            &format!("Waiting in {}", neutral(&queue)),
            None,
            html! {
                (view::banner(result.as_ref()))
                @if let Some(confirmation) = confirmation { (confirmation) }
                (waiting(
                    &queue,
                    console.broker.names_waiting_messages(),
                    newest,
                    stats.as_ref().map(|s| s.waiting),
                    &peeked,
                    Utc::now(),
                ))
            },
        ),
    )
}

fn waiting(
    queue: &str,
    names_one: bool,
    newest: bool,
    total: Option<u64>,
    peeked: &Result<Vec<WaitingMessage>, Error>,
    now: DateTime<Utc>,
) -> Markup {
    let base = format!("/queues/{}/waiting", urlencode(queue));
    let acts = view::may_act();
    html! {
        section.card #waiting {
            h2 { "Waiting in " code { (neutral(queue)) } }
            p.muted {
                @if let Some(total) = total { (thousands(total)) " waiting. " }
                "Shown without taking them: "
                @if newest { a href=(base) { "oldest first" } " · " strong { "newest first" } }
                @else { strong { "oldest first" } " · " a href=(format!("{base}?order=newest")) { "newest first" } }
                " · " a href=(format!("/poison/{}", urlencode(queue))) { "its poison messages" }
                @if acts && total.unwrap_or(0) > 0 {
                    " · " a.danger href=(format!("{base}?confirm=purge")) { "Purge waiting…" }
                }
            }
            @match peeked {
                Err(Error::Unsupported(why)) => p.muted { "This queue's backend cannot show its messages without taking them: " (why) "." },
                Err(e) => p.error { (neutral(&e.to_string())) },
                Ok(messages) if messages.is_empty() => p.ok { "Nothing waits." },
                Ok(messages) => {
                    div.scroll {
                        table.grid.waiting {
                            thead { tr {
                                th { "message" } th { "sent (UTC)" } th.num { "deliveries" } th { "next attempt" } th { "state" }
                                @if acts && names_one { th { "" } }
                            } }
                            tbody {
                                @for m in messages {
                                    tr {
                                        td.ident {
                                            @if let Some((kind, version)) = &m.kind {
                                                span.kind { (neutral(kind)) " v" (version) } br;
                                            } @else {
                                                span.kind.bad { "not an operation" } br;
                                            }
                                            @if m.id.is_empty() { span.muted { "no id" } } @else { code { (neutral(&m.id)) } }
                                        }
                                        td.nowrap {
                                            @match m.sent_at {
                                                Some(at) => { (at.format("%Y-%m-%d %H:%M:%S")) br; span.muted { (ago(at, now)) } },
                                                None => span.muted { "–" },
                                            }
                                        }
                                        td.num { (m.attempts) }
                                        td.nowrap {
                                            @match m.next_attempt {
                                                Some(at) if at > now => { (at.format("%H:%M:%S UTC")) br; span.muted { "in " (crate::display::span(now, at)) } },
                                                _ => span.muted { "now" },
                                            }
                                        }
                                        td {
                                            @if m.leased { span.badge { "being handled" } }
                                            @else if m.next_attempt.is_some_and(|at| at > now) { span.badge.bad { "delayed retry" } }
                                            @else { span.badge.ok { "ready" } }
                                        }
                                        @if acts && names_one {
                                            td.nowrap {
                                                @if let Some(handle) = m.handle.as_deref().filter(|_| names_one && !m.leased) {
                                                    @let at = format!("{base}?handle={}", urlencode(handle));
                                                    @if m.next_attempt.is_some_and(|at| at > now) {
                                                        a href=(format!("{at}&confirm=retry-now")) { "Retry now…" } " "
                                                    }
                                                    a.danger href=(format!("{at}&confirm=delete")) { "Delete…" }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                },
            }
        }
    }
}
