//! The secondary-index patterns on every backend (memory, a SQLite file and, with the
//! `azure` feature, Azurite): intra-partition copies in the primary's transaction,
//! inter-partition copies through the outbox, index entities in the partition, in a table
//! and in blobs, verified lookups, idempotent and ordered operations, the audit, repair and
//! backfill.

#![allow(missing_docs)]

mod support;

use std::sync::{Arc, Mutex};

use tablekit::core::blob::BlobStore;
use tablekit::core::fault::FaultyStore;
use tablekit::core::typed::KeyPart;
use tablekit::core::{AnyStore, Query, filter};
use tablekit::patterns::Error as PatternError;
use tablekit::patterns::consistency::{BoxFuture, Envelope, outbox};
use tablekit::patterns::index::operation::AddMember;
use tablekit::patterns::index::record::{SOURCE_PROPERTY, VERSION_PROPERTY};
use tablekit::patterns::index::{
    AuditOptions, Drift, EntityRef, IndexApplier, IndexOperation, IndexOperations, InlineSink,
    OutboxSink, Relay,
};
use tablekit::prelude::*;

/// The Employee of the README's derive example, as declared there.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    kind = "Employee",
    version = 1,
    partition_key = "{department}",
    row_key = "empid_{id:06}"
)]
#[index(
    name = "email",
    partition_key = "{department}",
    row_key = "email_{email}"
)] // same partition
#[index(
    name = "by_email",
    table = "EmployeesByEmail",
    partition_key = "email_{department}",
    row_key = "{email}"
)]
#[index_entity(name = "last_name", key = "{last_name}")] // id lists
struct Employee {
    department: String,
    id: u32,
    first_name: String,
    last_name: String,
    age: i32,
    email: String,
    #[entity(blob)]
    photo: Option<Vec<u8>>,
}

fn employee(department: &str, id: u32, last_name: &str, email: &str) -> Employee {
    Employee {
        department: department.into(),
        id,
        first_name: format!("First{id}"),
        last_name: last_name.into(),
        age: 30,
        email: email.into(),
        photo: None,
    }
}

fn is_active(p: &Person) -> bool {
    p.active
}

/// Every other shape: a property subset, a sparse index, an index in another partition of
/// the same table, id lists in a table and in blobs.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "People",
    kind = "Person",
    partition_key = "{team}",
    row_key = "p_{id:06}"
)]
#[index(name = "city", partition_key = "{team}", row_key = "city_{city},{id:06}", properties = ["city", "name"])]
#[index(name = "active", partition_key = "{team}", row_key = "active_{id:06}", when = is_active)]
#[index(
    name = "by_city",
    partition_key = "city_{city}",
    row_key = "{team},{id:06}"
)]
#[index_entity(
    name = "by_name",
    key = "{name}",
    storage = "table",
    table = "PeopleByName"
)]
#[index_entity(name = "by_age", key = "{age:03}", storage = "blob")]
struct Person {
    team: String,
    id: u32,
    name: String,
    city: String,
    age: u8,
    active: bool,
}

fn person(id: u32, name: &str, city: &str, age: u8, active: bool) -> Person {
    Person {
        team: "T1".into(),
        id,
        name: name.into(),
        city: city.into(),
        age,
        active,
    }
}

/// Only a same-partition id list: a last-name change is three entities in one batch.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Staff",
    kind = "Staff",
    partition_key = "{department}",
    row_key = "{id:06}"
)]
#[index_entity(name = "last_name", key = "{last_name}")]
struct Staff {
    department: String,
    id: u32,
    last_name: String,
}

/// Long RowKeys, so an id list fills pages fast.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Tags",
    kind = "Tagged",
    partition_key = "all",
    row_key = "{code}"
)]
#[index_entity(name = "tag", key = "{tag}")]
struct Tagged {
    code: String,
    tag: String,
}

/// 100 same-partition indexes: a write would need 101 operations in one batch.
#[allow(clippy::duplicated_attributes)] // Every index shares `partition_key = "{p}"`.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Wide",
    kind = "Wide",
    partition_key = "{p}",
    row_key = "w_{r}"
)]
#[index(name = "i0", partition_key = "{p}", row_key = "i0_{r}")]
#[index(name = "i1", partition_key = "{p}", row_key = "i1_{r}")]
#[index(name = "i2", partition_key = "{p}", row_key = "i2_{r}")]
#[index(name = "i3", partition_key = "{p}", row_key = "i3_{r}")]
#[index(name = "i4", partition_key = "{p}", row_key = "i4_{r}")]
#[index(name = "i5", partition_key = "{p}", row_key = "i5_{r}")]
#[index(name = "i6", partition_key = "{p}", row_key = "i6_{r}")]
#[index(name = "i7", partition_key = "{p}", row_key = "i7_{r}")]
#[index(name = "i8", partition_key = "{p}", row_key = "i8_{r}")]
#[index(name = "i9", partition_key = "{p}", row_key = "i9_{r}")]
#[index(name = "i10", partition_key = "{p}", row_key = "i10_{r}")]
#[index(name = "i11", partition_key = "{p}", row_key = "i11_{r}")]
#[index(name = "i12", partition_key = "{p}", row_key = "i12_{r}")]
#[index(name = "i13", partition_key = "{p}", row_key = "i13_{r}")]
#[index(name = "i14", partition_key = "{p}", row_key = "i14_{r}")]
#[index(name = "i15", partition_key = "{p}", row_key = "i15_{r}")]
#[index(name = "i16", partition_key = "{p}", row_key = "i16_{r}")]
#[index(name = "i17", partition_key = "{p}", row_key = "i17_{r}")]
#[index(name = "i18", partition_key = "{p}", row_key = "i18_{r}")]
#[index(name = "i19", partition_key = "{p}", row_key = "i19_{r}")]
#[index(name = "i20", partition_key = "{p}", row_key = "i20_{r}")]
#[index(name = "i21", partition_key = "{p}", row_key = "i21_{r}")]
#[index(name = "i22", partition_key = "{p}", row_key = "i22_{r}")]
#[index(name = "i23", partition_key = "{p}", row_key = "i23_{r}")]
#[index(name = "i24", partition_key = "{p}", row_key = "i24_{r}")]
#[index(name = "i25", partition_key = "{p}", row_key = "i25_{r}")]
#[index(name = "i26", partition_key = "{p}", row_key = "i26_{r}")]
#[index(name = "i27", partition_key = "{p}", row_key = "i27_{r}")]
#[index(name = "i28", partition_key = "{p}", row_key = "i28_{r}")]
#[index(name = "i29", partition_key = "{p}", row_key = "i29_{r}")]
#[index(name = "i30", partition_key = "{p}", row_key = "i30_{r}")]
#[index(name = "i31", partition_key = "{p}", row_key = "i31_{r}")]
#[index(name = "i32", partition_key = "{p}", row_key = "i32_{r}")]
#[index(name = "i33", partition_key = "{p}", row_key = "i33_{r}")]
#[index(name = "i34", partition_key = "{p}", row_key = "i34_{r}")]
#[index(name = "i35", partition_key = "{p}", row_key = "i35_{r}")]
#[index(name = "i36", partition_key = "{p}", row_key = "i36_{r}")]
#[index(name = "i37", partition_key = "{p}", row_key = "i37_{r}")]
#[index(name = "i38", partition_key = "{p}", row_key = "i38_{r}")]
#[index(name = "i39", partition_key = "{p}", row_key = "i39_{r}")]
#[index(name = "i40", partition_key = "{p}", row_key = "i40_{r}")]
#[index(name = "i41", partition_key = "{p}", row_key = "i41_{r}")]
#[index(name = "i42", partition_key = "{p}", row_key = "i42_{r}")]
#[index(name = "i43", partition_key = "{p}", row_key = "i43_{r}")]
#[index(name = "i44", partition_key = "{p}", row_key = "i44_{r}")]
#[index(name = "i45", partition_key = "{p}", row_key = "i45_{r}")]
#[index(name = "i46", partition_key = "{p}", row_key = "i46_{r}")]
#[index(name = "i47", partition_key = "{p}", row_key = "i47_{r}")]
#[index(name = "i48", partition_key = "{p}", row_key = "i48_{r}")]
#[index(name = "i49", partition_key = "{p}", row_key = "i49_{r}")]
#[index(name = "i50", partition_key = "{p}", row_key = "i50_{r}")]
#[index(name = "i51", partition_key = "{p}", row_key = "i51_{r}")]
#[index(name = "i52", partition_key = "{p}", row_key = "i52_{r}")]
#[index(name = "i53", partition_key = "{p}", row_key = "i53_{r}")]
#[index(name = "i54", partition_key = "{p}", row_key = "i54_{r}")]
#[index(name = "i55", partition_key = "{p}", row_key = "i55_{r}")]
#[index(name = "i56", partition_key = "{p}", row_key = "i56_{r}")]
#[index(name = "i57", partition_key = "{p}", row_key = "i57_{r}")]
#[index(name = "i58", partition_key = "{p}", row_key = "i58_{r}")]
#[index(name = "i59", partition_key = "{p}", row_key = "i59_{r}")]
#[index(name = "i60", partition_key = "{p}", row_key = "i60_{r}")]
#[index(name = "i61", partition_key = "{p}", row_key = "i61_{r}")]
#[index(name = "i62", partition_key = "{p}", row_key = "i62_{r}")]
#[index(name = "i63", partition_key = "{p}", row_key = "i63_{r}")]
#[index(name = "i64", partition_key = "{p}", row_key = "i64_{r}")]
#[index(name = "i65", partition_key = "{p}", row_key = "i65_{r}")]
#[index(name = "i66", partition_key = "{p}", row_key = "i66_{r}")]
#[index(name = "i67", partition_key = "{p}", row_key = "i67_{r}")]
#[index(name = "i68", partition_key = "{p}", row_key = "i68_{r}")]
#[index(name = "i69", partition_key = "{p}", row_key = "i69_{r}")]
#[index(name = "i70", partition_key = "{p}", row_key = "i70_{r}")]
#[index(name = "i71", partition_key = "{p}", row_key = "i71_{r}")]
#[index(name = "i72", partition_key = "{p}", row_key = "i72_{r}")]
#[index(name = "i73", partition_key = "{p}", row_key = "i73_{r}")]
#[index(name = "i74", partition_key = "{p}", row_key = "i74_{r}")]
#[index(name = "i75", partition_key = "{p}", row_key = "i75_{r}")]
#[index(name = "i76", partition_key = "{p}", row_key = "i76_{r}")]
#[index(name = "i77", partition_key = "{p}", row_key = "i77_{r}")]
#[index(name = "i78", partition_key = "{p}", row_key = "i78_{r}")]
#[index(name = "i79", partition_key = "{p}", row_key = "i79_{r}")]
#[index(name = "i80", partition_key = "{p}", row_key = "i80_{r}")]
#[index(name = "i81", partition_key = "{p}", row_key = "i81_{r}")]
#[index(name = "i82", partition_key = "{p}", row_key = "i82_{r}")]
#[index(name = "i83", partition_key = "{p}", row_key = "i83_{r}")]
#[index(name = "i84", partition_key = "{p}", row_key = "i84_{r}")]
#[index(name = "i85", partition_key = "{p}", row_key = "i85_{r}")]
#[index(name = "i86", partition_key = "{p}", row_key = "i86_{r}")]
#[index(name = "i87", partition_key = "{p}", row_key = "i87_{r}")]
#[index(name = "i88", partition_key = "{p}", row_key = "i88_{r}")]
#[index(name = "i89", partition_key = "{p}", row_key = "i89_{r}")]
#[index(name = "i90", partition_key = "{p}", row_key = "i90_{r}")]
#[index(name = "i91", partition_key = "{p}", row_key = "i91_{r}")]
#[index(name = "i92", partition_key = "{p}", row_key = "i92_{r}")]
#[index(name = "i93", partition_key = "{p}", row_key = "i93_{r}")]
#[index(name = "i94", partition_key = "{p}", row_key = "i94_{r}")]
#[index(name = "i95", partition_key = "{p}", row_key = "i95_{r}")]
#[index(name = "i96", partition_key = "{p}", row_key = "i96_{r}")]
#[index(name = "i97", partition_key = "{p}", row_key = "i97_{r}")]
#[index(name = "i98", partition_key = "{p}", row_key = "i98_{r}")]
#[index(name = "i99", partition_key = "{p}", row_key = "i99_{r}")]
struct Wide {
    p: String,
    r: String,
}

