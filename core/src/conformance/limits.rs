//! Cases about the data model's limits: each violation fails with its `ErrorKind` before
//! anything is written, and the value just inside each limit is accepted.

use chrono::{DateTime, TimeZone, Utc};

use super::{
    all_entities, drop_table, expect_kind, fetch, fetch_existing, insert_all, new_table,
    versions_of,
};
use crate::error::ErrorKind;
use crate::filter::property_named;
use crate::model::{Entity, IfMatch, Value};
use crate::query::Query;
use crate::store::{Batch, TableStore};

/// An entity with `count` Int32 properties named `{prefix}000`, `{prefix}001`, ….
fn with_properties(entity: Entity, prefix: &str, count: usize) -> Entity {
    let mut entity = entity;
    for i in 0..count {
        entity.set(format!("{prefix}{i:03}"), i as i32);
    }
    entity
}

/// A Binary property of `len` bytes.
fn bytes(len: usize) -> Value {
    Value::Binary(vec![0x5A; len])
}

/// Checks that every write of `entity` (insert, both upserts, replace and merge over the
/// stored `(pk, existing)`, and a batch insert) fails with `kind`, and that the table is
/// unchanged.
async fn assert_every_write_refused<S: TableStore>(
    store: &S,
    table: &str,
    entity: &Entity,
    kind: ErrorKind,
    what: &str,
) {
    let before = versions_of(&all_entities(store, table).await);
    expect_kind(
        store.insert(table, entity.clone()).await,
        kind,
        &format!("insert of {what}"),
    );
    expect_kind(
        store.insert_or_replace(table, entity.clone()).await,
        kind,
        &format!("insert_or_replace of {what}"),
    );
    expect_kind(
        store.insert_or_merge(table, entity.clone()).await,
        kind,
        &format!("insert_or_merge of {what}"),
    );
    expect_kind(
        store.replace(table, entity.clone(), IfMatch::Any).await,
        kind,
        &format!("replace with {what}"),
    );
    expect_kind(
        store.merge(table, entity.clone(), IfMatch::Any).await,
        kind,
        &format!("merge of {what}"),
    );
    let mut batch = Batch::new();
    batch.insert(entity.clone());
    let error = expect_kind(
        store.submit_batch(table, batch).await,
        kind,
        &format!("batch insert of {what}"),
    );
    assert_eq!(
        error.batch_index(),
        Some(0),
        "the batch error for {what} names operation 0 ({error})"
    );
    assert_eq!(
        versions_of(&all_entities(store, table).await),
        before,
        "refusing {what} must leave the table unchanged"
    );
}

/// Keys of 512 UTF-16 units are accepted; 1025 units (counted in UTF-16, so 512 astral
/// characters make 1024) are `TooLarge`, in either key, for every write.
pub async fn key_of_512_utf16_units_is_accepted_and_513_is_too_large<S: TableStore>(store: &S) {
    let table = new_table(store, "KeyLength").await;
    let astral_512 = "𝄞".repeat(256);
    let ascii_512 = "k".repeat(512);
    insert_all(
        store,
        &table,
        vec![
            Entity::new(astral_512.clone(), ascii_512.clone()).with("N", 1),
            Entity::new(ascii_512.clone(), astral_512.clone()).with("N", 2),
        ],
    )
    .await;
    let read = fetch_existing(store, &table, &astral_512, &ascii_512).await;
    assert_eq!(
        read.get("N"),
        Some(&Value::Int32(1)),
        "the 512-unit keys address it"
    );

    let over_astral = format!("{astral_512}a");
    let over_ascii = "k".repeat(513);
    for (pk, rk, what) in [
        (
            over_astral.as_str(),
            "r",
            "a PartitionKey of 513 UTF-16 units (257 chars)",
        ),
        ("p", over_ascii.as_str(), "a RowKey of 513 characters"),
        (
            astral_512.as_str(),
            over_astral.as_str(),
            "a RowKey of 513 UTF-16 units",
        ),
    ] {
        assert_every_write_refused(
            store,
            &table,
            &Entity::new(pk, rk).with("N", 3),
            ErrorKind::TooLarge,
            what,
        )
        .await;
        expect_kind(
            store.delete(&table, pk, rk, IfMatch::Any).await,
            ErrorKind::TooLarge,
            &format!("delete with {what}"),
        );
    }
    assert_eq!(
        all_entities(store, &table).await.len(),
        2,
        "only the valid entities"
    );
    drop_table(store, &table).await;
}

