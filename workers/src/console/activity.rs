//! What the workers did and who they are, as the workers record it in the store
//! ([`crate::activity`]): each queue's history — processed, failed, poisoned and
//! redelivered deliveries per minute for a day, per hour for 30 days — drawn as SVG charts
//! ([`super::chart`]) on the overview and each queue's page; and the page of the worker
//! processes (`/workers`) with their host, pid, version, queues, heartbeat, deliveries in
//! flight and rate, a process gone silent marked (its card is the overview's too, in
//! [`super::view`]). The same data as JSON is the API's (`/api/workers`,
//! `/api/queues/<queue>/history`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Duration, Utc};
use maud::{Markup, html};

use super::view::{thousands, urlencode};
use super::{Shared, chart, failure, html as page_of, view};
use crate::activity::Point;
use crate::display::neutral;
use crate::error::Result;

/// The window the overview's charts show (`?window=1h|24h`): the last hour, a bin a
/// minute, or the last day (the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Window {
    Hour,
    #[default]
    Day,
}

impl Window {
    /// The window of a page's query (`window=1h|24h`, the day when absent), or the
    /// problem naming the parameter.
    pub(super) fn of(
        query: Option<&str>,
    ) -> std::result::Result<Self, super::api::problem::Problem> {
        let params = super::api::problem::Params::of(query);
        Ok(match params.choice("window", &["1h", "24h"])? {
            Some("1h") => Window::Hour,
            _ => Window::Day,
        })
    }

    fn length(self) -> Duration {
        match self {
            Window::Hour => Duration::hours(1),
            Window::Day => Duration::hours(24),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Window::Hour => "last hour",
            Window::Day => "last 24 h",
        }
    }
}

/// A queue's history over `window`.
pub(super) async fn history_of(
    console: &super::Console,
    queue: &str,
    window: Window,
    now: DateTime<Utc>,
) -> Result<Vec<Point>> {
    crate::activity::history(&console.store, queue, now - window.length(), now).await
}

/// The chart of a queue's `window`.
fn window_chart(queue: &str, points: &[Point], window: Window, now: DateTime<Utc>) -> Markup {
    chart::activity(
        &format!("{queue} · {}", window.name()),
        points,
        now - window.length(),
        now,
    )
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

/// The overview's history card: one chart per queue shown over `window`, with its
/// totals, and the links to the other window.
pub(super) fn history_card(
    charts: &[(String, Vec<Point>)],
    window: Window,
    now: DateTime<Utc>,
) -> Markup {
    html! {
        section.card #history {
            h2 { "History" span.when {
                @for (shown, link, name) in [(Window::Hour, "/?window=1h#history", "last hour"), (Window::Day, "/#history", "last 24 h")] {
                    @if shown == window { strong { (name) } } @else { a href=(link) { (name) } }
                    " · "
                }
                "UTC (each chart says its step; hover for values)"
            } }
            @if charts.iter().all(|(_, points)| points.is_empty()) {
                p.muted { "No worker has recorded its deliveries yet: workers started with " code { "tablekit-worker run" } " record them every few seconds (" code { "--no-activity" } " turns it off)." }
            }
            div.charts {
                @for (queue, points) in charts {
                    @let t = totals(points);
                    figure.chart {
                        (window_chart(queue, points, window, now))
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

/// A queue's history card: the last hour and the last day per minute, and the last 30
/// days per hour.
pub(super) fn queue_history(queue: &str, month: &[Point], now: DateTime<Utc>) -> Markup {
    let within = |window: Window| -> Vec<Point> {
        let start = now - window.length();
        month.iter().filter(|p| p.end() > start).copied().collect()
    };
    html! {
        section.card #history {
            h2 { "History of " code { (neutral(queue)) } span.when { "UTC; hover for values" } }
            div.charts {
                figure.chart { (window_chart(queue, &within(Window::Hour), Window::Hour, now)) }
                figure.chart { (window_chart(queue, &within(Window::Day), Window::Day, now)) }
                figure.chart { (month_chart(queue, month, now)) }
            }
        }
    }
}

/// `GET /workers`.
pub(super) async fn workers_page(State(console): State<Shared>) -> Response {
    match crate::activity::workers(&console.store).await {
        Ok(workers) => page_of(
            StatusCode::OK,
            view::page("Workers", None, view::workers_card(&workers, Utc::now())),
        ),
        Err(e) => failure(&e),
    }
}
