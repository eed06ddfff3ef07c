//! Cases about tables: creating, deleting, listing, naming, and operations on a table
//! that does not exist.

use super::{
    all_entities, drop_table, expect_kind, fetch, fetch_existing, insert_all, new_table,
    unique_table,
};
use crate::error::ErrorKind;
use crate::model::{Entity, IfMatch};
use crate::query::{ContinuationToken, Query};
use crate::store::{Batch, TableStore};

/// A created table is listed under its own name.
pub async fn create_table_makes_it_listed<S: TableStore>(store: &S) {
    let table = unique_table("Created");
    store
        .create_table(&table)
        .await
        .expect("create_table of a new name");
    let listed = store.list_tables(&table).await.expect("list_tables");
    assert_eq!(
        listed,
        vec![table.clone()],
        "list_tables(prefix = the new name)"
    );
    assert!(
        all_entities(store, &table).await.is_empty(),
        "a new table holds no entity"
    );
    drop_table(store, &table).await;
}

/// Creating a table that exists fails with `TableAlreadyExists` and keeps its entities.
pub async fn create_table_twice_fails_with_table_already_exists<S: TableStore>(store: &S) {
    let table = new_table(store, "Twice").await;
    insert_all(store, &table, vec![Entity::new("p", "r").with("N", 1)]).await;
    expect_kind(
        store.create_table(&table).await,
        ErrorKind::TableAlreadyExists,
        "second create_table of the same name",
    );
    assert_eq!(
        all_entities(store, &table).await.len(),
        1,
        "the failed create must not empty the existing table"
    );
    drop_table(store, &table).await;
}

/// `create_table_if_not_exists` returns `true` when it created the table, then `false`.
pub async fn create_table_if_not_exists_reports_whether_it_created<S: TableStore>(store: &S) {
    let table = unique_table("IfNotExists");
    assert!(
        store
            .create_table_if_not_exists(&table)
            .await
            .expect("first create_table_if_not_exists"),
        "the first call creates the table and returns true"
    );
    insert_all(store, &table, vec![Entity::new("p", "r")]).await;
    assert!(
        !store
            .create_table_if_not_exists(&table)
            .await
            .expect("second create_table_if_not_exists"),
        "the second call finds the table and returns false"
    );
    assert_eq!(
        all_entities(store, &table).await.len(),
        1,
        "create_table_if_not_exists on an existing table keeps its entities"
    );
    drop_table(store, &table).await;
}

/// Deleting a table removes it from the listing and drops its entities; a table created
/// again under the name starts empty.
pub async fn delete_table_removes_the_table_and_its_entities<S: TableStore>(store: &S) {
    let table = new_table(store, "Deleted").await;
    insert_all(store, &table, vec![Entity::new("p", "r").with("N", 1)]).await;
    store
        .delete_table(&table)
        .await
        .expect("delete_table of an existing table");
    assert!(
        store
            .list_tables(&table)
            .await
            .expect("list_tables")
            .is_empty(),
        "a deleted table is no longer listed"
    );
    expect_kind(
        store.get(&table, "p", "r", None).await,
        ErrorKind::TableNotFound,
        "get from a deleted table",
    );
    store
        .create_table(&table)
        .await
        .expect("create_table of a deleted name");
    assert!(
        all_entities(store, &table).await.is_empty(),
        "a table created again after a delete starts empty"
    );
    drop_table(store, &table).await;
}

/// Deleting a table that does not exist fails with `TableNotFound`.
pub async fn delete_missing_table_fails_with_table_not_found<S: TableStore>(store: &S) {
    let table = unique_table("NeverCreated");
    expect_kind(
        store.delete_table(&table).await,
        ErrorKind::TableNotFound,
        "delete_table of a name never created",
    );
}

/// `list_tables` returns the tables whose name starts with the prefix (case-sensitively),
/// sorted, with the names as they were created.
pub async fn list_tables_filters_by_case_sensitive_prefix_in_sorted_order<S: TableStore>(
    store: &S,
) {
    // An upper-case first letter, so the lower-cased base is a different prefix.
    let base = unique_table("Listed");
    let lower = base.to_ascii_lowercase();
    // Byte order and case-insensitive order agree on these suffixes.
    let wanted = [
        format!("{base}A1"),
        format!("{base}B2"),
        format!("{base}c3"),
    ];
    for name in [&wanted[2], &wanted[0], &wanted[1]] {
        store
            .create_table(name)
            .await
            .expect("create_table of a listed name");
    }
    let other_case = format!("{lower}Z9");
    store
        .create_table(&other_case)
        .await
        .expect("create_table of the lower-case name");

    let listed = store.list_tables(&base).await.expect("list_tables(base)");
    assert_eq!(
        listed,
        wanted.to_vec(),
        "list_tables must return exactly the names with the case-sensitive prefix, sorted"
    );
    let listed_lower = store.list_tables(&lower).await.expect("list_tables(lower)");
    assert_eq!(
        listed_lower,
        vec![other_case.clone()],
        "the lower-case prefix matches only the lower-case name"
    );
    let one = store
        .list_tables(&format!("{base}B"))
        .await
        .expect("list_tables(base + B)");
    assert_eq!(
        one,
        vec![wanted[1].clone()],
        "a longer prefix narrows the listing"
    );
    let all = store.list_tables("").await.expect("list_tables(\"\")");
    for name in wanted.iter().chain([&other_case]) {
        assert!(all.contains(name), "the empty prefix lists `{name}` too");
    }
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted, "list_tables(\"\") is sorted");

    for name in wanted.iter().chain([&other_case]) {
        drop_table(store, name).await;
    }
}