/// Keys holding `/`, `\`, `#`, `?` or a control character are `InvalidInput` for every
/// write and for `get`, and never address another entity.
pub async fn keys_with_forbidden_characters_are_invalid_input<S: TableStore>(store: &S) {
    let table = new_table(store, "ForbiddenKeys").await;
    // Neighbours a backend mangling the keys (cutting at `/`, `?` or `#`) might hit.
    insert_all(
        store,
        &table,
        vec![
            Entity::new("a", "b").with("N", 1),
            Entity::new("a", "").with("N", 2),
            Entity::new("ab", "ab").with("N", 3),
        ],
    )
    .await;
    let before = versions_of(&all_entities(store, &table).await);
    for c in [
        '/', '\\', '#', '?', '\u{0}', '\n', '\r', '\t', '\u{1f}', '\u{7f}', '\u{9f}',
    ] {
        let bad = format!("a{c}b");
        for (pk, rk) in [(bad.as_str(), "ab"), ("ab", bad.as_str())] {
            let what = format!("keys ({pk:?}, {rk:?})");
            assert_every_write_refused(
                store,
                &table,
                &Entity::new(pk, rk).with("N", 9),
                ErrorKind::InvalidInput,
                &what,
            )
            .await;
            expect_kind(
                store.delete(&table, pk, rk, IfMatch::Any).await,
                ErrorKind::InvalidInput,
                &format!("delete of {what}"),
            );
            expect_kind(
                store.get(&table, pk, rk, None).await,
                ErrorKind::InvalidInput,
                &format!("get of {what}"),
            );
        }
    }
    assert_eq!(
        versions_of(&all_entities(store, &table).await),
        before,
        "no refused key may touch another entity"
    );
    drop_table(store, &table).await;
}

/// An entity may have 252 user properties; 253 is `TooLarge` for every write.
pub async fn entity_with_252_properties_is_accepted_and_253_is_too_large<S: TableStore>(store: &S) {
    let table = new_table(store, "PropertyCount").await;
    let full = with_properties(Entity::new("p", "full"), "P", 252);
    store
        .insert(&table, full)
        .await
        .expect("insert of 252 properties");
    let read = fetch_existing(store, &table, "p", "full").await;
    assert_eq!(read.properties.len(), 252, "all 252 properties are stored");
    let over = with_properties(Entity::new("p", "full"), "P", 253);
    assert_every_write_refused(store, &table, &over, ErrorKind::TooLarge, "253 properties").await;
    let other = with_properties(Entity::new("p", "other"), "P", 253);
    assert_every_write_refused(
        store,
        &table,
        &other,
        ErrorKind::TooLarge,
        "a new entity of 253",
    )
    .await;
    assert!(
        fetch(store, &table, "p", "other").await.is_none(),
        "nothing created"
    );
    drop_table(store, &table).await;
}

