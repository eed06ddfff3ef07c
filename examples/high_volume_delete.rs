//! High-volume delete: a table per day; old days go by deleting whole tables.
//!
//! `cargo run --example high_volume_delete`

#![allow(clippy::print_stdout)]

use chrono::{Duration, Utc};
use tablekit::patterns::periods::{Period, PeriodTables};
use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Logs",
    kind = "Log",
    partition_key = "{source}",
    row_key = "{n:06}"
)]
struct Log {
    source: String,
    n: u32,
}

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let store = MemoryStore::new();
    let logs = PeriodTables::new("Logs", Period::Day)?;
    let now = Utc::now();
    for days_ago in 0..10 {
        let table = logs
            .table_at::<Log, _>(&store, now - Duration::days(days_ago))
            .await?;
        table
            .insert(&Log {
                source: "api".into(),
                n: 1,
            })
            .await?;
    }
    let dropped = logs.drop_older_than(&store, Duration::days(7), now).await?;
    println!(
        "dropped {dropped:?}; left {:?}",
        logs.existing(&store).await?
    );
    Ok(())
}
