//! Hot/cold tables: this month's table takes the writes, reads span months, an old month
//! is exported to the blob store and dropped.
//!
//! `cargo run --example hot_cold`

#![allow(clippy::print_stdout)]

use chrono::{Duration, Utc};
use tablekit::core::blob::BlobStore;
use tablekit::patterns::periods::{Period, PeriodTables};
use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Sales",
    kind = "Sale",
    partition_key = "{shop}",
    row_key = "{n:06}"
)]
struct Sale {
    shop: String,
    n: u32,
}

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let store = MemoryStore::new();
    let sales = PeriodTables::new("Sales", Period::Month)?;
    let now = Utc::now();
    let old = now - Duration::days(62);
    sales
        .table_at::<Sale, _>(&store, old)
        .await?
        .insert(&Sale {
            shop: "s1".into(),
            n: 1,
        })
        .await?;
    sales
        .table_at::<Sale, _>(&store, now)
        .await?
        .insert(&Sale {
            shop: "s1".into(),
            n: 2,
        })
        .await?;
    let both = sales
        .query::<Sale, _>(&store, old, now, Query::partition("s1"))
        .await?;
    println!("sales across months: {}", both.len());
    let blobs = BlobStore::memory();
    // The export streams the table page by page into a blob written in parts, checks it
    // by streaming it back, then drops the table; the bar follows it.
    let bar = indicatif::ProgressBar::new_spinner();
    let (blob, count) = sales
        .export_to_blobs_with_progress(&store, &sales.table_for(old), &blobs, |n| {
            bar.set_message(format!("exported {n}"));
        })
        .await?;
    bar.finish_and_clear();
    println!(
        "exported {count} to {blob}; tables now {:?}",
        sales.existing(&store).await?
    );
    Ok(())
}
