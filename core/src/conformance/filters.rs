//! Cases about `$filter` semantics, run through `TableStore::query` on a small fixed set
//! of heterogeneous entities: each operator on each type, absent properties, mismatched
//! types, an Int32 literal's widening, `not`, `and`/`or` precedence, `true` and `false`,
//! keywords in any case, literals on the left, an empty filter, string escaping and key
//! ranges.
//!
//! The data set (partition `f`):
//!
//! | RowKey | Str      | I32 | I64          | Dbl   | Flag  | When                        | Id        | Bytes   | Name      |
//! |--------|----------|-----|--------------|-------|-------|-----------------------------|-----------|---------|-----------|
//! | a      | "apple"  | -7  | -7000000000L | -1.5  | false | 2001-01-01T00:00:00Z        | …0001     | 00      | "O'Brien" |
//! | b      | "Banana" | 0   | 0L           | 0.0   | true  | 2010-06-15T12:30:00.123456Z | …0002     | 00 01   | "Smith"   |
//! | c      | "cherry" | 42  | 9000000000L  | 2.25  | true  | 2024-02-29T23:59:59Z        | ffff…ffff | ff      | "it's"    |
//! | d      | (none of these; only `Other`)                                                                                   |
//! | e      | the same names with other types: Str Int32 1, I32 Int64 42, I64 Int32 0, Dbl Int64 0, Flag "true", When, Id and Bytes Strings |

use chrono::{DateTime, TimeZone, Utc};
use uuid::Uuid;

use super::{drop_table, insert_all, new_table, row_keys_of};
use crate::filter::{Filter, literal, property_named};
use crate::model::{Entity, Value};
use crate::query::Query;
use crate::store::TableStore;

/// The `When` of entity `b`.
fn when_b() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2010, 6, 15, 12, 30, 0)
        .single()
        .expect("a valid date")
        + chrono::Duration::microseconds(123_456)
}

/// A UTC instant at a whole second.
fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
        .single()
        .expect("a valid date")
}

/// Creates a table holding the data set of the module docs.
async fn seed_data_set<S: TableStore>(store: &S, prefix: &str) -> String {
    let table = new_table(store, prefix).await;
    let entities = vec![
        Entity::new("f", "c")
            .with("Str", "cherry")
            .with("I32", 42)
            .with("I64", 9_000_000_000i64)
            .with("Dbl", 2.25)
            .with("Flag", true)
            .with("When", at(2024, 2, 29, 23, 59, 59))
            .with("Id", Uuid::max())
            .with("Bytes", vec![0xffu8])
            .with("Name", "it's"),
        Entity::new("f", "a")
            .with("Str", "apple")
            .with("I32", -7)
            .with("I64", -7_000_000_000i64)
            .with("Dbl", -1.5)
            .with("Flag", false)
            .with("When", at(2001, 1, 1, 0, 0, 0))
            .with("Id", Uuid::from_u128(1))
            .with("Bytes", vec![0x00u8])
            .with("Name", "O'Brien"),
        Entity::new("f", "e")
            .with("Str", 1)
            .with("I32", 42i64)
            .with("I64", 0)
            .with("Dbl", 0i64)
            .with("Flag", "true")
            .with("When", "2010-06-15T12:30:00.123456Z")
            .with("Id", "00000000-0000-0000-0000-000000000002")
            .with("Bytes", "0001"),
        Entity::new("f", "b")
            .with("Str", "Banana")
            .with("I32", 0)
            .with("I64", 0i64)
            .with("Dbl", 0.0)
            .with("Flag", true)
            .with("When", when_b())
            .with("Id", Uuid::from_u128(2))
            .with("Bytes", vec![0x00u8, 0x01])
            .with("Name", "Smith"),
        Entity::new("f", "d").with("Other", 1),
    ];
    insert_all(store, &table, entities).await;
    table
}

/// Runs `filter` through `store.query` and checks the RowKeys it returns.
async fn assert_matches<S: TableStore>(store: &S, table: &str, filter: &str, expected: &[&str]) {
    let query = Query::parse(filter).unwrap_or_else(|e| panic!("filter {filter:?}: {e}"));
    assert_query_matches(store, table, &query, filter, expected).await;
}

