//! `IndexedTable::options()`: the settings may come in any order and `open` returns the
//! opened table. A blob store given after `inline_apply` reaches the inline sink, an
//! `engine` keeps a `sink` given before it, and the table's name, retries and look-up
//! settings hold whatever their order. A type whose declarations need follow-up work
//! outside the write's transaction opens only with a choice of where it is done.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use tablekit_core::blob::BlobStore;
use tablekit_core::{MemoryStore, TableStore};
use tablekit_derive::Entity;
use tablekit_patterns::consistency::{Engine, Envelope};
use tablekit_patterns::index::{IndexedTable, OutboxSink};

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Tags",
    kind = "Tag",
    partition_key = "{owner}",
    row_key = "{id}",
    crate = "tablekit_core"
)]
#[index_entity(name = "by_label", key = "{label}", storage = "blob")]
struct Tag {
    owner: String,
    id: String,
    label: String,
}

fn tag(id: &str) -> Tag {
    Tag {
        owner: "ann".into(),
        id: id.into(),
        label: "red".into(),
    }
}

/// A blob-kept id list is written by the inline sink only with the blob store: in both
/// orders of `blobs` and `inline_apply` the list holds the tag once `insert` returns.
#[tokio::test]
async fn the_blob_store_reaches_the_inline_sink_in_either_order() {
    for blobs_first in [true, false] {
        let blobs = BlobStore::memory();
        let options = IndexedTable::<Tag, _>::options();
        let options = if blobs_first {
            options.blobs(blobs.clone()).inline_apply()
        } else {
            options.inline_apply().blobs(blobs.clone())
        };
        let tags = options.open(MemoryStore::new()).await.unwrap();
        tags.insert(&tag("t1")).await.unwrap();
        let listed = tags.list(Tag::BY_LABEL).key("red").ids().await.unwrap();
        assert_eq!(
            listed
                .iter()
                .map(|r| r.row_key.as_str())
                .collect::<Vec<_>>(),
            ["t1"],
            "blobs first: {blobs_first}"
        );
    }
}

/// A sink that counts what it is given.
#[derive(Default)]
struct Counted(AtomicUsize);

impl OutboxSink for Counted {
    fn publish<'a>(
        &'a self,
        _envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn an_engine_keeps_the_sink_given_before_or_after_it() {
    for sink_first in [true, false] {
        let store = MemoryStore::new();
        let sink = Arc::new(Counted::default());
        let engine = Engine::new(store.clone());
        let options = IndexedTable::<Tag, _>::options();
        let options = if sink_first {
            options.sink(sink.clone()).engine(engine)
        } else {
            options.engine(engine).sink(sink.clone())
        };
        let tags = options.open(store).await.unwrap();
        tags.insert(&tag("t1")).await.unwrap();
        assert_eq!(
            sink.0.load(Ordering::SeqCst),
            1,
            "the list's work went to the sink (sink first: {sink_first})"
        );
    }
}

#[tokio::test]
async fn open_returns_the_table_with_its_tables_created_and_its_name() {
    let store = MemoryStore::new();
    let tags = IndexedTable::<Tag, _>::options()
        .max_attempts(3)
        .name("Labels")
        .lookup_concurrency(2)
        .follow_up_elsewhere()
        .open(store.clone())
        .await
        .unwrap();
    assert_eq!(tags.table().name(), "Labels");
    let tables = store.list_tables("").await.unwrap();
    assert!(tables.iter().any(|t| t == "Labels"), "{tables:?}");
    assert!(!tables.iter().any(|t| t == "Tags"), "{tables:?}");
    assert_eq!(tags.engine().retry().max_attempts, 3);
    // `build` makes the same table without I/O; `create` opens it.
    let other = MemoryStore::new();
    let built = IndexedTable::<Tag, _>::options()
        .name("Labels")
        .follow_up_elsewhere()
        .build(other.clone())
        .unwrap();
    assert!(other.list_tables("").await.unwrap().is_empty());
    built.create().await.unwrap();
    assert!(
        other
            .list_tables("")
            .await
            .unwrap()
            .iter()
            .any(|t| t == "Labels")
    );
}

/// Copies in another table: follow-up work outside the write's own transaction.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    kind = "Employee",
    partition_key = "{department}",
    row_key = "empid_{id:06}",
    crate = "tablekit_core"
)]
#[index(
    name = "email",
    partition_key = "{department}",
    row_key = "email_{email}"
)]
#[index(
    name = "by_email",
    table = "EmployeesByEmail",
    partition_key = "email_{department}",
    row_key = "{email}"
)]
struct Employee {
    department: String,
    id: u32,
    email: String,
}