/// Version 1 of a type, before it declared an index; version 2 declares it.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Clients",
    kind = "Client",
    partition_key = "{region}",
    row_key = "c_{id:06}"
)]
struct ClientV1 {
    region: String,
    id: u32,
    email: String,
}

#[allow(clippy::duplicated_attributes)] // The index shares the entity's `partition_key`.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Clients",
    kind = "Client",
    partition_key = "{region}",
    row_key = "c_{id:06}"
)]
#[index(
    name = "by_email",
    table = "ClientsByEmail",
    partition_key = "{region}",
    row_key = "{email}"
)]
#[index(
    name = "local_email",
    partition_key = "{region}",
    row_key = "email_{email}"
)]
#[index_entity(
    name = "domain",
    key = "{email}",
    storage = "table",
    table = "ClientDomains"
)]
struct ClientV2 {
    region: String,
    id: u32,
    email: String,
}

/// A department holding its manager's last name: a denormalised field whose source is
/// in the same partition.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    kind = "Department",
    partition_key = "{department}",
    row_key = "dept"
)]
struct Department {
    department: String,
    manager_id: u32,
    #[entity(denormalized(
        from = "Employee",
        partition_key = "{department}",
        row_key = "empid_{manager_id:06}",
        property = "last_name"
    ))]
    manager_name: Option<String>,
}

/// A project holding its lead's email: the source is in another table.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Projects",
    kind = "Project",
    partition_key = "{code}",
    row_key = "project"
)]
struct Project {
    code: String,
    department: String,
    lead_id: u32,
    #[entity(denormalized(
        from = "Employee",
        table = "Employees",
        partition_key = "{department}",
        row_key = "empid_{lead_id:06}",
        property = "email"
    ))]
    lead_email: Option<String>,
}

/// Two versions of one type whose index carries other properties.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Notes",
    kind = "Note",
    partition_key = "{owner}",
    row_key = "n_{id:06}"
)]
#[index(name = "by_title", partition_key = "{owner}", row_key = "t_{title}", properties = ["title"])]
struct NoteV1 {
    owner: String,
    id: u32,
    title: String,
    body: String,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Notes",
    kind = "Note",
    partition_key = "{owner}",
    row_key = "n_{id:06}"
)]
#[index(name = "by_title", partition_key = "{owner}", row_key = "t_{title}", properties = ["title", "body"])]
struct NoteV2 {
    owner: String,
    id: u32,
    title: String,
    body: String,
}