/// Runs `query` through `store.query` and checks the RowKeys it returns.
async fn assert_query_matches<S: TableStore>(
    store: &S,
    table: &str,
    query: &Query,
    what: &str,
    expected: &[&str],
) {
    let page = store
        .query(table, query)
        .await
        .unwrap_or_else(|e| panic!("query {what:?} failed: {e}"));
    assert!(
        page.continuation.is_none(),
        "{what}: five entities fit one page"
    );
    assert_eq!(
        row_keys_of(&page.entities),
        expected,
        "entities matching {what}"
    );
}

/// Checks each operator against one literal: `cases` pairs an operator with the RowKeys
/// it must select.
async fn assert_operators<S: TableStore>(
    store: &S,
    table: &str,
    property: &str,
    literal: &str,
    cases: [(&str, &[&str]); 6],
) {
    for (op, expected) in cases {
        assert_matches(
            store,
            table,
            &format!("{property} {op} {literal}"),
            expected,
        )
        .await;
    }
}

/// String comparisons are ordinal (upper case sorts before lower case), exact and never
/// match other types.
pub async fn filter_compares_strings_ordinally_with_each_operator<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterString").await;
    assert_operators(
        store,
        &table,
        "Str",
        "'apple'",
        [
            ("eq", &["a"]),
            ("ne", &["b", "c"]),
            ("gt", &["c"]),
            ("ge", &["a", "c"]),
            ("lt", &["b"]),
            ("le", &["a", "b"]),
        ],
    )
    .await;
    assert_matches(store, &table, "Str eq 'APPLE'", &[]).await;
    assert_matches(store, &table, "Str ge 'B' and Str lt 'C'", &["b"]).await;
    assert_matches(store, &table, "Str gt ''", &["a", "b", "c"]).await;
    assert_matches(store, &table, "'cherry' eq Str", &["c"]).await;
    drop_table(store, &table).await;
}

/// Int32 comparisons follow integer order; an Int32 literal also compares with the Int64
/// `I32` of `e` (42).
pub async fn filter_compares_int32_with_each_operator<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterInt32").await;
    assert_operators(
        store,
        &table,
        "I32",
        "0",
        [
            ("eq", &["b"]),
            ("ne", &["a", "c", "e"]),
            ("gt", &["c", "e"]),
            ("ge", &["b", "c", "e"]),
            ("lt", &["a"]),
            ("le", &["a", "b"]),
        ],
    )
    .await;
    assert_matches(store, &table, "I32 eq 42", &["c", "e"]).await;
    assert_matches(store, &table, "I32 lt -7", &[]).await;
    assert_matches(store, &table, "I32 ge -2147483648", &["a", "b", "c", "e"]).await;
    assert_matches(store, &table, "-7 ge I32", &["a"]).await;
    drop_table(store, &table).await;
}

/// Int64 comparisons follow integer order beyond the Int32 range; an Int64 literal
/// ignores Int32 properties.
pub async fn filter_compares_int64_with_each_operator<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterInt64").await;
    assert_operators(
        store,
        &table,
        "I64",
        "0L",
        [
            ("eq", &["b"]),
            ("ne", &["a", "c"]),
            ("gt", &["c"]),
            ("ge", &["b", "c"]),
            ("lt", &["a"]),
            ("le", &["a", "b"]),
        ],
    )
    .await;
    assert_matches(store, &table, "I64 gt 8999999999L", &["c"]).await;
    assert_matches(store, &table, "I64 eq -7000000000L", &["a"]).await;
    drop_table(store, &table).await;
}

/// Double comparisons follow IEEE order (`-0.0 eq 0.0`); a Double literal ignores integer
/// properties.
pub async fn filter_compares_doubles_with_each_operator<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterDouble").await;
    assert_operators(
        store,
        &table,
        "Dbl",
        "0.0",
        [
            ("eq", &["b"]),
            ("ne", &["a", "c"]),
            ("gt", &["c"]),
            ("ge", &["b", "c"]),
            ("lt", &["a"]),
            ("le", &["a", "b"]),
        ],
    )
    .await;
    assert_matches(store, &table, "Dbl eq -0.0", &["b"]).await;
    assert_matches(
        store,
        &table,
        "Dbl ge -1.5 and Dbl le 2.25",
        &["a", "b", "c"],
    )
    .await;
    assert_matches(store, &table, "Dbl gt 2.2499999", &["c"]).await;
    assert_matches(store, &table, "Dbl lt INF", &["a", "b", "c"]).await;
    assert_matches(store, &table, "Dbl ne NaN", &[]).await;
    assert_matches(store, &table, "Dbl eq 2.25d", &["c"]).await;
    assert_matches(store, &table, "Dbl gt 2D", &["c"]).await;
    drop_table(store, &table).await;
}

