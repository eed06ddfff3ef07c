//! Fault injection for the tests of code built on a [`TableStore`]: a wrapper that counts
//! calls and makes a chosen write fail, either before it reaches the store (nothing
//! written) or after (written, but the caller sees an error, as when a response is lost),
//! or that "crashes" the store from a chosen write on. Tests of multi-step operations use
//! it to stop between any two steps and check that a retry converges.
//!
//! [`ChaosStore`] injects seeded faults at every call instead, for the deterministic
//! simulation of the whole system.
//!
//! ```
//! use tablekit_core::fault::{FaultyStore, Timing};
//! use tablekit_core::prelude::*;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = FaultyStore::new(MemoryStore::new());
//! store.create_table("Items").await?;
//! store.fail_write(0, Timing::AfterWrite);
//! let err = store.insert("Items", Entity::new("p", "r")).await.unwrap_err();
//! assert!(err.is_retryable());
//! // The write happened; only its answer was lost.
//! assert!(store.get("Items", "p", "r", None).await?.is_some());
//! # Ok::<_, Error>(())
//! # }).unwrap();
//! ```

mod seeded;

pub use seeded::{ChaosStore, Crash, FaultCounts, FaultRates};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::model::{ETag, Entity};
use crate::query::{Page, Query};
use crate::store::{Batch, TableStore, WriteOp};

/// When an injected write failure strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// The write never reaches the store.
    BeforeWrite,
    /// The write is applied, then the caller gets an error.
    AfterWrite,
}

#[derive(Debug, Default)]
struct Plan {
    /// Fail the write with this number (counted from 0 over the wrapper's life).
    fail_at: Vec<(usize, Timing)>,
    /// From this write number on, every call fails.
    crash_at: Option<usize>,
}

#[derive(Debug, Default)]
struct State {
    calls: AtomicUsize,
    writes: AtomicUsize,
    rows: AtomicUsize,
    scans: Mutex<Vec<String>>,
    plan: Mutex<Plan>,
}

/// A [`TableStore`] wrapper that injects failures. Clones share the plan and counters.
#[derive(Clone, Debug)]
pub struct FaultyStore<S> {
    inner: S,
    state: Arc<State>,
}

fn injected(what: &str) -> Error {
    Error::Transient {
        message: format!("injected fault: {what}"),
    }
}