/// Table names are case-insensitive: a table created as `Abc…` is the table `abc…`.
pub async fn table_names_are_case_insensitive<S: TableStore>(store: &S) {
    let table = unique_table("MixedCase");
    let lower = table.to_ascii_lowercase();
    let upper = table.to_ascii_uppercase();
    store.create_table(&table).await.expect("create_table");
    expect_kind(
        store.create_table(&lower).await,
        ErrorKind::TableAlreadyExists,
        "create_table of the same name in lower case",
    );
    store
        .insert(&lower, Entity::new("p", "r").with("N", 7))
        .await
        .expect("insert through the lower-case name");
    let read = fetch_existing(store, &upper, "p", "r").await;
    assert_eq!(
        read.get("N"),
        Some(&7.into()),
        "read through the upper-case name"
    );
    assert_eq!(
        store
            .query_all(&table, Query::new())
            .await
            .expect("query through the created name")
            .len(),
        1,
        "the three spellings name one table"
    );
    assert_eq!(
        store.list_tables(&table).await.expect("list_tables"),
        vec![table.clone()],
        "the listing shows the name as created"
    );
    store
        .delete_table(&upper)
        .await
        .expect("delete_table through the upper-case name");
    assert!(
        store
            .list_tables(&table)
            .await
            .expect("list_tables")
            .is_empty(),
        "the table is gone after deleting it under another case"
    );
}

/// Names breaking the table naming rules are `InvalidInput`, for every operation, and
/// nothing gets created.
pub async fn invalid_table_names_are_rejected_before_anything_is_created<S: TableStore>(store: &S) {
    let suffix = unique_table("");
    let too_long = format!("a{}", "b".repeat(63));
    let bad_names = [
        "ab".to_owned(),
        format!("1{suffix}"),
        format!("ab-{suffix}"),
        format!("ab_{suffix}"),
        format!("ab {suffix}"),
        format!("äb{suffix}"),
        too_long,
        "tables".to_owned(),
        "Tables".to_owned(),
        String::new(),
    ];
    for name in &bad_names {
        expect_kind(
            store.create_table(name).await,
            ErrorKind::InvalidInput,
            &format!("create_table({name:?})"),
        );
        expect_kind(
            store.create_table_if_not_exists(name).await,
            ErrorKind::InvalidInput,
            &format!("create_table_if_not_exists({name:?})"),
        );
        expect_kind(
            store.delete_table(name).await,
            ErrorKind::InvalidInput,
            &format!("delete_table({name:?})"),
        );
        expect_kind(
            store.get(name, "p", "r", None).await,
            ErrorKind::InvalidInput,
            &format!("get from {name:?}"),
        );
        expect_kind(
            store.query(name, &Query::new()).await,
            ErrorKind::InvalidInput,
            &format!("query of {name:?}"),
        );
        expect_kind(
            store.insert(name, Entity::new("p", "r")).await,
            ErrorKind::InvalidInput,
            &format!("insert into {name:?}"),
        );
        let mut batch = Batch::new();
        batch.insert(Entity::new("p", "r"));
        expect_kind(
            store.submit_batch(name, batch).await,
            ErrorKind::InvalidInput,
            &format!("submit_batch to {name:?}"),
        );
        if !name.is_empty() {
            let listed = store
                .list_tables(name)
                .await
                .expect("list_tables(bad name)");
            assert!(
                listed.iter().all(|t| !t.eq_ignore_ascii_case(name)),
                "the invalid name {name:?} must not have been created: {listed:?}"
            );
        }
    }
}

/// `None` if `result` failed with `TableNotFound`, otherwise what `operation` did instead.
fn unless_table_not_found<T: std::fmt::Debug>(
    operation: &str,
    result: crate::error::Result<T>,
) -> Option<String> {
    match result {
        Err(e) if e.kind() == ErrorKind::TableNotFound => None,
        Err(e) => Some(format!("{operation}: a {} error: {e}", e.kind())),
        Ok(value) => Some(format!("{operation}: Ok({})", super::brief(&value))),
    }
}

