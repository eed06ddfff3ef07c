//! Fuzzes the `$filter` parser: it must never panic, whatever it accepts must format to
//! text that parses back into the same filter, and evaluation must agree on both.
#![no_main]

use std::sync::LazyLock;

use chrono::{TimeZone, Utc};
use libfuzzer_sys::fuzz_target;
use tablekit_core::{Entity, Filter, Value};
use uuid::Uuid;

/// An entity with one property of each type (a NaN among them) and a timestamp.
static ENTITY: LazyLock<Entity> = LazyLock::new(|| {
    let hired = Utc
        .with_ymd_and_hms(2010, 3, 1, 9, 0, 0)
        .single()
        .expect("a valid date");
    let mut e = Entity::new("Sales", "empid_000123")
        .with("Name", "Jun")
        .with("Quote", "it's")
        .with("Age", 47)
        .with("Big", 5_000_000_000i64)
        .with("Score", 2.5)
        .with("Nan", f64::NAN)
        .with("Active", true)
        .with("Hired", hired)
        .with("Id", Uuid::from_u128(5))
        .with("Photo", vec![1u8, 2, 3]);
    e.timestamp = Some(hired);
    e
});

fn has_nan(filter: &Filter) -> bool {
    match filter {
        Filter::Compare { value, .. } => matches!(value, Value::Double(v) if v.is_nan()),
        Filter::And(a, b) | Filter::Or(a, b) => has_nan(a) || has_nan(b),
        Filter::Not(a) => has_nan(a),
        Filter::Literal(_) => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(filter) = Filter::parse(text) else {
        return;
    };
    let formatted = filter.to_string();
    let reparsed = match Filter::parse(&formatted) {
        Ok(f) => f,
        Err(e) => panic!("{text:?} parsed, but its formatting {formatted:?} did not: {e}"),
    };
    if has_nan(&filter) {
        assert_eq!(reparsed.to_string(), formatted, "{text:?}");
    } else {
        assert_eq!(reparsed, filter, "{text:?} formatted as {formatted:?}");
    }
    assert_eq!(reparsed.comparisons(), filter.comparisons());
    let matched = filter.matches(&ENTITY);
    assert_eq!(reparsed.matches(&ENTITY), matched, "{text:?}");
    assert_eq!(filter.negate().matches(&ENTITY), !matched, "{text:?}");
});
