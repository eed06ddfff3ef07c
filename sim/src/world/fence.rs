//! The relays' fence in the simulated world: each relay publishes through a sink that
//! looks, at every publish of an outbox entry, at the lease of the share the entry's
//! partition falls in. The relay must hold it (the lease row names it, until a later
//! instant): two relays never drain one partition at once, whatever the faults, crashes
//! and clock jumps — a relay whose pass outlives its lease stops at the fence.

use std::sync::{Arc, Mutex};

use tablekit_core::{Batch, ETag, Entity, Page, Query, TableStore, WriteOp, random};
use tablekit_patterns::consistency::relay::{DEFAULT_SHARES, share_holder, share_of};
use tablekit_patterns::consistency::{BoxFuture, Envelope, OutboxSink};

/// A relay's sink that checks the share's lease at each publish of an entry.
pub(super) struct FencedSink {
    pub(super) inner: Arc<dyn OutboxSink>,
    /// The relay's id.
    pub(super) relay: String,
    /// The store without faults (what the lease rows hold).
    pub(super) store: super::backing::Backing,
    /// The publishes made without the lease.
    pub(super) unfenced: Arc<Mutex<Vec<String>>>,
    /// How often the relays published each entry.
    pub(super) published: Arc<Mutex<std::collections::HashMap<String, u64>>>,
}

impl OutboxSink for FencedSink {
    fn publish<'a>(
        &'a self,
        envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        self.inner.publish(envelope)
    }

    fn publish_entry<'a>(
        &'a self,
        table: &'a str,
        partition_key: &'a str,
        envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        Box::pin(async move {
            let share = share_of(table, partition_key, DEFAULT_SHARES);
            let now = tablekit_core::clock::now();
            let held = match share_holder(&self.store, share).await {
                Ok(Some((owner, until))) if owner == self.relay && until > now => None,
                Ok(holder) => Some(format!("{holder:?}")),
                Err(e) => Some(format!("unreadable ({e})")),
            };
            if let Some(holder) = held
                && let Ok(mut unfenced) = self.unfenced.lock()
            {
                unfenced.push(format!(
                    "{} published {} {} of {table}({partition_key}) at {now} without the lease of share {share} (held: {holder})",
                    self.relay,
                    envelope.kind,
                    &envelope.id.simple().to_string()[..8],
                ));
            }
            let outcome = self
                .inner
                .publish_entry(table, partition_key, envelope)
                .await;
            if outcome.is_ok()
                && let Ok(mut published) = self.published.lock()
            {
                *published.entry(envelope.id.to_string()).or_default() += 1;
            }
            outcome
        })
    }
}

/// A relay's store that now and then pauses after a query (the process stalls: a long
/// garbage collection, a frozen virtual machine) for longer than the share's lease: the
/// relay then goes on with a page read before the pause, after its lease ended and
/// another relay may have taken the share. The fence must stop it.
#[derive(Clone)]
pub(super) struct Stalling<S> {
    pub(super) inner: S,
    /// How likely a query is to pause.
    pub(super) chance: f64,
    /// The longest pause.
    pub(super) longest: std::time::Duration,
}

impl<S: TableStore> TableStore for Stalling<S> {
    async fn create_table(&self, table: &str) -> tablekit_core::Result<()> {
        self.inner.create_table(table).await
    }
    async fn delete_table(&self, table: &str) -> tablekit_core::Result<()> {
        self.inner.delete_table(table).await
    }
    async fn list_tables(&self, prefix: &str) -> tablekit_core::Result<Vec<String>> {
        self.inner.list_tables(prefix).await
    }
    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> tablekit_core::Result<Option<Entity>> {
        self.inner.get(table, partition_key, row_key, select).await
    }
    async fn query(&self, table: &str, query: &Query) -> tablekit_core::Result<Page> {
        let page = self.inner.query(table, query).await;
        if random::between(0.0, 1.0) < self.chance {
            let pause = self.longest.mul_f64(random::between(0.5, 1.0));
            tokio::time::sleep(pause).await;
        }
        page
    }
    async fn execute(&self, table: &str, op: WriteOp) -> tablekit_core::Result<Option<ETag>> {
        self.inner.execute(table, op).await
    }
    async fn submit_batch(
        &self,
        table: &str,
        batch: Batch,
    ) -> tablekit_core::Result<Vec<Option<ETag>>> {
        self.inner.submit_batch(table, batch).await
    }
}
