//! Typed look-ups: each `#[index]` and `#[index_entity]` is a handle the derive makes
//! (`Employee::EMAIL`), read through one builder per handle — exact, prefix, range,
//! verified, page, stream, the copies as stored — and the forms by name check at run
//! time what the handles check at compile time.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use futures::TryStreamExt;
use tablekit_core::typed::EntityType;
use tablekit_core::{ErrorKind, IfMatch, MemoryStore};
use tablekit_derive::Entity;
use tablekit_patterns::index::{IndexedTable, OutboxSink};

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
    name = "by_id",
    table = "EmployeesById",
    partition_key = "ids",
    row_key = "{id:06}_{department}"
)]
#[index_entity(name = "last_name", key = "{last_name}")]
#[index_entity(name = "byLevel", key = "{level}", storage = "table")]
struct Employee {
    department: String,
    id: u32,
    last_name: String,
    email: String,
    level: u8,
}

fn employee(department: &str, id: u32, last_name: &str, level: u8) -> Employee {
    Employee {
        department: department.into(),
        id,
        last_name: last_name.into(),
        email: format!("{}{id}@contoso.com", last_name.to_lowercase()),
        level,
    }
}

async fn seeded() -> IndexedTable<Employee, MemoryStore> {
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .open(MemoryStore::new())
        .await
        .unwrap();
    for (department, id, last_name, level) in [
        ("Sales", 1, "Jones", 1),
        ("Sales", 2, "Jones", 2),
        ("Sales", 3, "Smith", 2),
        ("Ops", 4, "Jones", 3),
        ("Ops", 5, "Cao", 2),
    ] {
        employees
            .insert(&employee(department, id, last_name, level))
            .await
            .unwrap();
    }
    employees
}

fn ids(found: &[tablekit_core::typed::Stored<Employee>]) -> Vec<u32> {
    found.iter().map(|e| e.id).collect()
}

#[tokio::test]
async fn look_ups_by_name_refuse_a_key_value_stored_as_another_type_than_its_field() {
    use tablekit_core::EdmType;
    use tablekit_core::keys::KeyError;

    let employees = seeded().await;
    // A `u32` for the `String` field `email`: it would look up `email_1` and find nothing.
    let wrong = employees
        .lookup_named("email")
        .keys(&[&"Sales", &1u32])
        .all()
        .await
        .expect_err("a u32 for a String field");
    assert_eq!(wrong.kind(), ErrorKind::InvalidInput);
    assert!(
        matches!(
            &wrong,
            tablekit_core::Error::Key(KeyError::WrongType {
                what: "index",
                name,
                field,
                expected: EdmType::String,
                given: "u32",
                given_stored: EdmType::Int64,
            }) if name == "email" && field == "email"
        ),
        "{wrong:?}"
    );
    assert_eq!(
        wrong.to_string(),
        "index `email`: key field `email` is stored as Edm.String, the value given is a `u32` (stored as Edm.Int64)"
    );
    // The PartitionKey's fields, the exact read and a range's bounds are checked alike.
    let partition = employees
        .lookup_named("email")
        .keys(&[&7u8])
        .all()
        .await
        .expect_err("a u8 for the String field `department`");
    assert!(
        partition.to_string().contains("key field `department`"),
        "{partition}"
    );
    let exact = employees
        .lookup_named("email")
        .keys(&[&"Sales", &true])
        .get()
        .await
        .expect_err("a bool for a String field");
    assert!(
        exact.to_string().contains("the value given is a `bool`"),
        "{exact}"
    );
    let ranged = employees
        .lookup_named("by_id")
        .range(&"1", &"2")
        .all()
        .await
        .expect_err("strings for the u32 field `id`");
    assert!(
        ranged
            .to_string()
            .contains("key field `id` is stored as Edm.Int64, the value given is a `str`"),
        "{ranged}"
    );
    let listed = employees
        .list_named("byLevel")
        .keys(&[&"2"])
        .ids()
        .await
        .expect_err("a string for the u8 field `level`");
    assert!(
        listed
            .to_string()
            .starts_with("id list `byLevel`: key field `level` is stored as Edm.Int32"),
        "{listed}"
    );

    // Integers of any width fill an integer field of any width: their key text is one.
    let by_id = employees
        .lookup_named("by_id")
        .range(&1, &2u64)
        .all()
        .await
        .unwrap();
    assert_eq!(ids(&by_id), [1, 2]);
    let hit = employees
        .lookup_named("by_id")
        .keys(&[&3i64, &"Sales"])
        .get()
        .await
        .unwrap();
    assert_eq!(hit.map(|e| e.id), Some(3));
    let level_two = employees
        .list_named("byLevel")
        .keys(&[&2u32])
        .ids()
        .await
        .unwrap();
    assert_eq!(level_two.len(), 3);
}

