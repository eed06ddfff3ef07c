//! The [`TableStore`] trait every backend implements, its write operations and entity
//! group transactions ([`Batch`]).

mod batch;
mod observed;
mod write;

pub use batch::{Batch, PlannedBatch, plan_batches};
pub(crate) use observed::Observed;
pub use write::WriteOp;

use std::collections::VecDeque;
use std::future::Future;

use futures::Stream;

use crate::error::{Error, ErrorKind, Result};
use crate::model::{ETag, Entity, IfMatch};
use crate::query::{Page, Query};

/// How a backend orders keys. The two orders differ only between characters above
/// U+FFFF (stored as UTF-16 surrogates) and characters from U+E000 to U+FFFF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrder {
    /// Unicode code points (byte order of UTF-8): the SQLite and in-memory stores.
    CodePoint,
    /// UTF-16 code units: the table service (Azure, Cosmos DB for Table, Azurite).
    Utf16,
}

impl KeyOrder {
    /// Compares two keys in this order.
    pub fn compare(self, a: &str, b: &str) -> std::cmp::Ordering {
        match self {
            KeyOrder::CodePoint => a.cmp(b),
            KeyOrder::Utf16 => a.encode_utf16().cmp(b.encode_utf16()),
        }
    }
}

/// A partitioned table store with the table service's model: tables of entities keyed by
/// (PartitionKey, RowKey), point reads, filtered queries in key order with continuation,
/// conditional writes and entity group transactions.
///
/// Backends implement the required methods; every check of the data model's limits
/// happens before any I/O. The write shortcuts (`insert`, `merge`, …) are provided.
///
/// ```
/// use tablekit_core::prelude::*;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// store.create_table("Employees").await?;
/// let etag = store.insert("Employees", Entity::new("Sales", "1").with("Age", 30)).await?;
/// store.merge("Employees", Entity::new("Sales", "1").with("Age", 31), etag.into()).await?;
/// let page = store.query("Employees", &Query::partition("Sales")).await?;
/// assert_eq!(page.entities[0].get("Age"), Some(&Value::Int32(31)));
/// # Ok::<_, Error>(())
/// # }).unwrap();
/// ```
pub trait TableStore: Send + Sync {
    /// Creates a table.
    ///
    /// # Errors
    /// `TableAlreadyExists`; `InvalidInput` for a bad name.
    fn create_table(&self, table: &str) -> impl Future<Output = Result<()>> + Send;

    /// Deletes a table and every entity in it.
    ///
    /// # Errors
    /// `TableNotFound`; `InvalidInput` for a bad name.
    fn delete_table(&self, table: &str) -> impl Future<Output = Result<()>> + Send;

    /// The names of the tables starting with `prefix` (case-sensitive), sorted.
    ///
    /// # Errors
    /// Backend failures.
    fn list_tables(&self, prefix: &str) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// Reads one entity; `select` projects its user properties.
    ///
    /// # Errors
    /// `TableNotFound`; `InvalidInput` for bad keys or names.
    fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> impl Future<Output = Result<Option<Entity>>> + Send;

    /// Reads one page of a query, in key order.
    ///
    /// # Errors
    /// `TableNotFound`; `InvalidInput` for a query that breaks the rules.
    fn query(&self, table: &str, query: &Query) -> impl Future<Output = Result<Page>> + Send;

    /// Applies one write and returns the new ETag (`None` for a delete).
    ///
    /// # Errors
    /// `NotFound`, `AlreadyExists`, `PreconditionFailed` as the operation defines;
    /// `TableNotFound`; `InvalidInput`/`TooLarge` before any I/O.
    fn execute(
        &self,
        table: &str,
        op: WriteOp,
    ) -> impl Future<Output = Result<Option<ETag>>> + Send;

    /// Applies an entity group transaction: every operation or none. Returns the new
    /// ETag of each operation, in order.
    ///
    /// # Errors
    /// [`Error::Batch`] naming the index of the failing operation; limit violations
    /// before any I/O.
    fn submit_batch(
        &self,
        table: &str,
        batch: Batch,
    ) -> impl Future<Output = Result<Vec<Option<ETag>>>> + Send;

    /// How this backend orders keys (queries return entities in this order).
    fn key_order(&self) -> KeyOrder {
        KeyOrder::CodePoint
    }

    /// Whether a Double `-0.0` reads back with its sign (the table service emulator
    /// returns `0.0`).
    fn preserves_negative_zero(&self) -> bool {
        true
    }

    /// Creates a table unless it exists; `true` if this call created it.
    ///
    /// # Errors
    /// As [`create_table`](Self::create_table), less `TableAlreadyExists`.
    fn create_table_if_not_exists(&self, table: &str) -> impl Future<Output = Result<bool>> + Send {
        async move {
            match self.create_table(table).await {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == ErrorKind::TableAlreadyExists => Ok(false),
                Err(e) => Err(e),
            }
        }
    }

    /// Inserts an entity.
    ///
    /// # Errors
    /// `AlreadyExists` if the keys are taken.
    fn insert(&self, table: &str, entity: Entity) -> impl Future<Output = Result<ETag>> + Send {
        async move { written(self.execute(table, WriteOp::Insert(entity)).await?) }
    }