/// 40 indexes in another table with long keys: one write's work is more than one outbox
/// entry holds.
#[allow(clippy::duplicated_attributes)] // Every index shares `table` and `row_key`.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "ManyCopies",
    kind = "Many",
    partition_key = "m",
    row_key = "{code}"
)]
#[index(
    name = "c0",
    table = "ManyCopiesIdx",
    partition_key = "c0",
    row_key = "{code}"
)]
#[index(
    name = "c1",
    table = "ManyCopiesIdx",
    partition_key = "c1",
    row_key = "{code}"
)]
#[index(
    name = "c2",
    table = "ManyCopiesIdx",
    partition_key = "c2",
    row_key = "{code}"
)]
#[index(
    name = "c3",
    table = "ManyCopiesIdx",
    partition_key = "c3",
    row_key = "{code}"
)]
#[index(
    name = "c4",
    table = "ManyCopiesIdx",
    partition_key = "c4",
    row_key = "{code}"
)]
#[index(
    name = "c5",
    table = "ManyCopiesIdx",
    partition_key = "c5",
    row_key = "{code}"
)]
#[index(
    name = "c6",
    table = "ManyCopiesIdx",
    partition_key = "c6",
    row_key = "{code}"
)]
#[index(
    name = "c7",
    table = "ManyCopiesIdx",
    partition_key = "c7",
    row_key = "{code}"
)]
#[index(
    name = "c8",
    table = "ManyCopiesIdx",
    partition_key = "c8",
    row_key = "{code}"
)]
#[index(
    name = "c9",
    table = "ManyCopiesIdx",
    partition_key = "c9",
    row_key = "{code}"
)]
#[index(
    name = "c10",
    table = "ManyCopiesIdx",
    partition_key = "c10",
    row_key = "{code}"
)]
#[index(
    name = "c11",
    table = "ManyCopiesIdx",
    partition_key = "c11",
    row_key = "{code}"
)]
#[index(
    name = "c12",
    table = "ManyCopiesIdx",
    partition_key = "c12",
    row_key = "{code}"
)]
#[index(
    name = "c13",
    table = "ManyCopiesIdx",
    partition_key = "c13",
    row_key = "{code}"
)]
#[index(
    name = "c14",
    table = "ManyCopiesIdx",
    partition_key = "c14",
    row_key = "{code}"
)]
#[index(
    name = "c15",
    table = "ManyCopiesIdx",
    partition_key = "c15",
    row_key = "{code}"
)]
#[index(
    name = "c16",
    table = "ManyCopiesIdx",
    partition_key = "c16",
    row_key = "{code}"
)]
#[index(
    name = "c17",
    table = "ManyCopiesIdx",
    partition_key = "c17",
    row_key = "{code}"
)]
#[index(
    name = "c18",
    table = "ManyCopiesIdx",
    partition_key = "c18",
    row_key = "{code}"
)]
#[index(
    name = "c19",
    table = "ManyCopiesIdx",
    partition_key = "c19",
    row_key = "{code}"
)]
#[index(
    name = "c20",
    table = "ManyCopiesIdx",
    partition_key = "c20",
    row_key = "{code}"
)]
#[index(
    name = "c21",
    table = "ManyCopiesIdx",
    partition_key = "c21",
    row_key = "{code}"
)]
#[index(
    name = "c22",
    table = "ManyCopiesIdx",
    partition_key = "c22",
    row_key = "{code}"
)]
#[index(
    name = "c23",
    table = "ManyCopiesIdx",
    partition_key = "c23",
    row_key = "{code}"
)]
#[index(
    name = "c24",
    table = "ManyCopiesIdx",
    partition_key = "c24",
    row_key = "{code}"
)]
#[index(
    name = "c25",
    table = "ManyCopiesIdx",
    partition_key = "c25",
    row_key = "{code}"
)]
#[index(
    name = "c26",
    table = "ManyCopiesIdx",
    partition_key = "c26",
    row_key = "{code}"
)]
#[index(
    name = "c27",
    table = "ManyCopiesIdx",
    partition_key = "c27",
    row_key = "{code}"
)]
#[index(
    name = "c28",
    table = "ManyCopiesIdx",
    partition_key = "c28",
    row_key = "{code}"
)]
#[index(
    name = "c29",
    table = "ManyCopiesIdx",
    partition_key = "c29",
    row_key = "{code}"
)]
#[index(
    name = "c30",
    table = "ManyCopiesIdx",
    partition_key = "c30",
    row_key = "{code}"
)]
#[index(
    name = "c31",
    table = "ManyCopiesIdx",
    partition_key = "c31",
    row_key = "{code}"
)]
#[index(
    name = "c32",
    table = "ManyCopiesIdx",
    partition_key = "c32",
    row_key = "{code}"
)]
#[index(
    name = "c33",
    table = "ManyCopiesIdx",
    partition_key = "c33",
    row_key = "{code}"
)]
#[index(
    name = "c34",
    table = "ManyCopiesIdx",
    partition_key = "c34",
    row_key = "{code}"
)]
#[index(
    name = "c35",
    table = "ManyCopiesIdx",
    partition_key = "c35",
    row_key = "{code}"
)]
#[index(
    name = "c36",
    table = "ManyCopiesIdx",
    partition_key = "c36",
    row_key = "{code}"
)]
#[index(
    name = "c37",
    table = "ManyCopiesIdx",
    partition_key = "c37",
    row_key = "{code}"
)]
#[index(
    name = "c38",
    table = "ManyCopiesIdx",
    partition_key = "c38",
    row_key = "{code}"
)]
#[index(
    name = "c39",
    table = "ManyCopiesIdx",
    partition_key = "c39",
    row_key = "{code}"
)]
struct ManyCopies {
    code: String,
}

/// Teams of a department that copy the department head's last name (many dependents).
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    kind = "Team",
    partition_key = "{department}",
    row_key = "team_{n:04}"
)]
struct Team {
    department: String,
    n: u32,
    head_id: u32,
    #[entity(denormalized(
        from = "Employee",
        partition_key = "{department}",
        row_key = "empid_{head_id:06}",
        property = "last_name"
    ))]
    head_name: Option<String>,
}

/// A sink that keeps every message instead of publishing it (the tests then deliver them
/// in any order, any number of times).
#[derive(Clone, Default)]
struct RecordingSink {
    messages: Arc<Mutex<Vec<IndexOperations>>>,
}

impl OutboxSink for RecordingSink {
    fn publish<'a>(
        &'a self,
        envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit::patterns::Result<()>> {
        let messages = Arc::clone(&self.messages);
        Box::pin(async move {
            if envelope.kind == "index" {
                let operations: IndexOperations =
                    serde_json::from_value(envelope.payload.clone()).expect("index work");
                messages.lock().expect("lock").push(operations);
            }
            Ok(())
        })
    }
}

impl RecordingSink {
    fn take(&self) -> Vec<IndexOperations> {
        std::mem::take(&mut *self.messages.lock().expect("lock"))
    }
}

async fn raw(store: &AnyStore, table: &str, pk: &str, rk: &str) -> Option<Entity> {
    store.get(table, pk, rk, None).await.expect("get")
}

fn ids(refs: &[EntityRef]) -> Vec<String> {
    let mut ids: Vec<String> = refs.iter().map(|r| r.row_key.clone()).collect();
    ids.sort();
    ids
}

async fn intra_partition_copies_follow_every_write(store: AnyStore) {
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    let mut jun = employee("Sales", 1, "Cao", "jun@x.com");
    employees.insert(&jun).await.expect("insert");
    let copy = raw(&store, "Employees", "Sales", "email_jun@x.com")
        .await
        .expect("copy");
    assert!(copy.get("FirstName").or(copy.get("first_name")).is_some());
    assert_eq!(
        copy.get("EntityKind"),
        Some(&Value::from("Employee#email")),
        "a copy is marked, so queries of the kind skip it"
    );
    let hit = employees
        .lookup_named("email")
        .keys(&[&"Sales"])
        .keys(&[&"jun@x.com"])
        .get()
        .await
        .expect("find")
        .expect("hit");
    assert_eq!((hit.row_key.as_str(), &hit.value), ("empid_000001", &jun));
    // The typed table's queries return primaries only.
    assert_eq!(
        employees
            .table()
            .partition("Sales")
            .await
            .expect("scan")
            .len(),
        1
    );

    jun.email = "jun.cao@x.com".into();
    employees.upsert(&jun).await.expect("change email");
    assert!(
        raw(&store, "Employees", "Sales", "email_jun@x.com")
            .await
            .is_none(),
        "old copy gone"
    );
    assert!(
        raw(&store, "Employees", "Sales", "email_jun.cao@x.com")
            .await
            .is_some()
    );
    assert!(
        employees
            .lookup_named("email")
            .keys(&[&"Sales"])
            .keys(&[&"jun@x.com"])
            .get()
            .await
            .expect("find")
            .is_none()
    );

    employees
        .delete("Sales", "empid_000001", IfMatch::Any)
        .await
        .expect("delete");
    // The published work's outbox entries are removed after the writes returned.
    employees.flush().await;
    let left = store
        .query_all("Employees", Query::new())
        .await
        .expect("scan");
    // What stays for the grace period is the tombstone and its burial.
    assert!(
        left.len() == 2
            && left
                .iter()
                .any(tablekit::patterns::index::record::is_tombstone)
            && left.iter().any(outbox::waiting),
        "primary, copies, id lists' members and outbox gone: {left:?}"
    );
    assert!(
        employees
            .get("Sales", "empid_000001")
            .await
            .expect("get")
            .is_none()
    );
    support::bury_tombstones(&store).await;
    let left = store
        .query_all("Employees", Query::new())
        .await
        .expect("scan");
    assert!(left.is_empty(), "buried after the grace period: {left:?}");
    let by_email = store
        .query_all("EmployeesByEmail", Query::new())
        .await
        .expect("scan");
    assert!(
        by_email.is_empty(),
        "the other table's copy is gone too: {by_email:?}"
    );
}

async fn email_ranges_come_back_in_index_order(store: AnyStore) {
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    for (id, email) in [
        (1, "dora@x"),
        (2, "anna@x"),
        (3, "bob@x"),
        (4, "carl@x"),
        (5, "bea@x"),
    ] {
        employees
            .insert(&employee("Sales", id, "L", email))
            .await
            .expect("insert");
    }
    employees
        .insert(&employee("Ops", 6, "L", "b@ops"))
        .await
        .expect("insert");
    let hits = employees
        .lookup_named("email")
        .keys(&[&"Sales"])
        .keys(&[])
        .range(&"a", &"c")
        .all()
        .await
        .expect("range");
    let emails: Vec<&str> = hits.iter().map(|h| h.email.as_str()).collect();
    assert_eq!(
        emails,
        ["anna@x", "bea@x", "bob@x"],
        "emails from a to c, in index order"
    );
    let across = employees
        .lookup_named("by_email")
        .keys(&[&"Sales"])
        .keys(&[])
        .range(&"b", &"d")
        .all()
        .await
        .expect("range in the other table");
    let emails: Vec<&str> = across.iter().map(|h| h.email.as_str()).collect();
    assert_eq!(emails, ["bea@x", "bob@x", "carl@x"]);
    assert!(
        across.iter().all(|h| h.partition_key == "Sales"),
        "hits carry the primary's keys"
    );
}

