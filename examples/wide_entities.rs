//! Wide entities: 365 daily counters (more than the 252 properties an entity holds) as
//! one logical entity over two physical ones, written in one transaction.
//!
//! `cargo run --example wide_entities`

#![allow(clippy::print_stdout)]

use tablekit::core::Properties;
use tablekit::patterns::wide::WideTable;
use tablekit::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = MemoryStore::new();
    store.create_table("Yearly").await?;
    let wide = WideTable::new(store.clone(), "Yearly");
    let year: Properties = (1..=365)
        .map(|d| (format!("d{d:03}"), Value::Int64(0)))
        .collect();
    wide.write("site1", "2026", year).await?;
    wide.add("site1", "2026", "d326", 7).await?;
    let back = wide.read("site1", "2026").await?.unwrap_or_default();
    let physical = store.query_all("Yearly", Query::partition("site1")).await?;
    println!(
        "{} properties in {} physical entities; d326 = {:?}",
        back.len(),
        physical.len(),
        back.get("d326")
    );
    Ok(())
}
