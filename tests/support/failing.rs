//! A store whose point reads fail with a transient error while a switch is on: a store
//! that stops answering part way through a multi-step operation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tablekit::core::{AnyStore, Batch, ETag, Entity, Error, Page, Query, TableStore, WriteOp};

/// `inner`, with point reads failing while [`FailingGets::fail`] is on.
#[derive(Clone)]
pub(crate) struct FailingGets {
    inner: AnyStore,
    failing: Arc<AtomicBool>,
}

impl FailingGets {
    pub(crate) fn new(inner: AnyStore) -> Self {
        FailingGets {
            inner,
            failing: Arc::default(),
        }
    }

    /// Turns the failure of point reads on or off.
    pub(crate) fn fail(&self, on: bool) {
        self.failing.store(on, Ordering::SeqCst);
    }
}

impl TableStore for FailingGets {
    async fn create_table(&self, table: &str) -> tablekit::core::Result<()> {
        self.inner.create_table(table).await
    }

    async fn delete_table(&self, table: &str) -> tablekit::core::Result<()> {
        self.inner.delete_table(table).await
    }

    async fn list_tables(&self, prefix: &str) -> tablekit::core::Result<Vec<String>> {
        self.inner.list_tables(prefix).await
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> tablekit::core::Result<Option<Entity>> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(Error::Transient {
                message: format!("reads of {table} fail in this test"),
            });
        }
        self.inner.get(table, partition_key, row_key, select).await
    }

    async fn query(&self, table: &str, query: &Query) -> tablekit::core::Result<Page> {
        self.inner.query(table, query).await
    }

    async fn execute(&self, table: &str, op: WriteOp) -> tablekit::core::Result<Option<ETag>> {
        self.inner.execute(table, op).await
    }

    async fn submit_batch(
        &self,
        table: &str,
        batch: Batch,
    ) -> tablekit::core::Result<Vec<Option<ETag>>> {
        self.inner.submit_batch(table, batch).await
    }
}