async fn a_taken_index_value_is_refused_and_nothing_is_written(store: AnyStore) {
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    employees
        .insert(&employee("Sales", 1, "A", "same@x"))
        .await
        .expect("first");
    let err = employees
        .insert(&employee("Sales", 2, "B", "same@x"))
        .await
        .expect_err("the value is taken");
    assert!(
        matches!(&err, PatternError::IndexValueTaken { index, .. } if index == "email"),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert!(
        raw(&store, "Employees", "Sales", "empid_000002")
            .await
            .is_none(),
        "nothing written"
    );
    let again = employees
        .insert(&employee("Sales", 1, "A", "other@x"))
        .await
        .expect_err("the primary exists");
    assert_eq!(again.kind(), ErrorKind::AlreadyExists);
    let stale = employees
        .replace(
            &employee("Sales", 1, "A", "x@x"),
            IfMatch::ETag(ETag::new("W/\"stale\"")),
        )
        .await
        .expect_err("stale etag");
    assert_eq!(stale.kind(), ErrorKind::PreconditionFailed);
    let missing = employees
        .replace(&employee("Sales", 9, "A", "nine@x"), IfMatch::Any)
        .await
        .expect_err("missing");
    assert_eq!(missing.kind(), ErrorKind::NotFound);
}

async fn subsets_and_sparse_indexes_follow_the_declaration(store: AnyStore) {
    let blobs = BlobStore::memory();
    let people = IndexedTable::<Person, _>::options()
        .blobs(blobs)
        .inline_apply()
        .build(store.clone())
        .expect("options");
    people.create().await.expect("open");
    let mut ann = person(1, "Ann", "Oslo", 40, false);
    people.insert(&ann).await.expect("insert");
    let copy = raw(&store, "People", "T1", "city_Oslo,000001")
        .await
        .expect("subset copy");
    let mut names: Vec<&str> = copy.properties.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "EntityKind",
            SOURCE_PROPERTY,
            VERSION_PROPERTY,
            "city",
            "name"
        ],
        "the copy carries the declared subset"
    );
    assert!(
        raw(&store, "People", "T1", "active_000001").await.is_none(),
        "inactive: no copy"
    );
    ann.active = true;
    people.upsert(&ann).await.expect("activate");
    assert!(
        raw(&store, "People", "T1", "active_000001").await.is_some(),
        "sparse copy added"
    );
    ann.active = false;
    people.upsert(&ann).await.expect("deactivate");
    assert!(
        raw(&store, "People", "T1", "active_000001").await.is_none(),
        "sparse copy removed"
    );
    let subset = people
        .lookup_named("city")
        .keys(&[&"T1"])
        .entities()
        .await
        .expect("find entities");
    assert_eq!(subset.len(), 1);
    // The other-partition index of the same table.
    let elsewhere = raw(&store, "People", "city_Oslo", "T1,000001")
        .await
        .expect("copy");
    assert_eq!(elsewhere.get("name"), Some(&Value::from("Ann")));
}

async fn writes_past_the_batch_limit_are_refused_before_any_io(store: AnyStore) {
    let store = FaultyStore::new(store);
    let wide = IndexedTable::<Wide, _>::options()
        .build(store.clone())
        .expect("options");
    wide.create().await.expect("open");
    let before = store.calls();
    let err = wide
        .insert(&Wide {
            p: "p".into(),
            r: "r".into(),
        })
        .await
        .expect_err("101 operations do not fit a batch");
    assert_eq!(err.kind(), ErrorKind::TooLarge);
    assert!(err.to_string().contains("101"), "{err}");
    assert_eq!(store.calls(), before, "refused before any I/O");
}

async fn the_outbox_keeps_follow_up_work_until_the_relay_publishes_it(store: AnyStore) {
    // No sink: as if the writer died right after its commit.
    let employees = IndexedTable::<Employee, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    let outcome = employees
        .insert(&employee("Sales", 7, "Lee", "lee@x"))
        .await
        .expect("insert");
    assert_eq!((outcome.operations, outcome.published), (1, false));
    assert_eq!(
        outbox::scan(&store, "Employees")
            .await
            .expect("outbox")
            .len(),
        1
    );
    assert!(
        raw(&store, "EmployeesByEmail", "email_Sales", "lee@x")
            .await
            .is_none()
    );
    assert!(
        raw(&store, "Employees", "Sales", "email_lee@x")
            .await
            .is_some(),
        "atomic copy there"
    );

    let handlers = tablekit::patterns::index::handlers(store.clone(), None);
    let sink: Arc<dyn OutboxSink> = Arc::new(InlineSink::new(handlers));
    let relay = Relay::options()
        .grace(std::time::Duration::ZERO)
        .build(store.clone(), sink);
    let report = relay.run_once().await.expect("relay");
    assert_eq!(report.published, 1);
    assert!(
        raw(&store, "EmployeesByEmail", "email_Sales", "lee@x")
            .await
            .is_some(),
        "copy made"
    );
    assert!(
        outbox::scan(&store, "Employees")
            .await
            .expect("outbox")
            .is_empty()
    );
    assert_eq!(
        relay.run_once().await.expect("relay").published,
        0,
        "nothing left"
    );
    // A relay with a grace period leaves young entries to their writers.
    employees
        .insert(&employee("Sales", 8, "Lee", "lee8@x"))
        .await
        .expect("insert");
    let patient = Relay::new(store.clone(), Arc::new(RecordingSink::default()));
    let report = patient.run_once().await.expect("relay");
    assert_eq!((report.published, report.deferred), (0, 1));
}

async fn late_and_repeated_messages_never_bring_back_an_older_copy(store: AnyStore) {
    let sink = RecordingSink::default();
    let employees = IndexedTable::<Employee, _>::options()
        .sink(Arc::new(sink.clone()))
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    let mut kim = employee("Sales", 3, "Kim", "a@x");
    employees.insert(&kim).await.expect("v1");
    kim.first_name = "Kimberly".into();
    employees.upsert(&kim).await.expect("v2, same email");
    kim.email = "b@x".into();
    employees.upsert(&kim).await.expect("v3, new email");
    let messages = sink.take();
    assert_eq!(messages.len(), 3);
    let applier = IndexApplier::new(store.clone());
    // Newest first, then the older ones, then everything again.
    for message in messages.iter().rev().chain(messages.iter()) {
        applier.apply_all(message).await.expect("apply");
    }
    assert!(
        raw(&store, "EmployeesByEmail", "email_Sales", "a@x")
            .await
            .is_none(),
        "old copy gone"
    );
    let copy = raw(&store, "EmployeesByEmail", "email_Sales", "b@x")
        .await
        .expect("new copy");
    assert_eq!(copy.get("first_name"), Some(&Value::from("Kimberly")));
    let primary = raw(&store, "Employees", "Sales", "empid_000003")
        .await
        .expect("primary");
    assert_eq!(
        copy.get(VERSION_PROPERTY),
        primary.get(VERSION_PROPERTY),
        "the newest version won"
    );
    // The delete's message, delivered before and after an older put: the copy stays gone.
    employees
        .delete("Sales", "empid_000003", IfMatch::Any)
        .await
        .expect("delete");
    let delete = sink.take();
    for message in delete.iter().chain(messages.iter()).chain(delete.iter()) {
        applier.apply_all(message).await.expect("apply");
    }
    assert!(
        raw(&store, "EmployeesByEmail", "email_Sales", "b@x")
            .await
            .is_none()
    );
    assert!(
        raw(&store, "EmployeesByEmail", "email_Sales", "a@x")
            .await
            .is_none()
    );
}

async fn verified_lookups_never_return_a_stale_hit(store: AnyStore) {
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    let mut ida = employee("Ops", 4, "Ng", "ida@x");
    employees.insert(&ida).await.expect("insert");
    // The email changes while the worker is away: the other table's copy is stale.
    let lagging = IndexedTable::<Employee, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    ida.email = "ida.ng@x".into();
    lagging.upsert(&ida).await.expect("change");
    let stale = employees
        .lookup_named("by_email")
        .keys(&[&"Ops"])
        .keys(&[&"ida@x"])
        .get()
        .await
        .expect("find");
    assert!(stale.is_some(), "the stale copy is still there");
    assert!(
        employees
            .lookup_named("by_email")
            .keys(&[&"Ops"])
            .keys(&[&"ida@x"])
            .verified()
            .get()
            .await
            .expect("find")
            .is_none(),
        "a verified lookup checks the primary"
    );
}

