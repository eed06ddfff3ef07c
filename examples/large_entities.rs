//! Large entities: a photo in the blob store (local files), its address in the entity.
//!
//! `cargo run --example large_entities`

#![allow(clippy::print_stdout)]

use tablekit::core::blob::BlobStore;
use tablekit::patterns::large::LargeTable;
use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    partition_key = "{department}",
    row_key = "empid_{id:06}"
)]
struct Employee {
    department: String,
    id: u32,
    #[entity(blob)]
    photo: Option<Vec<u8>>,
}

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let dir = tempfile::tempdir()?;
    let store =
        AnyStore::create(&format!("sqlite:{}", dir.path().join("app.db").display())).await?;
    let blobs = BlobStore::local(dir.path().join("blobs"))?;
    let employees = LargeTable::<Employee, _>::options()
        .inline_cleanup()
        .build(store, blobs.clone());
    employees.open().await?;
    let jun = Employee {
        department: "Sales".into(),
        id: 1,
        photo: Some(vec![0xFF; 2_000_000]),
    };
    employees.upsert(&jun).await?;
    // A large table reads by the keys its templates render from the value.
    let lazy = employees
        .get_lazy(&jun.partition_key()?, &jun.row_key()?)
        .await?
        .expect("just inserted");
    println!("addresses: {:?}", lazy.blob_addresses());
    let full = lazy.load().await?;
    println!("photo bytes: {}", full.photo.as_ref().map_or(0, Vec::len));
    println!(
        "blobs: {:?}",
        blobs
            .list("large/")
            .await?
            .iter()
            .map(|b| b.size)
            .collect::<Vec<_>>()
    );
    Ok(())
}