fn employee(id: u32) -> Employee {
    Employee {
        department: "Sales".into(),
        id,
        email: format!("e{id}@contoso.com"),
    }
}

#[tokio::test]
async fn a_table_with_an_index_in_another_table_is_refused_without_a_choice() {
    let store = MemoryStore::new();
    let refused = IndexedTable::<Employee, _>::options()
        .max_attempts(3)
        .open(store.clone())
        .await
        .expect_err("no choice of where the copies are written");
    assert_eq!(refused.kind(), tablekit_core::ErrorKind::InvalidInput);
    match &refused {
        tablekit_core::Error::NoFollowUpChoice {
            type_name,
            declarations,
        } => {
            assert_eq!(*type_name, "Employee");
            assert_eq!(
                declarations,
                &["index `by_email`: copies in table `EmployeesByEmail`"],
                "the same-partition index needs no follow-up work"
            );
        }
        other => panic!("another error: {other:?}"),
    }
    let message = refused.to_string();
    for needed in [
        "`Employee`",
        "index `by_email`: copies in table `EmployeesByEmail`",
        ".sink(queue_sink)",
        "tablekit-worker run --queue <queue>",
        ".inline_apply()",
        "right after each commit",
        ".follow_up_elsewhere()",
        "the relay of `tablekit-worker run`",
    ] {
        assert!(
            message.contains(needed),
            "`{needed}` missing from: {message}"
        );
    }
    assert!(
        store.list_tables("").await.unwrap().is_empty(),
        "refused before any I/O"
    );
    assert!(
        IndexedTable::<Employee, _>::options().build(store).is_err(),
        "`build` is refused alike"
    );
}

#[tokio::test]
async fn a_table_with_an_index_in_another_table_opens_with_each_choice() {
    let copies = |store: MemoryStore| async move {
        store
            .query_all("EmployeesByEmail", tablekit_core::Query::new())
            .await
            .map(|rows| rows.len())
            .unwrap_or(0)
    };
    // A sink: the work goes to it after the commit.
    let store = MemoryStore::new();
    let sink = Arc::new(Counted::default());
    let employees = IndexedTable::<Employee, _>::options()
        .sink(sink.clone())
        .open(store.clone())
        .await
        .unwrap();
    assert!(employees.insert(&employee(1)).await.unwrap().published);
    assert_eq!(sink.0.load(Ordering::SeqCst), 1);
    // An engine with a sink is the same choice.
    let sink = Arc::new(Counted::default());
    let engine = Engine::options().sink(sink.clone()).build(store.clone());
    let employees = IndexedTable::<Employee, _>::options()
        .engine(engine)
        .open(store.clone())
        .await
        .unwrap();
    employees.insert(&employee(2)).await.unwrap();
    assert_eq!(sink.0.load(Ordering::SeqCst), 1);
    // Inline: the copy is written when the insert returns.
    let store = MemoryStore::new();
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .open(store.clone())
        .await
        .unwrap();
    assert!(employees.insert(&employee(1)).await.unwrap().published);
    assert_eq!(copies(store).await, 1);
    // Elsewhere: the work waits in the partition's outbox for a relay.
    let store = MemoryStore::new();
    let employees = IndexedTable::<Employee, _>::options()
        .follow_up_elsewhere()
        .open(store.clone())
        .await
        .unwrap();
    let outcome = employees.insert(&employee(1)).await.unwrap();
    assert!(!outcome.published);
    assert_eq!(outcome.operations, 1);
    assert_eq!(copies(store.clone()).await, 0);
    let waiting = tablekit_patterns::consistency::outbox::scan(&store, "Employees")
        .await
        .unwrap();
    assert_eq!(waiting.len(), 1, "one outbox entry for the relay");
}

