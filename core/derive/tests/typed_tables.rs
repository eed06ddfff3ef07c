//! Typed tables on both embedded backends: the Employee of the README's derive example
//! without its indexes (a plain `Table` writes only a type that declares no follow-up
//! work; the indexed one is `tablekit-patterns`' `IndexedTable`), ETags,
//! key-template ranges, projections, heterogeneous partitions, versions and upcasting, read
//! errors, and batches planned into entity group transactions.

#![allow(missing_docs)]

mod support;

use std::future::Future;

use tablekit::core::filter::property_named;
use tablekit::core::keys::CompoundKey;
use tablekit::prelude::*;
use tablekit::typed::{KeyPart, TypedWrite};

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    kind = "Employee",
    version = 1,
    partition_key = "{department}",
    row_key = "empid_{id:06}"
)]
struct Employee {
    department: String,
    id: u32,
    first_name: String,
    last_name: String,
    age: i32,
    email: String,
    #[entity(blob)]
    photo: Option<Vec<u8>>, // inline in a plain Table; in the blob store via IndexedTable
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Employees", partition_key = "{name}", row_key = "department")]
struct Department {
    name: String,
    employee_count: i32,
}

#[derive(EntityKind, Clone, Debug, PartialEq)]
enum EmployeeTable {
    Employee(Employee),
    Department(Department),
}

#[derive(Projection, Clone, Debug, PartialEq)]
struct NameAndAge {
    first_name: String,
    age: i32,
}

fn employee(department: &str, id: u32) -> Employee {
    Employee {
        department: department.into(),
        id,
        first_name: format!("First{id}"),
        last_name: format!("Last{}", id % 7),
        age: 20 + (id % 40) as i32,
        email: format!("e{id}@contoso.com"),
        photo: id.is_multiple_of(2).then(|| vec![id as u8; 16]),
    }
}

/// Runs a test body on the in-memory store, on a SQLite file and, with the `azure`
/// feature, on Azurite.
async fn on_both<F, Fut>(body: F)
where
    F: Fn(AnyStore) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    body(AnyStore::create("memory:").await.expect("memory store"))
        .await
        .expect("memory backend");
    let dir = tempfile::tempdir().expect("a temp dir");
    let url = format!("sqlite:{}", dir.path().join("typed.db").display());
    body(AnyStore::create(&url).await.expect("sqlite store"))
        .await
        .expect("sqlite backend");
    match AnyStore::create("azure:UseDevelopmentStorage=true").await {
        // The facade was built without the `azure` feature.
        Err(e) if e.kind() == ErrorKind::InvalidInput => {}
        _ => {
            if let Some(url) = support::azurite() {
                body(AnyStore::create(&url).await.expect("azure store"))
                    .await
                    .expect("azure backend");
            }
        }
    }
}