/// Checks that every read and write on `table` fails with `TableNotFound`, listing every
/// operation that does not.
async fn assert_every_operation_finds_no_table<S: TableStore>(store: &S, table: &str) {
    let entity = || Entity::new("p", "r").with("N", 1);
    let point = Query::parse("PartitionKey eq 'p' and RowKey eq 'r'").expect("point filter");
    let mut batch = Batch::new();
    batch.insert(entity()).insert(Entity::new("p", "r2"));
    let wrong = [
        unless_table_not_found("get", store.get(table, "p", "r", None).await),
        unless_table_not_found(
            "query (table scan)",
            store.query(table, &Query::new()).await,
        ),
        unless_table_not_found(
            "query (partition scan)",
            store.query(table, &Query::partition("p")).await,
        ),
        unless_table_not_found("query (point)", store.query(table, &point).await),
        unless_table_not_found("query_all", store.query_all(table, Query::new()).await),
        unless_table_not_found("insert", store.insert(table, entity()).await),
        unless_table_not_found(
            "replace",
            store.replace(table, entity(), IfMatch::Any).await,
        ),
        unless_table_not_found("merge", store.merge(table, entity(), IfMatch::Any).await),
        unless_table_not_found(
            "insert_or_replace",
            store.insert_or_replace(table, entity()).await,
        ),
        unless_table_not_found(
            "insert_or_merge",
            store.insert_or_merge(table, entity()).await,
        ),
        unless_table_not_found("delete", store.delete(table, "p", "r", IfMatch::Any).await),
        unless_table_not_found(
            "delete_if_exists (must not report `false`)",
            store.delete_if_exists(table, "p", "r").await,
        ),
        unless_table_not_found("submit_batch", store.submit_batch(table, batch).await),
        unless_table_not_found("delete_table", store.delete_table(table).await),
    ];
    let wrong: Vec<String> = wrong.into_iter().flatten().collect();
    assert!(
        wrong.is_empty(),
        "operations on the missing table `{table}` must fail with TableNotFound; these did not:\n  {}",
        wrong.join("\n  ")
    );
}

/// Every read and write on a table that was never created fails with `TableNotFound`.
pub async fn operations_on_a_missing_table_fail_with_table_not_found<S: TableStore>(store: &S) {
    let table = unique_table("Missing");
    assert_every_operation_finds_no_table(store, &table).await;
    assert!(
        store
            .list_tables(&table)
            .await
            .expect("list_tables")
            .is_empty(),
        "no operation on a missing table may create it"
    );
}

/// Every read and write on a table deleted after it was used fails with `TableNotFound`
/// (no cached handle outlives the table).
pub async fn operations_on_a_deleted_table_fail_with_table_not_found<S: TableStore>(store: &S) {
    let table = new_table(store, "UsedThenDeleted").await;
    // Use every statement once, so that a backend caching them has them cached.
    let etag = store
        .insert(&table, Entity::new("p", "r").with("N", 1))
        .await
        .expect("insert");
    let etag = store
        .replace(&table, Entity::new("p", "r").with("N", 2), etag.into())
        .await
        .expect("replace");
    store
        .merge(&table, Entity::new("p", "r").with("M", 3), etag.into())
        .await
        .expect("merge");
    store
        .insert_or_replace(&table, Entity::new("p", "r2"))
        .await
        .expect("insert_or_replace");
    store
        .insert_or_merge(&table, Entity::new("p", "r3"))
        .await
        .expect("insert_or_merge");
    store
        .delete(&table, "p", "r3", IfMatch::Any)
        .await
        .expect("delete");
    assert!(
        fetch(store, &table, "p", "r").await.is_some(),
        "get before the delete"
    );
    store
        .query(&table, &Query::new())
        .await
        .expect("table scan");
    store
        .query(&table, &Query::partition("p"))
        .await
        .expect("partition scan");
    store
        .query(
            &table,
            &Query::parse("PartitionKey eq 'p' and RowKey eq 'r'").expect("point filter"),
        )
        .await
        .expect("point query");
    store.delete_table(&table).await.expect("delete_table");

    assert_every_operation_finds_no_table(store, &table).await;
    assert!(
        store
            .list_tables(&table)
            .await
            .expect("list_tables")
            .is_empty(),
        "no operation on a deleted table may bring it back"
    );
}

/// A query on a missing table fails with `TableNotFound` even when its continuation lies
/// past its key range (so there is nothing left to read).
pub async fn resumed_query_on_a_missing_table_fails_with_table_not_found<S: TableStore>(store: &S) {
    let table = unique_table("MissingResumed");
    let past = |pk: &str, rk: &str| Some(ContinuationToken::new(pk, rk));
    let queries = [
        ("table scan", Query::new().continue_from(past("p", "r"))),
        (
            "partition scan",
            Query::partition("p").continue_from(past("q", "")),
        ),
        (
            "range",
            Query::parse("PartitionKey eq 'p' and RowKey lt 'm'")
                .expect("range filter")
                .continue_from(past("p", "z")),
        ),
        (
            "point",
            Query::parse("PartitionKey eq 'p' and RowKey eq 'r'")
                .expect("point filter")
                .continue_from(past("q", "a")),
        ),
    ];
    let mut wrong = Vec::new();
    for (what, query) in &queries {
        let result = store.query(&table, query).await;
        wrong.extend(unless_table_not_found(
            &format!("resumed {what} query"),
            result,
        ));
    }
    assert!(
        wrong.is_empty(),
        "resumed queries on the missing table `{table}` must fail with TableNotFound; these did not:\n  {}",
        wrong.join("\n  ")
    );
}
