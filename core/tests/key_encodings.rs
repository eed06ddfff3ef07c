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

mod templates {
    use super::*;
    use tablekit_core::typed::{KeyPart, KeyTemplate};

    fn template(source: &str) -> KeyTemplate {
        KeyTemplate::parse(source).expect("a valid template")
    }

    proptest! {
        #[test]
        fn padded_ranges_hold_exactly_the_ids_in_range(
            lo in 0u32..5000, span in 0u32..500, id in 0u32..6000, year in 1990u32..2100,
        ) {
            let hi = lo + span;
            // The range field last, and followed by more of the key.
            for source in ["empid_{id:06}", "{id:06}_{year}"] {
                let t = template(source);
                let bounds = t.range(&[], &lo, &hi).expect("a range");
                let key = t.render(|f| match f {
                    "id" => Some(&id as &dyn KeyPart),
                    _ => Some(&year as &dyn KeyPart),
                }).expect("renders");
                prop_assert_eq!(bounds.contains(&key), (lo..=hi).contains(&id), "{} in {:?}", key, bounds);
            }
        }

        #[test]
        fn string_ranges_before_a_low_separator_hold_exactly_the_values_in_range(
            lo in "[0-9A-Za-z]{1,4}", hi in "[0-9A-Za-z]{1,4}", value in "[0-9A-Za-z]{1,5}", tail in "[0-9a-z]{0,3}",
        ) {
            prop_assume!(lo <= hi);
            let t = template("{name},{tail}");
            let bounds = t.range(&[], &lo, &hi).expect("a range");
            let key = t.render_args(&[&value, &tail]).expect("renders");
            let inside = lo.as_str() <= value.as_str() && value.as_str() <= hi.as_str();
            prop_assert_eq!(bounds.contains(&key), inside, "{} in {:?}", key, bounds);
        }

        #[test]
        fn prefixes_hold_exactly_the_keys_with_those_leading_fields(
            device in 0u32..300, seller in "[0-9a-z]{1,5}", card in 0u32..1000,
            other_device in 0u32..300, other_seller in "[0-9a-z]{1,5}",
        ) {
            let t = template("{device:06},{seller},{card}");
            let key = t.render_args(&[&other_device, &other_seller, &card]).expect("renders");
            let one = t.prefix(&[&device]).expect("a prefix");
            prop_assert_eq!(one.contains(&key), other_device == device);
            let two = t.prefix(&[&device, &seller]).expect("a prefix");
            prop_assert_eq!(two.contains(&key), other_device == device && other_seller == seller);
        }

        #[test]
        fn rendered_keys_split_back_into_their_parts(
            user in any::<u64>(), at in arb_instant(), tag in "[a-z0-9]{1,8}", n in any::<u16>(),
        ) {
            let t = template("{user:hash4}{user}|{at:ticks_desc}{n:05}-{tag}");
            let key = t.render(|f| match f {
                "user" => Some(&user as &dyn KeyPart),
                "at" => Some(&at as &dyn KeyPart),
                "n" => Some(&n as &dyn KeyPart),
                _ => Some(&tag as &dyn KeyPart),
            }).expect("renders");
            let parts = t.split(&key).expect("splits");
            let texts: Vec<&str> = parts.iter().map(|(_, text)| *text).collect();
            let user_text = user.to_string();
            let hash = keys::hash_prefix(&user_text, 4);
            let ticks = keys::ticks_desc(at).expect("in range");
            let n_text = format!("{n:05}");
            prop_assert_eq!(texts, vec![hash.as_str(), user_text.as_str(), ticks.as_str(), n_text.as_str(), tag.as_str()]);
        }
    }
}
