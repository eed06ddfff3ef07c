//! Property tests of the `$filter` parser and formatter: formatting round-trips, parsing
//! never panics, and evaluation is unchanged by a round trip.
#![allow(clippy::unwrap_used)]

use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use tablekit_core::filter::{CompareOp, Filter, literal, property_named};
use tablekit_core::{Entity, Query, Value};
use uuid::Uuid;

/// Words that cannot name a property, in any case, because the lexer reads them as
/// keywords or literals.
const RESERVED: &[&str] = &[
    "and", "or", "not", "eq", "ne", "gt", "ge", "lt", "le", "true", "false",
];

/// Words that cannot name a property as spelled here (other spellings can).
const RESERVED_AS_SPELLED: &[&str] = &["NaN", "INF"];

fn is_reserved(word: &str) -> bool {
    RESERVED.contains(&word.to_ascii_lowercase().as_str()) || RESERVED_AS_SPELLED.contains(&word)
}

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
            .prop_filter("reserved word", |s| !is_reserved(s)),
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
    let leaf = prop_oneof![
        6 => (property_name(), compare_op(), value(with_nan))
            .prop_map(|(name, op, value)| property_named(name).compare(op, value)),
        1 => any::<bool>().prop_map(literal),
    ];
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
            "5d",
            "1.5D",
            "-INF",
            "NaN",
            "true",
            "False",
            "AND",
            "Or",
            "NOT",
            "EQ",
            "X'0a'",
            "x'0A'",
            "BINARY'ff'",
            "GUID'00000000-0000-0000-0000-000000000001'",
            "DateTime'2020-01-01T00:00:00Z'",
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
    fn a_comparison_written_literal_first_parses_to_the_same_filter(
        name in property_name(),
        op in compare_op(),
        value in value(false),
    ) {
        let f = property_named(name.clone()).compare(op, value);
        let text = f.to_string();
        let literal_text = text
            .strip_prefix(&format!("{name} {op} "))
            .unwrap()
            .to_owned();
        let flipped = match op {
            CompareOp::Gt => CompareOp::Lt,
            CompareOp::Ge => CompareOp::Le,
            CompareOp::Lt => CompareOp::Gt,
            CompareOp::Le => CompareOp::Ge,
            other => other,
        };
        let swapped = format!("{literal_text} {flipped} {name}");
        prop_assert_eq!(Filter::parse(&swapped), Ok(f), "{}", swapped);
    }

    #[test]
    fn keywords_and_prefixes_in_any_case_parse_to_the_same_filter(
        f in filter(false),
        upper in proptest::collection::vec(any::<bool>(), 16),
    ) {
        // Re-case every keyword, and every type prefix (a word right before a quote),
        // outside string literals. Property names are never keywords.
        let text = f.to_string();
        let mut recased = String::new();
        let mut word = String::new();
        let mut in_string = false;
        let mut n = 0;
        let mut flush = |word: &mut String, out: &mut String, before_quote: bool| {
            let lower = word.to_ascii_lowercase();
            let prefix = before_quote && matches!(lower.as_str(), "datetime" | "guid" | "x");
            if prefix || RESERVED.contains(&lower.as_str()) {
                let up = upper[n % upper.len()];
                n += 1;
                out.push_str(&if up { word.to_ascii_uppercase() } else { lower });
            } else {
                out.push_str(word);
            }
            word.clear();
        };
        for c in text.chars() {
            if in_string {
                recased.push(c);
                in_string = c != '\'';
            } else if c.is_alphanumeric() || c == '_' {
                word.push(c);
            } else {
                flush(&mut word, &mut recased, c == '\'');
                in_string = c == '\'';
                recased.push(c);
            }
        }
        flush(&mut word, &mut recased, false);
        let reparsed = Filter::parse(&recased);
        prop_assert_eq!(reparsed.map(|r| r.to_string()), Ok(text), "{}", recased);
    }

    #[test]
    fn an_int32_literal_compares_numerically_with_int64_and_double_properties(
        stored in prop_oneof![
            any::<i64>().prop_map(Value::Int64),
            double_value(true).prop_map(Value::Double),
            any::<i32>().prop_map(Value::Int32),
        ],
        literal in prop_oneof![any::<i32>(), -3i32..3],
        op in compare_op(),
    ) {
        let e = Entity::new("p", "r").with("N", stored.clone());
        let expected = match stored {
            Value::Int64(a) => a.partial_cmp(&i64::from(literal)),
            Value::Double(a) => a.partial_cmp(&f64::from(literal)),
            Value::Int32(a) => a.partial_cmp(&literal),
            _ => unreachable!(),
        }
        .is_some_and(|order| match op {
            CompareOp::Eq => order.is_eq(),
            CompareOp::Ne => order.is_ne(),
            CompareOp::Gt => order.is_gt(),
            CompareOp::Ge => order.is_ge(),
            CompareOp::Lt => order.is_lt(),
            CompareOp::Le => order.is_le(),
        });
        prop_assert_eq!(property_named("N").compare(op, literal).matches(&e), expected);
    }

    #[test]
    fn a_query_of_whitespace_only_has_no_filter(text in "[ \t\r\n]{0,8}") {
        prop_assert_eq!(Query::parse(&text).unwrap().filter, None);
        prop_assert!(Filter::parse(&text).is_err());
    }

    #[test]
    fn not_is_the_complement_of_its_operand(f in filter(true), e in entity()) {
        prop_assert_eq!((!f.clone()).matches(&e), !f.matches(&e));
    }
}