impl<S: TableStore> FaultyStore<S> {
    /// Wraps a store; no fault is planned.
    pub fn new(inner: S) -> Self {
        FaultyStore {
            inner,
            state: Arc::default(),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn plan(&self) -> std::sync::MutexGuard<'_, Plan> {
        self.state.plan.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the write `after` writes from now fail once (`0` = the next write).
    pub fn fail_write(&self, after: usize, timing: Timing) {
        let at = self.writes() + after;
        self.plan().fail_at.push((at, timing));
    }

    /// Makes every call fail from the write `after` writes from now on, as if the
    /// process had died there, until [`recover`](Self::recover).
    pub fn crash_after_writes(&self, after: usize) {
        let at = self.writes() + after;
        self.plan().crash_at = Some(at);
    }

    /// Clears every planned fault.
    pub fn recover(&self) {
        *self.plan() = Plan::default();
    }

    /// Calls made so far (reads and writes).
    pub fn calls(&self) -> usize {
        self.state.calls.load(Ordering::SeqCst)
    }

    /// Writes attempted so far (single writes and batches, each counting once).
    pub fn writes(&self) -> usize {
        self.state.writes.load(Ordering::SeqCst)
    }

    /// Entities returned so far by point reads and queries.
    pub fn rows_read(&self) -> usize {
        self.state.rows.load(Ordering::SeqCst)
    }

    /// The tables read by queries that scan the whole table (no PartitionKey bound), in
    /// call order.
    pub fn table_scans(&self) -> Vec<String> {
        self.state
            .scans
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Sets the call, write and row counters and the scans back to zero (not the plan).
    pub fn reset_counters(&self) {
        self.state.calls.store(0, Ordering::SeqCst);
        self.state.writes.store(0, Ordering::SeqCst);
        self.state.rows.store(0, Ordering::SeqCst);
        if let Ok(mut scans) = self.state.scans.lock() {
            scans.clear();
        }
    }

    fn check_crashed(&self) -> Result<()> {
        self.state.calls.fetch_add(1, Ordering::SeqCst);
        match self.plan().crash_at {
            Some(at) if self.writes() >= at => Err(injected("store crashed")),
            _ => Ok(()),
        }
    }

    async fn write<T>(&self, f: impl Future<Output = Result<T>>) -> Result<T> {
        self.state.calls.fetch_add(1, Ordering::SeqCst);
        let n = self.state.writes.fetch_add(1, Ordering::SeqCst);
        let timing = {
            let mut plan = self.plan();
            if plan.crash_at.is_some_and(|at| n >= at) {
                return Err(injected("store crashed"));
            }
            let hit = plan.fail_at.iter().position(|(at, _)| *at == n);
            hit.map(|i| plan.fail_at.remove(i).1)
        };
        match timing {
            Some(Timing::BeforeWrite) => Err(injected("write failed before reaching the store")),
            Some(Timing::AfterWrite) => {
                f.await?;
                Err(injected("write applied, answer lost"))
            }
            None => f.await,
        }
    }
}

impl<S: TableStore> TableStore for FaultyStore<S> {
    async fn create_table(&self, table: &str) -> Result<()> {
        self.check_crashed()?;
        self.inner.create_table(table).await
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        self.check_crashed()?;
        self.inner.delete_table(table).await
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        self.check_crashed()?;
        self.inner.list_tables(prefix).await
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        self.check_crashed()?;
        let found = self
            .inner
            .get(table, partition_key, row_key, select)
            .await?;
        if found.is_some() {
            self.state.rows.fetch_add(1, Ordering::SeqCst);
        }
        Ok(found)
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        self.check_crashed()?;
        if query.explain() == crate::query::QueryClass::TableScan
            && let Ok(mut scans) = self.state.scans.lock()
        {
            scans.push(table.to_owned());
        }
        let page = self.inner.query(table, query).await?;
        self.state
            .rows
            .fetch_add(page.entities.len(), Ordering::SeqCst);
        Ok(page)
    }

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        self.write(self.inner.execute(table, op)).await
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        self.write(self.inner.submit_batch(table, batch)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryStore;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    }

    #[test]
    fn a_fault_before_the_write_leaves_nothing_written() {
        rt().block_on(async {
            let store = FaultyStore::new(MemoryStore::new());
            store.create_table("Items").await.expect("create");
            store.fail_write(1, Timing::BeforeWrite);
            store
                .insert("Items", Entity::new("p", "a"))
                .await
                .expect("first write");
            let err = store.insert("Items", Entity::new("p", "b")).await;
            assert!(err.is_err_and(|e| e.is_retryable()));
            assert!(
                store
                    .get("Items", "p", "b", None)
                    .await
                    .expect("get")
                    .is_none()
            );
            store
                .insert("Items", Entity::new("p", "b"))
                .await
                .expect("retry succeeds");
            assert_eq!(store.writes(), 3);
        });
    }

    #[test]
    fn a_crash_fails_every_call_until_recovery() {
        rt().block_on(async {
            let store = FaultyStore::new(MemoryStore::new());
            store.create_table("Items").await.expect("create");
            store.crash_after_writes(1);
            store
                .insert("Items", Entity::new("p", "a"))
                .await
                .expect("before the crash");
            assert!(store.insert("Items", Entity::new("p", "b")).await.is_err());
            assert!(store.get("Items", "p", "a", None).await.is_err());
            store.recover();
            assert!(
                store
                    .get("Items", "p", "a", None)
                    .await
                    .expect("get")
                    .is_some()
            );
            assert!(
                store
                    .get("Items", "p", "b", None)
                    .await
                    .expect("get")
                    .is_none()
            );
        });
    }
}
