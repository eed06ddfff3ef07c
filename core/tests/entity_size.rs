//! Property tests of entity-size accounting: sizes follow the table service's formula
//! (strings in UTF-16), adding a property adds exactly its share, and the 1 MiB check
//! accepts an entity exactly when its size is within the limit.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use proptest::prelude::*;
use tablekit_core::limits::{self, MAX_ENTITY_BYTES};
use tablekit_core::{Entity, Error, ErrorKind, Value};

fn arb_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        ".{0,40}".prop_map(Value::String),
        any::<i32>().prop_map(Value::Int32),
        any::<i64>().prop_map(Value::Int64),
        any::<f64>().prop_map(Value::Double),
        any::<bool>().prop_map(Value::Boolean),
        any::<u128>().prop_map(|g| Value::Guid(uuid::Uuid::from_u128(g))),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(Value::Binary),
        (0i64..4_000_000_000)
            .prop_map(|s| Value::DateTime(chrono::DateTime::from_timestamp(s, 0).unwrap())),
    ]
}

fn utf16(s: &str) -> usize {
    s.encode_utf16().count()
}

/// The service's formula, written independently of the library's.
fn expected_size(e: &Entity) -> usize {
    let mut size = 4 + 2 * (utf16(&e.partition_key) + utf16(&e.row_key));
    for (name, value) in &e.properties {
        size += 8 + 2 * utf16(name);
        size += match value {
            Value::String(s) => 4 + 2 * utf16(s),
            Value::Binary(b) => 4 + b.len(),
            Value::Int32(_) => 4,
            Value::Boolean(_) => 1,
            Value::Guid(_) => 16,
            Value::Int64(_) | Value::Double(_) | Value::DateTime(_) => 8,
        };
    }
    size
}

fn arb_entity() -> impl Strategy<Value = Entity> {
    (
        "[a-zA-Z0-9é𝄞]{0,20}",
        "[a-zA-Z0-9é𝄞]{0,20}",
        prop::collection::vec(("[A-Za-z_][A-Za-z0-9_é]{0,12}", arb_value()), 0..12),
    )
        .prop_map(|(pk, rk, props)| {
            let mut e = Entity::new(pk, rk);
            for (n, v) in props {
                e.set(n, v);
            }
            e
        })
}

proptest! {
    #[test]
    fn entity_size_matches_the_service_formula(e in arb_entity()) {
        prop_assert_eq!(limits::entity_size(&e), expected_size(&e));
    }

    #[test]
    fn adding_a_property_adds_exactly_its_share(e in arb_entity(), name in "Z[a-z]{0,8}", v in arb_value()) {
        prop_assume!(e.get(&name).is_none());
        let before = limits::entity_size(&e);
        let share = 8 + 2 * utf16(&name) + limits::value_size(&v);
        let after = limits::entity_size(&e.clone().with(name, v));
        prop_assert_eq!(after, before + share);
    }

}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_size_check_accepts_exactly_up_to_one_mebibyte(extra in 0usize..64, pad in 0usize..6) {
        // 16 string properties of 32,000 UTF-16 units each come close to 1 MiB; the last
        // one is tuned so the total lands a few bytes either side of the limit.
        let mut e = Entity::new("p", "r");
        for i in 0..16 {
            e.set(format!("S{i:02}"), "x".repeat(32_000));
        }
        let base = limits::entity_size(&e);
        let room = MAX_ENTITY_BYTES - base; // what the last property may take
        let target_units = (room - (8 + 2 * 3 + 4)) / 2 + extra / 2 - 16 + pad;
        e.set("T00", "y".repeat(target_units));
        let size = limits::entity_size(&e);
        let verdict = limits::check_entity(&e);
        if size <= MAX_ENTITY_BYTES {
            prop_assert!(verdict.is_ok(), "{} bytes refused: {:?}", size, verdict);
        } else {
            let err = Error::from(verdict.expect_err("over the limit must be refused"));
            prop_assert_eq!(err.kind(), ErrorKind::TooLarge);
        }
    }
}