/// Property names must be identifiers of 1 to 255 characters other than the system
/// properties; any other name is `InvalidInput` for every write.
pub async fn invalid_property_names_are_invalid_input<S: TableStore>(store: &S) {
    let table = new_table(store, "PropertyNames").await;
    let longest = "n".repeat(255);
    let valid = Entity::new("p", "r")
        .with(longest.as_str(), 1)
        .with("_x", 2)
        .with("Größe", 3)
        .with("a1_B2", 4);
    store
        .insert(&table, valid.clone())
        .await
        .expect("insert of valid names");
    let read = fetch_existing(store, &table, "p", "r").await;
    super::assert_same_properties(&read.properties, &valid.properties, "valid names");
    let too_long = "n".repeat(256);
    for name in [
        "",
        "1abc",
        "a-b",
        "a.b",
        "a b",
        "odata.etag",
        "PartitionKey",
        "RowKey",
        "Timestamp",
        too_long.as_str(),
    ] {
        let entity = Entity::new("p", "r").with("Fine", 1).with(name, 2);
        assert_every_write_refused(
            store,
            &table,
            &entity,
            ErrorKind::InvalidInput,
            &format!("the property name {name:?}"),
        )
        .await;
    }
    drop_table(store, &table).await;
}

/// A String of 64 KiB (32768 UTF-16 units) is accepted; one unit more is `TooLarge`,
/// counting astral characters as two units.
pub async fn string_property_over_64_kib_is_too_large<S: TableStore>(store: &S) {
    let table = new_table(store, "LongString").await;
    store
        .insert(&table, Entity::new("p", "ok").with("S", "s".repeat(32_768)))
        .await
        .expect("insert of a 64 KiB String");
    let cases = [
        ("s".repeat(32_769), "a String of 32769 characters"),
        (
            format!("{}s", "𝄞".repeat(16_384)),
            "a String of 16385 characters but 32769 UTF-16 units",
        ),
    ];
    for (value, what) in cases {
        let entity = Entity::new("p", "ok").with("S", value);
        assert_every_write_refused(store, &table, &entity, ErrorKind::TooLarge, what).await;
    }
    drop_table(store, &table).await;
}

/// A Binary of 64 KiB is accepted; one byte more is `TooLarge`.
pub async fn binary_property_over_64_kib_is_too_large<S: TableStore>(store: &S) {
    let table = new_table(store, "LongBinary").await;
    store
        .insert(&table, Entity::new("p", "ok").with("B", bytes(65_536)))
        .await
        .expect("insert of a 64 KiB Binary");
    let entity = Entity::new("p", "ok").with("B", bytes(65_537));
    assert_every_write_refused(
        store,
        &table,
        &entity,
        ErrorKind::TooLarge,
        "a 65537-byte Binary",
    )
    .await;
    drop_table(store, &table).await;
}

/// An entity of keys `p`/`r` and Binary properties `B00`… sized, as the service counts
/// it, to exactly `total` bytes. Every property is at most 64 KiB.
fn entity_of_size(row_key: &str, total: usize) -> Entity {
    // 4 + 2·(1 + len(RowKey)) for the keys; 8 + 2·3 + 4 + len per property.
    let keys = 4 + 2 * (1 + row_key.chars().count());
    let overhead = 8 + 2 * 3 + 4;
    let mut entity = Entity::new("p", row_key);
    let mut left = total - keys;
    let mut i = 0;
    while left > 0 {
        let len = (left - overhead).min(65_536);
        entity.set(format!("B{i:02}"), bytes(len));
        left -= overhead + len;
        i += 1;
    }
    assert_eq!(
        crate::limits::entity_size(&entity),
        total,
        "the case's own sizing of the entity"
    );
    entity
}

/// An entity of exactly 1 MiB (several properties of at most 64 KiB) is accepted; one
/// byte more is `TooLarge` for every write.
pub async fn entity_over_1_mib_is_too_large_and_exactly_1_mib_is_accepted<S: TableStore>(
    store: &S,
) {
    let table = new_table(store, "BigEntity").await;
    let mib = 1024 * 1024;
    let exact = entity_of_size("r", mib);
    store
        .insert(&table, exact.clone())
        .await
        .expect("insert of an entity of exactly 1 MiB");
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_eq!(
        read.properties.len(),
        exact.properties.len(),
        "every property is stored"
    );
    assert!(
        read.properties == exact.properties,
        "the 1 MiB entity reads back unchanged"
    );
    let over = entity_of_size("r", mib + 1);
    assert_every_write_refused(
        store,
        &table,
        &over,
        ErrorKind::TooLarge,
        "an entity of 1 MiB + 1",
    )
    .await;
    let mut sixteen = Entity::new("p", "r");
    for i in 0..16 {
        sixteen.set(format!("B{i:02}"), bytes(65_536));
    }
    assert_every_write_refused(
        store,
        &table,
        &sixteen,
        ErrorKind::TooLarge,
        "an entity of sixteen 64 KiB Binaries",
    )
    .await;
    drop_table(store, &table).await;
}

