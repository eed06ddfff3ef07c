//! The overview and its live part, the job form's action, the page of recent actions, and
//! the console's assets.

use std::time::Instant;

use std::net::SocketAddr;

use axum::body::Bytes;

use axum::extract::{ConnectInfo, Path, Query as UrlQuery, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};

use super::forms::{self, Admit, Form, admit_action};
use super::jobs::JobKind;
use super::records::ActionRecord;
use super::view::{Outcome, ago, thousands, urlencode};
use super::{Console, Overview, QueueRow, Shared, activity, failure, html, metrics, view};
use crate::display::neutral;
use crate::error::Result;
use crate::queue::Queue;
use maud::{Markup, html};

/// The most queues the overview adds from the backend's list of declared queues.
const LISTED_DECLARED: usize = 50;

#[derive(serde::Deserialize)]
pub(super) struct ResultQuery {
    pub(super) result: Option<String>,
    pub(super) again: Option<String>,
}

impl Console {
    pub(super) async fn overview(&self) -> Result<Overview> {
        // The registry read once: the default queues and the job forms both come from it.
        let schemas = tablekit_patterns::index::SchemaRecord::list(&self.store, None).await?;
        let queues = if self.options.queues.is_empty() {
            self.default_queues(&schemas).await
        } else {
            self.options.queues.clone()
        };
        let status = crate::status::status(&self.store, &self.broker, &queues).await?;
        let at = Utc::now();
        let unconsumed = {
            let mut watch = self.consumers.lock().unwrap_or_else(|e| e.into_inner());
            watch.keep_only(&status.queues);
            status
                .queues
                .iter()
                .filter_map(|q| watch.unconsumed(q, at, self.options.unconsumed_after))
                .collect()
        };
        let now = Instant::now();
        let queues = {
            let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
            status
                .queues
                .iter()
                .map(|q| {
                    let (mut waiting_rate, mut poisoned_rate) = (None, None);
                    if let (Some(waiting), Some(poisoned)) = (q.waiting, q.poisoned) {
                        if let Some((then, w, p)) = samples.get(&q.queue) {
                            let secs = now.duration_since(*then).as_secs_f64();
                            if secs >= 0.5 {
                                waiting_rate = Some((waiting as f64 - *w as f64) / secs);
                                poisoned_rate = Some((poisoned as f64 - *p as f64) / secs);
                            }
                        }
                        let stale = samples.get(&q.queue).is_none_or(|(then, _, _)| {
                            now.duration_since(*then).as_secs_f64() >= 0.5
                        });
                        if stale {
                            samples.insert(q.queue.clone(), (now, waiting, poisoned));
                        }
                    }
                    QueueRow {
                        status: q.clone(),
                        waiting_rate,
                        poisoned_rate,
                        paused: q.paused,
                    }
                })
                .collect()
        };
        let mut tables: Vec<(String, Vec<String>)> = Vec::new();
        for schema in schemas {
            let names = schema
                .declared
                .iter()
                .filter(|d| matches!(d.attribute.as_str(), "index" | "index_entity"))
                .map(|d| d.name.clone());
            match tables.iter_mut().find(|(t, _)| *t == schema.table) {
                Some((_, indexes)) => indexes.extend(names),
                None => tables.push((schema.table.clone(), names.collect())),
            }
        }
        Ok(Overview {
            at,
            status,
            queues,
            unconsumed,
            tables,
            migrations: self
                .jobs
                .migrations()
                .list()
                .into_iter()
                .map(|m| (m.table, m.kind, m.version))
                .collect(),
            jobs: self.jobs.list().await?,
            workers: match crate::activity::workers(&self.store).await {
                Ok(workers) => workers,
                Err(e) => {
                    tracing::debug!(error = %e, "reading the worker processes failed");
                    Vec::new()
                }
            },
            convergence: if self.options.metrics.is_empty() {
                None
            } else {
                Some(metrics::read(&self.options.metrics).await)
            },
        })
    }

