//! The poison page of one queue, bounded whatever the queue holds:
//!
//! - a page at a time (`?after=` from the page before, `?limit=` up to [`MAX_PAGE`]),
//!   filtered by operation kind, id, reason or body text, with the reasons grouped and
//!   counted;
//! - each body cut to [`PREVIEW`] bytes, the whole message one link away
//!   (`/poison/<queue>/message/<handle>`: its body pretty and raw, its headers, its failure);
//! - replay (to the message's queue or another), or discard, of one message or the
//!   selected ones; and of all the messages the filter passes, after a dry run that lists
//!   them and keeps that exact set ([`sets`]). Every discard is confirmed first, one message
//!   included; a set can be exported before it is confirmed ([`export`]).
//!
//! Each button acts once ([`super::forms`]); each action is recorded with its client and
//! every message it touched ([`super::records`]).

use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{Shared, failure, html, view as frame};
use crate::display::neutral;
use crate::error::{Error, Result};
use crate::queue::{PoisonFilter, PoisonQuery, Queue};

mod actions;
mod export;
mod message;
pub(super) mod sets;
mod view;

pub(super) use actions::{
    act, action, confirm_page, confirmed, destination_problem, dry_run, named,
};
pub(super) use export::export;
pub(super) use message::message;

/// How many messages a page lists unless asked.
pub(super) const DEFAULT_PAGE: usize = 50;
/// The most messages a page lists.
pub(super) const MAX_PAGE: usize = 100;
/// The most bytes of a body a page shows.
pub(super) const PREVIEW: usize = 800;
/// The most messages one bulk action takes.
pub(super) const MAX_SET: usize = 100_000;

/// Where the operator is in a queue's poison messages: the filter, the page and its size.
/// An action returns to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Place {
    pub(super) filter: PoisonFilter,
    /// The cursor of the page (`None`: the first).
    pub(super) after: Option<String>,
    /// Messages per page.
    pub(super) limit: usize,
    /// Newest first rather than oldest first.
    pub(super) newest_first: bool,
    /// Read backwards: the page before the cursor `after` of the other order (the last
    /// page when `after` is `None`).
    pub(super) backwards: bool,
}

impl Place {
    /// The place a form carries in its hidden fields (`kind`, `fid`, `reason`, `body`,
    /// `after`, `limit`).
    pub(super) fn of_form(form: &super::forms::Form) -> Self {
        Place {
            filter: filter_of(
                form.get("kind").unwrap_or_default(),
                form.get("fid").unwrap_or_default(),
                form.get("reason").unwrap_or_default(),
                form.get("body").unwrap_or_default(),
            ),
            after: form
                .get("after")
                .filter(|a| !a.is_empty())
                .map(str::to_owned),
            limit: form
                .get("limit")
                .and_then(|l| l.parse().ok())
                .unwrap_or(DEFAULT_PAGE)
                .clamp(1, MAX_PAGE),
            newest_first: form.get("order") == Some("newest"),
            backwards: form.get("back") == Some("1"),
        }
        .grouped(
            form.get("group").unwrap_or_default(),
            form.get("undecodable") == Some("1"),
        )
    }

    /// The place with the reason group (and undecodable-reasons) parts of its filter.
    fn grouped(mut self, group: &str, undecodable: bool) -> Self {
        self.filter = self.filter.reason_group(group);
        if undecodable {
            self.filter = self.filter.undecodable_reason();
        }
        self
    }

    /// The query of the page this place shows.
    fn query(&self, preview: usize) -> PoisonQuery {
        let query = PoisonQuery::new(self.limit, preview)
            .filter(self.filter.clone())
            .newest_first(self.newest_first);
        if self.backwards {
            query.reversed().after(self.after.clone())
        } else {
            query.after(self.after.clone())
        }
    }
}

