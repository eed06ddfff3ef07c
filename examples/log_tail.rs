//! The log-tail pattern: inverted .NET ticks in the RowKey, the newest first, the latest
//! `n` in one query.
//!
//! `cargo run --example log_tail`

#![allow(clippy::print_stdout)]

use chrono::{Duration, Utc};
use tablekit::patterns::log_tail;
use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Events",
    kind = "Event",
    partition_key = "{device}",
    row_key = "{at:ticks_desc}"
)]
struct Event {
    device: String,
    at: chrono::DateTime<Utc>,
    reading: i32,
}

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let events = Table::<Event, _>::new(MemoryStore::new());
    events.create().await?;
    let now = Utc::now();
    for minute in 0..10 {
        events
            .insert(&Event {
                device: "d1".into(),
                at: now - Duration::minutes(minute),
                reading: minute as i32,
            })
            .await?;
    }
    for event in log_tail::latest(&events, "d1", 3).await? {
        println!("{} {} reading {}", event.row_key, event.at, event.reading);
    }
    println!("key of now: {}", log_tail::row_key(now)?);
    Ok(())
}