/// Boolean comparisons order `false` before `true` and ignore the String "true".
pub async fn filter_compares_booleans_with_each_operator<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterBool").await;
    assert_operators(
        store,
        &table,
        "Flag",
        "true",
        [
            ("eq", &["b", "c"]),
            ("ne", &["a"]),
            ("gt", &[]),
            ("ge", &["b", "c"]),
            ("lt", &["a"]),
            ("le", &["a", "b", "c"]),
        ],
    )
    .await;
    assert_matches(store, &table, "Flag gt false", &["b", "c"]).await;
    assert_matches(store, &table, "Flag eq false", &["a"]).await;
    drop_table(store, &table).await;
}

/// DateTime comparisons are chronological to the microsecond, whatever offset the
/// literal is written in.
pub async fn filter_compares_datetimes_with_each_operator<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterDate").await;
    assert_operators(
        store,
        &table,
        "When",
        "datetime'2010-06-15T12:30:00.123456Z'",
        [
            ("eq", &["b"]),
            ("ne", &["a", "c"]),
            ("gt", &["c"]),
            ("ge", &["b", "c"]),
            ("lt", &["a"]),
            ("le", &["a", "b"]),
        ],
    )
    .await;
    assert_matches(
        store,
        &table,
        "When eq datetime'2010-06-15T14:30:00.123456+02:00'",
        &["b"],
    )
    .await;
    assert_matches(
        store,
        &table,
        "When gt datetime'2010-06-15T12:30:00.123455Z'",
        &["b", "c"],
    )
    .await;
    assert_matches(
        store,
        &table,
        "When lt datetime'2010-06-15T12:30:00.123457Z'",
        &["a", "b"],
    )
    .await;
    let built = Query::with_filter(property_named("When").eq(when_b()));
    assert_query_matches(store, &table, &built, "When eq <b's instant>", &["b"]).await;
    drop_table(store, &table).await;
}

/// GUID comparisons order by the GUID's bytes, accept either hex case, and ignore
/// Strings holding a GUID.
pub async fn filter_compares_guids_with_each_operator<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterGuid").await;
    assert_operators(
        store,
        &table,
        "Id",
        "guid'00000000-0000-0000-0000-000000000002'",
        [
            ("eq", &["b"]),
            ("ne", &["a", "c"]),
            ("gt", &["c"]),
            ("ge", &["b", "c"]),
            ("lt", &["a"]),
            ("le", &["a", "b"]),
        ],
    )
    .await;
    assert_matches(
        store,
        &table,
        "Id eq guid'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF'",
        &["c"],
    )
    .await;
    assert_matches(
        store,
        &table,
        "Id eq '00000000-0000-0000-0000-000000000002'",
        &["e"],
    )
    .await;
    drop_table(store, &table).await;
}

/// Binary comparisons are lexicographic by byte (a proper prefix sorts first), in
/// either literal spelling.
pub async fn filter_compares_binaries_with_each_operator<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterBinary").await;
    assert_operators(
        store,
        &table,
        "Bytes",
        "X'0001'",
        [
            ("eq", &["b"]),
            ("ne", &["a", "c"]),
            ("gt", &["c"]),
            ("ge", &["b", "c"]),
            ("lt", &["a"]),
            ("le", &["a", "b"]),
        ],
    )
    .await;
    assert_matches(store, &table, "Bytes eq binary'FF'", &["c"]).await;
    assert_matches(store, &table, "Bytes le X'00'", &["a"]).await;
    assert_matches(store, &table, "Bytes gt X''", &["a", "b", "c"]).await;
    drop_table(store, &table).await;
}

/// A comparison on a property the entity lacks is false for every operator, `ne`
/// included.
pub async fn filter_on_an_absent_property_matches_nothing_for_every_operator<S: TableStore>(
    store: &S,
) {
    let table = seed_data_set(store, "FilterAbsent").await;
    for op in ["eq", "ne", "gt", "ge", "lt", "le"] {
        for literal in ["1", "'x'", "1L", "1.0", "true", "X'00'"] {
            assert_matches(store, &table, &format!("Missing {op} {literal}"), &[]).await;
        }
    }
    // `d` lacks Str and `e` has it as an Int32: neither matches, even with `ne`.
    assert_matches(store, &table, "Str ne 'apple'", &["b", "c"]).await;
    assert_matches(store, &table, "Name ne 'Smith'", &["a", "c"]).await;
    assert_matches(store, &table, "Other eq 1", &["d"]).await;
    drop_table(store, &table).await;
}

