//! What the workers did and who they are, as the workers record it in the store
//! ([`crate::activity`]): each queue's history — processed, failed, poisoned and
//! redelivered deliveries per minute for a day, per hour for 30 days — drawn as SVG charts
//! ([`super::chart`]) on the overview and each queue's page; and the worker processes
//! with their host, pid, version, queues, heartbeat, deliveries in flight and rate, a
//! process gone silent marked.

use axum::Json;
use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Duration, Utc};
use maud::{Markup, html};
use serde::{Deserialize, Serialize};

use super::view::{ago, thousands, urlencode};
use super::{Shared, chart, failure, html as page_of, view};
use crate::activity::{Point, Resolution, WorkerProcess};
use crate::display::neutral;
use crate::error::Result;

/// The day of minutes every chart of the overview shows.
fn last_day(now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    (now - Duration::hours(24), now)
}

/// A queue's history over the last day.
pub(super) async fn day_of(
    console: &super::Console,
    queue: &str,
    now: DateTime<Utc>,
) -> Result<Vec<Point>> {
    let (start, end) = last_day(now);
    crate::activity::history(&console.store, queue, start, end).await
}

/// The chart of a queue's last day.
pub(super) fn day_chart(queue: &str, points: &[Point], now: DateTime<Utc>) -> Markup {
    let (start, end) = last_day(now);
    chart::activity(&format!("{queue} · last 24 h"), points, start, end)
}

/// The chart of a queue's last 30 days (per hour before the last day).
pub(super) fn month_chart(queue: &str, points: &[Point], now: DateTime<Utc>) -> Markup {
    chart::activity(
        &format!("{queue} · last 30 days"),
        points,
        now - Duration::days(30),
        now,
    )
}

/// The totals of a history.
fn totals(points: &[Point]) -> crate::activity::Counts {
    points
        .iter()
        .fold(crate::activity::Counts::default(), |sum, p| sum + p.counts)
}

/// The overview's history card: one chart per queue shown, with the day's totals.
pub(super) fn history_card(charts: &[(String, Vec<Point>)], now: DateTime<Utc>) -> Markup {
    html! {
        section.card #history {
            h2 { "History" span.when { "per minute, last 24 h, UTC" } }
            @if charts.iter().all(|(_, points)| points.is_empty()) {
                p.muted { "No worker has recorded its deliveries yet: workers started with " code { "tablekit-worker run" } " record them every few seconds (" code { "--no-activity" } " turns it off)." }
            }
            div.charts {
                @for (queue, points) in charts {
                    @let t = totals(points);
                    figure.chart {
                        (day_chart(queue, points, now))
                        figcaption {
                            a href=(format!("/poison/{}", urlencode(queue))) { (neutral(queue)) } ": "
                            (thousands(t.processed)) " processed, " (thousands(t.failed)) " failed, "
                            (thousands(t.poisoned)) " poisoned, " (thousands(t.redelivered)) " redelivered"
                        }
                    }
                }
            }
        }
    }
}

/// A queue's history card: the last day per minute and the last 30 days per hour.
pub(super) fn queue_history(queue: &str, month: &[Point], now: DateTime<Utc>) -> Markup {
    let (start, _) = last_day(now);
    let day: Vec<Point> = month.iter().filter(|p| p.end() > start).copied().collect();
    html! {
        section.card #history {
            h2 { "History of " code { (neutral(queue)) } }
            div.charts {
                figure.chart { (day_chart(queue, &day, now)) }
                figure.chart { (month_chart(queue, month, now)) }
            }
        }
    }
}

