//! Cases about values: every property type round-trips exactly through a write and both
//! kinds of read; properties set in any order read back by name; Unicode keys are kept.

use chrono::{DateTime, TimeZone, Utc};
use uuid::Uuid;

use super::{assert_same_properties, drop_table, fetch_existing, keys_of, new_table};
use crate::model::{Entity, Value};
use crate::query::Query;
use crate::store::TableStore;

/// Stores `entity`, then checks that `get`, a point query and a partition scan all give
/// back its properties exactly (same names, types, values; Doubles bit for bit).
async fn assert_round_trip<S: TableStore>(store: &S, table: &str, entity: Entity, what: &str) {
    let (pk, rk) = (entity.partition_key.clone(), entity.row_key.clone());
    store
        .insert(table, entity.clone())
        .await
        .unwrap_or_else(|e| panic!("{what}: insert failed: {e}"));
    let read = fetch_existing(store, table, &pk, &rk).await;
    assert_eq!(
        read.key(),
        (pk.as_str(), rk.as_str()),
        "{what}: keys through get"
    );
    assert_same_properties(
        &read.properties,
        &entity.properties,
        &format!("{what} (get)"),
    );

    let point = Query::with_filter(
        crate::filter::partition_key().eq(pk.as_str()) & crate::filter::row_key().eq(rk.as_str()),
    );
    let page = store
        .query(table, &point)
        .await
        .unwrap_or_else(|e| panic!("{what}: point query failed: {e}"));
    assert_eq!(
        page.entities.len(),
        1,
        "{what}: the point query finds the entity"
    );
    assert_same_properties(
        &page.entities[0].properties,
        &entity.properties,
        &format!("{what} (point query)"),
    );
    let scan = store
        .query_all(table, Query::partition(pk.as_str()))
        .await
        .unwrap_or_else(|e| panic!("{what}: partition scan failed: {e}"));
    let found = scan
        .iter()
        .find(|e| e.row_key == rk)
        .unwrap_or_else(|| panic!("{what}: the partition scan misses the entity"));
    assert_same_properties(
        &found.properties,
        &entity.properties,
        &format!("{what} (partition scan)"),
    );
}

/// Stores one entity per value of `values` under the property `V` and checks each round
/// trip.
async fn assert_values_round_trip<S: TableStore>(store: &S, prefix: &str, values: Vec<Value>) {
    let table = new_table(store, prefix).await;
    for (i, value) in values.into_iter().enumerate() {
        let what = format!("{prefix} value #{i} ({})", super::brief(&value));
        let entity = Entity::new("p", format!("r{i:03}")).with("V", value);
        assert_round_trip(store, &table, entity, &what).await;
    }
    drop_table(store, &table).await;
}

/// Strings round-trip exactly: empty, quotes, backslashes, control characters, any
/// Unicode including astral characters, and the longest allowed value.
pub async fn string_values_round_trip_exactly<S: TableStore>(store: &S) {
    let values = [
        String::new(),
        "O'Brien said \"hi\"".to_owned(),
        "back\\slash / hash # question ? percent %20 amp &".to_owned(),
        "line\nbreak\ttab\r\n".to_owned(),
        "日本語 Grüße ñ é 𝄞 😀 \u{FEFF}\u{200B}".to_owned(),
        " leading and trailing spaces ".to_owned(),
        "𝄞".repeat(16_384), // 32768 UTF-16 units: exactly 64 KiB
    ];
    assert_values_round_trip(store, "Strings", values.map(Value::String).to_vec()).await;
}

/// Int32 values round-trip exactly, extremes included, and stay Int32.
pub async fn int32_values_round_trip_exactly<S: TableStore>(store: &S) {
    let values = [i32::MIN, -1, 0, 1, i32::MAX];
    assert_values_round_trip(store, "Int32s", values.map(Value::Int32).to_vec()).await;
}

/// Int64 values round-trip exactly, extremes and values beyond 2^53 included, and stay
/// Int64.
pub async fn int64_values_round_trip_exactly<S: TableStore>(store: &S) {
    let values = [
        i64::MIN,
        -1,
        0,
        1,
        (1 << 53) + 1,
        i64::from(i32::MAX) + 1,
        i64::MAX,
    ];
    assert_values_round_trip(store, "Int64s", values.map(Value::Int64).to_vec()).await;
}