async fn partition_id_lists_move_with_a_last_name_change_in_one_transaction(store: AnyStore) {
    let store = FaultyStore::new(store);
    let staff = IndexedTable::<Staff, _>::options()
        .build(store.clone())
        .expect("options");
    staff.create().await.expect("open");
    for id in 1..=3 {
        staff
            .insert(&Staff {
                department: "D".into(),
                id,
                last_name: "Jones".into(),
            })
            .await
            .expect("insert");
    }
    let jones = staff
        .list_named("last_name")
        .in_partition("D")
        .keys(&[&"Jones"])
        .ids()
        .await
        .expect("ids");
    assert_eq!(ids(&jones), ["000001", "000002", "000003"]);
    let before = store.writes();
    staff
        .upsert(&Staff {
            department: "D".into(),
            id: 2,
            last_name: "Smith".into(),
        })
        .await
        .expect("rename");
    assert_eq!(
        store.writes() - before,
        1,
        "primary and both id lists in one batch"
    );
    let jones = staff
        .list_named("last_name")
        .in_partition("D")
        .keys(&[&"Jones"])
        .ids()
        .await
        .expect("ids");
    let smith = staff
        .list_named("last_name")
        .in_partition("D")
        .keys(&[&"Smith"])
        .ids()
        .await
        .expect("ids");
    assert_eq!(
        (ids(&jones), ids(&smith)),
        (
            vec!["000001".to_owned(), "000003".to_owned()],
            vec!["000002".to_owned()]
        )
    );
    let entities = staff
        .list_named("last_name")
        .in_partition("D")
        .keys(&[&"Jones"])
        .concurrency(4)
        .all()
        .await
        .expect("entities");
    assert_eq!(entities.len(), 2);
    let missing = staff.list_named("last_name").keys(&[&"Jones"]).ids().await;
    assert!(
        missing.is_err(),
        "a partition-stored list needs the partition"
    );
}