/// The workers card: every process with its last heartbeat.
pub(super) fn workers_card(workers: &[WorkerProcess], now: DateTime<Utc>) -> Markup {
    html! {
        section.card #workers {
            h2 { "Workers" }
            @if workers.is_empty() {
                p.muted { "No worker process has announced itself (workers started with " code { "tablekit-worker run" } " do, every 10 s)." }
            } @else {
                div.scroll {
                    table.grid.workers {
                        thead { tr {
                            th { "process" } th { "host" } th.num { "pid" } th { "version" } th { "queues" }
                            th { "heartbeat" } th.num { "in flight" } th.num { "processed/s" } th { "state" }
                        } }
                        tbody {
                            @for w in workers {
                                tr class=(if w.silent { "silent" } else { "" }) {
                                    td.name { (neutral(&w.id)) }
                                    td.name { (neutral(&w.host)) }
                                    td.num { (w.pid) }
                                    td { (neutral(&w.version)) }
                                    td.name { (w.queues.iter().map(|q| neutral(q).into_owned()).collect::<Vec<_>>().join(", ")) }
                                    td.nowrap { span title=(w.heartbeat_at.format("%Y-%m-%d %H:%M:%S UTC")) { (ago(w.heartbeat_at, now)) } }
                                    td.num { (thousands(w.in_flight)) " / " (thousands(w.concurrency)) }
                                    td.num { (format!("{:.1}", w.processed_per_second)) }
                                    td {
                                        @if w.stopped_at.is_some() {
                                            span.badge { "stopped" }
                                        } @else if w.silent {
                                            span.badge.bad title="no heartbeat for three intervals: it died, hangs or cannot reach the store" { "silent" }
                                        } @else {
                                            span.badge.ok { "running" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /workers`.
pub(super) async fn workers_page(State(console): State<Shared>) -> Response {
    match crate::activity::workers(&console.store).await {
        Ok(workers) => page_of(
            StatusCode::OK,
            view::page("Workers", None, workers_card(&workers, Utc::now())),
        ),
        Err(e) => failure(&e),
    }
}

#[derive(Deserialize)]
pub(super) struct Window {
    /// RFC 3339; default 30 days ago.
    since: Option<DateTime<Utc>>,
    /// RFC 3339; default now.
    until: Option<DateTime<Utc>>,
}

/// A history point as the API shows it.
#[derive(Serialize)]
struct ApiPoint {
    at: DateTime<Utc>,
    resolution: &'static str,
    processed: u64,
    failed: u64,
    poisoned: u64,
    redelivered: u64,
}

/// `GET /api/queues/<queue>/history?since=&until=`.
pub(super) async fn api_history(
    State(console): State<Shared>,
    Path(queue): Path<String>,
    UrlQuery(window): UrlQuery<Window>,
) -> Response {
    let now = Utc::now();
    let until = window.until.unwrap_or(now);
    let since = window.since.unwrap_or(now - Duration::days(30));
    match crate::activity::history(&console.store, &queue, since, until).await {
        Ok(points) => Json(
            points
                .iter()
                .map(|p| ApiPoint {
                    at: p.at,
                    resolution: match p.resolution {
                        Resolution::Minute => "minute",
                        Resolution::Hour => "hour",
                    },
                    processed: p.counts.processed,
                    failed: p.counts.failed,
                    poisoned: p.counts.poisoned,
                    redelivered: p.counts.redelivered,
                })
                .collect::<Vec<_>>(),
        )
        .into_response(),
        Err(e) => super::api::failed(&e),
    }
}

/// `GET /api/workers`.
pub(super) async fn api_workers(State(console): State<Shared>) -> Response {
    #[derive(Serialize)]
    struct ApiWorker<'a> {
        id: &'a str,
        host: &'a str,
        pid: u32,
        version: &'a str,
        queues: &'a [String],
        concurrency: u64,
        in_flight: u64,
        processed_per_second: f64,
        started_at: DateTime<Utc>,
        heartbeat_at: DateTime<Utc>,
        stopped_at: Option<DateTime<Utc>>,
        silent: bool,
    }
    match crate::activity::workers(&console.store).await {
        Ok(workers) => Json(
            workers
                .iter()
                .map(|w| ApiWorker {
                    id: &w.id,
                    host: &w.host,
                    pid: w.pid,
                    version: &w.version,
                    queues: &w.queues,
                    concurrency: w.concurrency,
                    in_flight: w.in_flight,
                    processed_per_second: w.processed_per_second,
                    started_at: w.started_at,
                    heartbeat_at: w.heartbeat_at,
                    stopped_at: w.stopped_at,
                    silent: w.silent,
                })
                .collect::<Vec<_>>(),
        )
        .into_response(),
        Err(e) => super::api::failed(&e),
    }
}
