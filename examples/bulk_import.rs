//! Parallel bulk import from a stream of typed records, with a progress bar: entities
//! grouped into per-partition transactions of up to 100, written 8 at a time, retried
//! when a failure is retryable.
//!
//! `cargo run --example bulk_import`

#![allow(clippy::print_stdout)]

use tablekit::patterns::import::{ImportOptions, import_records};
use tablekit::prelude::*;

/// A customer, in one of 50 regions.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Customers", partition_key = "{region}", row_key = "{id:08}")]
struct Customer {
    region: String,
    id: u32,
    name: String,
}

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = AnyStore::create(&format!(
        "sqlite:{}",
        dir.path().join("import.db").display()
    ))
    .await?;
    let customers = Table::<Customer, _>::new(store);
    customers.create().await?;
    // Generated lazily and imported as a stream: memory holds a bounded number of
    // entities whatever the total.
    let total = 20_000u32;
    let records = futures::stream::iter((0..total).map(|id| Customer {
        region: format!("region{:02}", id % 50),
        id,
        name: format!("customer {id}"),
    }));
    let bar = indicatif::ProgressBar::new(u64::from(total));
    let started = std::time::Instant::now();
    let report = import_records(&customers, records, &ImportOptions::default(), |r| {
        bar.set_position(r.written as u64)
    })
    .await?;
    bar.finish_and_clear();
    println!(
        "imported {} entities in {} batches in {:.2} s ({} retried, {} failed)",
        report.written,
        report.batches,
        started.elapsed().as_secs_f64(),
        report.retried,
        report.failed.len()
    );
    assert_eq!(report.written, total as usize);
    Ok(())
}