#[test]
fn the_derive_names_one_handle_per_index_and_id_list() {
    assert_eq!(Employee::EMAIL.name(), "email");
    assert_eq!(Employee::BY_ID.name(), "by_id");
    assert_eq!(Employee::LAST_NAME.name(), "last_name");
    assert_eq!(Employee::BY_LEVEL.name(), "byLevel");
    let declared: Vec<&str> = Employee::schema().indexes().map(|i| i.name).collect();
    assert_eq!(declared, ["email", "by_id"]);
}

#[tokio::test]
async fn an_exact_look_up_takes_every_key_field_in_template_order() {
    let employees = seeded().await;
    let hit = employees
        .lookup(Employee::EMAIL)
        .key("Sales")
        .key("smith3@contoso.com")
        .get()
        .await
        .unwrap()
        .expect("found");
    assert_eq!((hit.partition_key.as_str(), hit.id), ("Sales", 3));
    // A field's value by reference, or owned, reads the same.
    let email = String::from("smith3@contoso.com");
    let department = String::from("Sales");
    let again = employees
        .lookup(Employee::EMAIL)
        .key(&department)
        .key(email)
        .get()
        .await
        .unwrap();
    assert_eq!(again.map(|e| e.id), Some(3));
    // Another partition's value is not there.
    let missing = employees
        .lookup(Employee::EMAIL)
        .key("Ops")
        .key("smith3@contoso.com")
        .get()
        .await
        .unwrap();
    assert!(missing.is_none());
    // A padded integer field in another table.
    let by_id = employees
        .lookup(Employee::BY_ID)
        .key(4u32)
        .key("Ops")
        .get()
        .await
        .unwrap();
    assert_eq!(by_id.map(|e| e.value.last_name), Some("Jones".to_owned()));
}

#[tokio::test]
async fn prefixes_and_ranges_read_in_index_order_whole_paged_and_streamed() {
    let employees = seeded().await;
    let sales = employees
        .lookup(Employee::EMAIL)
        .key("Sales")
        .all()
        .await
        .unwrap();
    assert_eq!(ids(&sales), [1, 2, 3], "jones1, jones2, smith3");
    let j_to_k = employees
        .lookup(Employee::EMAIL)
        .key("Sales")
        .range("j", "k")
        .all()
        .await
        .unwrap();
    assert_eq!(ids(&j_to_k), [1, 2]);
    // Ids 2 to 4 in the other table, by a padded integer range.
    let middle = employees
        .lookup(Employee::BY_ID)
        .range(2u32, 4u32)
        .all()
        .await
        .unwrap();
    assert_eq!(ids(&middle), [2, 3, 4]);
    // Pages of two resume where they stopped.
    let first = employees
        .lookup(Employee::BY_ID)
        .page(2, None)
        .await
        .unwrap();
    assert_eq!(ids(&first.items), [1, 2]);
    let second = employees
        .lookup(Employee::BY_ID)
        .page(2, first.cursor.as_ref())
        .await
        .unwrap();
    assert_eq!(ids(&second.items), [3, 4]);
    let streamed: Vec<u32> = employees
        .lookup(Employee::BY_ID)
        .stream(2)
        .map_ok(|e| e.id)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(streamed, [1, 2, 3, 4, 5]);
    // The copies as stored.
    let copies = employees
        .lookup(Employee::EMAIL)
        .key("Ops")
        .entities()
        .await
        .unwrap();
    let keys: Vec<&str> = copies.iter().map(|c| c.row_key.as_str()).collect();
    assert_eq!(keys, ["email_cao5@contoso.com", "email_jones4@contoso.com"]);
    let page = employees
        .lookup(Employee::EMAIL)
        .key("Ops")
        .entities_page(1, None)
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    assert!(page.cursor.is_some());
}

/// A sink that keeps the follow-up work: the other table's copies wait.
struct Held;

impl OutboxSink for Held {
    fn publish<'a>(
        &'a self,
        _envelope: &'a tablekit_patterns::consistency::Envelope,
    ) -> futures::future::BoxFuture<'a, tablekit_patterns::Result<()>> {
        Box::pin(async {
            Err(tablekit_core::Error::unavailable(
                "held: the relay publishes later",
            ))
        })
    }
}