/// Only a same-partition index: everything is written in the write's own transaction.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Desks",
    kind = "Desk",
    partition_key = "{floor}",
    row_key = "d_{id:03}",
    crate = "tablekit_core"
)]
#[index(
    name = "by_owner",
    partition_key = "{floor}",
    row_key = "owner_{owner}"
)]
#[index_entity(name = "by_size", key = "{size}")]
struct Desk {
    floor: String,
    id: u32,
    owner: String,
    size: u8,
}

#[tokio::test]
async fn a_type_with_only_same_partition_declarations_opens_without_a_choice() {
    let store = MemoryStore::new();
    let desks = IndexedTable::<Desk, _>::options()
        .open(store.clone())
        .await
        .unwrap();
    let outcome = desks
        .insert(&Desk {
            floor: "f1".into(),
            id: 1,
            owner: "ann".into(),
            size: 2,
        })
        .await
        .unwrap();
    assert_eq!(outcome.operations, 0, "nothing outside the transaction");
    assert!(IndexedTable::<Desk, _>::options().build(store).is_ok());
}

/// Every kind of follow-up work a type can declare, each named in the refusal.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Accounts",
    kind = "Account",
    partition_key = "{region}",
    row_key = "a_{id:04}",
    changes = "account-changes",
    ttl = "1h",
    crate = "tablekit_core"
)]
#[index(name = "by_plan", partition_key = "plans", row_key = "{plan},{id:04}")]
#[index_entity(
    name = "by_city",
    key = "{city}",
    table = "AccountCities",
    storage = "table"
)]
#[index_entity(name = "by_tag", key = "{tag}", storage = "blob")]
#[unique(name = "login", key = "{login}")]
struct Account {
    region: String,
    id: u32,
    plan: String,
    city: String,
    tag: String,
    login: String,
}

#[tokio::test]
async fn the_refusal_names_every_declaration_that_needs_follow_up_work() {
    let refused = IndexedTable::<Account, _>::options()
        .blobs(BlobStore::memory())
        .build(MemoryStore::new())
        .expect_err("no choice");
    let tablekit_core::Error::NoFollowUpChoice { declarations, .. } = &refused else {
        panic!("another error: {refused:?}");
    };
    assert_eq!(
        declarations,
        &[
            "index `by_plan`: copies in other partitions of `Accounts`",
            "index entity `by_city`: id lists in table `AccountCities`",
            "index entity `by_tag`: id lists in blobs",
            "expiry: entries in table `AccountsExpiry`",
            "change events: queue `account-changes`",
            "unique value `login`: reservations in table `AccountsUnique`, released after the write",
            "a blob store: the blobs a write stops referencing are deleted after it",
        ]
    );
}

/// A type that copies a property of [`Employee`] (`denormalized(from = "Employee")`).
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Laptops",
    kind = "Laptop",
    partition_key = "{department}",
    row_key = "l_{id:03}",
    crate = "tablekit_core"
)]
struct Laptop {
    department: String,
    id: u32,
    holder: u32,
    #[entity(denormalized(
        from = "Employee",
        table = "Staff",
        partition_key = "{department}",
        row_key = "empid_{holder:06}",
        property = "email"
    ))]
    holder_email: Option<String>,
}

/// The same partition and row keys as [`Employee`], with no index: only another type's
/// copies of its properties need follow-up work.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Staff",
    kind = "Employee",
    partition_key = "{department}",
    row_key = "empid_{id:06}",
    crate = "tablekit_core"
)]
struct Staff {
    department: String,
    id: u32,
    email: String,
}

#[tokio::test]
async fn a_type_whose_properties_another_type_copies_needs_a_choice_once_the_registry_shows_it() {
    let store = MemoryStore::new();
    // Nothing registered copies from it yet: it opens without a choice.
    IndexedTable::<Staff, _>::options()
        .open(store.clone())
        .await
        .unwrap();
    IndexedTable::<Laptop, _>::options()
        .inline_apply()
        .open(store.clone())
        .await
        .unwrap();
    let refused = IndexedTable::<Staff, _>::options()
        .open(store.clone())
        .await
        .expect_err("its writes now update the laptops by follow-up work");
    assert!(
        refused.to_string().contains("tracked dependents"),
        "{refused}"
    );
    IndexedTable::<Staff, _>::options()
        .inline_apply()
        .open(store)
        .await
        .unwrap();
}
