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
//!
//! Where the operator is and what a page shows are [`place`]'s; the pages are drawn by
//! `view`, the buttons answered by `actions`.

use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{Shared, failure, html, view as frame};
use crate::display::neutral;
use crate::error::Error;
use crate::queue::Queue;

mod actions;
mod export;
mod message;
mod place;
pub(super) mod sets;
mod view;

pub(super) use actions::{
    act, action, confirm_page, confirmed, destination_problem, dry_run, named,
};
pub(super) use export::export;
pub(super) use message::message;
pub(super) use place::{DEFAULT_PAGE, MAX_PAGE, PREVIEW, Place, filter_of};
use place::{PoisonView, checked_queue};

/// How many of the workers' last trims a poison page lists.
const TRIMS_SHOWN: usize = 3;

/// A page's query: the filter, the page, and an action's result (the API's pages read
/// the same).
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub(super) struct PageQuery {
    result: Option<String>,
    /// Set when the result shown is that of an earlier submission of the same form.
    again: Option<String>,
    limit: Option<String>,
    after: Option<String>,
    order: Option<String>,
    back: Option<String>,
    /// The reason groups skipped (the page of reasons).
    skip: Option<String>,
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
    /// The queue typed in the "replay there" field, kept when a refusal sends the
    /// operator back.
    #[serde(default)]
    to: String,
    /// The messages ticked (`sel`, repeated), kept likewise.
    #[serde(skip)]
    selected: Vec<String>,
}

impl PageQuery {
    /// Where the query puts the operator.
    pub(in crate::console) fn place(&self) -> Place {
        let set = |flag: &Option<String>| matches!(flag.as_deref(), Some("1" | "true"));
        Place {
            filter: filter_of(&self.kind, &self.id, &self.reason, &self.body),
            after: self.after.clone().filter(|a| !a.is_empty()),
            limit: self
                .limit
                .as_deref()
                .and_then(|l| l.parse().ok())
                .unwrap_or(DEFAULT_PAGE)
                .clamp(1, MAX_PAGE),
            newest_first: self.order.as_deref() == Some("newest"),
            backwards: set(&self.back),
        }
        .grouped(&self.group, set(&self.undecodable))
    }

    /// The reason groups the page of reasons skips.
    fn skip(&self) -> usize {
        self.skip
            .as_deref()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    /// The query of a page's address, or its refusal (`400`, naming the parameter) when
    /// it has a value the pages do not know, read as strictly as the API reads it: never
    /// read as another value.
    fn of(uri: &axum::http::Uri) -> Result<Self, Box<Response>> {
        let params = super::api::problem::Params::of(uri.query());
        let checked = (|| {
            params.number("limit", 1, MAX_PAGE)?;
            params.number("skip", 0, usize::MAX)?;
            params.choice("order", &["oldest", "newest"])?;
            params.flag("back")?;
            params.flag("undecodable")?;
            Ok::<_, super::api::problem::Problem>(())
        })();
        if let Err(problem) = checked {
            return Err(Box::new(super::forms::query_refused(&problem)));
        }
        UrlQuery::<PageQuery>::try_from_uri(uri)
            .map(|UrlQuery(mut query)| {
                query.selected = form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
                    .filter(|(k, _)| k == "sel")
                    .map(|(_, v)| v.into_owned())
                    .take(MAX_PAGE)
                    .collect();
                query
            })
            .map_err(|e| {
                Box::new(super::forms::refusal(
                    StatusCode::BAD_REQUEST,
                    &format!("The page's address does not parse: {e}."),
                ))
            })
    }
}

impl super::Console {
    /// Moves what the broker's own poison queue of `queue` holds (dead-lettered by the
    /// broker, or left there by a store failure) into the poison table before a page
    /// shows it, as the workers do every minute: nothing is shown from two places. A
    /// failure is logged; the page shows the table. Nothing to do (no read) when the
    /// broker keeps the poison messages itself.
    pub(in crate::console) async fn sweep(&self, queue: &str) {
        // One broker read when its poison queue is empty (a sweep's first page).
        if let Err(e) = self.broker.sweep(queue).await {
            tracing::warn!(queue = %queue, error = %e, "sweeping the broker's poison queue into the poison table failed");
        }
    }
}

pub(super) async fn page(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    uri: axum::http::Uri,
) -> Response {
    let query = match PageQuery::of(&uri) {
        Ok(query) => query,
        Err(refused) => return *refused,
    };
    let place = query.place();
    let shown = async {
        crate::queue::check_queue_name(&queue)?;
        console.sweep(&queue).await;
        let total = match console.broker.stats(&queue).await {
            Ok(stats) => stats.poisoned,
            Err(Error::NotDeclared { .. }) => 0,
            Err(e) => return Err(e),
        };
        // The groups and kinds (one read of the table), then the page: one after the
        // other, as a broker that keeps its poison messages reads them by holding them.
        let (groups, kinds) = console
            .broker
            .poison_facets(&queue, &place.filter)
            .await?;
        let page = place.read(&console.broker, &queue, PREVIEW).await?;
        Ok::<_, Error>(PoisonView {
            queue: queue.clone(),
            total,
            matching: groups.iter().map(|g| g.count).sum(),
            partial: console.broker.table().is_some()
                && !crate::queue::poison_table::PoisonTable::<tablekit_core::AnyStore>::counted_whole(
                    &place.filter,
                    total,
                ),
            place: place.clone(),
            groups,
            kinds,
            page,
            paused: console.broker.paused(&queue).await.unwrap_or(false),
            trims: match console.broker.table() {
                Some(table) => Some(table.trims(&queue, TRIMS_SHOWN).await?),
                None => None,
            },
            typed_to: query.to.clone(),
            selected: query.selected.clone(),
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
    uri: axum::http::Uri,
) -> Response {
    let query = match PageQuery::of(&uri) {
        Ok(query) => query,
        Err(refused) => return *refused,
    };
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
                view::reasons(&queue, &place, &groups, query.skip()),
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
        Ok(None) => message::gone(),
        Err(e) => failure(&e),
    }
}
