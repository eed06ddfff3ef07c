//! A memory store that holds one call until the test releases it: a write stalled at a
//! chosen step while others run.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tablekit_core::{Batch, ETag, Entity, MemoryStore, Page, Query, TableStore, WriteOp};
use tablekit_patterns::consistency::{BoxFuture, Envelope, OutboxSink};
use tokio::sync::Notify;

/// The call a [`Held`] store holds (the first one, once armed).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Hold {
    /// A point read of this RowKey.
    Read(&'static str),
    /// A transaction inserting this RowKey.
    Insert(&'static str),
    /// A single replace of this RowKey.
    Replace(&'static str),
    /// The second point read of this RowKey once armed (a write's own read, after the
    /// read its caller made).
    SecondRead(&'static str),
    /// A point read of a RowKey starting with this fails (transiently) once armed.
    FailRead(&'static str),
    /// A transaction writing this RowKey (whatever the operation).
    Commit(&'static str),
    /// A query (the first once armed).
    Query,
}

/// A memory store holding the first call that matches its [`Hold`] once armed.
#[derive(Clone)]
pub(crate) struct Held {
    /// The store underneath (reads and writes through it are never held).
    pub(crate) inner: MemoryStore,
    hold: Hold,
    armed: Arc<AtomicBool>,
    reads: Arc<std::sync::atomic::AtomicUsize>,
    reached: Arc<Notify>,
    release: Arc<Notify>,
}

impl Held {
    /// A store that will hold `hold`.
    pub(crate) fn new(hold: Hold) -> Self {
        Held {
            inner: MemoryStore::new(),
            hold,
            armed: Arc::default(),
            reads: Arc::default(),
            reached: Arc::default(),
            release: Arc::default(),
        }
    }

    /// Holds the next matching call.
    pub(crate) fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// Waits until a call is held.
    pub(crate) async fn reached(&self) {
        self.reached.notified().await;
    }

    /// Lets the held call go on.
    pub(crate) fn release(&self) {
        self.release.notify_one();
    }

    async fn maybe_hold(&self, matches: bool) {
        if matches && self.armed.swap(false, Ordering::SeqCst) {
            self.reached.notify_one();
            self.release.notified().await;
        }
    }
}

impl TableStore for Held {
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
        if matches!(self.hold, Hold::FailRead(rk) if row_key.starts_with(rk))
            && self.armed.swap(false, Ordering::SeqCst)
        {
            return Err(tablekit_core::Error::Transient {
                message: "injected: read failed".into(),
            });
        }
        let second = matches!(self.hold, Hold::SecondRead(rk) if rk == row_key)
            && self.armed.load(Ordering::SeqCst)
            && self.reads.fetch_add(1, Ordering::SeqCst) == 1;
        self.maybe_hold(second || matches!(self.hold, Hold::Read(rk) if rk == row_key))
            .await;
        self.inner.get(table, partition_key, row_key, select).await
    }
    async fn query(&self, table: &str, query: &Query) -> tablekit_core::Result<Page> {
        self.maybe_hold(matches!(self.hold, Hold::Query)).await;
        self.inner.query(table, query).await
    }
    async fn execute(&self, table: &str, op: WriteOp) -> tablekit_core::Result<Option<ETag>> {
        self.maybe_hold(
            matches!((&self.hold, &op), (Hold::Replace(rk), WriteOp::Replace(e, _)) if e.row_key == *rk),
        )
        .await;
        self.inner.execute(table, op).await
    }
    async fn submit_batch(
        &self,
        table: &str,
        batch: Batch,
    ) -> tablekit_core::Result<Vec<Option<ETag>>> {
        let inserts = |rk: &str| {
            batch
                .operations()
                .iter()
                .any(|op| matches!(op, WriteOp::Insert(e) if e.row_key == rk))
        };
        let writes = |rk: &str| batch.operations().iter().any(|op| op.key().1 == rk);
        self.maybe_hold(match self.hold {
            Hold::Insert(rk) => inserts(rk),
            Hold::Commit(rk) => writes(rk),
            _ => false,
        })
        .await;
        self.inner.submit_batch(table, batch).await
    }
}

/// A sink that keeps what it is given.
#[derive(Default)]
pub(crate) struct Kept(std::sync::Mutex<Vec<Envelope>>);

impl Kept {
    /// What it was given, in order.
    pub(crate) fn kept(&self) -> std::sync::LockResult<std::sync::MutexGuard<'_, Vec<Envelope>>> {
        self.0.lock()
    }
}

impl OutboxSink for Kept {
    fn publish<'a>(
        &'a self,
        envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        if let Ok(mut kept) = self.0.lock() {
            kept.push(envelope.clone());
        }
        Box::pin(async { Ok(()) })
    }
}