/// A comparison with a literal of another type than the stored value (Int32 property vs
/// Int64 or Double literal, a String against a number, and so on) matches nothing: the
/// only conversion is an Int32 literal's widening (see the next case).
pub async fn filter_with_a_mismatched_type_matches_nothing<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterTypes").await;
    let cases: [(&str, &[&str]); 16] = [
        ("I32 eq 42L", &["e"]),
        ("I32 eq 42.0", &[]),
        ("I32 gt 1.5", &[]),
        ("I32 eq 42d", &[]),
        ("I64 gt 1.0", &[]),
        ("Dbl eq 0L", &["e"]),
        ("Dbl gt -5L", &["e"]),
        ("Str ne 1.0", &[]),
        ("Str eq 1", &["e"]),
        ("Flag eq 'true'", &["e"]),
        ("When eq '2010-06-15T12:30:00.123456Z'", &["e"]),
        ("Bytes eq '0001'", &["e"]),
        ("PartitionKey eq 1", &[]),
        ("RowKey ne 1", &[]),
        ("Str gt 0", &["e"]),
        ("Name ne 0", &[]),
    ];
    for (filter, expected) in cases {
        assert_matches(store, &table, filter, expected).await;
    }
    drop_table(store, &table).await;
}

/// An Int32 literal compares numerically with Int64 and Double properties, on either side
/// of the operator (`Price eq 5` holds for the Double `5.0`), as on the table service;
/// Int64 and Double literals do not widen.
pub async fn filter_int32_literal_compares_with_int64_and_double_properties<S: TableStore>(
    store: &S,
) {
    let table = seed_data_set(store, "FilterWiden").await;
    let cases: [(&str, &[&str]); 14] = [
        ("I64 eq 0", &["b", "e"]),
        ("I64 gt 0", &["c"]),
        ("I64 lt 0", &["a"]),
        ("I64 ge -1", &["b", "c", "e"]),
        ("I64 ne 0", &["a", "c"]),
        ("Dbl eq 0", &["b", "e"]),
        ("Dbl gt 2", &["c"]),
        ("Dbl lt 0", &["a"]),
        ("Dbl ne 2", &["a", "b", "c", "e"]),
        ("0 eq Dbl", &["b", "e"]),
        ("2 lt Dbl", &["c"]),
        ("-1 gt I64", &["a"]),
        ("Dbl eq 2.25 and Dbl gt 2", &["c"]),
        ("I64 gt 0L or Dbl lt -1", &["a", "c"]),
    ];
    for (filter, expected) in cases {
        assert_matches(store, &table, filter, expected).await;
    }
    assert_query_matches(
        store,
        &table,
        &Query::with_filter(property_named("Dbl").ge(0) & property_named("I64").ge(0)),
        "built Dbl ge 0 and I64 ge 0",
        &["b", "c", "e"],
    )
    .await;
    drop_table(store, &table).await;
}

/// `true` and `false` stand alone as a whole condition (every entity, none), in any case,
/// inside `and`, `or` and `not`; the builder writes them with [`literal`].
pub async fn filter_boolean_literals_select_every_entity_or_none<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterBoolLit").await;
    let all: &[&str] = &["a", "b", "c", "d", "e"];
    let cases: [(&str, &[&str]); 9] = [
        ("true", all),
        ("false", &[]),
        ("True", all),
        ("FALSE", &[]),
        ("not true", &[]),
        ("(true and RowKey eq 'b') or RowKey eq 'd'", &["b", "d"]),
        ("false or Flag eq true", &["b", "c"]),
        ("true and Str eq 'apple'", &["a"]),
        ("not (false) and (RowKey ge 'd' or false)", &["d", "e"]),
    ];
    for (filter, expected) in cases {
        assert_matches(store, &table, filter, expected).await;
    }
    let built =
        (literal(true) & property_named("RowKey").eq("b")) | property_named("RowKey").eq("d");
    assert_query_matches(
        store,
        &table,
        &Query::with_filter(built.clone()),
        "built (true and RowKey eq 'b') or RowKey eq 'd'",
        &["b", "d"],
    )
    .await;
    assert_matches(store, &table, &built.to_string(), &["b", "d"]).await;
    drop_table(store, &table).await;
}