/// A page's query: the filter, the page, and an action's result.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub(super) struct PageQuery {
    result: Option<String>,
    /// Set when the result shown is that of an earlier submission of the same form.
    again: Option<String>,
    limit: Option<usize>,
    after: Option<String>,
    order: Option<String>,
    back: Option<String>,
    /// The reason groups skipped (the page of reasons).
    skip: Option<usize>,
    #[serde(default)]
    group: String,
    undecodable: Option<String>,
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
    fn place(&self) -> Place {
        Place {
            filter: filter_of(&self.kind, &self.id, &self.reason, &self.body),
            after: self.after.clone().filter(|a| !a.is_empty()),
            limit: self.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE),
            newest_first: self.order.as_deref() == Some("newest"),
            backwards: self.back.as_deref() == Some("1"),
        }
        .grouped(&self.group, self.undecodable.as_deref() == Some("1"))
    }
}

pub(super) fn filter_of(kind: &str, id: &str, reason: &str, body: &str) -> PoisonFilter {
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
    place: Place,
    /// The reasons of the messages the filter passes, grouped with digits and ids masked.
    groups: Vec<crate::queue::ReasonGroup>,
    /// The operation kinds present among the messages the rest of the filter passes.
    kinds: Vec<(Option<String>, u64)>,
    page: crate::queue::PoisonPage,
    paused: bool,
}

pub(super) async fn page(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    UrlQuery(query): UrlQuery<PageQuery>,
) -> Response {
    let place = query.place();
    let shown = async {
        crate::queue::check_queue_name(&queue)?;
        let total = match console.broker.stats(&queue).await {
            Ok(stats) => stats.poisoned,
            Err(Error::NotDeclared { .. }) => 0,
            Err(e) => return Err(e),
        };
        let groups = console
            .broker
            .poison_reason_groups(&queue, &place.filter)
            .await?;
        let kinds = console.broker.poison_kinds(&queue, &place.filter).await?;
        let query = place.query(PREVIEW);
        let page = if place.backwards && place.after.is_none() {
            // The last page: one read of the other order's first page.
            console
                .broker
                .poison_last_page(&queue, &query.clone().reversed())
                .await?
        } else if place.backwards {
            console.broker.poison_page(&queue, &query).await?.reversed()
        } else {
            console.broker.poison_page(&queue, &query).await?
        };
        Ok::<_, Error>(PoisonView {
            queue: queue.clone(),
            total,
            matching: groups.iter().map(|g| g.count).sum(),
            place: place.clone(),
            groups,
            kinds,
            page,
            paused: console.broker.paused(&queue).await.unwrap_or(false),
        })
    }
    .await;
    match shown {
        Ok(v) => {
            let result = console.result(query.result.as_deref(), query.again.is_some());
            let now = chrono::Utc::now();
            let month = crate::activity::history(
                &console.store,
                &queue,
                now - chrono::Duration::days(30),
                now,
            )
            .await
            .unwrap_or_else(|e| {
                tracing::debug!(error = %e, "reading the queue's history failed");
                Vec::new()
            });
            html(
                StatusCode::OK,
                frame::page(
                    &format!("Poison of {}", neutral(&queue)),
                    None,
                    maud::html! {
                        (view::poison(
                            &v,
                            console.access.csrf(),
                            &console.nonces,
                            result.as_ref(),
                        ))
                        (super::activity::queue_history(&queue, &month, now))
                    },
                ),
            )
        }
        Err(e) => failure(&e),
    }
}

/// Every reason group of a queue's poison messages, a page at a time.
pub(super) async fn reasons(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    UrlQuery(query): UrlQuery<PageQuery>,
) -> Response {
    let place = query.place();
    if let Err(e) = checked_queue(&queue) {
        return failure(&e);
    }
    match console
        .broker
        .poison_reason_groups(&queue, &place.filter)
        .await
    {
        Ok(groups) => html(
            StatusCode::OK,
            frame::page(
                &format!("Reasons of {}", neutral(&queue)),
                None,
                view::reasons(&queue, &place, &groups, query.skip.unwrap_or(0)),
            ),
        ),
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
        Ok(None) => gone(),
        Err(e) => failure(&e),
    }
}

/// The page of a message no longer in the poison queue.
fn gone() -> Response {
    html(
        StatusCode::NOT_FOUND,
        frame::page(
            "Gone",
            None,
            frame::problem("This message is no longer in the poison queue."),
        ),
    )
}

/// Checks a queue named in a path, and that it is not itself a poison queue.
fn checked_queue(queue: &str) -> Result<()> {
    crate::queue::check_queue_name(queue)
}
