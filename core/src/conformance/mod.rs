//! The public backend conformance suite: backend-generic test cases that pin down the
//! table-service semantics every [`TableStore`] must have, and a macro that runs them all.
//!
//! Each case is a public `async fn` generic over the store, named by the behaviour it
//! checks (`merge_keeps_unmentioned_properties`). It creates its own uniquely named tables
//! (see [`unique_table`]), so cases can run in parallel against one shared store, deletes
//! them when it passes, and panics with a message saying what differed when the backend
//! misbehaves.
//!
//! # Running the whole suite against a backend
//!
//! One [`conformance_suite!`](crate::conformance_suite) call in an integration test
//! expands to one `#[tokio::test]` per case, in one module per area (`tables`, `writes`,
//! `values`, `batch`, `queries`, `limits`, `filters`, `concurrency`). Its argument is an
//! expression giving a future of either a fresh store, or a `(store, guard)` pair whose
//! guard lives until the case has finished (see [`Fixture`]); it is evaluated once per
//! test. The crate calling the macro needs `tokio` with the `macros` and `rt` features.
//!
//! ```no_run
//! // tests/conformance.rs of a backend crate.
//! mod memory {
//!     use tablekit_core::MemoryStore;
//!
//!     tablekit_core::conformance_suite!(async { MemoryStore::new() });
//! }
//!
//! # #[cfg(feature = "sqlite")]
//! mod sqlite {
//!     use tablekit_core::SqliteStore;
//!
//!     // One store per test in its own directory, deleted when the test ends.
//!     tablekit_core::conformance_suite!(async {
//!         let dir = tempfile::tempdir().expect("a temporary directory");
//!         let store = SqliteStore::create(dir.path().join("conformance.db"))
//!             .await
//!             .expect("a SQLite store in the temporary directory");
//!         (store, dir)
//!     });
//! }
//! # fn main() {}
//! ```
//!
//! A single case can also be called from a hand-written test:
//!
//! ```no_run
//! # async fn run() {
//! let store = tablekit_core::MemoryStore::new();
//! tablekit_core::conformance::merge_keeps_unmentioned_properties(&store).await;
//! # }
//! ```
//!
//! [`CASES`] names every case the macro runs.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};

use crate::error::{Error, ErrorKind, Result};
use crate::model::{ETag, Entity, Properties, Value};
use crate::query::Query;
use crate::store::{Batch, TableStore};

pub mod batch;
pub mod concurrency;
pub mod filters;
pub mod limits;
pub mod queries;
pub mod tables;
pub mod values;
pub mod writes;

pub use batch::*;
pub use concurrency::*;
pub use filters::*;
pub use limits::*;
pub use queries::*;
pub use tables::*;
pub use values::*;
pub use writes::*;

/// The name of every case [`conformance_suite!`](crate::conformance_suite) runs.
pub const CASES: &[&str] = crate::conformance_suite!(@names);

