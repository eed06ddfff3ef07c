//! Property tests of the `$filter` parser and formatter: formatting round-trips, parsing
//! never panics, and evaluation is unchanged by a round trip.
#![allow(clippy::unwrap_used)]

use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use tablekit_core::filter::{CompareOp, Filter, prop};
use tablekit_core::{Entity, Value};
use uuid::Uuid;

/// Words that cannot name a property because the lexer reads them as keywords or literals.
const RESERVED: &[&str] = &[
    "and", "or", "not", "eq", "ne", "gt", "ge", "lt", "le", "true", "false", "NaN", "INF",
];

/// Property names the random entities use, so that comparisons often find their property.
const NAMES: &[&str] = &[
    "PartitionKey",
    "RowKey",
    "Timestamp",
    "A",
    "B",
    "Größe",
    "_c",
];

fn property_name() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(NAMES).prop_map(str::to_owned),
        1 => "[A-Za-z_àéöüßø\u{4e00}-\u{4e10}][A-Za-z0-9_àéöüßø\u{660}-\u{669}]{0,6}"
            .prop_filter("reserved word", |s| !RESERVED.contains(&s.as_str())),
    ]
}

fn string_value() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(&["", "a", "b", "'", "''", "Sales"][..]).prop_map(str::to_owned),
        "[a' ]{0,6}",
        proptest::collection::vec(any::<char>(), 0..8).prop_map(String::from_iter),
    ]
}

fn datetime_value() -> impl Strategy<Value = DateTime<Utc>> {
    let min = Utc.with_ymd_and_hms(0, 1, 1, 0, 0, 0).unwrap().timestamp();
    let max = Utc
        .with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
        .unwrap()
        .timestamp();
    let nanos = prop_oneof![
        Just(0u32),
        0u32..1000,
        (0u32..1000).prop_map(|n| n * 1_000_000),
        0u32..1_000_000_000
    ];
    (
        prop_oneof![min..=max, (-2i64..2).prop_map(|d| d * 86_400)],
        nanos,
    )
        .prop_map(|(secs, nanos)| Utc.timestamp_opt(secs, nanos).unwrap())
}

fn double_value(with_nan: bool) -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        (-4i32..4).prop_map(f64::from),
        proptest::sample::select(&[0.5, -0.0, f64::INFINITY, f64::NEG_INFINITY, 1e16, 5e-324][..]),
        Just(f64::NAN),
    ]
    .prop_filter("NaN", move |v| with_nan || !v.is_nan())
}

fn value(with_nan: bool) -> impl Strategy<Value = Value> {
    prop_oneof![
        string_value().prop_map(Value::String),
        prop_oneof![any::<i32>(), -3i32..3].prop_map(Value::Int32),
        prop_oneof![any::<i64>(), -3i64..3].prop_map(Value::Int64),
        double_value(with_nan).prop_map(Value::Double),
        any::<bool>().prop_map(Value::Boolean),
        datetime_value().prop_map(Value::DateTime),
        prop_oneof![any::<u128>(), 0u128..3].prop_map(|v| Value::Guid(Uuid::from_u128(v))),
        proptest::collection::vec(prop_oneof![any::<u8>(), 0u8..2], 0..5).prop_map(Value::Binary),
    ]
}

fn compare_op() -> impl Strategy<Value = CompareOp> {
    proptest::sample::select(
        &[
            CompareOp::Eq,
            CompareOp::Ne,
            CompareOp::Gt,
            CompareOp::Ge,
            CompareOp::Lt,
            CompareOp::Le,
        ][..],
    )
}

fn filter(with_nan: bool) -> impl Strategy<Value = Filter> {
    let leaf = (property_name(), compare_op(), value(with_nan))
        .prop_map(|(name, op, value)| prop(name).compare(op, value));
    leaf.prop_recursive(4, 32, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| a & b),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| a | b),
            inner.prop_map(|a| !a),
        ]
    })
}

fn entity() -> impl Strategy<Value = Entity> {
    (
        prop_oneof![Just("Sales".to_owned()), string_value()],
        string_value(),
        proptest::option::of(datetime_value()),
        proptest::collection::vec((proptest::sample::select(&NAMES[3..]), value(true)), 0..4),
    )
        .prop_map(|(pk, rk, timestamp, properties)| {
            let mut e = Entity::new(pk, rk);
            e.timestamp = timestamp;
            for (name, value) in properties {
                e.set(name, value);
            }
            e
        })
}

/// Fragments that glue together into filter-like text, valid or not.
fn token_soup() -> impl Strategy<Value = String> {
    let token = proptest::sample::select(
        &[
            "(",
            ")",
            "not",
            "and",
            "or",
            "eq",
            "ne",
            "gt",
            "le",
            "A",
            "PartitionKey",
            "'x'",
            "'",
            "''",
            "1",
            "-",
            "1L",
            "1.5",
            "1e",
            "-INF",
            "NaN",
            "true",
            "X'0a'",
            "X'",
            "guid'",
            "datetime'2020-01-01T00:00:00Z'",
            "datetime'",
            " ",
            "\t",
            "ü",
            "#",
        ][..],
    );
    proptest::collection::vec(token, 0..40).prop_map(|tokens| tokens.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn formatting_then_parsing_gives_back_the_same_filter(f in filter(false)) {
        let text = f.to_string();
        prop_assert_eq!(Filter::parse(&text), Ok(f), "{}", text);
    }

    #[test]
    fn parsing_arbitrary_text_never_panics(text in any::<String>()) {
        let _ = Filter::parse(&text);
    }

    #[test]
    fn parsing_token_soup_never_panics_and_what_parses_round_trips(text in token_soup()) {
        if let Ok(f) = Filter::parse(&text) {
            let again = f.to_string();
            let reparsed = Filter::parse(&again);
            prop_assert!(reparsed.is_ok(), "{} -> {}", text, again);
            prop_assert_eq!(reparsed.map(|r| r.to_string()), Ok(again));
        }
    }

    #[test]
    fn a_round_trip_does_not_change_which_entities_match(
        f in filter(true),
        entities in proptest::collection::vec(entity(), 1..8),
    ) {
        let reparsed = Filter::parse(&f.to_string()).unwrap();
        for e in &entities {
            prop_assert_eq!(f.matches(e), reparsed.matches(e), "{} on {:?}", f, e);
        }
    }

    #[test]
    fn not_is_the_complement_of_its_operand(f in filter(true), e in entity()) {
        prop_assert_eq!((!f.clone()).matches(&e), !f.matches(&e));
    }
}
