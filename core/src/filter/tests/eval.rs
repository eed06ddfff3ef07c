//! Tests of evaluation: whether a filter holds on an entity, comparing each type as the
//! table service does.

use uuid::Uuid;

use super::*;
use crate::model::Entity;

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
        property_named("S")
            .lt("\u{ffff}")
            .matches(&Entity::new("p", "r").with("S", "\u{e000}"))
    );
    assert!(
        property_named("S")
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
        property_named("Z")
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