/// Expands to one `#[tokio::test]` per conformance case, named `<area>::<case>`
/// (`writes::merge_keeps_unmentioned_properties`), each running the case against a store
/// its argument builds. See the [module docs](crate::conformance) for an example.
///
/// The argument is an expression of a future whose output is a [`Fixture`]: a store, or a
/// `(store, guard)` pair. It is evaluated anew in every test, inside the generated area
/// modules, which glob-import the module where the macro is called (so the names imported
/// there can be used in it). The calling crate needs `tokio` with the `macros` and `rt`
/// features. The arms starting with `@` are internal.
///
/// `conformance_suite!(if AVAILABLE, FIXTURE)` first evaluates the `bool` expression
/// `AVAILABLE` in every test and returns early when it is false: for backends that need a
/// service, whose check reports the skip (or fails under `CI=true`).
#[macro_export]
macro_rules! conformance_suite {
    (@names) => {
        $crate::conformance_suite! { @list names () }
    };
    (@list $mode:ident $args:tt) => {
        $crate::conformance_suite! { @$mode $args
            tables {
                create_table_makes_it_listed,
                create_table_twice_fails_with_table_already_exists,
                create_table_if_not_exists_reports_whether_it_created,
                delete_table_removes_the_table_and_its_entities,
                delete_missing_table_fails_with_table_not_found,
                list_tables_filters_by_case_sensitive_prefix_in_sorted_order,
                table_names_are_case_insensitive,
                invalid_table_names_are_rejected_before_anything_is_created,
                operations_on_a_missing_table_fail_with_table_not_found,
                operations_on_a_deleted_table_fail_with_table_not_found,
                resumed_query_on_a_missing_table_fails_with_table_not_found,
            }
            writes {
                insert_then_get_returns_the_entity,
                get_of_a_missing_entity_returns_none,
                insert_of_an_existing_entity_fails_with_already_exists,
                replace_removes_unmentioned_properties,
                replace_of_a_missing_entity_fails_with_not_found,
                replace_with_a_stale_etag_fails_with_precondition_failed,
                replace_with_if_match_any_overwrites_any_version,
                merge_keeps_unmentioned_properties,
                merge_overwrites_mentioned_properties_and_appends_new_ones,
                merge_of_a_missing_entity_fails_with_not_found,
                merge_with_a_stale_etag_fails_with_precondition_failed,
                merge_with_if_match_any_applies_to_any_version,
                insert_or_replace_inserts_a_missing_entity,
                insert_or_replace_replaces_a_stored_entity_whole,
                insert_or_merge_inserts_a_missing_entity,
                insert_or_merge_merges_into_a_stored_entity,
                delete_removes_the_entity,
                delete_with_the_current_etag_removes_the_entity,
                delete_of_a_missing_entity_fails_with_not_found,
                delete_with_a_stale_etag_fails_with_precondition_failed,
                delete_if_exists_reports_whether_it_deleted,
                every_write_returns_a_fresh_etag_that_get_returns,
                timestamp_is_set_by_the_store_and_advances_on_every_write,
                store_ignores_the_etag_and_timestamp_carried_by_the_entity,
                empty_string_keys_are_allowed,
                get_with_select_returns_only_the_selected_properties,
                get_with_select_of_a_missing_property_omits_it,
            }
            values {
                string_values_round_trip_exactly,
                int32_values_round_trip_exactly,
                int64_values_round_trip_exactly,
                double_values_round_trip_bit_for_bit,
                boolean_values_round_trip_exactly,
                datetime_values_round_trip_to_the_microsecond,
                guid_values_round_trip_exactly,
                binary_values_round_trip_exactly,
                properties_set_in_any_order_read_back_by_name,
                entity_without_properties_round_trips,
                unicode_keys_round_trip,
            }
            batch {
                batch_applies_every_operation_and_returns_one_etag_each,
                batch_failing_in_the_middle_names_the_index_and_applies_nothing,
                batch_failure_rolls_back_earlier_updates_and_deletes,
                batch_with_mixed_partitions_names_the_index_and_writes_nothing,
                batch_with_two_operations_on_one_entity_is_invalid_input,
                batch_of_100_operations_is_accepted,
                batch_of_101_operations_is_too_large,
                empty_batch_is_invalid_input,
                batch_over_4_mib_is_too_large,
                batch_mixing_every_kind_of_operation_applies_each,
                batch_with_a_stale_etag_fails_atomically,
                batch_with_an_invalid_operation_names_its_index,
                batch_merge_past_the_property_limit_fails_atomically,
            }
            queries {
                query_returns_entities_in_key_order,
                point_query_returns_the_entity_and_is_classified_point,
                range_query_returns_the_row_range_and_is_classified_range,
                partition_scan_returns_the_partition_and_is_classified_partition_scan,
                table_scan_returns_every_match_and_is_classified_table_scan,
                partition_key_range_query_spans_partitions,
                contradictory_key_conditions_return_nothing,
                top_limits_the_page_and_returns_a_continuation,
                continuation_pages_through_more_than_1000_entities,
                range_query_continuation_stays_inside_the_range,
                query_resumed_past_its_range_returns_an_empty_last_page,
                garbage_continuation_token_is_invalid_input,
                query_stream_yields_every_entity_across_pages,
                query_stream_with_top_stops_after_top,
                query_stream_with_top_0_fails_with_invalid_input,
                sparse_filter_matches_across_pages_are_returned_once,
                page_without_continuation_is_the_last,
                query_on_an_empty_table_returns_an_empty_last_page,
                filter_on_timestamp_selects_by_write_time,
                query_with_select_keeps_keys_timestamp_and_etag,
            }
            limits {
                key_of_512_utf16_units_is_accepted_and_513_is_too_large,
                keys_with_forbidden_characters_are_invalid_input,
                entity_with_252_properties_is_accepted_and_253_is_too_large,
                invalid_property_names_are_invalid_input,
                string_property_over_64_kib_is_too_large,
                binary_property_over_64_kib_is_too_large,
                entity_over_1_mib_is_too_large_and_exactly_1_mib_is_accepted,
                datetime_outside_1601_to_9999_is_invalid_input,
                merge_past_252_properties_is_too_large_and_leaves_the_entity_unchanged,
                merge_past_1_mib_is_too_large_and_leaves_the_entity_unchanged,
                replace_breaking_a_limit_leaves_the_stored_entity_unchanged,
                top_outside_1_to_1000_is_invalid_input,
                filter_with_16_comparisons_is_invalid_input,
                invalid_property_name_in_select_or_filter_is_invalid_input,
            }
            filters {
                filter_compares_strings_ordinally_with_each_operator,
                filter_compares_int32_with_each_operator,
                filter_compares_int64_with_each_operator,
                filter_compares_doubles_with_each_operator,
                filter_compares_booleans_with_each_operator,
                filter_compares_datetimes_with_each_operator,
                filter_compares_guids_with_each_operator,
                filter_compares_binaries_with_each_operator,
                filter_on_an_absent_property_matches_nothing_for_every_operator,
                filter_with_a_mismatched_type_matches_nothing,
                filter_int32_literal_compares_with_int64_and_double_properties,
                filter_boolean_literals_select_every_entity_or_none,
                filter_that_is_empty_selects_every_entity,
                filter_keywords_and_type_prefixes_are_read_in_any_case,
                filter_with_the_literal_on_the_left_mirrors_the_operator,
                filter_not_over_an_absent_property_matches,
                filter_and_or_and_parentheses_follow_boolean_precedence,
                filter_string_literals_escape_quotes_by_doubling,
                filter_on_partition_and_row_key_ranges,
            }
            concurrency {
                concurrent_read_modify_write_with_etags_loses_no_update,
                concurrent_inserts_of_one_entity_have_exactly_one_winner,
            }
        }
    };
    (@names () $($area:ident { $($case:ident),* $(,)? })*) => {
        &[$($(stringify!($case)),*),*]
    };
    (@tests ($available:expr, $make:expr) $($area:ident { $($case:ident),* $(,)? })*) => {
        $(
            mod $area {
                #[allow(unused_imports)]
                use super::*;

                $(
                    #[::tokio::test]
                    async fn $case() {
                        if !$available {
                            return;
                        }
                        let fixture = $make.await;
                        $crate::conformance::$area::$case(
                            $crate::conformance::Fixture::store(&fixture),
                        )
                        .await;
                    }
                )*
            }
        )*
    };
    (if $available:expr, $make:expr $(,)?) => {
        $crate::conformance_suite! { @list tests ($available, $make) }
    };
    ($make:expr $(,)?) => {
        $crate::conformance_suite! { @list tests (true, $make) }
    };
}