/// A UTC instant from its date and time, plus microseconds.
fn instant(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, micros: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
        .single()
        .expect("a valid calendar date")
        + chrono::Duration::microseconds(micros)
}

/// DateTimes from 1601-01-01 to the end of 9999 are accepted; anything earlier or later
/// is `InvalidInput` for every write.
pub async fn datetime_outside_1601_to_9999_is_invalid_input<S: TableStore>(store: &S) {
    let table = new_table(store, "DateRange").await;
    let first = instant(1601, 1, 1, 0, 0, 0, 0);
    let last = instant(9999, 12, 31, 23, 59, 59, 999_999);
    store
        .insert(
            &table,
            Entity::new("p", "r")
                .with("First", first)
                .with("Last", last),
        )
        .await
        .expect("insert of the first and last instants stored");
    for (value, what) in [
        (
            instant(1600, 12, 31, 23, 59, 59, 999_999),
            "1600-12-31T23:59:59.999999Z",
        ),
        (instant(1, 1, 1, 0, 0, 0, 0), "0001-01-01T00:00:00Z"),
        (instant(10_000, 1, 1, 0, 0, 0, 0), "10000-01-01T00:00:00Z"),
        (DateTime::<Utc>::MIN_UTC, "the earliest chrono instant"),
    ] {
        let entity = Entity::new("p", "r").with("When", value);
        assert_every_write_refused(
            store,
            &table,
            &entity,
            ErrorKind::InvalidInput,
            &format!("the DateTime {what}"),
        )
        .await;
    }
    drop_table(store, &table).await;
}

/// A merge (or insert-or-merge) that would leave the stored entity with more than 252
/// properties is `TooLarge` and leaves it unchanged; up to 252 it is accepted.
pub async fn merge_past_252_properties_is_too_large_and_leaves_the_entity_unchanged<
    S: TableStore,
>(
    store: &S,
) {
    let table = new_table(store, "MergeCount").await;
    store
        .insert(&table, with_properties(Entity::new("p", "r"), "P", 200))
        .await
        .expect("insert of 200 properties");
    let before = all_entities(store, &table).await;
    let fifty_three = with_properties(Entity::new("p", "r"), "Q", 53);
    expect_kind(
        store.merge(&table, fifty_three.clone(), IfMatch::Any).await,
        ErrorKind::TooLarge,
        "merge of 53 new properties into 200",
    );
    expect_kind(
        store.insert_or_merge(&table, fifty_three).await,
        ErrorKind::TooLarge,
        "insert_or_merge of 53 new properties into 200",
    );
    assert_eq!(
        all_entities(store, &table).await,
        before,
        "the stored entity is unchanged"
    );

    let fifty_two = with_properties(Entity::new("p", "r"), "Q", 52);
    store
        .merge(&table, fifty_two, IfMatch::Any)
        .await
        .expect("merge up to exactly 252 properties");
    let overwrite = with_properties(Entity::new("p", "r"), "P", 100);
    store
        .merge(&table, overwrite, IfMatch::Any)
        .await
        .expect("merge overwriting existing properties only, staying at 252");
    let full = all_entities(store, &table).await;
    assert_eq!(
        full[0].properties.len(),
        252,
        "252 properties after the merges"
    );
    expect_kind(
        store
            .merge(
                &table,
                Entity::new("p", "r").with("OneMore", 1),
                IfMatch::Any,
            )
            .await,
        ErrorKind::TooLarge,
        "merge of a 253rd property",
    );
    assert_eq!(
        all_entities(store, &table).await,
        full,
        "the full entity is unchanged"
    );
    drop_table(store, &table).await;
}

