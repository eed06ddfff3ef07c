//! Unit tests of the filter parser, formatter, evaluator and builder.
#![allow(clippy::unwrap_used)]

mod eval;
mod format;
mod parse;

use chrono::{DateTime, TimeZone, Utc};

use super::*;

fn parse(input: &str) -> Filter {
    match Filter::parse(input) {
        Ok(f) => f,
        Err(e) => panic!("{input:?} should parse: {e}"),
    }
}

fn literal(input: &str) -> Value {
    match parse(&format!("P eq {input}")) {
        Filter::Compare { value, .. } => value,
        other => panic!("expected a comparison, got {other:?}"),
    }
}

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

fn round_trips(f: &Filter) {
    let text = f.to_string();
    assert_eq!(Filter::parse(&text).as_ref(), Ok(f), "{text}");
}