    /// The result of an action, by its nonce, for the banner; `again` when the same form
    /// was submitted once more (a double click, a page restored by Back): it says that
    /// nothing was done this time.
    pub(super) fn result(&self, nonce: Option<&str>, again: bool) -> Option<Outcome> {
        let outcome = nonce.and_then(|n| self.nonces.outcome(n))?;
        Some(if again {
            Outcome {
                text: format!(
                    "Nothing was done: this form had already acted, and acts once. What it did then: {}",
                    outcome.text
                ),
                failed: true,
            }
        } else {
            outcome
        })
    }

    /// The queues shown when none are named: `index`, `archive` and the change queues the
    /// registered types declare, then those tablekit declared (at most
    /// [`LISTED_DECLARED`]), then those the workers recorded history for — each once, in
    /// that order. Whether each exists is left to the overview's counts (a queue not on
    /// the broker shows "not declared yet"). When the store cannot be read, the first are
    /// still shown.
    async fn default_queues(
        &self,
        schemas: &[tablekit_patterns::index::SchemaRecord],
    ) -> Vec<String> {
        let mut queues = crate::status::default_queues(schemas);
        match self.candidates().await {
            Ok(super::queues::Candidates { declared, served }) => {
                queues.extend(declared.into_iter().take(LISTED_DECLARED));
                // Queues served elsewhere (another broker, a queue since deleted): their
                // history is shown, and nothing is done to them.
                queues.extend(served);
            }
            Err(e) => tracing::debug!(error = %e, "reading the declared queues failed"),
        }
        let mut seen = std::collections::HashSet::new();
        queues.retain(|q| !crate::queue::is_poison_queue(q) && seen.insert(q.clone()));
        queues
    }
}

pub(super) async fn overview(
    State(console): State<Shared>,
    RawQuery(raw): RawQuery,
    UrlQuery(query): UrlQuery<ResultQuery>,
) -> Response {
    let window = match activity::Window::of(raw.as_deref()) {
        Ok(window) => window,
        Err(problem) => return forms::query_refused(&problem),
    };
    match console.overview().await {
        Ok(o) => {
            let result = console.result(query.result.as_deref(), query.again.is_some());
            // The charts are drawn once per page load, not at each refresh.
            let now = Utc::now();
            let histories = futures::future::join_all(o.queues.iter().map(|q| {
                let console = &console;
                async move {
                    let points = activity::history_of(console, &q.status.queue, window, now)
                        .await
                        .unwrap_or_else(|e| {
                            tracing::debug!(error = %e, "reading a queue's history failed");
                            Vec::new()
                        });
                    (q.status.queue.clone(), points)
                }
            }))
            .await;
            html(
                StatusCode::OK,
                view::page(
                    "Overview",
                    Some(console.options.refresh.max(1)),
                    html! {
                        (view::overview(&o, console.access.csrf(), &console.nonces, result.as_ref()))
                        (activity::history_card(&histories, window, now))
                    },
                ),
            )
        }
        Err(e) => failure(&e),
    }
}

pub(super) async fn live(State(console): State<Shared>) -> Response {
    match console.overview().await {
        Ok(o) => html(
            StatusCode::OK,
            view::live(&o, console.access.csrf(), &console.nonces),
        ),
        Err(e) => failure(&e),
    }
}

fn back_to_overview(nonce: &str) -> Response {
    Redirect::to(&format!("/?result={nonce}")).into_response()
}

/// Back to the overview after a form that had already acted.
fn again_to_overview(nonce: &str) -> Response {
    Redirect::to(&format!("/?result={nonce}&again=1")).into_response()
}

