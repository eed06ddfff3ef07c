//! A store that ends its process right after a chosen write: the kill tests run a child
//! process through it, killed between two steps of a multi-step operation.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tablekit::core::{AnyStore, Batch, ETag, Entity, Page, Query, TableStore, WriteOp};

/// A store that ends its process right after its `after`-th write (counted from 0) is
/// applied: a kill between that step and the next.
#[derive(Clone)]
pub(crate) struct KilledAfter {
    inner: AnyStore,
    writes: Arc<AtomicUsize>,
    after: usize,
}

impl KilledAfter {
    /// `inner`, ending the process right after its `after`-th write (from 0).
    pub(crate) fn new(inner: AnyStore, after: usize) -> Self {
        KilledAfter {
            inner,
            writes: Arc::default(),
            after,
        }
    }

    fn written(&self) {
        if self.writes.fetch_add(1, Ordering::SeqCst) == self.after {
            std::process::abort();
        }
    }
}

impl TableStore for KilledAfter {
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
        self.inner.get(table, partition_key, row_key, select).await
    }

    async fn query(&self, table: &str, query: &Query) -> tablekit::core::Result<Page> {
        self.inner.query(table, query).await
    }

    async fn execute(&self, table: &str, op: WriteOp) -> tablekit::core::Result<Option<ETag>> {
        let result = self.inner.execute(table, op).await;
        self.written();
        result
    }

    async fn submit_batch(
        &self,
        table: &str,
        batch: Batch,
    ) -> tablekit::core::Result<Vec<Option<ETag>>> {
        let result = self.inner.submit_batch(table, batch).await;
        self.written();
        result
    }
}

/// The exit code of a kill-test child whose kill point lay past its last write.
pub(crate) const FINISHED: i32 = 3;

/// Runs the test `child` of this test binary alone, with `env`: whether it was killed
/// (`false`: it exited with [`FINISHED`]). Any other exit fails the calling test.
pub(crate) fn run_child(child: &str, env: &[(&str, &str)]) -> bool {
    let status = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", child, "--nocapture", "--test-threads=1"])
        .envs(env.iter().copied())
        .env("RUST_LOG", "off")
        .status()
        .expect("the child runs");
    match status.code() {
        None => true,
        Some(FINISHED) => false,
        Some(_) => panic!("the child {child} ({env:?}) failed: {status:?}"),
    }
}
