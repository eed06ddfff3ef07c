//! Tests of the parser: literals of every type, the tree it builds, and the errors it
//! reports.

use uuid::Uuid;

use super::*;

/// What the parser expects where a condition starts.
const OPERAND: &str = "a comparison, `true`, `false`, `not` or `(`";

fn parse_err(input: &str) -> ParseError {
    match Filter::parse(input) {
        Ok(f) => panic!("{input:?} should not parse, got {f:?}"),
        Err(e) => e,
    }
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
        property_named("A").eq(1) | (property_named("B").eq(2) & property_named("C").eq(3))
    );
    assert_eq!(
        parse("A eq 1 and B eq 2 or C eq 3"),
        (property_named("A").eq(1) & property_named("B").eq(2)) | property_named("C").eq(3)
    );
}

#[test]
fn and_and_or_associate_to_the_left() {
    assert_eq!(
        parse("A eq 1 and B eq 2 and C eq 3"),
        (property_named("A").eq(1) & property_named("B").eq(2)) & property_named("C").eq(3)
    );
    assert_eq!(
        parse("A eq 1 or B eq 2 or C eq 3"),
        (property_named("A").eq(1) | property_named("B").eq(2)) | property_named("C").eq(3)
    );
}

#[test]
fn not_binds_to_the_next_comparison_or_parenthesis() {
    assert_eq!(
        parse("not A eq 1 and B eq 2"),
        !property_named("A").eq(1) & property_named("B").eq(2)
    );
    assert_eq!(
        parse("not (A eq 1 and B eq 2)"),
        !(property_named("A").eq(1) & property_named("B").eq(2))
    );
    assert_eq!(parse("not not A eq 1"), !!property_named("A").eq(1));
}

#[test]
fn parentheses_override_precedence() {
    assert_eq!(
        parse("(A eq 1 or B eq 2) and C eq 3"),
        (property_named("A").eq(1) | property_named("B").eq(2)) & property_named("C").eq(3)
    );
    assert_eq!(parse("((A eq 1))"), property_named("A").eq(1));
}

#[test]
fn literal_left_comparisons_flip_the_operator() {
    assert_eq!(parse("30 lt Age"), property_named("Age").gt(30));
    assert_eq!(parse("30 le Age"), property_named("Age").ge(30));
    assert_eq!(parse("30 gt Age"), property_named("Age").lt(30));
    assert_eq!(parse("30 ge Age"), property_named("Age").le(30));
    assert_eq!(parse("'x' eq Name"), property_named("Name").eq("x"));
    assert_eq!(parse("'x' ne Name"), property_named("Name").ne("x"));
}

#[test]
fn any_whitespace_separates_tokens() {
    assert_eq!(
        parse("\t(Age\n  ge\r\n30)and(Name eq'x')  "),
        property_named("Age").ge(30) & property_named("Name").eq("x")
    );
}

#[test]
fn identifiers_may_hold_unicode_letters_and_digits() {
    assert_eq!(parse("Größe_2 eq 1"), property_named("Größe_2").eq(1));
    assert_eq!(parse("_x eq 1"), property_named("_x").eq(1));
}

#[test]
fn typed_literal_prefixes_without_a_quote_are_property_names() {
    assert_eq!(parse("X eq 1"), property_named("X").eq(1));
    assert_eq!(parse("datetime eq 1"), property_named("datetime").eq(1));
    assert_eq!(
        parse("binary eq X'00'"),
        property_named("binary").eq(vec![0u8])
    );
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
    assert_eq!(f, property_named("Age").ge(30));
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
    assert_eq!(parse("A EQ 1"), property_named("A").eq(1));
    assert_eq!(
        parse("NOT (A Gt 1 AND B lE 2) Or C ne 3"),
        !(property_named("A").gt(1) & property_named("B").le(2)) | property_named("C").ne(3)
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
    assert_eq!(parse(&ok), property_named("A").eq(1));
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