/// An empty `$filter`, or one of whitespace only, is no filter.
pub async fn filter_that_is_empty_selects_every_entity<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterEmpty").await;
    for empty in ["", " ", "\t\r\n "] {
        assert_matches(store, &table, empty, &["a", "b", "c", "d", "e"]).await;
    }
    drop_table(store, &table).await;
}

/// Keywords (`and`, `or`, `not`, the operators), `true`, `false` and the typed-literal
/// prefixes are read in any case: `EQ`, `True`, `GUID'…'`, `DATETIME'…'`, `x'…'`.
pub async fn filter_keywords_and_type_prefixes_are_read_in_any_case<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterCase").await;
    let cases: [(&str, &[&str]); 12] = [
        ("Flag eq True", &["b", "c"]),
        ("Flag EQ FALSE", &["a"]),
        ("Str eq 'apple' OR Str eq 'cherry'", &["a", "c"]),
        ("NOT (Str ge 'b') And Str ne 'Banana'", &["a"]),
        ("Id eq GUID'00000000-0000-0000-0000-000000000001'", &["a"]),
        ("Id eq Guid'00000000-0000-0000-0000-000000000002'", &["b"]),
        ("Bytes eq x'0001'", &["b"]),
        ("Bytes eq BINARY'FF'", &["c"]),
        ("Bytes eq Binary'00'", &["a"]),
        ("When eq DATETIME'2001-01-01T00:00:00Z'", &["a"]),
        ("When lt DateTime'2010-01-01T00:00:00Z'", &["a"]),
        ("I32 Gt 0 aNd I32 Le 42", &["c", "e"]),
    ];
    for (filter, expected) in cases {
        assert_matches(store, &table, filter, expected).await;
    }
    drop_table(store, &table).await;
}

/// A literal may stand left of the operator (`'2022-07-12' eq PartitionKey`): the
/// comparison is the same with the operator mirrored.
pub async fn filter_with_the_literal_on_the_left_mirrors_the_operator<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterLeft").await;
    let cases: [(&str, &[&str]); 9] = [
        ("'f' eq PartitionKey", &["a", "b", "c", "d", "e"]),
        ("'c' le RowKey", &["c", "d", "e"]),
        ("'apple' eq Str", &["a"]),
        ("'b' lt Str", &["c"]),
        ("0 lt I32", &["c", "e"]),
        ("42L eq I32", &["e"]),
        ("datetime'2010-01-01T00:00:00Z' lt When", &["b", "c"]),
        ("true eq Flag", &["b", "c"]),
        ("X'00' lt Bytes", &["b", "c"]),
    ];
    for (filter, expected) in cases {
        assert_matches(store, &table, filter, expected).await;
    }
    drop_table(store, &table).await;
}

/// `not` is plain negation: it holds for entities where the comparison is false because
/// the property is absent or of another type.
pub async fn filter_not_over_an_absent_property_matches<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterNot").await;
    assert_matches(
        store,
        &table,
        "not (Missing eq 1)",
        &["a", "b", "c", "d", "e"],
    )
    .await;
    assert_matches(
        store,
        &table,
        "not (Missing ne 1)",
        &["a", "b", "c", "d", "e"],
    )
    .await;
    assert_matches(store, &table, "not (Str eq 'apple')", &["b", "c", "d", "e"]).await;
    assert_matches(store, &table, "not (Str ne 'apple')", &["a", "d", "e"]).await;
    assert_matches(store, &table, "not not (Str eq 'apple')", &["a"]).await;
    // `e` holds I32 as the Int64 42, which the Int32 literal widens to.
    let built = Query::with_filter(!property_named("I32").ge(0));
    assert_query_matches(store, &table, &built, "!(I32 ge 0)", &["a", "d"]).await;
    let built = Query::with_filter(!property_named("I32").ge(0i64));
    assert_query_matches(store, &table, &built, "!(I32 ge 0L)", &["a", "b", "c", "d"]).await;
    drop_table(store, &table).await;
}