async fn eight_concurrent_writers_of_one_last_name_lose_no_id(store: AnyStore) {
    let staff = IndexedTable::<Staff, _>::options()
        .build(store.clone())
        .expect("options");
    staff.create().await.expect("open");
    let tasks: Vec<_> = (0..8u32)
        .map(|task| {
            let staff = staff.clone();
            tokio::spawn(async move {
                for n in 0..5u32 {
                    staff
                        .insert(&Staff {
                            department: "D".into(),
                            id: task * 100 + n,
                            last_name: "Jones".into(),
                        })
                        .await
                        .expect("insert");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    let jones = staff
        .list_named("last_name")
        .in_partition("D")
        .keys(&[&"Jones"])
        .ids()
        .await
        .expect("ids");
    assert_eq!(jones.len(), 40, "no id lost");
    let report = staff.audit(&AuditOptions::default()).await.expect("audit");
    assert!(report.is_clean(), "{report:?}");
}

async fn table_and_blob_id_lists_are_kept_by_the_worker(store: AnyStore) {
    let blobs = BlobStore::memory();
    table_and_blob_id_lists_with(store, blobs).await;
}

async fn table_and_blob_id_lists_with(store: AnyStore, blobs: BlobStore) {
    let sink = RecordingSink::default();
    let people = IndexedTable::<Person, _>::options()
        .blobs(blobs.clone())
        .sink(Arc::new(sink.clone()))
        .build(store.clone())
        .expect("options");
    people.create().await.expect("open");
    let mut a = person(1, "Ann", "Oslo", 40, true);
    people.insert(&a).await.expect("insert");
    people
        .insert(&person(2, "Ann", "Rome", 40, true))
        .await
        .expect("insert");
    a.name = "Anne".into();
    a.age = 41;
    people.upsert(&a).await.expect("rename");
    let applier = IndexApplier::new(store.clone()).with_blobs(blobs.clone());
    let messages = sink.take();
    // Out of order, twice.
    for message in messages.iter().rev().chain(messages.iter()) {
        applier.apply_all(message).await.expect("apply");
    }
    let ann = people
        .list_named("by_name")
        .keys(&[&"Ann"])
        .ids()
        .await
        .expect("ids");
    let anne = people
        .list_named("by_name")
        .keys(&[&"Anne"])
        .ids()
        .await
        .expect("ids");
    assert_eq!(
        (ids(&ann), ids(&anne)),
        (vec!["p_000002".to_owned()], vec!["p_000001".to_owned()])
    );
    let forty = people
        .list_named("by_age")
        .keys(&[&40u8])
        .ids()
        .await
        .expect("ids");
    let forty_one = people
        .list_named("by_age")
        .keys(&[&41u8])
        .ids()
        .await
        .expect("ids");
    assert_eq!(
        (ids(&forty), ids(&forty_one)),
        (vec!["p_000002".to_owned()], vec!["p_000001".to_owned()])
    );
    let entities = people
        .list_named("by_age")
        .keys(&[&41u8])
        .concurrency(4)
        .all()
        .await
        .expect("entities");
    assert_eq!(
        entities.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["Anne"]
    );
    let report = people.audit(&AuditOptions::default()).await.expect("audit");
    assert!(report.is_clean(), "{report:?}");
    // Without a blob store, a blob-stored list is a clear error.
    let no_blobs = IndexedTable::<Person, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    let err = no_blobs
        .list_named("by_age")
        .keys(&[&41u8])
        .ids()
        .await
        .expect_err("no blobs");
    assert!(matches!(err, PatternError::NoBlobStore { .. }), "{err}");
}

async fn long_id_lists_continue_on_more_pages(store: AnyStore) {
    let tags = IndexedTable::<Tagged, _>::options()
        .build(store.clone())
        .expect("options");
    tags.create().await.expect("open");
    let long = "x".repeat(400);
    for n in 0..160 {
        tags.insert(&Tagged {
            code: format!("{n:04}{long}"),
            tag: "red".into(),
        })
        .await
        .expect("insert");
    }
    let members = tags
        .list_named("tag")
        .in_partition("all")
        .keys(&[&"red"])
        .ids()
        .await
        .expect("ids");
    assert_eq!(members.len(), 160, "every id, over several pages");
    let pages = store
        .query_all(
            "Tags",
            Query::with_filter(filter::property_named("EntityKind").eq("TablekitIndexEntity")),
        )
        .await
        .expect("pages");
    assert!(
        pages.len() >= 3,
        "the list continued on more pages: {}",
        pages.len()
    );
    tags.delete("all", &format!("0000{long}"), IfMatch::Any)
        .await
        .expect("delete");
    assert_eq!(
        tags.list_named("tag")
            .in_partition("all")
            .keys(&[&"red"])
            .ids()
            .await
            .expect("ids")
            .len(),
        159
    );
}

async fn the_audit_finds_injected_drift_and_repairs_it(store: AnyStore) {
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    for id in 1..=6 {
        employees
            .insert(&employee(
                "Sales",
                id,
                if id % 2 == 0 { "Even" } else { "Odd" },
                &format!("e{id}@x"),
            ))
            .await
            .expect("insert");
    }
    let clean = employees
        .audit(&AuditOptions::default())
        .await
        .expect("audit");
    assert!(clean.is_clean(), "{clean:?}");
    assert_eq!(clean.primaries, 6);
    // Drift: a missing same-partition copy, a stale other-table copy, an orphan copy, a
    // membership lost from an id list.
    store
        .delete("Employees", "Sales", "email_e1@x", IfMatch::Any)
        .await
        .expect("drop copy");
    let mut stale = raw(&store, "EmployeesByEmail", "email_Sales", "e2@x")
        .await
        .expect("copy");
    stale
        .properties
        .insert("first_name".into(), Value::from("Wrong"));
    store
        .insert_or_replace("EmployeesByEmail", stale.clone())
        .await
        .expect("stale");
    let mut orphan = raw(&store, "EmployeesByEmail", "email_Sales", "e3@x")
        .await
        .expect("copy");
    orphan.row_key = "ghost@x".into();
    store
        .insert("EmployeesByEmail", orphan)
        .await
        .expect("orphan");
    let lost = Staff {
        department: "x".into(),
        id: 0,
        last_name: String::new(),
    };
    drop(lost);
    let pages = store
        .query_all(
            "Employees",
            Query::with_filter(filter::property_named("EntityKind").eq("TablekitIndexEntity")),
        )
        .await
        .expect("pages");
    let mut odd = pages
        .into_iter()
        .find(|p| p.get("Value") == Some(&Value::from("Odd")))
        .expect("odd page");
    odd.properties.insert(
        "Ids".into(),
        Value::from("[\"empid_000001\",\"empid_000003\",\"empid_000099\"]"),
    );
    store
        .insert_or_replace("Employees", odd)
        .await
        .expect("drift the list");

    let found = employees
        .audit(&AuditOptions::default())
        .await
        .expect("audit");
    assert_eq!(
        (found.missing, found.stale, found.orphaned, found.repaired),
        (2, 1, 2, 0),
        "{:#?}",
        found.findings
    );
    assert!(
        found
            .findings
            .iter()
            .any(|f| f.drift == Drift::Stale && f.index == "by_email")
    );
    let repaired = employees
        .audit(&AuditOptions {
            repair: true,
            ..AuditOptions::default()
        })
        .await
        .expect("repair");
    assert_eq!(repaired.repaired, 5, "{:#?}", repaired.findings);
    let after = employees
        .audit(&AuditOptions::default())
        .await
        .expect("audit");
    assert!(after.is_clean(), "{:#?}", after.findings);
    let odd_ids = employees
        .list_named("last_name")
        .in_partition("Sales")
        .keys(&[&"Odd"])
        .ids()
        .await
        .expect("ids");
    assert_eq!(
        ids(&odd_ids),
        ["empid_000001", "empid_000003", "empid_000005"]
    );
    assert!(
        raw(&store, "EmployeesByEmail", "email_Sales", "ghost@x")
            .await
            .is_none()
    );
}

async fn backfill_adds_an_index_declared_after_the_data(store: AnyStore) {
    let v1 = Table::<ClientV1, _>::new(store.clone());
    v1.create().await.expect("create");
    for id in 1..=5 {
        v1.insert(&ClientV1 {
            region: "EU".into(),
            id,
            email: format!("c{id}@x"),
        })
        .await
        .expect("insert");
    }
    let v2 = IndexedTable::<ClientV2, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    v2.create().await.expect("open registers the new index");
    let progress_calls = Arc::new(Mutex::new(0u64));
    let calls = Arc::clone(&progress_calls);
    let options = AuditOptions {
        progress: Some(Arc::new(move |_| *calls.lock().expect("lock") += 1)),
        progress_every: 2,
        ..AuditOptions::default()
    };
    // The deployable path: from the registry, without the type.
    let report = tablekit::patterns::index::backfill(&store, "Clients", "by_email", &options)
        .await
        .expect("backfill");
    assert_eq!(report.repaired, 5);
    assert!(
        *progress_calls.lock().expect("lock") >= 2,
        "progress was reported"
    );
    let hit = v2
        .lookup_named("by_email")
        .keys(&[&"EU"])
        .keys(&[&"c3@x"])
        .get()
        .await
        .expect("find")
        .expect("hit");
    assert_eq!(hit.id, 3);
    // The typed path, for the other two.
    v2.backfill("local_email", &AuditOptions::default())
        .await
        .expect("backfill");
    v2.backfill("domain", &AuditOptions::default())
        .await
        .expect("backfill");
    assert!(
        v2.lookup_named("local_email")
            .keys(&[&"EU"])
            .keys(&[&"c5@x"])
            .get()
            .await
            .expect("find")
            .is_some()
    );
    assert_eq!(
        v2.list_named("domain")
            .keys(&[&"c4@x"])
            .ids()
            .await
            .expect("ids")
            .len(),
        1
    );
    let again = tablekit::patterns::index::backfill(&store, "Clients", "by_email", &options)
        .await
        .expect("backfill again");
    assert_eq!(again.repaired, 0, "a second backfill finds nothing to do");
    let audit = v2.audit(&AuditOptions::default()).await.expect("audit");
    assert!(audit.is_clean(), "{:#?}", audit.findings);
    // Writes after the backfill keep every index.
    v2.upsert(&ClientV2 {
        region: "EU".into(),
        id: 3,
        email: "new3@x".into(),
    })
    .await
    .expect("update");
    assert!(
        v2.lookup_named("by_email")
            .keys(&[&"EU"])
            .keys(&[&"c3@x"])
            .get()
            .await
            .expect("find")
            .is_none()
    );
    assert!(
        v2.lookup_named("by_email")
            .keys(&[&"EU"])
            .keys(&[&"new3@x"])
            .get()
            .await
            .expect("find")
            .is_some()
    );
    let err = tablekit::patterns::index::backfill(&store, "Clients", "nope", &options)
        .await
        .expect_err("undeclared");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

async fn an_interrupted_audit_resumes_from_its_checkpoint(store: AnyStore) {
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    for id in 1..=12 {
        employees
            .insert(&employee("Sales", id, "Same", &format!("r{id}@x")))
            .await
            .expect("insert");
    }
    // The outbox entries are gone before the audits, which count what they scan.
    employees.flush().await;
    store
        .delete("Employees", "Sales", "email_r11@x", IfMatch::Any)
        .await
        .expect("drift");
    let job = Some("audit-resume".to_owned());
    let first = employees
        .audit(&AuditOptions {
            job: job.clone(),
            stop_after: Some(5),
            progress_every: 2,
            ..AuditOptions::default()
        })
        .await
        .expect("first part");
    assert_eq!(first.scanned, 5);
    assert!(
        tablekit::patterns::index::AuditResult::list(&store)
            .await
            .expect("results")
            .is_empty(),
        "a run stopped part way is not the table's last audit"
    );
    let rest = employees
        .audit(&AuditOptions {
            job: job.clone(),
            ..AuditOptions::default()
        })
        .await
        .expect("the rest");
    assert!(rest.resumed);
    let saved = tablekit::patterns::index::AuditResult::list(&store)
        .await
        .expect("results");
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(
        (saved[0].0.as_str(), saved[0].1.report.missing),
        ("Employees", 1),
        "the finished run is the last audit"
    );
    let whole = employees
        .audit(&AuditOptions::default())
        .await
        .expect("whole");
    assert_eq!(
        rest.scanned, whole.scanned,
        "the resumed run covers the rest, once"
    );
    assert_eq!((rest.missing, whole.missing), (1, 1));
    let fresh = employees
        .audit(&AuditOptions {
            job,
            ..AuditOptions::default()
        })
        .await
        .expect("fresh");
    assert!(!fresh.resumed, "a finished run leaves no checkpoint");
}

async fn denormalized_fields_follow_their_source(store: AnyStore) {
    // The dependents' types are registered first, so the employees' writes track them.
    let departments = IndexedTable::<Department, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    departments.create().await.expect("open");
    let projects = IndexedTable::<Project, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    projects.create().await.expect("open");
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    let mut lee = employee("Sales", 7, "Lee", "lee@x");
    employees.insert(&lee).await.expect("insert");
    employees
        .insert(&employee("Sales", 8, "Park", "park@x"))
        .await
        .expect("insert");
    let mut sales = Department {
        department: "Sales".into(),
        manager_id: 7,
        manager_name: None,
    };
    departments.insert(&sales).await.expect("department");
    let name = |d: Option<Stored<Department>>| d.and_then(|d| d.value.manager_name);
    assert_eq!(
        name(departments.get("Sales", "dept").await.expect("get")),
        Some("Lee".to_owned()),
        "filled from the source on write"
    );
    projects
        .insert(&Project {
            code: "P1".into(),
            department: "Sales".into(),
            lead_id: 7,
            lead_email: None,
        })
        .await
        .expect("project");

    // The source changes: the department (same partition) in the same transaction, the
    // project (another table) through the worker.
    lee.last_name = "Li".into();
    lee.email = "li@x".into();
    employees.upsert(&lee).await.expect("rename");
    assert_eq!(
        name(departments.get("Sales", "dept").await.expect("get")),
        Some("Li".to_owned())
    );
    let project = projects
        .get("P1", "project")
        .await
        .expect("get")
        .expect("there");
    assert_eq!(project.lead_email.as_deref(), Some("li@x"));

    // The department's manager changes: the link to the old manager goes.
    sales.manager_id = 8;
    departments.upsert(&sales).await.expect("new manager");
    assert_eq!(
        name(departments.get("Sales", "dept").await.expect("get")),
        Some("Park".to_owned())
    );
    lee.last_name = "Lee".into();
    employees.upsert(&lee).await.expect("rename back");
    assert_eq!(
        name(departments.get("Sales", "dept").await.expect("get")),
        Some("Park".to_owned()),
        "the old manager no longer reaches the department"
    );
    let clean = employees
        .audit(&AuditOptions::default())
        .await
        .expect("audit");
    assert!(clean.is_clean(), "{:#?}", clean.findings);

    // Drift in a copied value is found and repaired.
    let mut raw_dept = raw(&store, "Employees", "Sales", "dept")
        .await
        .expect("dept");
    raw_dept
        .properties
        .insert("manager_name".into(), Value::from("Wrong"));
    store
        .insert_or_replace("Employees", raw_dept)
        .await
        .expect("drift");
    let found = employees
        .audit(&AuditOptions::default())
        .await
        .expect("audit");
    assert_eq!(found.stale, 1, "{:#?}", found.findings);
    let repaired = employees
        .audit(&AuditOptions {
            repair: true,
            ..AuditOptions::default()
        })
        .await
        .expect("repair");
    assert_eq!(repaired.repaired, 1);
    assert_eq!(
        name(departments.get("Sales", "dept").await.expect("get")),
        Some("Park".to_owned())
    );
    // Deleting the department removes its link.
    departments
        .delete("Sales", "dept", IfMatch::Any)
        .await
        .expect("delete");
    let links = store
        .query_all(
            "Employees",
            Query::with_filter(filter::property_named("EntityKind").eq("TablekitLink")),
        )
        .await
        .expect("links");
    let dependents: Vec<&Value> = links.iter().filter_map(|l| l.get("Dependent")).collect();
    assert_eq!(
        dependents,
        [&Value::from(
            "{\"table\":\"Projects\",\"partition_key\":\"P1\",\"row_key\":\"project\"}"
        )],
        "only the project's link is left"
    );
    let project_audit = projects
        .audit(&AuditOptions::default())
        .await
        .expect("audit");
    assert!(project_audit.is_clean(), "{:#?}", project_audit.findings);
}

async fn a_late_link_removal_never_undoes_a_newer_claim(store: AnyStore) {
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    employees
        .insert(&employee("Sales", 7, "Lee", "lee@x"))
        .await
        .expect("source");
    let sink = RecordingSink::default();
    let projects = IndexedTable::<Project, _>::options()
        .sink(Arc::new(sink.clone()))
        .build(store.clone())
        .expect("options");
    projects.create().await.expect("open");
    let project = Project {
        code: "P9".into(),
        department: "Sales".into(),
        lead_id: 7,
        lead_email: None,
    };
    projects.insert(&project).await.expect("insert");
    projects
        .delete("P9", "project", IfMatch::Any)
        .await
        .expect("delete");
    projects.insert(&project).await.expect("insert again");
    let applier = IndexApplier::new(store.clone());
    // The delete's link removal arrives after the new claim, and twice.
    for message in sink.take().iter().chain(sink.take().iter()) {
        applier.apply_all(message).await.expect("apply");
    }
    let links = store
        .query_all(
            "Employees",
            Query::with_filter(filter::property_named("EntityKind").eq("TablekitLink")),
        )
        .await
        .expect("links");
    assert_eq!(links.len(), 1, "the re-inserted project keeps its link");
    let audit = projects
        .audit(&AuditOptions::default())
        .await
        .expect("audit");
    assert!(audit.is_clean(), "{:#?}", audit.findings);
}

async fn changing_an_indexs_properties_updates_copies_in_place(store: AnyStore) {
    let v1 = IndexedTable::<NoteV1, _>::options()
        .build(store.clone())
        .expect("options");
    v1.create().await.expect("open");
    v1.insert(&NoteV1 {
        owner: "o".into(),
        id: 1,
        title: "hello".into(),
        body: "text".into(),
    })
    .await
    .expect("insert");
    let v2 = IndexedTable::<NoteV2, _>::options()
        .build(store.clone())
        .expect("options");
    v2.create().await.expect("open");
    v2.upsert(&NoteV2 {
        owner: "o".into(),
        id: 1,
        title: "hello".into(),
        body: "more text".into(),
    })
    .await
    .expect("the same slot, other properties: updated in place");
    let copy = raw(&store, "Notes", "o", "t_hello").await.expect("copy");
    assert_eq!(copy.get("body"), Some(&Value::from("more text")));
    let audit = v2.audit(&AuditOptions::default()).await.expect("audit");
    assert!(audit.is_clean(), "{:#?}", audit.findings);
}

async fn a_checkpoint_resumes_only_its_own_job_and_unreadable_records_are_reported(
    store: AnyStore,
) {
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    for id in 1..=6 {
        employees
            .insert(&employee("Sales", id, "Same", &format!("k{id}@x")))
            .await
            .expect("insert");
    }
    let job = Some("shared-job".to_owned());
    employees
        .audit(&AuditOptions {
            job: job.clone(),
            stop_after: Some(2),
            ..AuditOptions::default()
        })
        .await
        .expect("part of an audit");
    let err = employees
        .backfill(
            "by_email",
            &AuditOptions {
                job: job.clone(),
                ..AuditOptions::default()
            },
        )
        .await
        .expect_err("another job's checkpoint");
    assert!(err.to_string().contains("audit Employees"), "{err}");
    // A primary whose record does not read: reported, and the scan goes on.
    let mut broken = raw(&store, "Employees", "Sales", "empid_000003")
        .await
        .expect("primary");
    broken
        .properties
        .insert("TablekitTargets".into(), Value::from("{not json"));
    store
        .insert_or_replace("Employees", broken)
        .await
        .expect("corrupt");
    let report = employees
        .audit(&AuditOptions::default())
        .await
        .expect("audit");
    // The primary, and what points at it (its copies, its id list), cannot be checked.
    assert!(
        report.findings.iter().any(|f| f.drift == Drift::Unreadable
            && f.source
                .as_ref()
                .is_some_and(|s| s.row_key == "empid_000003")),
        "{:#?}",
        report.findings
    );
    assert_eq!(report.unreadable, 4, "{:#?}", report.findings);
    assert_eq!(report.primaries, 5, "the other primaries were checked");
    assert!(!report.is_clean());
}

async fn work_past_one_outbox_entry_is_spread_over_several(store: AnyStore) {
    let many = IndexedTable::<ManyCopies, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    many.create().await.expect("open");
    let code = "k".repeat(450);
    let outcome = many
        .insert(&ManyCopies { code: code.clone() })
        .await
        .expect("insert");
    assert_eq!((outcome.operations, outcome.published), (40, true));
    let copies = store
        .query_all("ManyCopiesIdx", Query::new())
        .await
        .expect("copies");
    assert_eq!(copies.len(), 40);
    many.flush().await;
    assert!(
        outbox::scan(&store, "ManyCopies")
            .await
            .expect("outbox")
            .is_empty()
    );
}

async fn a_source_with_more_dependents_than_a_batch_holds_reaches_them_all(store: AnyStore) {
    let teams = IndexedTable::<Team, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    teams.create().await.expect("open");
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    let mut head = employee("Big", 1, "Stone", "stone@x");
    employees.insert(&head).await.expect("head");
    for n in 0..120 {
        teams
            .insert(&Team {
                department: "Big".into(),
                n,
                head_id: 1,
                head_name: None,
            })
            .await
            .expect("team");
    }
    head.last_name = "Rock".into();
    employees.upsert(&head).await.expect("rename");
    let all = teams.table().partition("Big").await.expect("teams");
    assert_eq!(all.len(), 120);
    assert!(all.iter().all(|t| t.head_name.as_deref() == Some("Rock")));
}

async fn concurrent_adds_to_a_table_list_leave_each_id_on_one_page(store: AnyStore) {
    let applier = IndexApplier::new(store.clone());
    let long = "r".repeat(400);
    let tasks: Vec<_> = (0..8u32)
        .map(|task| {
            let (applier, long) = (applier.clone(), long.clone());
            tokio::spawn(async move {
                for n in 0..20u32 {
                    let source = EntityRef::new("Src", "p", format!("{task}_{n:02}{long}"));
                    let add = IndexOperation::from(AddMember {
                        source,
                        version: 1,
                        index: "tag".into(),
                        storage: tablekit::patterns::index::MemberStorage::Table,
                        table: "TagLists".into(),
                        value: "red".into(),
                    });
                    applier.apply(&add).await.expect("add");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    let pages = store
        .query_all("TagLists", Query::new())
        .await
        .expect("pages");
    assert!(pages.len() >= 3, "the list spans pages: {}", pages.len());
    let mut entries: Vec<String> = Vec::new();
    for page in &pages {
        let Some(Value::String(json)) = page.get("Ids") else {
            panic!("a page without ids: {page:?}");
        };
        let rows: Vec<serde_json::Value> = serde_json::from_str(json).expect("json");
        entries.extend(rows.iter().map(|r| r[2].as_str().expect("rk").to_owned()));
    }
    let total = entries.len();
    entries.sort();
    entries.dedup();
    assert_eq!(
        (total, entries.len()),
        (160, 160),
        "each id once, none lost"
    );
}

async fn the_design_photo_lives_in_the_blob_store_beside_its_indexes(store: AnyStore) {
    let blobs = BlobStore::memory();
    let employees = IndexedTable::<Employee, _>::options()
        .blobs(blobs.clone())
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    let mut jun = employee("Sales", 5, "Cao", "jun@x");
    jun.photo = Some(vec![9u8; 200_000]);
    employees.insert(&jun).await.expect("insert");
    let raw_primary = raw(&store, "Employees", "Sales", "empid_000005")
        .await
        .expect("primary");
    assert!(
        raw_primary.get("photo").is_none(),
        "the photo is in the blob store"
    );
    assert_eq!(blobs.list("large/").await.expect("list").len(), 1);
    let read = employees
        .get("Sales", "empid_000005")
        .await
        .expect("get")
        .expect("there");
    assert_eq!(read.photo.as_ref().map(Vec::len), Some(200_000));
    let same = employees
        .lookup_named("email")
        .keys(&[&"Sales"])
        .keys(&[&"jun@x"])
        .get()
        .await
        .expect("find")
        .expect("hit");
    assert_eq!(
        same.value, jun,
        "the same-partition copy reads with its photo"
    );
    let other = employees
        .lookup_named("by_email")
        .keys(&[&"Sales"])
        .keys(&[&"jun@x"])
        .get()
        .await
        .expect("find")
        .expect("hit");
    assert_eq!(other.value, jun, "so does the other table's");
    // A new photo: the old blob goes after the commit.
    jun.photo = Some(vec![1u8; 150_000]);
    employees.upsert(&jun).await.expect("new photo");
    let names = blobs.list("large/").await.expect("list");
    assert_eq!(names.len(), 1, "{names:?}");
    assert_eq!(
        employees
            .get("Sales", "empid_000005")
            .await
            .expect("get")
            .and_then(|e| e.value.photo),
        Some(vec![1u8; 150_000])
    );
    employees
        .delete("Sales", "empid_000005", IfMatch::Any)
        .await
        .expect("delete");
    assert!(blobs.list("large/").await.expect("list").is_empty());
}

async fn a_partial_update_of_an_indexed_field_moves_its_entries(store: AnyStore) {
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    let jun = employee("Sales", 7, "Cao", "jun@x");
    employees.insert(&jun).await.expect("insert");
    // Only `email` and `last_name` are taken from the value; `age` stays as stored.
    let changed = Employee {
        email: "cao@x".into(),
        last_name: "Nguyen".into(),
        age: 99,
        ..jun.clone()
    };
    let outcome = employees
        .update(&changed, &["email", "last_name"], IfMatch::Any)
        .await
        .expect("update");
    assert!(outcome.published);
    let stored = employees
        .get("Sales", "empid_000007")
        .await
        .expect("get")
        .expect("there");
    assert_eq!(
        (
            stored.value.email.as_str(),
            stored.value.last_name.as_str(),
            stored.value.age
        ),
        ("cao@x", "Nguyen", 30)
    );
    let by_new = employees
        .lookup_named("by_email")
        .keys(&[&"Sales"])
        .keys(&[&"cao@x"])
        .get()
        .await
        .expect("find");
    assert_eq!(by_new.map(|e| e.id), Some(7));
    assert!(
        employees
            .lookup_named("by_email")
            .keys(&[&"Sales"])
            .keys(&[&"jun@x"])
            .get()
            .await
            .expect("find")
            .is_none()
    );
    assert!(
        employees
            .lookup_named("email")
            .keys(&[&"Sales"])
            .keys(&[&"cao@x"])
            .get()
            .await
            .expect("find")
            .is_some()
    );
    assert_eq!(
        employees
            .list_named("last_name")
            .in_partition("Sales")
            .keys(&[&"Nguyen"])
            .ids()
            .await
            .expect("ids")
            .len(),
        1
    );
    assert!(
        employees
            .list_named("last_name")
            .in_partition("Sales")
            .keys(&[&"Cao"])
            .ids()
            .await
            .expect("ids")
            .is_empty()
    );
    // Under a stale ETag nothing changes; an unknown field is refused before any I/O.
    let stale = tablekit::core::ETag::new("W/\"stale\"");
    let refused = employees
        .update(&jun, &["email"], IfMatch::ETag(stale))
        .await
        .expect_err("stale");
    assert_eq!(refused.kind(), ErrorKind::PreconditionFailed);
    assert!(
        employees
            .update(&jun, &["salary"], IfMatch::Any)
            .await
            .is_err()
    );
    assert!(
        employees
            .audit(&AuditOptions::default())
            .await
            .expect("audit")
            .is_clean()
    );
}

async fn write_all_of_1000_indexed_employees_over_10_partitions_leaves_the_audit_clean(
    store: AnyStore,
) {
    use tablekit::typed::TypedWrite;
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    let writes = (0..1_000u32).map(|id| {
        TypedWrite::Upsert(employee(
            &format!("D{}", id % 10),
            id,
            &format!("L{}", id % 7),
            &format!("e{id}@x"),
        ))
    });
    let report = employees.write_all(writes).await.expect("write all");
    assert!(report.is_complete(), "{:?}", report.refused);
    assert_eq!(report.written.len(), 1_000);
    let primaries = store
        .query_all(
            "Employees",
            Query::with_filter(filter::property_named("EntityKind").eq("Employee")),
        )
        .await
        .expect("primaries");
    assert_eq!(primaries.len(), 1_000);
    let hit = employees
        .lookup_named("by_email")
        .keys(&[&"D3"])
        .keys(&[&"e523@x"])
        .get()
        .await
        .expect("find");
    assert_eq!(hit.map(|e| e.id), Some(523));
    // A taken same-partition index value is refused on its own; the rest is written.
    let report = employees
        .write_all([
            TypedWrite::Insert(employee("D1", 5_001, "X", "e1@x")),
            TypedWrite::Insert(employee("D1", 5_002, "X", "fresh@x")),
        ])
        .await
        .expect("write all");
    assert_eq!(report.refused.len(), 1);
    assert_eq!(report.refused[0].0, 0);
    assert_eq!(report.written, vec![(1, report.written[0].1)]);
    assert!(
        employees
            .audit(&AuditOptions::default())
            .await
            .expect("audit")
            .is_clean()
    );
}

on_backends!(
    a_partial_update_of_an_indexed_field_moves_its_entries,
    write_all_of_1000_indexed_employees_over_10_partitions_leaves_the_audit_clean,
    the_design_photo_lives_in_the_blob_store_beside_its_indexes,
    concurrent_adds_to_a_table_list_leave_each_id_on_one_page,
    work_past_one_outbox_entry_is_spread_over_several,
    a_source_with_more_dependents_than_a_batch_holds_reaches_them_all,
    a_late_link_removal_never_undoes_a_newer_claim,
    changing_an_indexs_properties_updates_copies_in_place,
    a_checkpoint_resumes_only_its_own_job_and_unreadable_records_are_reported,
    denormalized_fields_follow_their_source,
    intra_partition_copies_follow_every_write,
    email_ranges_come_back_in_index_order,
    a_taken_index_value_is_refused_and_nothing_is_written,
    subsets_and_sparse_indexes_follow_the_declaration,
    writes_past_the_batch_limit_are_refused_before_any_io,
    the_outbox_keeps_follow_up_work_until_the_relay_publishes_it,
    late_and_repeated_messages_never_bring_back_an_older_copy,
    verified_lookups_never_return_a_stale_hit,
    partition_id_lists_move_with_a_last_name_change_in_one_transaction,
    eight_concurrent_writers_of_one_last_name_lose_no_id,
    table_and_blob_id_lists_are_kept_by_the_worker,
    long_id_lists_continue_on_more_pages,
    the_audit_finds_injected_drift_and_repairs_it,
    backfill_adds_an_index_declared_after_the_data,
    an_interrupted_audit_resumes_from_its_checkpoint,
);

/// The blob-stored id lists on Azure Blob Storage (Azurite), with the tables on SQLite.
#[cfg(feature = "azure")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_id_lists_on_azure_blob_storage() {
    let Some(base) = support::azurite_blobs() else {
        return;
    };
    // A container of its own, so every run starts empty.
    let container = format!("tk{}", uuid::Uuid::new_v4().simple());
    tablekit::core::azure::create_blob_container(&base, &container)
        .await
        .expect("container");
    let blobs = BlobStore::connect(&format!("azure:{base};Container={container}"))
        .expect("azure blob store");
    let backend = support::sqlite().await.expect("sqlite");
    table_and_blob_id_lists_with(backend.store.clone(), blobs).await;
}

#[allow(dead_code)]
fn _key_part_is_object_safe(_: &dyn KeyPart) {}