/// A merge that would push the stored entity past 1 MiB is `TooLarge` and leaves it
/// unchanged, although the update alone is small enough.
pub async fn merge_past_1_mib_is_too_large_and_leaves_the_entity_unchanged<S: TableStore>(
    store: &S,
) {
    let table = new_table(store, "MergeSize").await;
    let mut stored = Entity::new("p", "r");
    for i in 0..9 {
        stored.set(format!("A{i}"), bytes(65_536));
    }
    store
        .insert(&table, stored)
        .await
        .expect("insert of about 590 KB");
    let before = versions_of(&all_entities(store, &table).await);
    let mut update = Entity::new("p", "r");
    for i in 0..8 {
        update.set(format!("B{i}"), bytes(65_536));
    }
    for (what, result) in [
        (
            "merge",
            store.merge(&table, update.clone(), IfMatch::Any).await,
        ),
        (
            "insert_or_merge",
            store.insert_or_merge(&table, update.clone()).await,
        ),
    ] {
        expect_kind(
            result,
            ErrorKind::TooLarge,
            &format!("{what} of 524 KB into 590 KB"),
        );
        assert_eq!(
            versions_of(&all_entities(store, &table).await),
            before,
            "the refused {what} leaves the entity unchanged"
        );
    }
    let mut same_size = Entity::new("p", "r");
    for i in 0..9 {
        same_size.set(format!("A{i}"), bytes(65_536));
    }
    store
        .merge(&table, same_size, IfMatch::Any)
        .await
        .expect("merge overwriting properties with values of the same size");
    drop_table(store, &table).await;
}

/// Writes over a stored entity that break a limit leave it exactly as it was.
pub async fn replace_breaking_a_limit_leaves_the_stored_entity_unchanged<S: TableStore>(store: &S) {
    let table = new_table(store, "ReplaceLimit").await;
    let etag = store
        .insert(&table, Entity::new("p", "r").with("N", 1).with("S", "s"))
        .await
        .expect("insert");
    let before = all_entities(store, &table).await;
    let bad: [(Entity, ErrorKind, &str); 4] = [
        (
            Entity::new("p", "r").with("bad-name", 1),
            ErrorKind::InvalidInput,
            "a bad property name",
        ),
        (
            with_properties(Entity::new("p", "r"), "P", 253),
            ErrorKind::TooLarge,
            "253 properties",
        ),
        (
            Entity::new("p", "r").with("B", bytes(65_537)),
            ErrorKind::TooLarge,
            "a Binary over 64 KiB",
        ),
        (
            Entity::new("p", "r").with("When", instant(1600, 1, 1, 0, 0, 0, 0)),
            ErrorKind::InvalidInput,
            "a DateTime in 1600",
        ),
    ];
    for (entity, kind, what) in bad {
        expect_kind(
            store
                .replace(&table, entity.clone(), etag.clone().into())
                .await,
            kind,
            &format!("replace (current ETag) with {what}"),
        );
        expect_kind(
            store
                .merge(&table, entity.clone(), etag.clone().into())
                .await,
            kind,
            &format!("merge (current ETag) with {what}"),
        );
        expect_kind(
            store.insert_or_replace(&table, entity).await,
            kind,
            &format!("insert_or_replace with {what}"),
        );
        assert_eq!(
            all_entities(store, &table).await,
            before,
            "refusing {what} leaves the stored entity unchanged"
        );
    }
    drop_table(store, &table).await;
}

