//! The consumer of the queue backend and its deliveries: receives in batches bounded by
//! the prefetch, renews each held delivery's lease every half lease, and settles a
//! delivery by deleting it, making it visible later, or moving it to the poison queue.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore, oneshot};

use super::super::{Consumer, Delivery, Received, poison_queue};
use super::AzureQueue;
use super::wire::{Leased, Wire, lease_duration};
use crate::error::Result;

/// How long a consumer waits for held deliveries to settle before a receive, so that one
/// receive brings several messages.
const GATHER: Duration = Duration::from_millis(20);

/// Receives the deliveries of one Azure queue.
#[derive(Debug)]
pub struct AzureConsumer {
    queue: AzureQueue,
    name: String,
    prefetch: usize,
    lease: Duration,
    /// One permit per delivery held: `prefetch` bounds them.
    permits: Arc<Semaphore>,
    /// Received, not yet handed out (their leases are running).
    buffer: VecDeque<Leased>,
    /// The current pause between empty receives.
    idle: Duration,
}

impl AzureConsumer {
    pub(super) fn new(
        queue: AzureQueue,
        name: &str,
        prefetch: usize,
        lease: Duration,
        permits: Arc<Semaphore>,
    ) -> Self {
        AzureConsumer {
            queue,
            name: name.to_owned(),
            prefetch,
            lease,
            permits,
            buffer: VecDeque::new(),
            idle: Duration::ZERO,
        }
    }

    fn deliver(&self, message: Leased, permit: OwnedSemaphorePermit) -> AzureDelivery {
        let receipt = Arc::new(Mutex::new(message.receipt.clone()));
        let (stop, stopped) = oneshot::channel::<()>();
        let renewal = tokio::spawn(renew(
            self.queue.clone(),
            self.name.clone(),
            message.message_id.clone(),
            receipt.clone(),
            self.lease,
            stopped,
        ));
        AzureDelivery {
            queue: self.queue.clone(),
            name: self.name.clone(),
            message_id: message.message_id,
            receipt,
            received: message.received,
            claim: message.claim,
            wire: message.wire,
            renewal: Some((stop, renewal)),
            _permit: permit,
        }
    }
}

/// Keeps a delivery's lease: every half lease, the message stays invisible for another
/// lease. Ends when told, or when the lease is lost.
async fn renew(
    queue: AzureQueue,
    name: String,
    message_id: String,
    receipt: Arc<Mutex<String>>,
    lease: Duration,
    mut stop: oneshot::Receiver<()>,
) {
    let period = (lease_duration(lease) / 2).max(Duration::from_millis(500));
    if !queue.inner.renew_leases {
        let _ = stop.await;
        return;
    }
    loop {
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(period) => {}
        }
        let mut current = receipt.lock().await;
        match queue
            .set_visibility(&name, &message_id, &current, lease_duration(lease))
            .await
        {
            Ok(next) => *current = next,
            Err(e) => {
                tracing::warn!(error = %e, queue = name, "could not renew a delivery's lease");
                if !e.is_retryable() || e.to_string().contains("lease was lost") {
                    return;
                }
            }
        }
    }
}

impl Consumer for AzureConsumer {
    type Delivery = AzureDelivery;