pub(super) async fn start_job(
    State(console): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    body: Bytes,
) -> Response {
    let form = Form::parse(&body);
    // The form the nonce was issued for: a repair's confirmation (bound to its table), the
    // clearing of finished jobs, the migration form, or the job form.
    let (bound_action, bound_target) = if form.get("confirmed") == Some("yes") {
        (view::REPAIR_FORM, form.get("table").unwrap_or_default())
    } else if form.get("kind") == Some("clear") {
        (view::CLEAR_FORM, "")
    } else if form.get("type").is_some() {
        (view::MIGRATE_FORM, "")
    } else {
        (view::JOB_FORM, "")
    };
    let nonce = match admit_action(
        &console,
        &form,
        client,
        form.get("nonce"),
        bound_action,
        bound_target,
    ) {
        Admit::Refused(response) => return *response,
        Admit::Done(nonce) => return again_to_overview(&nonce),
        Admit::Act(nonce) => nonce,
    };
    if form.get("kind") == Some("clear") {
        if !console.nonces.claim(&nonce) {
            return again_to_overview(&nonce);
        }
        let outcome = match console.jobs.clear_finished().await {
            Ok(n) => Outcome::done(format!(
                "Cleared {n} finished {}.",
                if n == 1 { "job" } else { "jobs" }
            )),
            Err(e) => Outcome::failed(format!("Clearing the finished jobs failed: {e}")),
        };
        console
            .records
            .record(
                ActionRecord::new(client, None, "clear-jobs", None, &outcome),
                &[],
            )
            .await;
        console.nonces.finish(&nonce, outcome);
        return back_to_overview(&nonce);
    }
    let (Some(kind), Some(table)) = (
        form.get("kind").and_then(JobKind::parse),
        form.get("table").or(form.get("type")),
    ) else {
        return html(
            StatusCode::BAD_REQUEST,
            view::page(
                "Refused",
                None,
                view::problem("A job names its kind and table."),
            ),
        );
    };
    // A repair writes to the table: it runs after a confirmation that says so.
    if kind == JobKind::Repair && form.get("confirmed") != Some("yes") {
        return html(
            StatusCode::OK,
            view::page(
                "Confirm",
                None,
                view::confirm_repair(table, console.access.csrf(), &console.nonces),
            ),
        );
    }
    if !console.nonces.claim(&nonce) {
        return again_to_overview(&nonce);
    }
    // A migration names `table:kind` in one field; a backfill names its index.
    let (table, target) = match (kind, form.get("type")) {
        (JobKind::Migrate, Some(chosen)) => match chosen.split_once(':') {
            Some((table, entity_kind)) => (table, Some(entity_kind.to_owned())),
            None => (chosen, None),
        },
        _ => (
            table,
            form.get("index")
                .filter(|i| !i.is_empty())
                .map(str::to_owned),
        ),
    };
    let result = match console.jobs.start(kind, table, target).await {
        Ok(job) => Outcome::done(format!(
            "Started: {}{} of {}.",
            kind.name(),
            job.index
                .as_deref()
                .or(job.entity_kind.as_deref())
                .map(|i| format!(" of {i}"))
                .unwrap_or_default(),
            job.table
        )),
        Err(e) => Outcome::failed(format!("The job did not start: {e}")),
    };
    let mut record = ActionRecord::new(client, None, kind.name(), None, &result);
    record.to = Some(table.to_owned());
    console.records.record(record, &[]).await;
    console.nonces.finish(&nonce, result);
    back_to_overview(&nonce)
}

/// Pauses or resumes the consumers of one queue.
pub(super) async fn pause_queue(
    State(console): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(queue): Path<String>,
    body: Bytes,
) -> Response {
    if let Err(e) = crate::queue::check_queue_name(&queue) {
        return failure(&e);
    }
    let form = Form::parse(&body);
    let nonce = match admit_action(&console, &form, client, form.get("nonce"), "pause", &queue) {
        Admit::Refused(response) => return *response,
        Admit::Done(nonce) => return again_to_overview(&nonce),
        Admit::Act(nonce) => nonce,
    };
    let paused = match form.get("pause") {
        Some("pause") => true,
        Some("resume") => false,
        _ => {
            return html(
                StatusCode::BAD_REQUEST,
                view::page("Refused", None, view::problem("Pause or resume?")),
            );
        }
    };
    if let Err(refused) = pausable(&console, &queue).await {
        return refused;
    }
    if !console.nonces.claim(&nonce) {
        return again_to_overview(&nonce);
    }
    let outcome = match console.broker.set_paused(&queue, paused).await {
        Ok(()) if paused => Outcome::done(format!(
            "Paused the consumers of {}: its workers take no new messages until it is resumed.",
            neutral(&queue)
        )),
        Ok(()) => Outcome::done(format!("Resumed the consumers of {}.", neutral(&queue))),
        Err(e) => Outcome::failed(format!(
            "The consumers of {} were not {}: {e}",
            neutral(&queue),
            if paused { "paused" } else { "resumed" }
        )),
    };
    console
        .records
        .record(
            ActionRecord::new(
                client,
                Some(&queue),
                if paused { "pause" } else { "resume" },
                None,
                &outcome,
            ),
            &[],
        )
        .await;
    console.nonces.finish(&nonce, outcome);
    back_to_overview(&nonce)
}

