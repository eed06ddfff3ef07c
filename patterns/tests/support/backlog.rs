//! What a broker outage leaves, for the relay's tests and bench: outbox entries in many
//! partitions with their markers' leases long over, and a sink that tallies every publish
//! by operation id (so duplicates show).

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tablekit_core::{Batch, TableStore};
use tablekit_patterns::consistency::pending;
use tablekit_patterns::consistency::{BoxFuture, Envelope, Operation, OutboxSink, outbox};

/// The operation of the backlog's entries.
#[derive(Serialize, Deserialize)]
pub(crate) struct Ship {
    pub(crate) order: u64,
}

impl Operation for Ship {
    const KIND: &'static str = "ship";
    const VERSION: u32 = 1;
}

/// Counts every publish by operation id.
#[derive(Clone, Default)]
pub(crate) struct Tally(pub(crate) Arc<Mutex<HashMap<uuid::Uuid, usize>>>);

impl Tally {
    /// Every publish, and the distinct operations published.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let tally = self.0.lock().unwrap_or_else(|e| e.into_inner());
        (tally.values().sum(), tally.len())
    }
}

impl OutboxSink for Tally {
    fn publish<'a>(
        &'a self,
        envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        *self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(envelope.id)
            .or_default() += 1;
        Box::pin(async { Ok(()) })
    }
}

/// `partitions` partitions (`customer000`, …) of `entries` outbox entries each in
/// `table`, their markers' leases an hour over.
///
/// # Panics
/// On the store's errors (test support).
pub(crate) async fn backlog<S: TableStore>(
    store: &S,
    table: &str,
    partitions: usize,
    entries: usize,
) {
    let seeded = seed(store, table, partitions, entries).await;
    seeded.expect("the backlog is written");
}

async fn seed<S: TableStore>(
    store: &S,
    table: &str,
    partitions: usize,
    entries: usize,
) -> tablekit_patterns::Result<()> {
    store.create_table_if_not_exists(table).await?;
    store
        .create_table_if_not_exists(pending::PENDING_TABLE)
        .await?;
    let past = chrono::Utc::now() - chrono::Duration::hours(1);
    for p in 0..partitions {
        let partition_key = format!("customer{p:03}");
        let mut batch = Batch::new();
        for e in 0..entries {
            let envelope = Envelope::new(&Ship {
                order: (p * entries + e) as u64,
            })
            .expect("a ship operation serialises");
            batch.insert(outbox::entry(&partition_key, &envelope)?);
            if batch.len() == 100 {
                store
                    .submit_batch(table, std::mem::take(&mut batch))
                    .await?;
            }
        }
        if !batch.is_empty() {
            store.submit_batch(table, batch).await?;
        }
        pending::write_marker(store, table, &partition_key, past).await?;
    }
    Ok(())
}
