//! Parallel bulk import from a stream, with a progress bar: entities grouped into
//! per-partition transactions of up to 100, written 8 at a time, retried when a failure
//! is retryable.
//!
//! `cargo run --example bulk_import`

#![allow(clippy::print_stdout)]

use tablekit::patterns::import::{ImportOptions, import_stream};
use tablekit::prelude::*;

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = AnyStore::connect(&format!(
        "sqlite:{}",
        dir.path().join("import.db").display()
    ))
    .await?;
    store.create_table("Customers").await?;
    // Generated lazily and imported as a stream: memory holds a bounded number of
    // entities whatever the total.
    let total = 20_000u32;
    let entities = futures::stream::iter((0..total).map(|i| {
        Entity::new(format!("region{:02}", i % 50), format!("{i:08}"))
            .with("Name", format!("customer {i}"))
    }));
    let bar = indicatif::ProgressBar::new(u64::from(total));
    let started = std::time::Instant::now();
    let report = import_stream(
        &store,
        "Customers",
        entities,
        &ImportOptions::default(),
        |r| bar.set_position(r.written as u64),
    )
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
