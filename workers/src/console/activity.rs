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
            h2 { "History" span.when { "last 24 h, UTC (each chart says its step)" } }
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