/// What the expression given to [`conformance_suite!`](crate::conformance_suite) yields:
/// a store, or a `(store, guard)` pair whose guard (a temporary directory, a container
/// handle…) is dropped only after the case has finished.
pub trait Fixture {
    /// The store under test.
    type Store: TableStore;

    /// The store the case runs against.
    fn store(&self) -> &Self::Store;
}

impl<S: TableStore> Fixture for S {
    type Store = S;

    fn store(&self) -> &S {
        self
    }
}

impl<S: TableStore, G> Fixture for (S, G) {
    type Store = S;

    fn store(&self) -> &S {
        &self.0
    }
}

static NEXT_TABLE: AtomicU64 = AtomicU64::new(0);

/// A valid table name that no other call returns, in this process (a counter) or in
/// another one (a random part): the ASCII letters and digits of `prefix` (at most 24,
/// after a `t` when they do not start with a letter), the counter, `x` and 12 random hex
/// digits. At most 58 characters.
///
/// ```
/// let a = tablekit_core::conformance::unique_table("Orders");
/// let b = tablekit_core::conformance::unique_table("Orders");
/// assert!(a.starts_with("Orders") && a != b);
/// assert!(tablekit_core::limits::check_table_name(&a).is_ok());
/// ```
pub fn unique_table(prefix: &str) -> String {
    let mut name: String = prefix
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(24)
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name.insert(0, 't');
    }
    let count = NEXT_TABLE.fetch_add(1, Ordering::Relaxed);
    let random = uuid::Uuid::new_v4().simple().to_string();
    name.push_str(&count.to_string());
    name.push('x');
    name.push_str(&random[..12]);
    name
}

