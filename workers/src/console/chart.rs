//! Time series charts as inline SVG: pure functions from samples to markup, no script. The
//! window is cut into at most [`MAX_BINS`] equal bins and each sample is spread over the
//! bins its minute or hour overlaps, so a chart stays a few kilobytes whatever it shows
//! (a day of minutes, a month of hours, or both). Labels are escaped (maud); numbers are
//! written as numbers only. No `style` attribute (the console's Content-Security-Policy
//! blocks them): colours are presentation attributes, and each series carries a class a
//! stylesheet may restyle. The `svg` has the class `tk-chart` and a fixed `viewBox`; the
//! page's stylesheet gives it its width (`.tk-chart { width: 100%; height: auto }`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use crate::activity::Point;

/// The most bins a chart has.
pub(crate) const MAX_BINS: usize = 240;
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 712.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 228.0;
/// The longest label shown of a series.
const MAX_LABEL: usize = 40;

/// A value over a time: `value` spread evenly over `span` from `at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sample {
    pub(crate) at: DateTime<Utc>,
    pub(crate) span: Duration,
    pub(crate) value: f64,
}

/// One line of a chart.
#[derive(Clone, Debug)]
pub(crate) struct Series<'a> {
    /// The legend's text (untrusted: escaped, cut to 40 characters).
    pub(crate) label: &'a str,
    /// A class name of the console's own (`tk-series-<class>`).
    pub(crate) class: &'static str,
    /// The line's colour, a constant of the console's own (`#rrggbb`).
    pub(crate) color: &'static str,
    pub(crate) samples: Vec<Sample>,
}

/// A chart of `series` from `start` to `end` (UTC): one polyline per series over the bins,
/// the time axis labelled in UTC, the y axis from 0 to a round maximum labelled with the
/// bin's length, a legend, and "no activity" when every value is 0.
pub(crate) fn time_series(
    title: &str,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    series: &[Series<'_>],
) -> Markup {
    let minute = chrono::Duration::minutes(1);
    let (start, end) = if end > start {
        (start, end)
    } else {
        match start.checked_add_signed(minute) {
            Some(end) => (start, end),
            None => (start - minute, start),
        }
    };
    let window = (end - start).to_std().unwrap_or(Duration::from_secs(60));
    let bins = usize::try_from(window.as_secs() / 60)
        .unwrap_or(MAX_BINS)
        .clamp(2, MAX_BINS);
    let binned: Vec<Vec<f64>> = series
        .iter()
        .map(|s| bin(&s.samples, start, window, bins))
        .collect();
    let highest = binned.iter().flatten().copied().fold(0.0, f64::max);
    let top = nice_ceiling(highest);
    let x = |i: f64| LEFT + (RIGHT - LEFT) * i / bins as f64;
    let y = |v: f64| BOTTOM - (BOTTOM - TOP) * (v / top).clamp(0.0, 1.0);
    let bin_length = window / u32::try_from(bins).unwrap_or(u32::MAX);
    let ticks = time_ticks(start, end);
    html! {
        svg xmlns="http://www.w3.org/2000/svg" class="tk-chart" width="100%"
            viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img" aria-label=(title) {
            title { (title) }
            line x1=(LEFT) y1=(TOP) x2=(RIGHT) y2=(TOP) stroke="#dddddd" stroke-width="1" {}
            line x1=(LEFT) y1=(fmt(y(top / 2.0))) x2=(RIGHT) y2=(fmt(y(top / 2.0)))
                stroke="#eeeeee" stroke-width="1" {}
            line x1=(LEFT) y1=(BOTTOM) x2=(RIGHT) y2=(BOTTOM) stroke="#888888" stroke-width="1" {}
            line x1=(LEFT) y1=(TOP) x2=(LEFT) y2=(BOTTOM) stroke="#888888" stroke-width="1" {}
            text x=(LEFT - 6.0) y=(TOP + 4.0) text-anchor="end" font-size="11" fill="#444444" {
                (count(top))
            }
            text x=(LEFT - 6.0) y=(BOTTOM + 4.0) text-anchor="end" font-size="11" fill="#444444" {
                "0"
            }
            text x=(LEFT) y=(TOP - 6.0) font-size="10" fill="#666666" {
                "per " (length(bin_length))
            }
            @for (fraction, label) in &ticks {
                @let anchor = if *fraction <= 0.0 { "start" } else if *fraction >= 1.0 { "end" } else { "middle" };
                line x1=(fmt(x(fraction * bins as f64))) y1=(BOTTOM)
                    x2=(fmt(x(fraction * bins as f64))) y2=(BOTTOM + 4.0)
                    stroke="#888888" stroke-width="1" {}
                text x=(fmt(x(fraction * bins as f64))) y=(BOTTOM + 18.0) text-anchor=(anchor)
                    font-size="11" fill="#444444" { (label) }
            }
            text x=(RIGHT) y=(HEIGHT - 4.0) text-anchor="end" font-size="10" fill="#666666" {
                "UTC"
            }
            @for (s, values) in series.iter().zip(&binned) {
                polyline class=(format!("tk-series-{}", s.class)) fill="none" stroke=(s.color)
                    stroke-width="1.5" stroke-linejoin="round"
                    points=(polyline(values, &x, &y)) {}
            }
            // Hovering a bin shows its time and each series' value there.
            g.tk-bins fill="transparent" {
                @for i in 0..bins {
                    @let from = start + chrono::Duration::from_std(bin_length * u32::try_from(i).unwrap_or(u32::MAX)).unwrap_or_default();
                    rect x=(fmt(x(i as f64))) y=(TOP) width=(fmt(x(1.0) - x(0.0))) height=(BOTTOM - TOP) {
                        title { (hover(from, bin_length, series, &binned, i)) }
                    }
                }
            }
            @if highest <= 0.0 {
                text x=(fmt((LEFT + RIGHT) / 2.0)) y=(fmt((TOP + BOTTOM) / 2.0))
                    text-anchor="middle" font-size="13" fill="#888888" { "no activity" }
            }
            @for (i, s) in series.iter().enumerate() {
                @let left = LEFT + 130.0 * i as f64;
                rect x=(fmt(left + 80.0)) y=(TOP - 16.0) width="10" height="10" fill=(s.color) {}
                text x=(fmt(left + 94.0)) y=(TOP - 7.0) font-size="11" fill="#333333" {
                    (s.label.chars().take(MAX_LABEL).collect::<String>())
                }
            }
        }
    }
}