    async fn next(&mut self) -> Result<Option<AzureDelivery>> {
        let Ok(permit) = self.permits.clone().acquire_owned().await else {
            return Ok(None);
        };
        let unreachable_since = Instant::now();
        loop {
            while let Some(message) = self.buffer.pop_front() {
                // A message whose lease ran out while buffered may be another consumer's
                // now: leave it to the service.
                if message.lease_ends.saturating_duration_since(Instant::now())
                    > lease_duration(self.lease) / 4
                {
                    return Ok(Some(self.deliver(message, permit)));
                }
            }
            // Every receive is a request: when most deliveries are still held, wait a
            // moment for more to be settled so one receive brings several.
            let batch = (self.prefetch / 2).max(1);
            if self.permits.available_permits() + 1 < batch {
                let more = u32::try_from(batch - 1).unwrap_or(u32::MAX);
                let _ = tokio::time::timeout(GATHER, self.permits.acquire_many(more)).await;
            }
            let want = 1 + self.permits.available_permits();
            match self.queue.receive(&self.name, want, self.lease).await {
                Ok(batch) if batch.is_empty() => {
                    self.idle = (self.idle * 2).clamp(
                        Duration::from_millis(20),
                        self.queue.inner.max_poll_interval,
                    );
                    tokio::time::sleep(self.idle).await;
                }
                Ok(batch) => {
                    self.idle = Duration::ZERO;
                    self.buffer.extend(batch);
                }
                Err(e)
                    if e.is_retryable()
                        && unreachable_since.elapsed() < self.queue.inner.reconnect_within =>
                {
                    tracing::warn!(error = %e, queue = self.name, "receiving failed, retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn close(mut self) {
        // Received but never handed out: visible again at once.
        for message in self.buffer.drain(..) {
            let _ = self
                .queue
                .set_visibility(
                    &self.name,
                    &message.message_id,
                    &message.receipt,
                    Duration::ZERO,
                )
                .await;
        }
    }
}

/// One delivery of an Azure queue.
#[derive(Debug)]
pub struct AzureDelivery {
    queue: AzureQueue,
    name: String,
    message_id: String,
    receipt: Arc<Mutex<String>>,
    received: Received,
    claim: Option<String>,
    wire: Wire,
    renewal: Option<(oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for AzureDelivery {
    fn drop(&mut self) {
        // Dropped without settling: the lease runs out and the message comes back.
        if let Some((_, renewal)) = self.renewal.take() {
            renewal.abort();
        }
    }
}

impl AzureDelivery {
    /// Stops the lease renewal (letting a renewal in flight finish) and returns the
    /// current pop receipt.
    async fn settle(&mut self) -> String {
        if let Some((stop, renewal)) = self.renewal.take() {
            let _ = stop.send(());
            let _ = renewal.await;
        }
        self.receipt.lock().await.clone()
    }
}

impl Delivery for AzureDelivery {
    fn received(&self) -> &Received {
        &self.received
    }

    async fn ack(mut self) -> Result<()> {
        let receipt = self.settle().await;
        self.queue
            .delete_message(&self.name, &self.message_id, &receipt)
            .await?;
        if let Some(claim) = &self.claim
            && let Ok(store) = self.queue.claims().await
            && let Err(e) = store.delete(claim).await
        {
            tracing::warn!(error = %e, claim, "a claim-checked body outlived its message");
        }
        Ok(())
    }

    /// Delivers the message again after `delay`. When this delivery's lease was lost,
    /// another delivery may have settled the message meanwhile, and the work this one
    /// failed half way would never be applied again: the message is sent again instead
    /// (its id and body, claim-checked anew when large), so it is.
    async fn retry(mut self, delay: Duration) -> Result<()> {
        let receipt = self.settle().await;
        let after = if delay.is_zero() {
            Duration::ZERO
        } else {
            lease_duration(delay)
        };
        let set = self
            .queue
            .set_visibility_unless_lost(&self.name, &self.message_id, &receipt, after)
            .await?;
        if set.is_some() {
            return Ok(());
        }
        let wire = Wire {
            tk: 1,
            id: self.received.id.clone(),
            sent: self.wire.sent.or_else(|| Some(chrono::Utc::now())),
            ..Wire::default()
        };
        let text = self
            .queue
            .encode(&self.name, wire, &self.received.body)
            .await?;
        self.queue.put(&self.name, &text, after).await
    }

    async fn poison(mut self, reason: &str) -> Result<()> {
        let receipt = self.settle().await;
        let mut wire = self.wire.clone();
        wire.reason = Some(reason.chars().take(4096).collect());
        wire.count = Some(self.received.delivery_count);
        wire.poisoned = Some(chrono::Utc::now());
        let text =
            serde_json::to_string(&wire).map_err(|e| crate::Error::encode("a queue message", e))?;
        // The copy first: a crash in between leaves the message to be delivered (and
        // poisoned) again, never lost.
        self.queue
            .put(&poison_queue(&self.name), &text, Duration::ZERO)
            .await?;
        self.queue
            .delete_message(&self.name, &self.message_id, &receipt)
            .await
    }
}
