//! Data series: page views counted per hour, one entity per day (24 hourly points), and
//! a meter's hourly use over 30 days (720 points, more than one entity holds: spread over
//! chunks of its partition). Each `add` is one indexed write under the span's ETag; a
//! range read returns the points between two instants.
//!
//! `cargo run --example data_series`

#![allow(clippy::print_stdout)]

use chrono::{DateTime, TimeZone, Utc};
use tablekit::prelude::*;
use tablekit::typed::Points;

/// Page views per hour; one entity per page and day.
#[derive(Entity, Clone, Debug, Default)]
#[entity(table = "PageViews", partition_key = "{page}", row_key = "{day}")]
#[series(start = "day", points = "views", every = "1h", span = "1d")]
struct DailyViews {
    page: String,
    day: DateTime<Utc>,
    views: Points<i64>,
}

/// A meter's use per hour; one entity per meter and 30 days, in chunks.
#[derive(Entity, Clone, Debug, Default)]
#[entity(table = "MeterUse", partition_key = "{meter}", row_key = "{start}")]
#[series(
    start = "start",
    points = "kwh",
    every = "1h",
    span = "30d",
    spill = "chunks"
)]
struct MonthlyUse {
    meter: String,
    start: DateTime<Utc>,
    kwh: Points<f64>,
}

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let dir = tempfile::tempdir()?;
    let store =
        AnyStore::create(&format!("sqlite:{}", dir.path().join("app.db").display())).await?;

    let views = IndexedTable::<DailyViews, _>::options()
        .open(store.clone())
        .await?;
    let home = DailyViews {
        page: "home".into(),
        ..Default::default()
    };
    let at = |day, hour, minute| {
        Utc.with_ymd_and_hms(2026, 11, day, hour, minute, 0)
            .unwrap()
    };
    for (day, hour, minute) in [
        (25, 23, 50),
        (26, 9, 5),
        (26, 9, 40),
        (26, 10, 1),
        (26, 13, 30),
    ] {
        views.add(&home, at(day, hour, minute), 1).await?;
    }
    for (hour, count) in views.points(&home, at(25, 22, 0), at(26, 14, 0)).await? {
        if count > 0 {
            println!("home {hour}: {count} views");
        }
    }

    let meters = IndexedTable::<MonthlyUse, _>::options()
        .open(store.clone())
        .await?;
    let meter = MonthlyUse {
        meter: "meter-7".into(),
        ..Default::default()
    };
    for hour in 0..48 {
        let at = at(20, 0, 0) + chrono::TimeDelta::hours(hour);
        meters
            .add(
                &meter,
                at,
                0.25 + f64::from(u8::try_from(hour % 3).unwrap_or(0)),
            )
            .await?;
    }
    let span = meters
        .span(&meter, at(20, 0, 0))
        .await?
        .expect("a span was added");
    let total: f64 = span.value.kwh.iter().sum();
    // The rows as stored, read untyped: the span's chunks are rows of their own.
    let rows = store
        .query_all("MeterUse", Query::partition("meter-7"))
        .await?
        .len();
    println!(
        "meter-7: {} points from {}, {total} kWh, stored in {rows} rows",
        span.value.kwh.len(),
        span.value.start
    );
    Ok(())
}