/// Whether the consumers of `queue` can be paused from the console: a queue tablekit
/// declared that the broker holds ([`Console::declared`]), never a poison or retry queue.
/// The refusal names the queues that can.
async fn pausable(console: &Console, queue: &str) -> std::result::Result<(), Response> {
    actionable(
        console,
        queue,
        "The consumers of {} cannot be paused here: the console pauses the queues tablekit declared, never a poison or retry queue.",
    )
    .await
}

/// Whether the console may act on `queue`: a queue tablekit declared that the broker
/// holds ([`Console::declared`]), never a poison or retry queue. The refusal is `refused`
/// (its `{}` the queue) followed by the queues that could be.
pub(super) async fn actionable(
    console: &Console,
    queue: &str,
    refused: &str,
) -> std::result::Result<(), Response> {
    match console.is_declared(queue).await {
        Ok(true) => return Ok(()),
        Ok(false) => {}
        Err(e) => return Err(failure(&e)),
    }
    let can = match console.declared().await {
        Ok(declared) => declared,
        Err(e) => return Err(failure(&e)),
    };
    Err(forms::refusal(
        StatusCode::BAD_REQUEST,
        &format!(
            "{} It could be: {}.",
            refused.replacen("{}", &neutral(queue), 1),
            if can.is_empty() {
                "none yet (a worker declares its queue when it starts)".to_owned()
            } else {
                can.iter()
                    .map(|q| neutral(q).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ),
    ))
}

pub(super) async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("console.css"),
    )
        .into_response()
}

pub(super) async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("console.js"),
    )
        .into_response()
}

#[derive(serde::Deserialize)]
pub(super) struct ActionsQuery {
    after: Option<String>,
}

/// How many actions the page of recent actions lists.
const ACTIONS_LISTED: usize = 50;

/// The recent actions, newest first, a page at a time.
pub(super) async fn actions(
    State(console): State<Shared>,
    UrlQuery(query): UrlQuery<ActionsQuery>,
) -> Response {
    match console
        .records
        .recent(
            ACTIONS_LISTED,
            query.after.as_deref().filter(|a| !a.is_empty()),
        )
        .await
    {
        Ok((records, next)) => html(
            StatusCode::OK,
            view::page(
                "Actions",
                None,
                recent_actions(&records, next.as_deref(), Utc::now()),
            ),
        ),
        Err(e) => failure(&e),
    }
}

/// The page of recent actions.
fn recent_actions(records: &[ActionRecord], next: Option<&str>, now: DateTime<Utc>) -> Markup {
    html! {
        section.card #actions {
            h2 { "Recent actions" }
            @if records.is_empty() {
                p.muted { "No action recorded yet." }
            } @else {
                div.scroll {
                    table.grid.actions {
                        thead { tr {
                            th { "when (UTC)" } th { "who" } th { "action" } th { "queue" }
                            th.num { "asked" } th.num { "taken" } th { "result" } th { "every message" }
                        } }
                        tbody {
                            @for r in records {
                                tr class=(if r.failed { "failed" } else { "" }) {
                                    td.nowrap { (r.at.format("%Y-%m-%d %H:%M:%S")) br; span.muted { (ago(r.at, now)) } }
                                    td.nowrap { (neutral(&r.client)) br; span.muted { (neutral(&r.role)) } }
                                    td.nowrap { (neutral(&r.action)) @if let Some(to) = &r.to { " → " (neutral(to)) } }
                                    td.name { @if let Some(q) = &r.queue { (neutral(q)) } }
                                    td.num { (thousands(r.asked)) }
                                    td.num { (thousands(r.taken)) }
                                    td.reason { (neutral(&r.result)) }
                                    td.reason.muted { @if let Some(d) = &r.details { (neutral(d)) } }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(next) = next {
                nav.pager { a.next href=(format!("/actions?after={}", urlencode(next))) { "Older actions →" } }
            }
        }
    }
}