/// `top` must be 1 to 1000: 0, 1001 and more are `InvalidInput`.
pub async fn top_outside_1_to_1000_is_invalid_input<S: TableStore>(store: &S) {
    let table = new_table(store, "TopRange").await;
    insert_all(store, &table, vec![Entity::new("p", "r")]).await;
    for top in [0, 1001, usize::MAX] {
        for query in [Query::new(), Query::partition("p")] {
            expect_kind(
                store.query(&table, &query.top(top)).await,
                ErrorKind::InvalidInput,
                &format!("query with top({top})"),
            );
        }
    }
    for top in [1, 1000] {
        let page = store
            .query(&table, &Query::new().top(top))
            .await
            .unwrap_or_else(|e| panic!("query with top({top}) failed: {e}"));
        assert_eq!(page.entities.len(), 1, "top({top}) is valid");
    }
    drop_table(store, &table).await;
}

/// A filter may hold 15 comparisons; 16 is `InvalidInput`.
pub async fn filter_with_16_comparisons_is_invalid_input<S: TableStore>(store: &S) {
    let table = new_table(store, "FilterSize").await;
    insert_all(
        store,
        &table,
        (0..20)
            .map(|i| Entity::new("p", format!("r{i:02}")).with("N", i))
            .collect(),
    )
    .await;
    let or_of = |count: i32| {
        (0..count)
            .map(|i| format!("N eq {i}"))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    let fifteen = Query::parse(&or_of(15)).expect("a filter of 15 comparisons");
    let page = store
        .query(&table, &fifteen)
        .await
        .expect("a query with 15 comparisons");
    assert_eq!(
        page.entities.len(),
        15,
        "each comparison matches one entity"
    );
    let sixteen_texts = [
        or_of(16),
        format!("PartitionKey eq 'p' and ({})", or_of(15)),
        format!("not ({})", or_of(16)),
    ];
    for text in &sixteen_texts {
        let query = Query::parse(text).expect("a filter of 16 comparisons parses");
        expect_kind(
            store.query(&table, &query).await,
            ErrorKind::InvalidInput,
            &format!("query with 16 comparisons: {text}"),
        );
        expect_kind(
            store.query_all(&table, query).await,
            ErrorKind::InvalidInput,
            "query_all with 16 comparisons",
        );
    }
    drop_table(store, &table).await;
}

/// Invalid property names in `select` (of `get` or `query`) or in a filter are
/// `InvalidInput`; system property names are allowed in both.
pub async fn invalid_property_name_in_select_or_filter_is_invalid_input<S: TableStore>(store: &S) {
    let table = new_table(store, "SelectNames").await;
    insert_all(store, &table, vec![Entity::new("p", "r").with("A", 1)]).await;
    for name in ["a-b", "", "1a", "a b"] {
        expect_kind(
            store.get(&table, "p", "r", Some(&["A", name])).await,
            ErrorKind::InvalidInput,
            &format!("get selecting {name:?}"),
        );
        expect_kind(
            store.query(&table, &Query::new().select(["A", name])).await,
            ErrorKind::InvalidInput,
            &format!("query selecting {name:?}"),
        );
        expect_kind(
            store
                .query(&table, &Query::with_filter(property_named(name).eq(1)))
                .await,
            ErrorKind::InvalidInput,
            &format!("query filtering on {name:?}"),
        );
    }
    let read = store
        .get(
            &table,
            "p",
            "r",
            Some(&["PartitionKey", "RowKey", "Timestamp", "A"]),
        )
        .await
        .expect("get selecting system properties")
        .expect("the entity exists");
    assert_eq!(read.get("A"), Some(&Value::Int32(1)), "A is selected");
    let page = store
        .query(
            &table,
            &Query::with_filter(property_named("Timestamp").gt(instant(2000, 1, 1, 0, 0, 0, 0)))
                .select(["PartitionKey", "A"]),
        )
        .await
        .expect("query filtering on Timestamp and selecting PartitionKey");
    assert_eq!(page.entities.len(), 1, "the entity was written after 2000");
    drop_table(store, &table).await;
}