#[tokio::test]
async fn a_verified_look_up_answers_from_the_primary_when_a_copy_lags() {
    let store = MemoryStore::new();
    let inline = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .open(store.clone())
        .await
        .unwrap();
    inline.insert(&employee("Ops", 7, "Lee", 1)).await.unwrap();
    // The rename's copy in the other table waits for the relay.
    let lagging = IndexedTable::<Employee, _>::options()
        .sink(std::sync::Arc::new(Held))
        .build(store.clone())
        .unwrap();
    let mut renamed = employee("Ops", 7, "Lee", 1);
    renamed.last_name = "Park".into();
    lagging.replace(&renamed, IfMatch::Any).await.unwrap();
    let stale = lagging
        .lookup(Employee::BY_ID)
        .key(7u32)
        .key("Ops")
        .get()
        .await
        .unwrap()
        .expect("the old copy");
    assert_eq!(stale.last_name, "Lee", "the copy lags");
    let verified = lagging
        .lookup(Employee::BY_ID)
        .key(7u32)
        .key("Ops")
        .verified()
        .get()
        .await
        .unwrap()
        .expect("the primary");
    assert_eq!(verified.last_name, "Park", "the primary answers");
    assert!(verified.etag.is_some(), "a verified hit carries its ETag");
    // The table-wide setting does the same for every look-up.
    let always = IndexedTable::<Employee, _>::options()
        .verified_lookups(true)
        .follow_up_elsewhere()
        .build(store.clone())
        .unwrap();
    let all = always.lookup(Employee::BY_ID).all().await.unwrap();
    assert_eq!(all[0].last_name, "Park");
}

#[tokio::test]
async fn id_lists_read_their_ids_and_primaries_by_handle() {
    let employees = seeded().await;
    let joneses = employees
        .list(Employee::LAST_NAME)
        .in_partition("Sales")
        .key("Jones")
        .ids()
        .await
        .unwrap();
    let rows: Vec<&str> = joneses.iter().map(|r| r.row_key.as_str()).collect();
    assert_eq!(rows, ["empid_000001", "empid_000002"]);
    let level_two = employees
        .list(Employee::BY_LEVEL)
        .key(2u8)
        .concurrency(2)
        .all()
        .await
        .unwrap();
    let mut found = ids(&level_two);
    found.sort_unstable();
    assert_eq!(found, [2, 3, 5], "a table-kept list spans partitions");
    let first = employees
        .list(Employee::BY_LEVEL)
        .key(2u8)
        .page(2, None)
        .await
        .unwrap();
    assert_eq!(first.items.len(), 2);
    let rest = employees
        .list(Employee::BY_LEVEL)
        .key(2u8)
        .page(2, first.cursor.as_ref())
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
    assert!(rest.cursor.is_none());
    let streamed: Vec<u32> = employees
        .list(Employee::LAST_NAME)
        .in_partition("Ops")
        .key("Jones")
        .stream(10)
        .map_ok(|e| e.id)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(streamed, [4]);
    // A partition-kept list without its partition is refused, naming what is missing.
    let err = employees
        .list(Employee::LAST_NAME)
        .key("Jones")
        .ids()
        .await
        .expect_err("no partition");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("give the partition"), "{err}");
}

#[tokio::test]
async fn look_ups_by_name_check_the_name_and_the_key_when_they_run() {
    let employees = seeded().await;
    let hit = employees
        .lookup_named("email")
        .keys(&[&"Sales", &"jones2@contoso.com"])
        .get()
        .await
        .unwrap();
    assert_eq!(hit.map(|e| e.id), Some(2));
    let ranged = employees
        .lookup_named("by_id")
        .range(&1u32, &2u32)
        .all()
        .await
        .unwrap();
    assert_eq!(ids(&ranged), [1, 2]);
    let listed = employees
        .list_named("last_name")
        .in_partition("Sales")
        .keys(&[&"Smith"])
        .all()
        .await
        .unwrap();
    assert_eq!(ids(&listed), [3]);

    let misspelled = employees
        .lookup_named("emal")
        .keys(&[&"Sales", &"x"])
        .get()
        .await
        .expect_err("undeclared");
    assert!(
        matches!(&misspelled, tablekit_core::Error::Undeclared { name, .. } if name == "emal"),
        "{misspelled}"
    );
    let too_many = employees
        .lookup_named("email")
        .keys(&[&"Sales", &"x", &"y"])
        .get()
        .await
        .expect_err("three values for two fields");
    assert_eq!(too_many.kind(), ErrorKind::InvalidInput);
    assert!(
        too_many.to_string().contains("takes 2 key values"),
        "{too_many}"
    );
    let too_few = employees
        .lookup_named("email")
        .keys(&[&"Sales"])
        .get()
        .await
        .expect_err("one value for two fields");
    assert_eq!(too_few.kind(), ErrorKind::InvalidInput, "{too_few}");
    let wrong_list = employees
        .list_named("last_name")
        .in_partition("Sales")
        .keys(&[&"Smith", &"extra"])
        .ids()
        .await
        .expect_err("two values for one field");
    assert!(
        wrong_list.to_string().contains("takes 1 key values"),
        "{wrong_list}"
    );
}