/// Creates a fresh table named after `prefix` and returns its name.
async fn new_table<S: TableStore>(store: &S, prefix: &str) -> String {
    let table = unique_table(prefix);
    store
        .create_table(&table)
        .await
        .unwrap_or_else(|e| panic!("creating the fresh table `{table}` failed: {e}"));
    table
}

/// Deletes a table a case created, once the case has passed.
async fn drop_table<S: TableStore>(store: &S, table: &str) {
    store
        .delete_table(table)
        .await
        .unwrap_or_else(|e| panic!("deleting the case's table `{table}` failed: {e}"));
}

/// At most 300 characters of a value's `Debug` text, so that a failure quoting a
/// megabyte entity stays readable.
fn brief(value: &dyn fmt::Debug) -> String {
    let text = format!("{value:?}");
    if text.chars().count() <= 300 {
        text
    } else {
        let mut short: String = text.chars().take(300).collect();
        short.push('…');
        short
    }
}

/// The error of `result`, which must fail with `kind`; panics naming `what` otherwise.
#[track_caller]
fn expect_kind<T: fmt::Debug>(result: Result<T>, kind: ErrorKind, what: &str) -> Error {
    match result {
        Ok(value) => panic!("{what}: expected a {kind} error, got Ok({})", brief(&value)),
        Err(e) if e.kind() == kind => e,
        Err(e) => panic!(
            "{what}: expected a {kind} error, got a {} error: {e}",
            e.kind()
        ),
    }
}

/// Reads one entity, which may be absent.
async fn fetch<S: TableStore>(store: &S, table: &str, pk: &str, rk: &str) -> Option<Entity> {
    store
        .get(table, pk, rk, None)
        .await
        .unwrap_or_else(|e| panic!("get of ({pk:?}, {rk:?}) in `{table}` failed: {e}"))
}

/// Reads one entity that must exist.
async fn fetch_existing<S: TableStore>(store: &S, table: &str, pk: &str, rk: &str) -> Entity {
    fetch(store, table, pk, rk)
        .await
        .unwrap_or_else(|| panic!("entity ({pk:?}, {rk:?}) should exist in `{table}`"))
}

