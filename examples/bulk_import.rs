//! Parallel bulk import with a progress bar: entities grouped into per-partition
//! transactions of up to 100, shuffled, written 8 at a time.
//!
//! `cargo run --example bulk_import`

#![allow(clippy::print_stdout)]

use tablekit::patterns::import::bulk_import;
use tablekit::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = AnyStore::connect(&format!(
        "sqlite:{}",
        dir.path().join("import.db").display()
    ))
    .await?;
    store.create_table("Customers").await?;
    let entities: Vec<Entity> = (0..20_000)
        .map(|i| {
            Entity::new(format!("region{:02}", i % 50), format!("{i:08}"))
                .with("Name", format!("customer {i}"))
        })
        .collect();
    let bar = indicatif::ProgressBar::new(entities.len() as u64);
    let started = std::time::Instant::now();
    let report = bulk_import(&store, "Customers", entities, 8, |done, _| {
        bar.set_position(done as u64)
    })
    .await?;
    bar.finish_and_clear();
    println!(
        "imported {} entities in {} batches in {:.2} s ({} failed)",
        report.written,
        report.batches,
        started.elapsed().as_secs_f64(),
        report.failed.len()
    );
    Ok(())
}
