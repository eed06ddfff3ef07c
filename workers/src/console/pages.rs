//! The overview and its live part, the job form's action, and the console's assets.

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Query as UrlQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Utc;

use super::forms::{Admit, Form, Nonces, Outcome, admit_action};
use super::jobs::JobKind;
use super::{Console, Overview, QueueRow, Shared, failure, html, metrics, view};
use crate::error::Result;

#[derive(serde::Deserialize)]
pub(super) struct ResultQuery {
    pub(super) result: Option<String>,
}

impl Console {
    pub(super) async fn overview(&self) -> Result<Overview> {
        // The registry read once: the default queues and the job forms both come from it.
        let schemas = tablekit_patterns::index::SchemaRecord::list(&self.store, None).await?;
        let queues = if self.options.queues.is_empty() {
            crate::status::default_queues(&schemas)
        } else {
            self.options.queues.clone()
        };
        let status = crate::status::status(&self.store, &self.broker, &queues).await?;
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
                    }
                })
                .collect()
        };
        let mut tables: Vec<(String, Vec<String>)> = Vec::new();
        for schema in schemas {
            let names = schema
                .indexes
                .iter()
                .map(|i| i.name.clone())
                .chain(schema.members.iter().map(|m| m.name.clone()));
            match tables.iter_mut().find(|(t, _)| *t == schema.table) {
                Some((_, indexes)) => indexes.extend(names),
                None => tables.push((schema.table.clone(), names.collect())),
            }
        }
        Ok(Overview {
            at: Utc::now(),
            status,
            queues,
            tables,
            migrations: self
                .jobs
                .migrations()
                .list()
                .into_iter()
                .map(|m| (m.table, m.kind, m.version))
                .collect(),
            jobs: self.jobs.list().await?,
            convergence: if self.options.metrics.is_empty() {
                None
            } else {
                Some(metrics::read(&self.options.metrics).await)
            },
        })
    }

    /// The result of an action, by its nonce, for the banner.
    pub(super) fn result(&self, nonce: Option<&str>) -> Option<Outcome> {
        nonce.and_then(|n| self.nonces.outcome(n))
    }
}

pub(super) async fn overview(
    State(console): State<Shared>,
    UrlQuery(query): UrlQuery<ResultQuery>,
) -> Response {
    match console.overview().await {
        Ok(o) => {
            let result = console.result(query.result.as_deref());
            html(
                StatusCode::OK,
                view::page(
                    "Overview",
                    Some(console.options.refresh.max(1)),
                    view::overview(&o, console.access.csrf(), &Nonces::fresh(), result.as_ref()),
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
            view::live(&o, console.access.csrf(), &Nonces::fresh()),
        ),
        Err(e) => failure(&e),
    }
}

pub(super) async fn start_job(State(console): State<Shared>, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let nonce = match admit_action(&console, &form) {
        Admit::Refused(response) => return *response,
        Admit::Done(nonce) => return Redirect::to(&format!("/?result={nonce}")).into_response(),
        Admit::Act(nonce) => nonce,
    };
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
    if !console.nonces.claim(&nonce) {
        return Redirect::to(&format!("/?result={nonce}")).into_response();
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
    console.nonces.finish(&nonce, result);
    Redirect::to(&format!("/?result={nonce}")).into_response()
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
