//! The README quickstart: open a SQLite file, write with optimistic concurrency, query with
//! a `$filter`, page with continuation tokens.
//!
//! This is the untyped storage core, for dynamic use: entities are property bags whose
//! keys, property names and filters are strings chosen at run time. Typed code declares
//! its entity types with `#[derive(Entity)]` and reads them by typed keys and properties
//! (`table.primary().key("Sales").key(123).get()`, `Employee::fields()`; see the other
//! examples).
//!
//! `cargo run --example quickstart [PATH]` (default `quickstart.db` in the current folder).
#![allow(clippy::print_stdout)]

use tablekit::core::filter::property_named;
use tablekit::prelude::*;

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "quickstart.db".to_owned());
    let store = SqliteStore::create(&path).await?;
    store.create_table_if_not_exists("Employees").await?;

    for (id, first, age) in [(123, "Jun", 47), (124, "Don", 34), (125, "Ken", 23)] {
        let employee = Entity::new("Sales", format!("empid_{id:06}"))
            .with("FirstName", first)
            .with("Age", age);
        store.insert_or_replace("Employees", employee).await?;
    }

    // Read, then update only if nobody changed the entity in between.
    let jun = store
        .get("Employees", "Sales", "empid_000123", None)
        .await?
        .ok_or_else(|| tablekit::Error::Backend {
            message: "just written".into(),
        })?;
    let etag = jun.etag.clone().expect("a stored entity has an ETag");
    store
        .merge(
            "Employees",
            Entity::new("Sales", "empid_000123").with("Age", 48),
            IfMatch::ETag(etag),
        )
        .await?;

    // The $filter syntax of the table service, or the typed builder: the same query.
    let parsed = Query::parse("PartitionKey eq 'Sales' and RowKey ge 'empid_000124'")?;
    let built = Query::with_filter(
        property_named("PartitionKey").eq("Sales") & property_named("RowKey").ge("empid_000124"),
    );
    assert_eq!(parsed, built);
    println!("plan: {:?}", parsed.explain());

    // Pages of one entity each, resumed with the continuation token.
    let mut query = parsed.top(1);
    loop {
        let page = store.query("Employees", &query).await?;
        for e in &page.entities {
            println!("{} {:?} {:?}", e.row_key, e.get("FirstName"), e.get("Age"));
        }
        match page.continuation {
            Some(token) => query = query.continue_from(Some(token)),
            None => break,
        }
    }
    Ok(())
}
