//! Property tests of the key encodings: padded integers and compound keys keep the order
//! of what they encode, inverted ticks reverse it, and every encoding reads back.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use chrono::{DateTime, Utc};
use proptest::prelude::*;
use tablekit_core::keys::{self, CompoundKey, DOTNET_MAX_TICKS};

fn arb_instant() -> impl Strategy<Value = DateTime<Utc>> {
    // 0001-01-01 ..= 9999-12-31, at 100 ns precision (what .NET ticks hold).
    (0i64..=DOTNET_MAX_TICKS).prop_map(|t| keys::from_dotnet_ticks(t).expect("in range"))
}

proptest! {
    #[test]
    fn padding_keeps_numeric_order(a in 0u64..1_000_000, b in 0u64..1_000_000) {
        let (pa, pb) = (keys::pad(a, 6).unwrap(), keys::pad(b, 6).unwrap());
        prop_assert_eq!(a.cmp(&b), pa.cmp(&pb));
        prop_assert_eq!(keys::parse_padded(&pa), Ok(a));
    }

    #[test]
    fn padding_to_twenty_digits_holds_every_u64(a in any::<u64>(), b in any::<u64>()) {
        let (pa, pb) = (keys::pad(a, 20).unwrap(), keys::pad(b, 20).unwrap());
        prop_assert_eq!(a.cmp(&b), pa.cmp(&pb));
    }

    #[test]
    fn inverted_ticks_reverse_time_order_and_read_back(a in arb_instant(), b in arb_instant()) {
        let (ka, kb) = (keys::ticks_desc(a).unwrap(), keys::ticks_desc(b).unwrap());
        prop_assert_eq!(ka.len(), 19);
        prop_assert_eq!(a.cmp(&b), kb.cmp(&ka));
        prop_assert_eq!(keys::parse_ticks_desc(&ka), Ok(a));
    }

    #[test]
    fn compound_keys_sort_as_their_part_tuples(
        a in prop::collection::vec("[0-9A-Za-z_.-]{0,6}", 1..4),
        b in prop::collection::vec("[0-9A-Za-z_.-]{0,6}", 1..4),
    ) {
        // `,` sorts below every character of the parts.
        let key = CompoundKey::new(',');
        let (ka, kb) = (key.join(&a).unwrap(), key.join(&b).unwrap());
        prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        prop_assert_eq!(key.split(&ka).unwrap(), a.iter().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn prefix_ranges_hold_exactly_the_keys_under_the_prefix(
        prefix in prop::collection::vec("[0-9a-z]{1,4}", 1..3),
        other in prop::collection::vec("[0-9a-z]{0,4}", 1..5),
    ) {
        let key = CompoundKey::new(',');
        let (start, end) = key.prefix_range(&prefix).unwrap();
        let joined = key.join(&other).unwrap();
        let under = other.len() > prefix.len() && other[..prefix.len()] == prefix[..];
        prop_assert_eq!(joined >= start && joined < end, under, "{} in [{}, {})", joined, start, end);
    }

    #[test]
    fn hash_prefixes_are_lowercase_hex_of_the_asked_length(value in ".{0,40}", n in 0usize..40) {
        let p = keys::hash_prefix(&value, n);
        prop_assert_eq!(p.len(), n.min(32));
        prop_assert!(p.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        prop_assert!(keys::hashed(&value, n).ends_with(&value));
    }
}
