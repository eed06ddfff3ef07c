//! Data series: 24 hourly counters in one entity, incremented by merges under ETags,
//! read with one point get.
//!
//! `cargo run --example data_series`

#![allow(clippy::print_stdout)]

use tablekit::patterns::wide::WideTable;
use tablekit::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = MemoryStore::new();
    store.create_table("Visits").await?;
    let visits = WideTable::new(store, "Visits");
    for hour in [9, 9, 10, 13, 13, 13] {
        visits
            .add("site1", "2026-11-22", &format!("h{hour:02}"), 1)
            .await?;
    }
    let day = visits
        .read("site1", "2026-11-22")
        .await?
        .unwrap_or_default();
    for (hour, count) in &day {
        println!("{hour}: {count:?}");
    }
    Ok(())
}
