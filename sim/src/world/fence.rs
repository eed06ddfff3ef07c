//! The relays' fence in the simulated world: each relay publishes through a sink that
//! looks, at every publish of an outbox entry, at the lease of the share the entry's
//! partition falls in. The relay must hold it (the lease row names it, until a later
//! instant): two relays never drain one partition at once, whatever the faults, crashes
//! and clock jumps — a relay whose pass outlives its lease stops at the fence.

use std::sync::{Arc, Mutex};

use tablekit_core::AnyStore;
use tablekit_patterns::consistency::relay::{DEFAULT_SHARES, share_holder, share_of};
use tablekit_patterns::consistency::{BoxFuture, Envelope, OutboxSink};

/// A relay's sink that checks the share's lease at each publish of an entry.
pub(super) struct FencedSink {
    pub(super) inner: Arc<dyn OutboxSink>,
    /// The relay's id.
    pub(super) relay: String,
    /// The store without faults (what the lease rows hold).
    pub(super) store: AnyStore,
    /// The publishes made without the lease.
    pub(super) unfenced: Arc<Mutex<Vec<String>>>,
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
            self.inner
                .publish_entry(table, partition_key, envelope)
                .await
        })
    }
}
