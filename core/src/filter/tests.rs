//! Unit tests of the filter parser, formatter, evaluator and builder.
#![allow(clippy::unwrap_used)]

use chrono::{DateTime, TimeZone, Utc};
use uuid::Uuid;

use super::*;
use crate::model::Entity;

/// What the parser expects where a condition starts.
const OPERAND: &str = "a comparison, `true`, `false`, `not` or `(`";

fn parse(input: &str) -> Filter {
    match Filter::parse(input) {
        Ok(f) => f,
        Err(e) => panic!("{input:?} should parse: {e}"),
    }
}

fn parse_err(input: &str) -> ParseError {
    match Filter::parse(input) {
        Ok(f) => panic!("{input:?} should not parse, got {f:?}"),
        Err(e) => e,
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

// ---- literals ------------------------------------------------------------------------

#[test]
fn string_literals_unescape_doubled_quotes() {
    assert_eq!(literal("'Sales'"), Value::from("Sales"));
    assert_eq!(literal("''"), Value::from(""));
    assert_eq!(literal("'it''s'"), Value::from("it's"));
    assert_eq!(literal("''''"), Value::from("'"));
    assert_eq!(
        literal("'a\nb\u{0}ü𝄞 and or'"),
        Value::from("a\nb\u{0}ü𝄞 and or")
    );
}

#[test]
fn integer_literals_are_int32_unless_suffixed_with_l() {
    assert_eq!(literal("42"), Value::Int32(42));
    assert_eq!(literal("-2147483648"), Value::Int32(i32::MIN));
    assert_eq!(literal("2147483647"), Value::Int32(i32::MAX));
    assert_eq!(literal("42L"), Value::Int64(42));
    assert_eq!(literal("-7l"), Value::Int64(-7));
    assert_eq!(literal("9223372036854775807L"), Value::Int64(i64::MAX));
}

#[test]
fn numbers_with_a_point_or_exponent_are_doubles() {
    assert_eq!(literal("1.5"), Value::Double(1.5));
    assert_eq!(literal("-2.0"), Value::Double(-2.0));
    assert_eq!(literal("1e10"), Value::Double(1e10));
    assert_eq!(literal("1.5E-3"), Value::Double(1.5e-3));
    assert_eq!(literal("2e+3"), Value::Double(2000.0));
    assert_eq!(literal("INF"), Value::Double(f64::INFINITY));
    assert_eq!(literal("-INF"), Value::Double(f64::NEG_INFINITY));
    assert!(literal("NaN").as_f64().unwrap().is_nan());
}

#[test]
fn booleans_are_words_in_any_case() {
    assert_eq!(literal("true"), Value::Boolean(true));
    assert_eq!(literal("false"), Value::Boolean(false));
    assert_eq!(literal("True"), Value::Boolean(true));
    assert_eq!(literal("FALSE"), Value::Boolean(false));
    assert_eq!(literal("tRuE"), Value::Boolean(true));
}

#[test]
fn type_prefixes_are_read_in_any_case() {
    let when = Value::DateTime(utc(2008, 7, 10, 0, 0, 0));
    for prefix in ["datetime", "DATETIME", "DateTime"] {
        assert_eq!(literal(&format!("{prefix}'2008-07-10T00:00:00Z'")), when);
    }
    let id = Value::Guid(Uuid::from_u128(5));
    for prefix in ["guid", "GUID", "Guid"] {
        assert_eq!(
            literal(&format!("{prefix}'00000000-0000-0000-0000-000000000005'")),
            id
        );
    }
    for prefix in ["X", "x", "binary", "BINARY", "Binary"] {
        assert_eq!(
            literal(&format!("{prefix}'0AfF'")),
            Value::Binary(vec![0x0a, 0xff])
        );
    }
}

#[test]
fn nan_and_inf_are_read_only_as_spelled() {
    for word in ["nan", "NAN", "inf", "Inf"] {
        assert_eq!(parse_err(&format!("P eq {word}")).expected, "a literal");
    }
}

#[test]
fn datetimes_are_converted_to_utc() {
    assert_eq!(
        literal("datetime'2008-07-10T00:00:00Z'"),
        Value::DateTime(utc(2008, 7, 10, 0, 0, 0))
    );
    assert_eq!(
        literal("datetime'2008-07-10T02:30:00+02:30'"),
        Value::DateTime(utc(2008, 7, 10, 0, 0, 0))
    );
    let precise = literal("datetime'2008-07-10T00:00:00.123456789Z'");
    assert_eq!(
        precise,
        Value::DateTime(utc(2008, 7, 10, 0, 0, 0) + chrono::Duration::nanoseconds(123_456_789))
    );
}

#[test]
fn guids_accept_either_case() {
    let id = Uuid::parse_str("c9da6455-213d-42c9-9a79-3e9149a57833").unwrap();
    assert_eq!(
        literal("guid'c9da6455-213d-42c9-9a79-3e9149a57833'"),
        Value::Guid(id)
    );
    assert_eq!(
        literal("guid'C9DA6455-213D-42C9-9A79-3E9149A57833'"),
        Value::Guid(id)
    );
}

#[test]
fn binaries_accept_both_prefixes_and_either_case() {
    assert_eq!(literal("X'0aff'"), Value::Binary(vec![0x0a, 0xff]));
    assert_eq!(literal("binary'0AFF'"), Value::Binary(vec![0x0a, 0xff]));
    assert_eq!(literal("X''"), Value::Binary(vec![]));
}

// ---- structure -----------------------------------------------------------------------

#[test]
fn and_binds_tighter_than_or() {
    assert_eq!(
        parse("A eq 1 or B eq 2 and C eq 3"),
        prop("A").eq(1) | (prop("B").eq(2) & prop("C").eq(3))
    );
    assert_eq!(
        parse("A eq 1 and B eq 2 or C eq 3"),
        (prop("A").eq(1) & prop("B").eq(2)) | prop("C").eq(3)
    );
}

#[test]
fn and_and_or_associate_to_the_left() {
    assert_eq!(
        parse("A eq 1 and B eq 2 and C eq 3"),
        (prop("A").eq(1) & prop("B").eq(2)) & prop("C").eq(3)
    );
    assert_eq!(
        parse("A eq 1 or B eq 2 or C eq 3"),
        (prop("A").eq(1) | prop("B").eq(2)) | prop("C").eq(3)
    );
}

#[test]
fn not_binds_to_the_next_comparison_or_parenthesis() {
    assert_eq!(
        parse("not A eq 1 and B eq 2"),
        !prop("A").eq(1) & prop("B").eq(2)
    );
    assert_eq!(
        parse("not (A eq 1 and B eq 2)"),
        !(prop("A").eq(1) & prop("B").eq(2))
    );
    assert_eq!(parse("not not A eq 1"), !!prop("A").eq(1));
}

#[test]
fn parentheses_override_precedence() {
    assert_eq!(
        parse("(A eq 1 or B eq 2) and C eq 3"),
        (prop("A").eq(1) | prop("B").eq(2)) & prop("C").eq(3)
    );
    assert_eq!(parse("((A eq 1))"), prop("A").eq(1));
}

#[test]
fn literal_left_comparisons_flip_the_operator() {
    assert_eq!(parse("30 lt Age"), prop("Age").gt(30));
    assert_eq!(parse("30 le Age"), prop("Age").ge(30));
    assert_eq!(parse("30 gt Age"), prop("Age").lt(30));
    assert_eq!(parse("30 ge Age"), prop("Age").le(30));
    assert_eq!(parse("'x' eq Name"), prop("Name").eq("x"));
    assert_eq!(parse("'x' ne Name"), prop("Name").ne("x"));
}

#[test]
fn any_whitespace_separates_tokens() {
    assert_eq!(
        parse("\t(Age\n  ge\r\n30)and(Name eq'x')  "),
        prop("Age").ge(30) & prop("Name").eq("x")
    );
}

#[test]
fn identifiers_may_hold_unicode_letters_and_digits() {
    assert_eq!(parse("Größe_2 eq 1"), prop("Größe_2").eq(1));
    assert_eq!(parse("_x eq 1"), prop("_x").eq(1));
}

#[test]
fn typed_literal_prefixes_without_a_quote_are_property_names() {
    assert_eq!(parse("X eq 1"), prop("X").eq(1));
    assert_eq!(parse("datetime eq 1"), prop("datetime").eq(1));
    assert_eq!(parse("binary eq X'00'"), prop("binary").eq(vec![0u8]));
}

#[test]
fn system_properties_are_ordinary_identifiers() {
    assert_eq!(
        parse(
            "PartitionKey eq 'a' and RowKey lt 'b' and Timestamp ge datetime'2020-01-01T00:00:00Z'"
        ),
        partition_key().eq("a") & row_key().lt("b") & timestamp().ge(utc(2020, 1, 1, 0, 0, 0))
    );
}

#[test]
fn from_str_parses_like_parse() {
    let f: Filter = "Age ge 30".parse().unwrap();
    assert_eq!(f, prop("Age").ge(30));
}

// ---- errors --------------------------------------------------------------------------

fn assert_error(input: &str, column: usize, expected: &str, found: &str) {
    let e = parse_err(input);
    assert_eq!(
        (e.column, e.expected.as_str(), e.found.as_str()),
        (column, expected, found),
        "{input:?}"
    );
}

#[test]
fn a_missing_literal_is_reported_at_the_end() {
    assert_error("Age gt", 7, "a literal", "end of filter");
}

#[test]
fn an_unknown_operator_is_reported_with_the_operator_list() {
    assert_error(
        "Age gtx 3",
        5,
        "a comparison operator (eq, ne, gt, ge, lt, le)",
        "`gtx`",
    );
}

#[test]
fn an_unterminated_string_names_the_column_where_it_opens() {
    assert_error(
        "Name eq 'abc",
        13,
        "`'` to close the string that starts at column 9",
        "end of filter",
    );
}

#[test]
fn an_unclosed_parenthesis_is_reported_at_the_end() {
    assert_error("(Age eq 1", 10, "`and`, `or` or `)`", "end of filter");
}

#[test]
fn an_int32_overflow_suggests_the_l_suffix() {
    assert_error(
        "Age eq 99999999999",
        8,
        "an Int32 (-2147483648 to 2147483647); add `L` for an Int64",
        "`99999999999`",
    );
    assert_eq!(literal("99999999999L"), Value::Int64(99_999_999_999));
    assert!(
        parse_err("Age eq 99999999999999999999L")
            .expected
            .contains("Int64")
    );
}

#[test]
fn binaries_need_an_even_number_of_hex_digits() {
    assert_error(
        "X'abc'",
        1,
        "an even number of hex digits, like `X'0aff'`",
        "`X'abc'`",
    );
    assert_eq!(parse_err("B eq X'zz'").column, 6);
}

#[test]
fn malformed_guids_are_rejected() {
    assert_error(
        "guid'nope'",
        1,
        "a GUID like `guid'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'`",
        "`guid'nope'`",
    );
    // A UUID without hyphens is valid for the uuid crate, not in a filter.
    assert!(Filter::parse("G eq guid'c9da6455213d42c99a793e9149a57833'").is_err());
}

#[test]
fn impossible_datetimes_are_rejected() {
    let e = parse_err("datetime'2020-13-01T00:00:00Z'");
    assert_eq!(
        (e.column, e.found.as_str()),
        (1, "`datetime'2020-13-01T00:00:00Z'`")
    );
    assert!(
        e.expected.starts_with("an RFC 3339 date and time"),
        "{}",
        e.expected
    );
    for bad in [
        "datetime'2020-01-01T00:00:00'",
        "datetime'2020-01-01'",
        "datetime'2020-01-01T00:00:00.1234567890Z'",
        "datetime'0000-01-01T00:00:00+01:00'",
        "datetime'9999-12-31T23:00:00-02:00'",
    ] {
        assert!(Filter::parse(&format!("T eq {bad}")).is_err(), "{bad}");
    }
}

#[test]
fn an_empty_filter_expects_a_comparison() {
    assert_error("", 1, OPERAND, "end of filter");
    assert_error("   ", 4, OPERAND, "end of filter");
}

#[test]
fn an_empty_query_filter_is_no_filter() {
    for empty in ["", "  ", "\t\r\n"] {
        let query = crate::Query::parse(empty).unwrap();
        assert_eq!(query.filter, None, "{empty:?}");
    }
}

#[test]
fn a_keyword_cannot_start_a_filter() {
    assert_error("and", 1, OPERAND, "`and`");
    assert_error("OR", 1, OPERAND, "`OR`");
}

#[test]
fn two_booleans_cannot_be_compared() {
    assert_error("true eq true", 9, "a property name", "`true`");
    assert_error("true eq", 8, "a property name", "end of filter");
}

#[test]
fn a_lone_literal_other_than_a_boolean_is_refused() {
    assert_error(
        "'a'",
        4,
        "a comparison operator (eq, ne, gt, ge, lt, le)",
        "end of filter",
    );
    assert_error(
        "1 and A eq 1",
        3,
        "a comparison operator (eq, ne, gt, ge, lt, le)",
        "`and`",
    );
}

#[test]
fn two_properties_cannot_be_compared() {
    assert_error("A eq B", 6, "a literal", "`B`");
}

#[test]
fn two_literals_cannot_be_compared() {
    assert_error("1 eq 2", 6, "a property name", "`2`");
}

#[test]
fn trailing_tokens_are_rejected() {
    assert_error("A eq 1 B", 8, "`and`, `or` or end of filter", "`B`");
    assert_error("A eq 1)", 7, "`and`, `or` or end of filter", "`)`");
}

#[test]
fn keywords_are_read_in_any_case() {
    assert_eq!(parse("A EQ 1"), prop("A").eq(1));
    assert_eq!(
        parse("NOT (A Gt 1 AND B lE 2) Or C ne 3"),
        !(prop("A").gt(1) & prop("B").le(2)) | prop("C").ne(3)
    );
    // A keyword in any case cannot name a property.
    assert_error("Not eq 1", 5, OPERAND, "`eq`");
}

#[test]
fn malformed_numbers_are_rejected() {
    for bad in [
        "1.", "1e", "1.5L", "12abc", "--1", "-", "1.2.3", "1e5L", "-INFX", "1dd", "1Ld", "1dL",
        "1.d", "INFd",
    ] {
        let e = parse_err(&format!("A eq {bad}"));
        assert_eq!(e.column, 6, "{bad}");
    }
    assert!(parse_err("A eq 1e999").expected.contains("finite Double"));
}

#[test]
fn unexpected_characters_are_reported_by_column_in_characters() {
    assert_error("Größe eq #", 10, "a literal", "`#`");
}

#[test]
fn columns_count_characters_not_bytes() {
    let e = parse_err("'ü𝄞' eq 1");
    assert_eq!((e.column, e.found.as_str()), (9, "`1`"));
}

#[test]
fn long_tokens_are_shortened_in_errors() {
    let name = "N".repeat(100);
    let e = parse_err(&format!("A eq {name}"));
    assert_eq!(e.found, format!("`{}…`", "N".repeat(40)));
}

#[test]
fn nesting_is_limited_to_100_levels() {
    let ok = format!("{}A eq 1{}", "(".repeat(100), ")".repeat(100));
    assert_eq!(parse(&ok), prop("A").eq(1));
    let deep = format!("{}A eq 1{}", "(".repeat(101), ")".repeat(101));
    assert_error(&deep, 101, "nesting at most 100 levels", "`(`");

    let nots = format!("{}A eq 1", "not ".repeat(101));
    assert_eq!(parse_err(&nots).expected, "nesting at most 100 levels");
    let chain = vec!["A eq 1"; 102].join(" and ");
    assert_eq!(parse_err(&chain).expected, "nesting at most 100 levels");
    let chain = vec!["A eq 1"; 101].join(" and ");
    round_trips(&parse(&chain));
}

#[test]
fn very_deep_input_fails_without_overflowing_the_stack() {
    let deep = "(".repeat(1_000_000);
    assert!(Filter::parse(&deep).is_err());
    let nots = "not ".repeat(1_000_000);
    assert!(Filter::parse(&nots).is_err());
}

#[test]
fn the_error_message_names_column_expectation_and_finding() {
    assert_eq!(
        parse_err("Age gt").to_string(),
        "invalid filter at column 7: expected a literal, found end of filter"
    );
}

// ---- formatting ----------------------------------------------------------------------

#[test]
fn boolean_conditions_parse_format_and_round_trip() {
    let cases = [
        ("true", Filter::Literal(true)),
        ("FALSE", Filter::Literal(false)),
        ("not True", !Filter::Literal(true)),
        (
            "(true and RowKey eq '1') or PartitionKey eq 'b'",
            (Filter::Literal(true) & prop("RowKey").eq("1")) | prop("PartitionKey").eq("b"),
        ),
        (
            "Active eq true or false",
            prop("Active").eq(true) | Filter::Literal(false),
        ),
        ("true eq Active", prop("Active").eq(true)),
        ("(((false)))", Filter::Literal(false)),
    ];
    for (text, expected) in cases {
        let parsed = parse(text);
        assert_eq!(parsed, expected, "{text}");
        round_trips(&parsed);
    }
    assert_eq!(
        ((Filter::Literal(true) & prop("RowKey").eq("1")) | Filter::Literal(false)).to_string(),
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
    let f = prop("PartitionKey").eq("Sales") & prop("RowKey").ge("empid_000100");
    assert_eq!(
        f.to_odata(),
        "PartitionKey eq 'Sales' and RowKey ge 'empid_000100'"
    );
}

#[test]
fn nested_logic_is_parenthesised() {
    let (a, b, c) = (prop("A").eq(1), prop("B").eq(2), prop("C").eq(3));
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
        let f = prop("P").eq(value);
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
        round_trips(&prop("D").eq(v));
    }
}

#[test]
fn nan_formats_as_nan_and_parses_back_as_nan() {
    let text = prop("D").eq(f64::NAN).to_string();
    assert!(literal(&text["D eq ".len()..]).as_f64().unwrap().is_nan());
}

// ---- evaluation ----------------------------------------------------------------------

fn employee() -> Entity {
    let mut e = Entity::new("Sales", "empid_000123")
        .with("Name", "Jun")
        .with("Age", 47)
        .with("Big", 5_000_000_000i64)
        .with("Score", 2.5)
        .with("Nan", f64::NAN)
        .with("Active", true)
        .with("Hired", utc(2010, 3, 1, 9, 0, 0))
        .with("Id", Uuid::from_u128(5))
        .with("Photo", vec![1u8, 2, 3]);
    e.timestamp = Some(utc(2024, 1, 1, 0, 0, 0));
    e
}

fn holds(filter: &str) -> bool {
    parse(filter).matches(&employee())
}

#[test]
fn strings_compare_by_code_point() {
    assert!(holds("Name eq 'Jun'"));
    assert!(!holds("Name eq 'jun'"));
    assert!(holds("Name lt 'jun'")); // 'J' < 'j'
    assert!(holds("Name gt 'Ju'"));
    assert!(holds("Name lt 'Jun\u{0}'"));
    assert!(
        prop("S")
            .lt("\u{ffff}")
            .matches(&Entity::new("p", "r").with("S", "\u{e000}"))
    );
    assert!(
        prop("S")
            .gt("\u{ffff}")
            .matches(&Entity::new("p", "r").with("S", "𝄞"))
    );
}

#[test]
fn integers_compare_numerically() {
    assert!(holds("Age eq 47"));
    assert!(holds("Age ge 47") && holds("Age le 47") && holds("Age gt 9") && holds("Age lt 100"));
    assert!(holds("Big gt 4999999999L"));
    assert!(holds("Big ne 1L"));
}

#[test]
fn an_int32_literal_widens_to_int64_and_double_properties() {
    assert!(holds("Big gt 1") && holds("Big ne 1") && holds("Big ge -2147483648"));
    assert!(!holds("Big eq 1") && !holds("Big lt 2147483647"));
    assert!(holds("Score gt 2") && holds("Score lt 3") && holds("Score ne 2"));
    assert!(!holds("Score eq 2") && !holds("Score le 2"));
    assert!(holds("2 lt Score") && holds("3 gt Score") && holds("1 lt Big"));
    let whole = Entity::new("p", "r").with("Price", 5.0).with("Count", 5i64);
    for filter in [
        "Price eq 5",
        "Price gt 4",
        "5 eq Price",
        "4 lt Price",
        "Count eq 5",
    ] {
        assert!(parse(filter).matches(&whole), "{filter}");
    }
    assert!(!parse("Price ne 5").matches(&whole));
}

#[test]
fn int64_and_double_literals_do_not_widen_or_narrow() {
    assert!(!holds("Age eq 47L"));
    assert!(!holds("Age ne 47L"));
    assert!(!holds("Age eq 47.0"));
    assert!(!holds("Age gt 1.5"));
    assert!(!holds("Score gt 1L"));
    assert!(!holds("Big gt 1.0"));
    assert!(!holds("Big ne 1.0"));
}

#[test]
fn a_string_never_equals_a_number() {
    let e = Entity::new("p", "r").with("N", "5");
    for filter in [
        "N eq 5", "N ne 5", "N gt 4", "N eq 5L", "N eq 5.0", "5 eq N",
    ] {
        assert!(!parse(filter).matches(&e), "{filter}");
    }
    assert!(parse("N eq '5'").matches(&e));
}

#[test]
fn boolean_literals_hold_for_every_entity_or_none() {
    let e = Entity::new("a", "1");
    assert!(parse("true").matches(&e));
    assert!(!parse("false").matches(&e));
    assert!(parse("not false").matches(&e));
    assert!(parse("(true and RowKey eq '1') or PartitionKey eq 'b'").matches(&e));
    assert!(!parse("(true and RowKey eq '2') or PartitionKey eq 'b'").matches(&e));
    assert!(parse("false or RowKey eq '1'").matches(&e));
    assert!(!parse("False and RowKey eq '1'").matches(&e));
}

#[test]
fn a_d_suffix_makes_a_double() {
    assert_eq!(literal("5d"), Value::Double(5.0));
    assert_eq!(literal("1.5D"), Value::Double(1.5));
    assert_eq!(literal("-2e3d"), Value::Double(-2000.0));
    assert_eq!(parse("A eq 5d").to_string(), "A eq 5.0");
    assert!(!holds("Age eq 47d"));
    assert!(holds("Score eq 2.5d"));
}

#[test]
fn doubles_compare_numerically() {
    assert!(holds("Score eq 2.5"));
    assert!(holds("Score gt 2.4999"));
    assert!(holds("Score lt INF"));
    assert!(holds("Score gt -INF"));
    assert!(
        prop("Z")
            .eq(0.0)
            .matches(&Entity::new("p", "r").with("Z", -0.0))
    );
}

#[test]
fn every_comparison_with_nan_is_false() {
    for op in ["eq", "ne", "gt", "ge", "lt", "le"] {
        assert!(!holds(&format!("Nan {op} 1.0")), "stored NaN {op}");
        assert!(!holds(&format!("Score {op} NaN")), "literal NaN {op}");
        assert!(!holds(&format!("Nan {op} NaN")), "both NaN {op}");
    }
    assert!(holds("not (Nan eq 1.0)"));
}

#[test]
fn false_sorts_before_true() {
    assert!(holds("Active eq true"));
    assert!(holds("Active gt false"));
    assert!(!holds("Active lt true"));
}

#[test]
fn datetimes_compare_chronologically() {
    assert!(holds("Hired eq datetime'2010-03-01T09:00:00Z'"));
    assert!(holds("Hired eq datetime'2010-03-01T10:00:00+01:00'"));
    assert!(holds("Hired gt datetime'2010-03-01T08:59:59.999Z'"));
    assert!(holds("Hired lt datetime'2011-01-01T00:00:00Z'"));
}

#[test]
fn guids_compare_by_bytes() {
    assert!(holds("Id eq guid'00000000-0000-0000-0000-000000000005'"));
    assert!(holds("Id lt guid'01000000-0000-0000-0000-000000000000'"));
    assert!(holds("Id gt guid'00000000-0000-0000-0000-000000000004'"));
}

#[test]
fn binaries_compare_lexicographically() {
    assert!(holds("Photo eq X'010203'"));
    assert!(holds("Photo gt X'0102'"));
    assert!(holds("Photo lt X'02'"));
    assert!(holds("Photo gt X''"));
}

#[test]
fn system_properties_come_from_the_entity_fields() {
    assert!(holds("PartitionKey eq 'Sales'"));
    assert!(holds(
        "RowKey ge 'empid_000100' and RowKey lt 'empid_000200'"
    ));
    assert!(holds("Timestamp eq datetime'2024-01-01T00:00:00Z'"));
    assert!(!holds("PartitionKey eq 1"));
    assert!(!holds("Timestamp eq 'x'"));
}

#[test]
fn a_missing_timestamp_is_absent() {
    let e = Entity::new("p", "r");
    assert!(!timestamp().ge(utc(1970, 1, 1, 0, 0, 0)).matches(&e));
    assert!(!timestamp().ne(utc(1970, 1, 1, 0, 0, 0)).matches(&e));
}

#[test]
fn ne_is_false_when_the_property_is_absent() {
    assert!(!holds("Dept ne 'HR'"));
    for op in ["eq", "gt", "ge", "lt", "le"] {
        assert!(!holds(&format!("Dept {op} 'HR'")), "{op}");
    }
}

#[test]
fn ne_is_false_when_the_types_differ() {
    assert!(!holds("Name ne 1"));
    assert!(!holds("Age ne 'Jun'"));
    assert!(!holds("Active ne 1"));
}

#[test]
fn not_over_an_absent_property_is_true() {
    assert!(holds("not (Dept eq 'HR')"));
    assert!(holds("not (Dept ne 'HR')"));
}

#[test]
fn and_or_follow_boolean_logic() {
    assert!(holds("Age eq 47 and Name eq 'Jun'"));
    assert!(!holds("Age eq 47 and Name eq 'X'"));
    assert!(holds("Age eq 1 or Name eq 'Jun'"));
    assert!(!holds("Age eq 1 or Name eq 'X'"));
}

#[test]
fn comparisons_counts_every_comparison() {
    assert_eq!(parse("A eq 1").comparisons(), 1);
    assert_eq!(
        parse("not (A eq 1 or B eq 2) and (C eq 3 or D eq 4 or A eq 5)").comparisons(),
        5
    );
}

// ---- builder -------------------------------------------------------------------------

#[test]
fn builder_operators_match_the_named_methods() {
    let (a, b) = (prop("A").eq(1), prop("B").eq(2));
    assert_eq!(a.clone() & b.clone(), a.clone().and(b.clone()));
    assert_eq!(a.clone() | b.clone(), a.clone().or(b.clone()));
    assert_eq!(!a.clone(), a.clone().negate());
    assert_eq!(!a, Filter::Not(Box::new(prop("A").eq(1))));
}

#[test]
fn builder_shortcuts_name_the_system_properties() {
    assert_eq!(partition_key().name(), "PartitionKey");
    assert_eq!(row_key().name(), "RowKey");
    assert_eq!(timestamp().name(), "Timestamp");
    assert_eq!(prop("A").compare(CompareOp::Le, 3i64), parse("A le 3L"));
}
