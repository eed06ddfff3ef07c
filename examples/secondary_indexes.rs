//! Secondary indexes: an email index in the employees' partition (same transaction), an
//! email index in another table (eventually consistent, applied in process here), and
//! last-name id lists — declared on the type, kept by `IndexedTable`.
//!
//! `cargo run --example secondary_indexes`

#![allow(clippy::print_stdout)]

use tablekit::patterns::index::AuditOptions;
use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    kind = "Employee",
    partition_key = "{department}",
    row_key = "empid_{id:06}"
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
#[index_entity(name = "last_name", key = "{last_name}")]
struct Employee {
    department: String,
    id: u32,
    last_name: String,
    email: String,
}

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let dir = tempfile::tempdir()?;
    let store =
        AnyStore::create(&format!("sqlite:{}", dir.path().join("app.db").display())).await?;
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .open(store)
        .await?;
    for (id, last, email) in [
        (1, "Jones", "ann@contoso.com"),
        (2, "Jones", "bob@contoso.com"),
        (3, "Smith", "cy@contoso.com"),
    ] {
        employees
            .insert(&Employee {
                department: "Sales".into(),
                id,
                last_name: last.into(),
                email: email.into(),
            })
            .await?;
    }
    // Each declaration is a typed handle: its key fields are given in template order,
    // each of its field's type (a misspelled handle or a missing field does not compile).
    let bob = employees
        .lookup(Employee::EMAIL)
        .key("Sales")
        .key("bob@contoso.com")
        .get()
        .await?;
    println!("by email: {:?}", bob.map(|b| b.id));
    let a_to_b = employees
        .lookup(Employee::EMAIL)
        .key("Sales")
        .range("a", "bz")
        .all()
        .await?;
    println!(
        "emails a..bz: {:?}",
        a_to_b.iter().map(|e| e.email.as_str()).collect::<Vec<_>>()
    );
    let joneses = employees
        .list(Employee::LAST_NAME)
        .in_partition("Sales")
        .key("Jones")
        .all()
        .await?;
    println!(
        "Joneses: {:?}",
        joneses.iter().map(|e| e.id).collect::<Vec<_>>()
    );
    let report = employees.audit(&AuditOptions::default()).await?;
    println!("audit clean: {}", report.is_clean());
    Ok(())
}
