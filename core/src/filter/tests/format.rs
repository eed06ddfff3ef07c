//! Tests of the formatter and the builder: the text a filter is written as, and its round
//! trip through the parser.

use uuid::Uuid;

use super::*;

// ---- formatting ----------------------------------------------------------------------

#[test]
fn boolean_conditions_parse_format_and_round_trip() {
    let cases = [
        ("true", Filter::Literal(true)),
        ("FALSE", Filter::Literal(false)),
        ("not True", !Filter::Literal(true)),
        (
            "(true and RowKey eq '1') or PartitionKey eq 'b'",
            (Filter::Literal(true) & property_named("RowKey").eq("1"))
                | property_named("PartitionKey").eq("b"),
        ),
        (
            "Active eq true or false",
            property_named("Active").eq(true) | Filter::Literal(false),
        ),
        ("true eq Active", property_named("Active").eq(true)),
        ("(((false)))", Filter::Literal(false)),
    ];
    for (text, expected) in cases {
        let parsed = parse(text);
        assert_eq!(parsed, expected, "{text}");
        round_trips(&parsed);
    }
    assert_eq!(
        ((Filter::Literal(true) & property_named("RowKey").eq("1")) | Filter::Literal(false))
            .to_string(),
        "(true and RowKey eq '1') or false"
    );
    assert_eq!((!Filter::Literal(false)).to_string(), "not (false)");
    assert_eq!(Filter::from(true), Filter::Literal(true));
}

#[test]
fn a_literal_on_the_left_formats_with_the_property_on_the_left() {
    for (text, canonical) in [
        (
            "'2022-07-12' eq PartitionKey",
            "PartitionKey eq '2022-07-12'",
        ),
        ("5 lt Price", "Price gt 5"),
        ("5L ge Big", "Big le 5L"),
        ("2.5 ne Score", "Score ne 2.5"),
        ("X'00' gt Bytes", "Bytes lt X'00'"),
        (
            "DATETIME'2020-01-01T00:00:00Z' le When",
            "When ge datetime'2020-01-01T00:00:00Z'",
        ),
    ] {
        let parsed = parse(text);
        assert_eq!(parsed.to_string(), canonical, "{text}");
        round_trips(&parsed);
    }
}

#[test]
fn keywords_and_prefixes_format_in_lowercase() {
    let f = parse(
        "NOT (A EQ TRUE) AND B Ne GUID'00000000-0000-0000-0000-000000000001' OR C eq BINARY'FF'",
    );
    assert_eq!(
        f.to_string(),
        "(not (A eq true) and B ne guid'00000000-0000-0000-0000-000000000001') or C eq X'ff'"
    );
    round_trips(&f);
}

#[test]
fn the_builder_example_formats_as_documented() {
    let f =
        property_named("PartitionKey").eq("Sales") & property_named("RowKey").ge("empid_000100");
    assert_eq!(
        f.to_odata(),
        "PartitionKey eq 'Sales' and RowKey ge 'empid_000100'"
    );
}

#[test]
fn nested_logic_is_parenthesised() {
    let (a, b, c) = (
        property_named("A").eq(1),
        property_named("B").eq(2),
        property_named("C").eq(3),
    );
    assert_eq!(
        ((a.clone() & b.clone()) | c.clone()).to_string(),
        "(A eq 1 and B eq 2) or C eq 3"
    );
    assert_eq!(
        (a.clone() & (b.clone() & c.clone())).to_string(),
        "A eq 1 and (B eq 2 and C eq 3)"
    );
    assert_eq!(
        (!a.clone() & b.clone()).to_string(),
        "not (A eq 1) and B eq 2"
    );
    assert_eq!((!(a | b)).to_string(), "not (A eq 1 or B eq 2)");
}

#[test]
fn literals_format_canonically() {
    let cases: Vec<(Value, &str)> = vec![
        (Value::from("it's"), "'it''s'"),
        (Value::Int32(-5), "-5"),
        (Value::Int64(5), "5L"),
        (Value::Double(1.0), "1.0"),
        (Value::Double(1e16), "1e16"),
        (Value::Double(-1.5e-7), "-1.5e-7"),
        (Value::Double(f64::INFINITY), "INF"),
        (Value::Double(f64::NEG_INFINITY), "-INF"),
        (Value::Double(f64::NAN), "NaN"),
        (Value::Boolean(true), "true"),
        (
            Value::DateTime(utc(2008, 7, 10, 0, 0, 0)),
            "datetime'2008-07-10T00:00:00Z'",
        ),
        (
            Value::DateTime(utc(2008, 7, 10, 0, 0, 0) + chrono::Duration::milliseconds(250)),
            "datetime'2008-07-10T00:00:00.250Z'",
        ),
        (
            Value::Guid(Uuid::parse_str("C9DA6455-213D-42C9-9A79-3E9149A57833").unwrap()),
            "guid'c9da6455-213d-42c9-9a79-3e9149a57833'",
        ),
        (Value::Binary(vec![0x0a, 0xff]), "X'0aff'"),
    ];
    for (value, text) in cases {
        let f = property_named("P").eq(value);
        assert_eq!(f.to_string(), format!("P eq {text}"));
        if text != "NaN" {
            round_trips(&f);
        }
    }
}

#[test]
fn doubles_with_integral_values_keep_their_type() {
    for v in [
        0.0,
        -0.0,
        3.0,
        1e15,
        1e16,
        1e300,
        f64::MAX,
        f64::MIN_POSITIVE,
        5e-324,
    ] {
        round_trips(&property_named("D").eq(v));
    }
}

#[test]
fn nan_formats_as_nan_and_parses_back_as_nan() {
    let text = property_named("D").eq(f64::NAN).to_string();
    assert!(literal(&text["D eq ".len()..]).as_f64().unwrap().is_nan());
}

// ---- builder -------------------------------------------------------------------------

#[test]
fn builder_operators_match_the_named_methods() {
    let (a, b) = (property_named("A").eq(1), property_named("B").eq(2));
    assert_eq!(a.clone() & b.clone(), a.clone().and(b.clone()));
    assert_eq!(a.clone() | b.clone(), a.clone().or(b.clone()));
    assert_eq!(!a.clone(), a.clone().negate());
    assert_eq!(!a, Filter::Not(Box::new(property_named("A").eq(1))));
}

#[test]
fn builder_shortcuts_name_the_system_properties() {
    assert_eq!(partition_key().name(), "PartitionKey");
    assert_eq!(row_key().name(), "RowKey");
    assert_eq!(timestamp().name(), "Timestamp");
    assert_eq!(
        property_named("A").compare(CompareOp::Le, 3i64),
        parse("A le 3L")
    );
}