/// `and` binds tighter than `or`, `not` tighter than both, and parentheses override.
pub async fn filter_and_or_and_parentheses_follow_boolean_precedence<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterLogic").await;
    let cases: [(&str, &[&str]); 7] = [
        ("I32 gt -10 and Flag eq true", &["b", "c"]),
        ("Str eq 'apple' or Str eq 'cherry'", &["a", "c"]),
        ("Str eq 'cherry' or Flag eq true and I32 lt 42", &["b", "c"]),
        ("(Str eq 'cherry' or Flag eq true) and I32 lt 42", &["b"]),
        ("not Flag eq true and I32 lt 0", &["a"]),
        ("not (Flag eq true and I32 lt 42)", &["a", "c", "d", "e"]),
        (
            "((Other eq 1) or (Name eq 'Smith' and (Dbl eq 0.0))) and RowKey ne 'x'",
            &["b", "d"],
        ),
    ];
    for (filter, expected) in cases {
        assert_matches(store, &table, filter, expected).await;
    }
    let built: Filter = property_named("Str").eq("cherry")
        | (property_named("Flag").eq(true) & property_named("I32").lt(42));
    assert_query_matches(
        store,
        &table,
        &Query::with_filter(built),
        "built or/and",
        &["b", "c"],
    )
    .await;
    drop_table(store, &table).await;
}

/// A quote inside a string literal is written twice (`'O''Brien'`); the builder and the
/// parser agree on it.
pub async fn filter_string_literals_escape_quotes_by_doubling<S: TableStore>(store: &S) {
    let table = seed_data_set(store, "FilterQuotes").await;
    assert_matches(store, &table, "Name eq 'O''Brien'", &["a"]).await;
    assert_matches(store, &table, "Name eq 'it''s'", &["c"]).await;
    assert_matches(store, &table, "Name eq 'OBrien'", &[]).await;
    assert_matches(store, &table, "Name eq 'O'''", &[]).await;
    assert_matches(store, &table, "Name gt 'O''' and Name lt 'P'", &["a"]).await;
    for (value, expected) in [("O'Brien", ["a"]), ("it's", ["c"])] {
        let filter = property_named("Name").eq(value);
        assert_query_matches(
            store,
            &table,
            &Query::with_filter(filter.clone()),
            &format!("built Name eq {value:?}"),
            &expected,
        )
        .await;
        let text = filter.to_string();
        assert_matches(store, &table, &text, &expected).await;
    }
    drop_table(store, &table).await;
}

/// Comparisons on PartitionKey and RowKey select key ranges, inside and across partitions,
/// by string order.
pub async fn filter_on_partition_and_row_key_ranges<S: TableStore>(store: &S) {
    let table = new_table(store, "FilterKeys").await;
    let mut entities = Vec::new();
    for pk in ["p3", "p1", "p2"] {
        for rk in ["r3", "r1", "r10", "r2"] {
            entities.push(Entity::new(pk, rk).with("V", Value::String(format!("{pk}{rk}"))));
        }
    }
    insert_all(store, &table, entities).await;
    let cases: [(&str, &[&str]); 8] = [
        (
            "PartitionKey ge 'p2'",
            &[
                "p2r1", "p2r10", "p2r2", "p2r3", "p3r1", "p3r10", "p3r2", "p3r3",
            ],
        ),
        (
            "PartitionKey gt 'p1' and PartitionKey lt 'p3'",
            &["p2r1", "p2r10", "p2r2", "p2r3"],
        ),
        (
            "PartitionKey eq 'p2' and RowKey gt 'r1'",
            &["p2r10", "p2r2", "p2r3"],
        ),
        (
            "PartitionKey eq 'p2' and RowKey ge 'r1' and RowKey lt 'r2'",
            &["p2r1", "p2r10"],
        ),
        ("RowKey eq 'r2'", &["p1r2", "p2r2", "p3r2"]),
        ("PartitionKey ne 'p2' and RowKey le 'r1'", &["p1r1", "p3r1"]),
        (
            "RowKey lt 'r2' and PartitionKey le 'p1'",
            &["p1r1", "p1r10"],
        ),
        (
            "PartitionKey eq 'p3' or RowKey eq 'r3'",
            &["p1r3", "p2r3", "p3r1", "p3r10", "p3r2", "p3r3"],
        ),
    ];
    for (filter, expected) in cases {
        let query = Query::parse(filter).unwrap_or_else(|e| panic!("filter {filter:?}: {e}"));
        let page = store
            .query(&table, &query)
            .await
            .unwrap_or_else(|e| panic!("query {filter:?} failed: {e}"));
        let values: Vec<&str> = page
            .entities
            .iter()
            .map(|e| e.get("V").and_then(Value::as_str).unwrap_or("?"))
            .collect();
        assert_eq!(values, expected, "entities matching {filter}");
    }
    drop_table(store, &table).await;
}