    /// Replaces a stored entity whole.
    ///
    /// # Errors
    /// `NotFound`, `PreconditionFailed`.
    fn replace(
        &self,
        table: &str,
        entity: Entity,
        if_match: IfMatch,
    ) -> impl Future<Output = Result<ETag>> + Send {
        async move {
            written(
                self.execute(table, WriteOp::Replace(entity, if_match))
                    .await?,
            )
        }
    }

    /// Merges properties into a stored entity.
    ///
    /// # Errors
    /// `NotFound`, `PreconditionFailed`.
    fn merge(
        &self,
        table: &str,
        entity: Entity,
        if_match: IfMatch,
    ) -> impl Future<Output = Result<ETag>> + Send {
        async move {
            written(
                self.execute(table, WriteOp::Merge(entity, if_match))
                    .await?,
            )
        }
    }

    /// Inserts, or replaces what is stored.
    ///
    /// # Errors
    /// Limit violations, backend failures.
    fn insert_or_replace(
        &self,
        table: &str,
        entity: Entity,
    ) -> impl Future<Output = Result<ETag>> + Send {
        async move {
            written(
                self.execute(table, WriteOp::InsertOrReplace(entity))
                    .await?,
            )
        }
    }

    /// Inserts, or merges into what is stored.
    ///
    /// # Errors
    /// Limit violations, backend failures.
    fn insert_or_merge(
        &self,
        table: &str,
        entity: Entity,
    ) -> impl Future<Output = Result<ETag>> + Send {
        async move { written(self.execute(table, WriteOp::InsertOrMerge(entity)).await?) }
    }

    /// Deletes an entity.
    ///
    /// # Errors
    /// `NotFound`, `PreconditionFailed`.
    fn delete(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        if_match: IfMatch,
    ) -> impl Future<Output = Result<()>> + Send {
        async move {
            let op = WriteOp::Delete {
                partition_key: partition_key.to_owned(),
                row_key: row_key.to_owned(),
                if_match,
            };
            self.execute(table, op).await.map(drop)
        }
    }

    /// Reads one entity, a missing table reading as a missing entity: for code that
    /// looks for entities in tables it does not create (copies, archives, links).
    ///
    /// # Errors
    /// As [`get`](Self::get), but never `TableNotFound`.
    fn get_if_table_exists(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
    ) -> impl Future<Output = Result<Option<Entity>>> + Send {
        async move {
            match self.get(table, partition_key, row_key, None).await {
                Ok(found) => Ok(found),
                Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(None),
                Err(e) => Err(e),
            }
        }
    }

    /// Deletes an entity if it exists; `true` if this call deleted it.
    ///
    /// # Errors
    /// `TableNotFound`, limit violations, backend failures.
    fn delete_if_exists(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
    ) -> impl Future<Output = Result<bool>> + Send {
        async move {
            match self
                .delete(table, partition_key, row_key, IfMatch::Any)
                .await
            {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e),
            }
        }
    }

    /// Every entity of a query, page after page, as a stream; stops after `top` entities
    /// when the query sets it.
    fn query_stream<'a>(
        &'a self,
        table: &'a str,
        query: Query,
    ) -> impl Stream<Item = Result<Entity>> + Send + 'a
    where
        Self: Sized,
    {
        let remaining = query.top.unwrap_or(usize::MAX);
        let state = StreamState {
            query: Some(query),
            buffer: VecDeque::new(),
            remaining,
            started: false,
        };
        futures::stream::unfold(state, move |mut state| async move {
            loop {
                // The first page is always requested, so an invalid query (`top(0)`)
                // reports its error instead of looking empty.
                if state.remaining == 0 && state.started {
                    return None;
                }
                if let Some(entity) = state.buffer.pop_front() {
                    state.remaining -= 1;
                    return Some((Ok(entity), state));
                }
                let query = state.query.take()?;
                state.started = true;
                match self.query(table, &query).await {
                    Ok(page) => {
                        state.buffer.extend(page.entities);
                        if page.continuation.is_some() {
                            state.query = Some(query.continue_from(page.continuation));
                        }
                    }
                    Err(e) => return Some((Err(e), state)),
                }
            }
        })
    }

    /// Every entity of a query, collected (stops after `top` when the query sets it).
    ///
    /// # Errors
    /// The first error of any page.
    fn query_all(
        &self,
        table: &str,
        query: Query,
    ) -> impl Future<Output = Result<Vec<Entity>>> + Send
    where
        Self: Sized,
    {
        async move {
            use futures::TryStreamExt;
            self.query_stream(table, query).try_collect().await
        }
    }
}

struct StreamState {
    query: Option<Query>,
    buffer: VecDeque<Entity>,
    remaining: usize,
    started: bool,
}

fn written(etag: Option<ETag>) -> Result<ETag> {
    etag.ok_or_else(|| Error::Backend {
        message: "the backend returned no ETag for a write".to_owned(),
    })
}
