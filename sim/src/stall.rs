//! A delivery stalled between its reads and its first write: the worker's store waits, at
//! the first write of a delivery chosen to stall, until a message of the same entity sent
//! after it was settled (or a deadline passed). So the work of an older write commits
//! after the newer write's work was applied, from reads made before the newer write —
//! the reordering every declaration's apply must survive.
//!
//! The stall stands for a pause in the apply between its reads and its write: the
//! worker's lease fence (`tablekit_workers::fence`), checked as the write reaches the
//! store, comes after it, so the stalled store checks it again after waiting (the
//! workers' `FencedStore` in front of it checked before).

use std::time::Duration;

use tablekit_core::{Batch, ETag, Entity, Page, Query, Result, TableStore, WriteOp};
use tokio::time::Instant;

use crate::queue::SimQueue;

/// What a stalled delivery waits for.
#[derive(Clone, Debug)]
pub struct Stall {
    /// The queue and the entity of the delivered message, and its place in the queue.
    pub(crate) queue: SimQueue,
    pub(crate) lane: String,
    pub(crate) subject: String,
    pub(crate) key: u64,
    /// The latest the write waits until.
    pub(crate) until: Instant,
}

tokio::task_local! {
    /// The stall of the delivery being handled, taken by its first write.
    static STALL: std::cell::RefCell<Option<Stall>>;
}

/// How long a stalled write waits at most (below the workers' 30 s lease).
pub const LONGEST_STALL: Duration = Duration::from_secs(10);

/// Runs `handling` with `stall` waiting at its first write.
pub async fn stalled<F: std::future::Future>(stall: Option<Stall>, handling: F) -> F::Output {
    STALL.scope(std::cell::RefCell::new(stall), handling).await
}

/// A store that stalls the first write of a stalled delivery (see the module).
#[derive(Clone, Debug)]
pub struct StallingStore<S> {
    inner: S,
}

impl<S> StallingStore<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        StallingStore { inner }
    }
}

/// Waits as the delivery being handled was chosen to, once.
async fn wait_if_stalled() {
    let Ok(Some(stall)) = STALL.try_with(|s| s.borrow_mut().take()) else {
        return;
    };
    while Instant::now() < stall.until
        && !stall
            .queue
            .settled_after(&stall.lane, &stall.subject, stall.key)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl<S: TableStore> TableStore for StallingStore<S> {
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
        wait_if_stalled().await;
        tablekit_workers::fence::check()?;
        self.inner.execute(table, op).await
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        wait_if_stalled().await;
        tablekit_workers::fence::check()?;
        self.inner.submit_batch(table, batch).await
    }

    fn key_order(&self) -> tablekit_core::KeyOrder {
        self.inner.key_order()
    }

    fn preserves_negative_zero(&self) -> bool {
        self.inner.preserves_negative_zero()
    }
}
