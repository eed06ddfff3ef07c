//! The part of each [`TableStore`](super::TableStore) method that every backend of this
//! crate shares: a write's hot-partition count, the span and metrics of
//! [`observe::call`], and the limit checks, in that order, before the backend's own work.

use std::future::Future;

use super::{Batch, WriteOp};
use crate::error::Result;
use crate::limits;
use crate::model::{ETag, Entity};
use crate::observe;
use crate::query::{Page, Query};

/// The calls of one backend, observed and checked. Each method mirrors a `TableStore`
/// method: inside [`observe::call`] (so a failed check is counted with its error kind) it
/// runs the checks every backend makes for that method and then the backend's `work`,
/// which a failed check never starts. A backend's own checks (an access signature's
/// scope) belong in its `work`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Observed {
    /// The backend's `db.system`.
    backend: &'static str,
}

impl Observed {
    /// The calls of the backend whose `db.system` is `backend` (see [`observe::system`]).
    pub(crate) const fn new(backend: &'static str) -> Self {
        Observed { backend }
    }

    /// `create_table`: the table name is checked.
    pub(crate) async fn create_table<Fut>(
        self,
        table: &str,
        work: impl FnOnce() -> Fut,
    ) -> Result<()>
    where
        Fut: Future<Output = Result<()>>,
    {
        observe::call(self.backend, "create_table", table, None, async {
            limits::check_table_name(table)?;
            work().await
        })
        .await
    }

    /// `delete_table`: the table name is checked.
    pub(crate) async fn delete_table<Fut>(
        self,
        table: &str,
        work: impl FnOnce() -> Fut,
    ) -> Result<()>
    where
        Fut: Future<Output = Result<()>>,
    {
        observe::call(self.backend, "delete_table", table, None, async {
            limits::check_table_name(table)?;
            work().await
        })
        .await
    }

    /// `list_tables`: nothing to check (the span names the prefix as its table).
    pub(crate) async fn list_tables<Fut>(
        self,
        prefix: &str,
        work: impl FnOnce() -> Fut,
    ) -> Result<Vec<String>>
    where
        Fut: Future<Output = Result<Vec<String>>>,
    {
        observe::call(self.backend, "list_tables", prefix, None, work()).await
    }

    /// `get`: the table name, both keys and every projected name are checked.
    pub(crate) async fn get<Fut>(
        self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
        work: impl FnOnce() -> Fut,
    ) -> Result<Option<Entity>>
    where
        Fut: Future<Output = Result<Option<Entity>>>,
    {
        observe::call(self.backend, "get", table, Some(partition_key), async {
            limits::check_point_read(table, partition_key, row_key, select)?;
            work().await
        })
        .await
    }

    /// `query`: the table name, then the query ([`Query::check`]).
    pub(crate) async fn query<Fut>(
        self,
        table: &str,
        query: &Query,
        work: impl FnOnce() -> Fut,
    ) -> Result<Page>
    where
        Fut: Future<Output = Result<Page>>,
    {
        observe::call(self.backend, "query", table, None, async {
            limits::check_table_name(table)?;
            query.check()?;
            work().await
        })
        .await
    }

    /// `execute`: the write is counted for its partition, then the table name and the
    /// operation ([`WriteOp::check`]) are checked and `work` gets the operation.
    pub(crate) async fn execute<Fut>(
        self,
        table: &str,
        op: WriteOp,
        work: impl FnOnce(WriteOp) -> Fut,
    ) -> Result<Option<ETag>>
    where
        Fut: Future<Output = Result<Option<ETag>>>,
    {
        let partition_key = op.key().0.to_owned();
        observe::written(table, Some(&partition_key), 1);
        observe::call(
            self.backend,
            "execute",
            table,
            Some(&partition_key),
            async {
                limits::check_table_name(table)?;
                op.check()?;
                work(op).await
            },
        )
        .await
    }

    /// `submit_batch`: the batch's writes are counted for its partition, then the table
    /// name and the batch ([`Batch::check`]) are checked and `work` gets the batch.
    pub(crate) async fn submit_batch<Fut>(
        self,
        table: &str,
        batch: Batch,
        work: impl FnOnce(Batch) -> Fut,
    ) -> Result<Vec<Option<ETag>>>
    where
        Fut: Future<Output = Result<Vec<Option<ETag>>>>,
    {
        let partition_key = batch.partition_key().map(str::to_owned);
        observe::written(table, partition_key.as_deref(), batch.len());
        observe::call(
            self.backend,
            "submit_batch",
            table,
            partition_key.as_deref(),
            async {
                limits::check_table_name(table)?;
                batch.check()?;
                work(batch).await
            },
        )
        .await
    }
}