/// What hovering bin `i` shows: its time (UTC) and each series' value in it.
fn hover(
    from: DateTime<Utc>,
    length: Duration,
    series: &[Series<'_>],
    binned: &[Vec<f64>],
    i: usize,
) -> String {
    use std::fmt::Write as _;
    let to = from + chrono::Duration::from_std(length).unwrap_or_default();
    let format = if length >= Duration::from_secs(86_400) {
        "%m-%d %H:%M"
    } else {
        "%H:%M"
    };
    let mut text = format!("{}–{} UTC", from.format(format), to.format(format));
    for (s, values) in series.iter().zip(binned) {
        let label: String = s.label.chars().take(MAX_LABEL).collect();
        let _ = write!(
            text,
            "\n{label}: {}",
            count(values.get(i).copied().unwrap_or(0.0))
        );
    }
    text
}

/// The chart of a queue's history ([`crate::activity::history`]): processed, failed,
/// poisoned and redelivered deliveries from `start` to `end`.
pub(crate) fn activity(
    title: &str,
    points: &[Point],
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Markup {
    #[allow(clippy::cast_precision_loss)]
    let samples = |pick: fn(&crate::activity::Counts) -> u64| {
        points
            .iter()
            .map(|p| Sample {
                at: p.at,
                span: p.resolution.duration(),
                value: pick(&p.counts) as f64,
            })
            .collect::<Vec<_>>()
    };
    let series = [
        Series {
            label: "processed",
            class: "processed",
            color: "#2e7d32",
            samples: samples(|c| c.processed),
        },
        Series {
            label: "failed",
            class: "failed",
            color: "#ef6c00",
            samples: samples(|c| c.failed),
        },
        Series {
            label: "poisoned",
            class: "poisoned",
            color: "#c62828",
            samples: samples(|c| c.poisoned),
        },
        Series {
            label: "redelivered",
            class: "redelivered",
            color: "#1565c0",
            samples: samples(|c| c.redelivered),
        },
    ];
    time_series(title, start, end, &series)
}

/// The samples summed into `bins` equal bins of the window, each spread over the bins its
/// span overlaps (a sample without a span goes to the bin of its time). Values that are
/// not finite and positive count as 0.
fn bin(samples: &[Sample], start: DateTime<Utc>, window: Duration, bins: usize) -> Vec<f64> {
    let mut out = vec![0.0; bins];
    let total = window.as_secs_f64();
    let width = total / bins as f64;
    for sample in samples {
        if !(sample.value.is_finite() && sample.value > 0.0) {
            continue;
        }
        let from = (sample.at - start).num_milliseconds() as f64 / 1000.0;
        let span = sample.span.as_secs_f64();
        let to = from + span;
        if to < 0.0 || from >= total || (span > 0.0 && to <= 0.0) {
            continue;
        }
        if span <= 0.0 {
            let i = ((from / width) as usize).min(bins - 1);
            out[i] += sample.value;
            continue;
        }
        let first = (from.max(0.0) / width) as usize;
        let last = ((to.min(total) / width).ceil() as usize).min(bins);
        for (i, slot) in out.iter_mut().enumerate().take(last).skip(first) {
            let (low, high) = (i as f64 * width, (i + 1) as f64 * width);
            let overlap = to.min(high) - from.max(low);
            if overlap > 0.0 {
                *slot += sample.value * overlap / span;
            }
        }
    }
    out
}

/// The polyline's points: one per bin, at its middle.
fn polyline(values: &[f64], x: &impl Fn(f64) -> f64, y: &impl Fn(f64) -> f64) -> String {
    let mut points = String::with_capacity(values.len() * 12);
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            points.push(' ');
        }
        points.push_str(&fmt(x(i as f64 + 0.5)));
        points.push(',');
        points.push_str(&fmt(y(*value)));
    }
    points
}

