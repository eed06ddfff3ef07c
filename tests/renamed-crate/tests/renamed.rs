//! The derives work through a renamed dependency, on both embedded backends.

use tablekit_renamed_crate::{Customer, CustomerName, CustomerRecord, RegionSummary};
use tk::core::query::Query;
use tk::prelude::*;
use tk::typed::Table;

fn customer(id: u64, name: &str) -> Customer {
    Customer {
        region: "emea".into(),
        id,
        name: name.into(),
    }
}

async fn round_trip<S: TableStore + Clone + 'static>(store: S) -> Result<()> {
    // A customer declares an index: written through the one write path that keeps it.
    let indexed = IndexedTable::<Customer, _>::options()
        .inline_apply()
        .open(store.clone())
        .await?;
    indexed.insert(&customer(7, "Ada")).await?;
    indexed.insert(&customer(12, "Grace")).await?;
    let by_name = indexed
        .lookup(Customer::BY_NAME)
        .key("emea")
        .key("Grace")
        .get()
        .await?
        .expect("indexed");
    assert_eq!(by_name.value, customer(12, "Grace"));
    // The inserts' outbox entries are removed (the partition holds the customers alone).
    indexed.flush().await;
    let customers = indexed.table();
    Table::<RegionSummary, _>::new(store.clone())
        .insert(&RegionSummary {
            region: "emea".into(),
            customers: 2,
        })
        .await?;

    let ada = customers
        .get("emea", "cust_00000007")
        .await?
        .expect("stored");
    assert_eq!(ada.value, customer(7, "Ada"));

    // A typed query only returns its own kind; the enum reads the whole partition.
    assert_eq!(customers.partition("emea").await?.len(), 2);
    let all = Table::<CustomerRecord, _>::new(store.clone())
        .partition("emea")
        .await?;
    assert_eq!(all.len(), 3);
    assert!(matches!(all[2].value, CustomerRecord::Summary(_)));

    let names = customers
        .select::<CustomerName>(Query::partition("emea"))
        .await?;
    let names: Vec<String> = names.into_iter().map(|n| n.value.name).collect();
    assert_eq!(names, ["Ada", "Grace"]);
    Ok(())
}

#[tokio::test]
async fn derives_work_through_a_renamed_dependency_on_memory() -> Result<()> {
    round_trip(MemoryStore::new()).await
}

#[tokio::test]
async fn derives_work_through_a_renamed_dependency_on_sqlite() -> Result<()> {
    let dir = tempfile::tempdir().expect("a temp dir");
    round_trip(SqliteStore::create(dir.path().join("app.db")).await?).await
}