/// Every entity of a table, in key order, through `query_all`.
async fn all_entities<S: TableStore>(store: &S, table: &str) -> Vec<Entity> {
    store
        .query_all(table, Query::new())
        .await
        .unwrap_or_else(|e| panic!("reading every entity of `{table}` failed: {e}"))
}

/// The (PartitionKey, RowKey) of each entity.
fn keys_of(entities: &[Entity]) -> Vec<(String, String)> {
    entities
        .iter()
        .map(|e| (e.partition_key.clone(), e.row_key.clone()))
        .collect()
}

/// The RowKey of each entity.
fn row_keys_of(entities: &[Entity]) -> Vec<String> {
    entities.iter().map(|e| e.row_key.clone()).collect()
}

/// The key and ETag of each entity: what must not change when a write is refused.
fn versions_of(entities: &[Entity]) -> Vec<(String, String, Option<ETag>)> {
    entities
        .iter()
        .map(|e| (e.partition_key.clone(), e.row_key.clone(), e.etag.clone()))
        .collect()
}

/// Whether two values are the same, Doubles bit for bit (so `-0.0` differs from `0.0`).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Double(x), Value::Double(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// Asserts that `actual` holds exactly the properties of `expected`, with the same types
/// and values. Property order is not compared: the table service's JSON has none (Azurite
/// returns properties sorted by name), so it is not part of the contract.
#[track_caller]
fn assert_same_properties(actual: &Properties, expected: &Properties, what: &str) {
    let mut actual_names: Vec<&String> = actual.keys().collect();
    let mut expected_names: Vec<&String> = expected.keys().collect();
    actual_names.sort();
    expected_names.sort();
    assert_eq!(
        actual_names, expected_names,
        "{what}: property names differ"
    );
    for (name, want) in expected {
        let got = &actual[name];
        assert!(
            same_value(got, want),
            "{what}: property `{name}` came back as {} instead of {}",
            brief(got),
            brief(want)
        );
    }
}

/// Inserts entities one by one.
async fn insert_all<S: TableStore>(store: &S, table: &str, entities: Vec<Entity>) {
    for entity in entities {
        let key = (entity.partition_key.clone(), entity.row_key.clone());
        store
            .insert(table, entity)
            .await
            .unwrap_or_else(|e| panic!("inserting {key:?} into `{table}` failed: {e}"));
    }
}

/// Inserts entities of one partition in batches of 100.
async fn insert_batched<S: TableStore>(store: &S, table: &str, entities: Vec<Entity>) {
    let mut entities = entities.into_iter().peekable();
    while entities.peek().is_some() {
        let mut batch = Batch::new();
        for entity in entities.by_ref().take(100) {
            batch.insert(entity);
        }
        store
            .submit_batch(table, batch)
            .await
            .unwrap_or_else(|e| panic!("seeding `{table}` with a batch failed: {e}"));
    }
}

/// Merges `Step = step` into `(pk, rk)` (inserting it if needed) until the store's
/// Timestamp for it is later than `after`, and returns that Timestamp. Panics if the
/// Timestamp goes backwards or never advances.
async fn write_until_later<S: TableStore>(
    store: &S,
    table: &str,
    pk: &str,
    rk: &str,
    after: DateTime<Utc>,
    step: i32,
) -> DateTime<Utc> {
    for _ in 0..100_000 {
        store
            .insert_or_merge(table, Entity::new(pk, rk).with("Step", step))
            .await
            .unwrap_or_else(|e| panic!("insert_or_merge of ({pk:?}, {rk:?}) failed: {e}"));
        let ts = fetch_existing(store, table, pk, rk)
            .await
            .timestamp
            .expect("a stored entity has a Timestamp");
        assert!(
            ts >= after,
            "the Timestamp went backwards: {ts} after a write stamped {after}"
        );
        if ts > after {
            return ts;
        }
        tokio::task::yield_now().await;
    }
    panic!("the Timestamp stayed at {after} over 100000 writes");
}