/// A coordinate: one decimal, always finite.
fn fmt(value: f64) -> String {
    let value = if value.is_finite() { value } else { 0.0 };
    format!("{value:.1}")
}

/// The least of 1, 2 or 5 times a power of ten at or above `value` (1 for nothing).
fn nice_ceiling(value: f64) -> f64 {
    if !(value.is_finite() && value > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(value.log10().floor());
    for step in [1.0, 2.0, 5.0, 10.0] {
        let nice = step * power;
        if !nice.is_finite() {
            return value;
        }
        if nice >= value * (1.0 - 1e-12) {
            return nice;
        }
    }
    value
}

/// A count in a few characters: `950`, `1.5k`, `20M`, `2e21`.
fn count(value: f64) -> String {
    if !value.is_finite() {
        return "0".to_owned();
    }
    const UNITS: [(f64, &str); 6] = [
        (1e18, "E"),
        (1e15, "P"),
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "k"),
    ];
    if value >= 1e21 {
        return format!("{value:.0e}");
    }
    for (unit, suffix) in UNITS {
        if value >= unit {
            return format!("{}{suffix}", trim(value / unit));
        }
    }
    trim(value)
}

/// A number with at most two decimals, trailing zeros dropped.
fn trim(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A bin's length in words: `30 s`, `6 min`, `hour`, `3 h`.
fn length(bin: Duration) -> String {
    let seconds = bin.as_secs().max(1);
    match seconds {
        s if s < 60 => format!("{s} s"),
        60 => "minute".to_owned(),
        s if s < 3600 => format!("{} min", trim(s as f64 / 60.0)),
        3600 => "hour".to_owned(),
        s => format!("{} h", trim(s as f64 / 3600.0)),
    }
}

/// Five labels along the time axis (at 0, ¼, ½, ¾ and 1 of the window): hours and minutes
/// for up to two days, else month and day.
fn time_ticks(start: DateTime<Utc>, end: DateTime<Utc>) -> Vec<(f64, String)> {
    let window = end - start;
    let format = if window <= chrono::Duration::days(2) {
        "%H:%M"
    } else {
        "%m-%d %H:%M"
    };
    [0.0, 0.25, 0.5, 0.75, 1.0]
        .into_iter()
        .map(|fraction: f64| {
            let millis = (window.num_milliseconds() as f64 * fraction) as i64;
            let at = start + chrono::Duration::milliseconds(millis);
            (fraction, at.format(format).to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::activity::{Counts, Resolution};

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn minute_points(n: i64, end: DateTime<Utc>, each: u64) -> Vec<Point> {
        (0..n)
            .map(|i| Point {
                at: end - chrono::Duration::minutes(n - i),
                resolution: Resolution::Minute,
                counts: Counts {
                    processed: each,
                    failed: each / 10,
                    poisoned: each / 100,
                    redelivered: each / 20,
                },
            })
            .collect()
    }

    fn well_formed(svg: &str) {
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.ends_with("</svg>"));
        assert!(
            !svg.contains("style="),
            "no style attribute: the CSP blocks it"
        );
        assert!(!svg.contains("<script"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 4);
        assert_eq!(
            svg.matches("<polyline").count(),
            svg.matches("</polyline>").count()
        );
    }

    #[test]
    fn no_points_draw_empty_axes_that_say_so() {
        let end = at("2024-05-02T12:00:00Z");
        let svg = activity("q", &[], end - chrono::Duration::hours(24), end).into_string();
        well_formed(&svg);
        assert!(svg.contains("no activity"));
        assert!(svg.contains(">1<"), "the y maximum of nothing is 1: {svg}");
        assert!(svg.contains("12:00") && svg.contains("UTC"));
    }

    #[test]
    fn one_point_lands_in_its_bin() {
        let end = at("2024-05-02T12:00:00Z");
        let points = minute_points(1, end, 7);
        let svg = activity("q", &points, end - chrono::Duration::hours(1), end).into_string();
        well_formed(&svg);
        assert!(!svg.contains("no activity"));
        // An hour is 60 bins of a minute; 7 rounds up to 10.
        assert!(svg.contains(">10<"), "{svg}");
        assert!(svg.contains("per minute"));
        // Each bin says its time and values when hovered.
        let bins = svg.split("class=\"tk-bins\"").nth(1).unwrap();
        assert_eq!(
            bins.split("</g>").next().unwrap().matches("<rect").count(),
            60
        );
        assert!(
            svg.contains("<title>11:59–12:00 UTC\nprocessed: 7\nfailed: 0\npoisoned: 0\nredelivered: 0</title>"),
            "{svg}"
        );
    }

    #[test]
    fn a_day_of_minutes_is_bucketed_into_a_small_svg() {
        let end = at("2024-05-02T12:00:00Z");
        let points = minute_points(1440, end, 1000);
        let svg = activity("q", &points, end - chrono::Duration::hours(24), end).into_string();
        well_formed(&svg);
        assert!(svg.len() < 60_000, "{} bytes", svg.len());
        // 240 bins of 6 minutes, each 6000 processed.
        assert!(svg.contains("per 6 min"), "{svg}");
        assert!(svg.contains(">10k<"), "{svg}");
        let processed = svg.split("tk-series-processed").nth(1).unwrap();
        let points = processed.split("points=\"").nth(1).unwrap();
        let points = points.split('"').next().unwrap();
        assert_eq!(points.split(' ').count(), MAX_BINS);
    }

    #[test]
    fn hour_points_spread_over_the_bins_they_cover() {
        let start = at("2024-05-01T00:00:00Z");
        let sample = Sample {
            at: start,
            span: Duration::from_secs(3600),
            value: 60.0,
        };
        let bins = bin(&[sample], start, Duration::from_secs(2 * 3600), 120);
        assert!(bins[..60].iter().all(|v| (v - 1.0).abs() < 1e-9));
        assert!(bins[60..].iter().all(|v| *v == 0.0));
        let outside = Sample {
            at: start - chrono::Duration::hours(3),
            ..sample
        };
        assert!(
            bin(&[outside], start, Duration::from_secs(3600), 60)
                .iter()
                .all(|v| *v == 0.0)
        );
    }

    #[test]
    fn huge_values_keep_numbers_finite_and_labels_short() {
        let end = at("2024-05-02T12:00:00Z");
        let mut points = minute_points(3, end, u64::MAX);
        points[1].counts.redelivered = u64::MAX;
        let svg = activity("q", &points, end - chrono::Duration::hours(1), end).into_string();
        well_formed(&svg);
        assert!(svg.contains(">20E<"), "{svg}");
        let samples = [Sample {
            at: end,
            span: Duration::ZERO,
            value: f64::MAX,
        }];
        let series = [Series {
            label: "x",
            class: "x",
            color: "#000000",
            samples: samples.to_vec(),
        }];
        let svg = time_series("t", end - chrono::Duration::hours(1), end, &series).into_string();
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        assert_eq!(count(1.5e3), "1.5k");
        assert_eq!(count(950.0), "950");
        assert_eq!(count(0.5), "0.5");
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(11.0), 20.0);
        assert_eq!(nice_ceiling(0.3), 0.5);
    }

    #[test]
    fn labels_and_titles_are_escaped() {
        let end = at("2024-05-02T12:00:00Z");
        let series = [Series {
            label: "<script>alert(1)</script>\"'&",
            class: "x",
            color: "#000000",
            samples: Vec::new(),
        }];
        let svg = time_series(
            "</title><script>alert(2)</script>",
            end - chrono::Duration::hours(1),
            end,
            &series,
        )
        .into_string();
        assert!(!svg.contains("<script"), "{svg}");
        assert!(svg.contains("&lt;script&gt;alert(1)"), "{svg}");
        assert!(svg.contains("&lt;/title&gt;"), "{svg}");
        assert!(!svg.contains("style="));
    }

    #[test]
    fn an_empty_or_reversed_window_still_renders() {
        let end = at("2024-05-02T12:00:00Z");
        let points = minute_points(2, end, 3);
        for (start, end) in [(end, end), (end, end - chrono::Duration::hours(1))] {
            let svg = activity("q", &points, start, end).into_string();
            well_formed(&svg);
        }
        let month = activity("q", &points, end - chrono::Duration::days(30), end).into_string();
        well_formed(&month);
        assert!(month.contains("per 3 h"), "{month}");
        assert!(month.contains("04-02"), "{month}");
    }
}