/// Doubles round-trip bit for bit: negative zero, the smallest subnormal, the extremes,
/// infinities and values with no short decimal form.
pub async fn double_values_round_trip_bit_for_bit<S: TableStore>(store: &S) {
    let mut values = vec![
        0.0,
        f64::from_bits(1), // 5e-324, the smallest subnormal
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        0.1,
        -1.0 / 3.0,
        1e300,
        123_456_789.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    if store.preserves_negative_zero() {
        values.insert(1, -0.0);
    }
    assert_values_round_trip(
        store,
        "Doubles",
        values.into_iter().map(Value::Double).collect(),
    )
    .await;
}

/// Booleans round-trip exactly.
pub async fn boolean_values_round_trip_exactly<S: TableStore>(store: &S) {
    assert_values_round_trip(
        store,
        "Booleans",
        vec![Value::Boolean(true), Value::Boolean(false)],
    )
    .await;
}

/// An instant from its parts, with microseconds.
fn instant(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, micros: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
        .single()
        .expect("a valid calendar date")
        + chrono::Duration::microseconds(i64::from(micros))
}

/// DateTimes round-trip to the microsecond, across the whole stored range (1601 to 9999)
/// and on both sides of 1970.
pub async fn datetime_values_round_trip_to_the_microsecond<S: TableStore>(store: &S) {
    let values = [
        instant(1601, 1, 1, 0, 0, 0, 0),
        instant(1601, 1, 1, 0, 0, 0, 1),
        instant(1969, 12, 31, 23, 59, 59, 999_999),
        instant(1970, 1, 1, 0, 0, 0, 0),
        instant(1970, 1, 1, 0, 0, 0, 1),
        instant(2024, 2, 29, 12, 34, 56, 123_456),
        instant(9999, 12, 31, 23, 59, 59, 999_999),
    ];
    assert_values_round_trip(store, "DateTimes", values.map(Value::DateTime).to_vec()).await;
}

/// GUIDs round-trip exactly.
pub async fn guid_values_round_trip_exactly<S: TableStore>(store: &S) {
    let values = [
        Uuid::nil(),
        Uuid::max(),
        Uuid::from_u128(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210),
        Uuid::new_v4(),
    ];
    assert_values_round_trip(store, "Guids", values.map(Value::Guid).to_vec()).await;
}

/// Binaries round-trip exactly: empty, every byte value, and the largest allowed value.
pub async fn binary_values_round_trip_exactly<S: TableStore>(store: &S) {
    let every_byte: Vec<u8> = (0..=255).collect();
    let largest: Vec<u8> = (0..64 * 1024).map(|i: u32| (i % 251) as u8).collect();
    let values = vec![
        Value::Binary(Vec::new()),
        Value::Binary(vec![0]),
        Value::Binary(every_byte),
        Value::Binary(largest),
    ];
    assert_values_round_trip(store, "Binaries", values).await;
}

/// User properties come back in the order they were set, whatever their names.
/// Properties set out of alphabetical order all read back, each under its name.
pub async fn properties_set_in_any_order_read_back_by_name<S: TableStore>(store: &S) {
    let table = new_table(store, "Order").await;
    let names = [
        "zeta", "Alpha", "_under", "mu", "Beta", "alpha", "Ärger", "a1",
    ];
    let mut entity = Entity::new("p", "r");
    for (i, name) in names.iter().enumerate() {
        entity.set(*name, i as i32);
    }
    entity.set("Mixed", Value::Guid(Uuid::nil()));
    entity.set("Last", "text");
    assert_round_trip(
        store,
        &table,
        entity,
        "properties set out of alphabetical order",
    )
    .await;
    drop_table(store, &table).await;
}

/// An entity with no user property round-trips with none.
pub async fn entity_without_properties_round_trips<S: TableStore>(store: &S) {
    let table = new_table(store, "NoProps").await;
    assert_round_trip(
        store,
        &table,
        Entity::new("p", "r"),
        "entity without properties",
    )
    .await;
    let read = fetch_existing(store, &table, "p", "r").await;
    assert!(
        read.properties.is_empty(),
        "no property appears from nowhere"
    );
    drop_table(store, &table).await;
}

/// Keys with any allowed Unicode (accents, CJK, astral characters, spaces, quotes, `%`)
/// round-trip exactly and address their entity.
pub async fn unicode_keys_round_trip<S: TableStore>(store: &S) {
    let table = new_table(store, "UnicodeKeys").await;
    let keys = [
        ("Grüße", "日本語"),
        ("𝄞 clef", "😀"),
        ("it's", "a \"quoted\" key"),
        ("100% & more", "a+b=c;d,e"),
        ("  spaces  ", "tab-free"),
        ("ﬀ ligature", "Å vs A\u{30A}"),
    ];
    for (i, (pk, rk)) in keys.iter().enumerate() {
        let entity = Entity::new(*pk, *rk).with("I", i as i32);
        assert_round_trip(store, &table, entity, &format!("keys ({pk:?}, {rk:?})")).await;
    }
    let all = super::all_entities(store, &table).await;
    let mut expected: Vec<(String, String)> = keys
        .iter()
        .map(|(pk, rk)| ((*pk).to_owned(), (*rk).to_owned()))
        .collect();
    let order = store.key_order();
    expected.sort_by(|a, b| {
        order
            .compare(&a.0, &b.0)
            .then_with(|| order.compare(&a.1, &b.1))
    });
    assert_eq!(
        keys_of(&all),
        expected,
        "every Unicode key is stored once, in key order"
    );
    drop_table(store, &table).await;
}
