//! A queue's waiting messages, peeked at without taking them
//! (`/queues/<queue>/waiting?order=oldest|newest`; the API serves the same as JSON at
//! `/api/queues/<queue>/waiting`): each one's id, operation kind, age, deliveries so far,
//! and when a delayed retry becomes deliverable — or that a consumer holds it now.
//!
//! Where the backend allows ([`Queue::peek`]): the SQLite queue shows either end of the
//! queue, delayed and leased messages included; Azure Queue Storage shows the front only
//! (its peek reads the oldest 32, and cannot tell delayed ones); RabbitMQ cannot (AMQP has
//! no read that leaves a message where it is), and the page says so.

use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;

use super::view::{ago, thousands, urlencode};
use super::{Shared, failure, html as page_of, view};
use crate::display::neutral;
use crate::error::Error;
use crate::queue::{PeekQuery, Queue, WaitingMessage};

/// How many waiting messages a page shows.
pub(super) const SHOWN: usize = 50;

#[derive(Deserialize, Default)]
pub(super) struct Order {
    order: Option<String>,
    limit: Option<usize>,
}

impl Order {
    pub(super) fn newest_first(&self) -> bool {
        self.order.as_deref() == Some("newest")
    }
}

/// `GET /queues/<queue>/waiting`.
pub(super) async fn page(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    UrlQuery(order): UrlQuery<Order>,
) -> Response {
    if let Err(e) = crate::queue::check_queue_name(&queue) {
        return failure(&e);
    }
    let newest = order.newest_first();
    let query = PeekQuery::new(order.limit.unwrap_or(SHOWN)).newest_first(newest);
    let peeked = console.broker.peek(&queue, &query).await;
    let stats = console.broker.stats(&queue).await.ok();
    page_of(
        StatusCode::OK,
        view::page(
            &format!("Waiting in {}", neutral(&queue)),
            None,
            waiting(
                &queue,
                newest,
                stats.map(|s| s.waiting),
                &peeked,
                Utc::now(),
            ),
        ),
    )
}

fn waiting(
    queue: &str,
    newest: bool,
    total: Option<u64>,
    peeked: &Result<Vec<WaitingMessage>, Error>,
    now: DateTime<Utc>,
) -> Markup {
    let base = format!("/queues/{}/waiting", urlencode(queue));
    html! {
        section.card #waiting {
            h2 { "Waiting in " code { (neutral(queue)) } }
            p.muted {
                @if let Some(total) = total { (thousands(total)) " waiting. " }
                "Shown without taking them: "
                @if newest { a href=(base) { "oldest first" } " · " strong { "newest first" } }
                @else { strong { "oldest first" } " · " a href=(format!("{base}?order=newest")) { "newest first" } }
                " · " a href=(format!("/poison/{}", urlencode(queue))) { "its poison messages" }
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
                                                Some(at) if at > now => { (at.format("%H:%M:%S UTC")) br; span.muted { "in " (ago(now, at).trim_end_matches(" ago")) } },
                                                _ => span.muted { "now" },
                                            }
                                        }
                                        td {
                                            @if m.leased { span.badge { "being handled" } }
                                            @else if m.next_attempt.is_some_and(|at| at > now) { span.badge.bad { "delayed retry" } }
                                            @else { span.badge.ok { "ready" } }
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