#[tokio::test]
async fn the_design_example_round_trips_with_etags() {
    on_both(|store| async move {
        let employees = Table::<Employee, _>::new(store.clone());
        assert!(employees.create().await?);
        let jun = employee("Sales", 123);
        let etag = employees.insert(&jun).await?;

        let stored = employees
            .get("Sales", "empid_000123")
            .await?
            .expect("stored");
        assert_eq!(stored.value, jun);
        assert_eq!(stored.etag.as_ref(), Some(&etag));
        assert!(stored.timestamp.is_some());
        assert_eq!(stored.upgraded_from, None);

        // Insert again: the keys are taken.
        let again = employees.insert(&jun).await.expect_err("duplicate");
        assert_eq!(again.kind(), ErrorKind::AlreadyExists);

        // Replace under the ETag read; a stale ETag then fails.
        let mut older = jun.clone();
        older.age = 35;
        let new_etag = employees.replace(&older, stored.if_match()).await?;
        let stale = employees
            .replace(&older, stored.if_match())
            .await
            .expect_err("stale ETag");
        assert_eq!(stale.kind(), ErrorKind::PreconditionFailed);

        // Merge keeps properties a None field leaves absent.
        let mut no_photo = older.clone();
        no_photo.photo = None;
        no_photo.first_name = "Jun".into();
        employees.merge(&no_photo, IfMatch::ETag(new_etag)).await?;
        let merged = employees.get_value(&no_photo).await?.expect("stored");
        assert_eq!(merged.first_name, "Jun");
        assert_eq!(
            merged.photo, jun.photo,
            "merge leaves the absent photo as stored"
        );

        // Upsert replaces whole.
        employees.upsert(&no_photo).await?;
        assert_eq!(
            employees.get_value(&no_photo).await?.expect("stored").photo,
            None
        );

        employees.delete_value(&no_photo, IfMatch::Any).await?;
        assert!(employees.get("Sales", "empid_000123").await?.is_none());
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn key_template_ranges_select_exactly_the_ids_asked_for() {
    on_both(|store| async move {
        let employees = Table::<Employee, _>::new(store);
        employees.create().await?;
        let writes = (1..=300).map(|id| TypedWrite::Insert(employee("Sales", id)));
        employees.write_all(writes).await?.into_result()?;

        let bounds = Employee::schema().row_key.range(&[], &100u32, &199u32)?;
        let hits = employees.range("Sales", &bounds).await?;
        let ids: Vec<u32> = hits.iter().map(|e| e.id).collect();
        assert_eq!(ids, (100..=199).collect::<Vec<_>>());

        let query = Query::partition("Sales").top(5);
        let (page, token) = employees.query_page(query).await?;
        assert_eq!(page.len(), 5);
        assert!(token.is_some());

        let older = employees
            .query(Query::with_filter(
                tablekit::core::filter::partition_key().eq("Sales") & property_named("age").ge(58),
            ))
            .await?;
        assert!(older.iter().all(|e| e.age >= 58) && !older.is_empty());
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn projections_read_a_subset_of_properties() {
    on_both(|store| async move {
        let employees = Table::<Employee, _>::new(store);
        employees.create().await?;
        employees.insert(&employee("Ops", 7)).await?;
        let names = employees
            .select::<NameAndAge>(Query::partition("Ops"))
            .await?;
        assert_eq!(names.len(), 1);
        assert_eq!(
            names[0].value,
            NameAndAge {
                first_name: "First7".into(),
                age: 27
            }
        );
        assert_eq!(names[0].row_key, "empid_000007");
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn a_mixed_partition_reads_into_the_enum_and_typed_queries_keep_their_kind() {
    on_both(|store| async move {
        let all = Table::<EmployeeTable, _>::new(store.clone());
        all.create().await?;
        all.insert(&EmployeeTable::Department(Department {
            name: "Sales".into(),
            employee_count: 2,
        }))
        .await?;
        all.insert(&employee("Sales", 1).into()).await?;
        all.insert(&employee("Sales", 2).into()).await?;

        let mixed = all.partition("Sales").await?;
        let kinds: Vec<&str> = mixed
            .iter()
            .map(|s| match s.value {
                EmployeeTable::Employee(_) => "employee",
                EmployeeTable::Department(_) => "department",
            })
            .collect();
        assert_eq!(kinds, ["department", "employee", "employee"]);

        let employees = Table::<Employee, _>::new(store.clone());
        assert_eq!(employees.partition("Sales").await?.len(), 2);
        let departments = Table::<Department, _>::new(store.clone());
        assert_eq!(departments.partition("Sales").await?.len(), 1);

        // Reading a department as an employee names the kind found.
        let error = employees
            .get("Sales", "department")
            .await
            .expect_err("another kind");
        assert_eq!(error.kind(), ErrorKind::InvalidData);
        assert!(error.to_string().contains("kind `Department`"), "{error}");
        Ok(())
    })
    .await;
}

/// Version 1 stored a single `Name`; version 2 has first and last names.
fn split_name(entity: &mut Entity, from: u32) -> std::result::Result<(), String> {
    if from < 2 {
        let name = match entity.remove("Name") {
            Some(Value::String(name)) => name,
            _ => return Err("version 1 entities have a Name".into()),
        };
        let (first, last) = name.split_once(' ').unwrap_or((name.as_str(), ""));
        let (first, last) = (first.to_owned(), last.to_owned());
        entity.set("FirstName", first);
        entity.set("LastName", last);
    }
    Ok(())
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Contacts", version = 2, partition_key = "c", row_key = "{id}",
         rename_all = "PascalCase", upcast = split_name)]
struct Contact {
    id: String,
    first_name: String,
    last_name: String,
}

#[tokio::test]
async fn old_versions_are_upcast_on_read_and_written_back_on_request() {
    on_both(|store| async move {
        store.create_table("Contacts").await?;
        for id in ["a", "b"] {
            store
                .insert(
                    "Contacts",
                    Entity::new("c", id)
                        .with("EntityKind", "Contact")
                        .with("EntityVersion", 1)
                        .with("Id", id)
                        .with("Name", "Ada Lovelace"),
                )
                .await?;
        }
        let lazy = Table::<Contact, _>::new(store.clone());
        let a = lazy.get("c", "a").await?.expect("stored");
        assert_eq!(a.upgraded_from, Some(1));
        assert_eq!(
            (a.first_name.as_str(), a.last_name.as_str()),
            ("Ada", "Lovelace")
        );
        // Without write-back the stored entity stays at version 1.
        let raw = store
            .get("Contacts", "c", "a", None)
            .await?
            .expect("stored");
        assert_eq!(raw.get("EntityVersion"), Some(&Value::Int32(1)));

        let migrating = Table::<Contact, _>::options()
            .write_back_upgrades(true)
            .build(store.clone());
        let b = migrating.get("c", "b").await?.expect("stored");
        assert_eq!(b.upgraded_from, None, "written back");
        let raw = store
            .get("Contacts", "c", "b", None)
            .await?
            .expect("stored");
        assert_eq!(raw.get("EntityVersion"), Some(&Value::Int32(2)));
        assert_eq!(raw.get("Name"), None);
        assert_eq!(raw.get("LastName"), Some(&Value::from("Lovelace")));
        assert_eq!(raw.etag, b.etag);

        // A version newer than this program knows is refused, not guessed at.
        store
            .insert(
                "Contacts",
                Entity::new("c", "z")
                    .with("EntityKind", "Contact")
                    .with("EntityVersion", 3)
                    .with("Id", "z"),
            )
            .await?;
        let error = lazy.get("c", "z").await.expect_err("newer version");
        assert!(error.to_string().contains("version 3"), "{error}");
        // A failing upcaster names the version it started from.
        store
            .insert(
                "Contacts",
                Entity::new("c", "y")
                    .with("EntityVersion", 1)
                    .with("Id", "y"),
            )
            .await?;
        let error = lazy.get("c", "y").await.expect_err("no Name");
        assert!(
            error.to_string().contains("upgrading from version 1"),
            "{error}"
        );
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn reads_name_the_missing_or_mistyped_property_and_ignore_unknown_ones() {
    on_both(|store| async move {
        store.create_table("Employees").await?;
        let employees = Table::<Employee, _>::new(store.clone());
        let mut entity = employee("Sales", 5).to_entity()?;
        entity.set("Unrelated", 99);
        entity.set("Nickname", "J");
        store.insert("Employees", entity.clone()).await?;
        assert_eq!(
            employees
                .get("Sales", "empid_000005")
                .await?
                .expect("stored")
                .value,
            employee("Sales", 5)
        );

        entity.row_key = "empid_000006".into();
        entity.remove("age");
        store.insert("Employees", entity.clone()).await?;
        let error = employees
            .get("Sales", "empid_000006")
            .await
            .expect_err("missing");
        let message = error.to_string();
        assert!(message.contains("property `age`"), "{message}");
        assert!(message.contains("RowKey `empid_000006`"), "{message}");
        assert!(message.contains("missing"), "{message}");

        entity.row_key = "empid_000007".into();
        entity.set("age", "forty");
        store.insert("Employees", entity).await?;
        let error = employees
            .get("Sales", "empid_000007")
            .await
            .expect_err("mistyped");
        assert!(
            error
                .to_string()
                .contains("expected Edm.Int32, found Edm.String"),
            "{error}"
        );
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn many_writes_are_planned_into_entity_group_transactions() {
    on_both(|store| async move {
        let employees = Table::<Employee, _>::new(store.clone());
        employees.create().await?;
        // 250 employees in three departments, interleaved.
        let departments = ["Sales", "Ops", "Dev"];
        let writes: Vec<_> = (0..250)
            .map(|i| TypedWrite::Insert(employee(departments[i % 3], i as u32)))
            .collect();
        let report = employees.write_all(writes).await?;
        assert!(report.is_complete());
        assert_eq!(report.written(), 250);
        assert!(report.batches.iter().all(|b| b.inputs.len() <= 100));
        assert_eq!(
            report.batches.len(),
            3,
            "84 + 83 + 83 writes: one batch each"
        );
        for (department, count) in [("Sales", 84), ("Ops", 83), ("Dev", 83)] {
            assert_eq!(employees.partition(department).await?.len(), count);
        }

        // Large entities: 14 binaries of 40 KiB, about 766 KB each in base64 on the wire,
        // so a sixth would pass the 4 MiB payload limit: batches of five and one.
        let bulky = Table::<Bulky, _>::new(store.clone());
        bulky.create().await?;
        let report = bulky
            .write_all((0..6).map(|id| TypedWrite::Upsert(Bulky::new(id))))
            .await?;
        assert!(report.is_complete(), "{:?}", report.first_failure());
        let sizes: Vec<usize> = report.batches.iter().map(|b| b.inputs.len()).collect();
        assert_eq!(sizes, [5, 1]);
        assert_eq!(bulky.partition("bulk").await?.len(), 6);

        // The same entity twice goes into consecutive batches, in order.
        let mut changed = employee("Ops", 1);
        changed.age = 99;
        let writes = vec![
            TypedWrite::Upsert(employee("Ops", 1)),
            TypedWrite::Upsert(changed.clone()),
        ];
        let report = employees.write_all(writes).await?;
        assert_eq!(report.batches.len(), 2);
        assert_eq!(
            employees.get_value(&changed).await?.expect("stored").age,
            99
        );

        // One failing batch does not stop the others; the report says which failed.
        let writes = vec![
            TypedWrite::Insert(employee("Sales", 0)),
            TypedWrite::Insert(employee("New", 1)),
        ];
        let report = employees.write_all(writes).await?;
        assert!(!report.is_complete());
        assert_eq!(report.written(), 1);
        let (input, error) = report.first_failure().expect("a failure");
        assert_eq!(input, 0);
        assert_eq!(error.kind(), ErrorKind::AlreadyExists);
        assert!(employees.get("New", "empid_000001").await?.is_some());

        // An invalid write is refused before any batch is sent.
        let mut bad = employee("Nope", 1);
        bad.department = "a/b".into();
        let error = employees
            .write_all(vec![
                TypedWrite::Insert(employee("Nope", 2)),
                TypedWrite::Insert(bad),
            ])
            .await
            .expect_err("invalid key");
        assert_eq!(error.batch_index(), Some(1));
        assert!(employees.partition("Nope").await?.is_empty());
        Ok(())
    })
    .await;
}

/// A large entity: 14 binary properties of 40 KiB.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Bulky", partition_key = "bulk", row_key = "{id:03}")]
struct Bulky {
    id: u32,
    b0: Vec<u8>,
    b1: Vec<u8>,
    b2: Vec<u8>,
    b3: Vec<u8>,
    b4: Vec<u8>,
    b5: Vec<u8>,
    b6: Vec<u8>,
    b7: Vec<u8>,
    b8: Vec<u8>,
    b9: Vec<u8>,
    b10: Vec<u8>,
    b11: Vec<u8>,
    b12: Vec<u8>,
    b13: Vec<u8>,
}

impl Bulky {
    fn new(id: u32) -> Self {
        let b = || vec![id as u8; 40 * 1024];
        Bulky {
            id,
            b0: b(),
            b1: b(),
            b2: b(),
            b3: b(),
            b4: b(),
            b5: b(),
            b6: b(),
            b7: b(),
            b8: b(),
            b9: b(),
            b10: b(),
            b11: b(),
            b12: b(),
            b13: b(),
        }
    }
}

/// The student-card consumer records of the Tablestore guide: DeviceID, SellerID and
/// CardID joined into one partition key.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "CardRecords",
    partition_key = "{device_id:06},{seller_id},{card_id}",
    row_key = "{order_number}"
)]
struct CardRecord {
    device_id: u32,
    seller_id: String,
    card_id: u32,
    order_number: u64,
}

fn card_records() -> Vec<CardRecord> {
    let record = |device_id, seller_id: &str, card_id, order_number| CardRecord {
        device_id,
        seller_id: seller_id.into(),
        card_id,
        order_number,
    };
    vec![
        record(16, "a100", 66661, 200001),
        record(54, "a100", 6777, 200003),
        record(54, "a1001", 6777, 200004),
        record(167, "a101", 283408, 200002),
    ]
}

#[test]
fn a_separator_below_every_character_keeps_the_column_order() {
    let records = card_records();
    // The rows in column order (DeviceID, SellerID, CardID).
    let mut by_columns = records.clone();
    by_columns.sort_by(|a, b| {
        (a.device_id, &a.seller_id, a.card_id).cmp(&(b.device_id, &b.seller_id, b.card_id))
    });
    // Joined with `,` (below digits and letters) after zero padding: the same order.
    let mut by_key = records.clone();
    by_key.sort_by_key(|r| r.partition_key().expect("renders"));
    assert_eq!(by_key, by_columns);
    assert_eq!(
        by_key
            .iter()
            .map(|r| r.partition_key().expect("renders"))
            .collect::<Vec<_>>(),
        [
            "000016,a100,66661",
            "000054,a100,6777",
            "000054,a1001,6777",
            "000167,a101,283408"
        ]
    );
    // Joined with `:` (above the digits) the order breaks, as the guide shows:
    // '000054:a1001' sorts before '000054:a100:'.
    let colon = CompoundKey::new(':');
    let joined = |r: &CardRecord| {
        colon.join([
            format!("{:06}", r.device_id),
            r.seller_id.clone(),
            r.card_id.to_string(),
        ])
    };
    assert!(
        joined(&records[2]).is_err(),
        "':' is not below the digits, so the helper refuses it"
    );
    let naive = |r: &CardRecord| format!("{:06}:{}:{}", r.device_id, r.seller_id, r.card_id);
    let mut by_naive = records.clone();
    by_naive.sort_by_key(naive);
    assert_ne!(by_naive, by_columns);
    let comma = CompoundKey::new(',');
    for r in &records {
        let key = comma
            .join([
                format!("{:06}", r.device_id),
                r.seller_id.clone(),
                r.card_id.to_string(),
            ])
            .expect("every part is above ','");
        assert_eq!(key, r.partition_key().expect("renders"));
        assert_eq!(comma.split(&key).expect("splits").len(), 3);
    }
}

#[tokio::test]
async fn device_ranges_read_back_in_column_order() {
    on_both(|store| async move {
        let records = Table::<CardRecord, _>::new(store);
        records.create().await?;
        records
            .write_all(card_records().into_iter().map(TypedWrite::Insert))
            .await?
            .into_result()?;
        // DeviceID in [15, 100): the guide's range read.
        let template = &CardRecord::schema().partition_key;
        let bounds = template.range(&[], &15u32, &99u32)?;
        let hits = records
            .query(Query::with_filter(bounds.partition_key_filter()))
            .await?;
        let found: Vec<(u32, &str)> = hits
            .iter()
            .map(|r| (r.device_id, r.seller_id.as_str()))
            .collect();
        assert_eq!(found, [(16, "a100"), (54, "a100"), (54, "a1001")]);
        // Device 54, seller a100: a prefix of the compound key.
        let prefix = template.prefix(&[&54u32 as &dyn KeyPart, &"a100"])?;
        let hits = records
            .query(Query::with_filter(prefix.partition_key_filter()))
            .await?;
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].order_number, 200003);
        Ok(())
    })
    .await;
}
