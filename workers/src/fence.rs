//! Writes of a delivery whose lease ran out are refused.
//!
//! A queue that leases deliveries for a fixed time (the SQLite queue) hands a message to
//! another consumer once its lease ends, whether or not the first delivery is still
//! running. A delivery paused past that point — a stop-the-world pause, a stalled
//! connection — would then write from reads made before the other delivery's work (and a
//! newer write's), and if its process died before it could take the write back, nothing
//! would ever apply the message again to set it right. So the worker runs each delivery's
//! handler inside a fence a quarter of the lease before its end ([`fenced`]), and the
//! follow-up work's store ([`FencedStore`], which `index::register` puts in front of the
//! handlers' store) refuses every write attempted past it with a retryable error: nothing
//! is written, the delivery answers "retry", and its retry sends the message again
//! (`Delivery::retry`), so the work is applied once more from fresh reads.
//!
//! The same bound as the relay's and the feed's fences: what is left is a pause longer
//! than a quarter of the lease between the check and the write reaching the store.
//! Hand-written: no crate fences writes by a queue's lease.

use std::future::Future;

use tablekit_core::{Batch, ETag, Entity, Error, Page, Query, Result, TableStore, WriteOp};
use tokio::time::Instant;

tokio::task_local! {
    /// The fence of the delivery being handled.
    static FENCE: Instant;
}

/// The fence of a delivery whose lease ends at `lease_ends`, seen at `now`: a quarter of
/// what is left of the lease before its end.
pub fn fence_of(now: Instant, lease_ends: Instant) -> Instant {
    now + lease_ends.saturating_duration_since(now).mul_f64(0.75)
}

/// Runs `handling` with its writes fenced at `fence` (none: unfenced).
pub async fn fenced<F: Future>(fence: Option<Instant>, handling: F) -> F::Output {
    match fence {
        Some(fence) => FENCE.scope(fence, handling).await,
        None => handling.await,
    }
}

/// Refuses a write of a delivery past its fence (see the module docs).
///
/// # Errors
/// A retryable [`Error::Transient`] past the fence.
pub fn check() -> Result<()> {
    match FENCE.try_with(|fence| *fence) {
        Ok(fence) if Instant::now() >= fence => Err(Error::Transient {
            message: "the delivery's lease is about to run out (another consumer may get the message): its writes are refused, and the message is applied again".to_owned(),
        }),
        _ => Ok(()),
    }
}

/// A store whose writes are refused past the fence of the delivery writing (see the
/// module docs); reads pass.
#[derive(Clone, Debug)]
pub struct FencedStore<S> {
    inner: S,
}

impl<S> FencedStore<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        FencedStore { inner }
    }
}

impl<S: TableStore> TableStore for FencedStore<S> {
    async fn create_table(&self, table: &str) -> Result<()> {
        self.inner.create_table(table).await
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        self.inner.delete_table(table).await
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        self.inner.list_tables(prefix).await
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        self.inner.get(table, partition_key, row_key, select).await
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        self.inner.query(table, query).await
    }

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        check()?;
        self.inner.execute(table, op).await
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        check()?;
        self.inner.submit_batch(table, batch).await
    }

    fn key_order(&self) -> tablekit_core::KeyOrder {
        self.inner.key_order()
    }

    fn preserves_negative_zero(&self) -> bool {
        self.inner.preserves_negative_zero()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tablekit_core::{MemoryStore, WriteOp};

    use super::*;

    #[tokio::test]
    async fn writes_past_the_fence_are_refused_and_reads_pass() {
        let store = FencedStore::new(MemoryStore::new());
        store.create_table("Fenced").await.expect("create");
        // A 400 ms lease: fenced 300 ms on.
        let now = Instant::now();
        let fence = fence_of(now, now + Duration::from_millis(400));
        fenced(Some(fence), async {
            store
                .execute("Fenced", WriteOp::Insert(Entity::new("p", "1")))
                .await
                .expect("before the fence");
            tokio::time::sleep_until(now + Duration::from_millis(320)).await;
            let err = store
                .execute("Fenced", WriteOp::Insert(Entity::new("p", "2")))
                .await
                .expect_err("past the fence");
            assert!(err.is_retryable(), "{err}");
            assert!(
                store
                    .get("Fenced", "p", "1", None)
                    .await
                    .expect("read")
                    .is_some()
            );
        })
        .await;
        assert!(
            store
                .get("Fenced", "p", "2", None)
                .await
                .expect("read")
                .is_none()
        );
        // Unfenced work writes whenever.
        store
            .execute("Fenced", WriteOp::Insert(Entity::new("p", "3")))
            .await
            .expect("unfenced");
    }
}
