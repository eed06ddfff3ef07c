//! The [`TableStore`] trait every backend implements, its write operations and entity
//! group transactions ([`Batch`]).

use std::collections::{HashMap, VecDeque};
use std::future::Future;

use futures::Stream;

use crate::error::{Error, ErrorKind, Result};
use crate::limits::{self, MAX_BATCH_BYTES, MAX_BATCH_OPERATIONS, Violation};
use crate::model::{ETag, Entity, IfMatch};
use crate::query::{Page, Query};

/// One write, as the table service defines it.
#[derive(Clone, Debug, PartialEq)]
pub enum WriteOp {
    /// Insert; fails with `AlreadyExists` if the keys are taken.
    Insert(Entity),
    /// Replace the whole stored entity; fails with `NotFound` or `PreconditionFailed`.
    Replace(Entity, IfMatch),
    /// Overwrite the given properties, keep the others; fails with `NotFound` or
    /// `PreconditionFailed`.
    Merge(Entity, IfMatch),
    /// Insert, or replace whatever is stored.
    InsertOrReplace(Entity),
    /// Insert, or merge into whatever is stored.
    InsertOrMerge(Entity),
    /// Delete; fails with `NotFound` or `PreconditionFailed`.
    Delete {
        /// The partition key.
        partition_key: String,
        /// The row key.
        row_key: String,
        /// The concurrency condition.
        if_match: IfMatch,
    },
}

impl WriteOp {
    /// The (PartitionKey, RowKey) the operation writes.
    pub fn key(&self) -> (&str, &str) {
        match self {
            WriteOp::Insert(e)
            | WriteOp::Replace(e, _)
            | WriteOp::Merge(e, _)
            | WriteOp::InsertOrReplace(e)
            | WriteOp::InsertOrMerge(e) => e.key(),
            WriteOp::Delete {
                partition_key,
                row_key,
                ..
            } => (partition_key, row_key),
        }
    }

    /// The entity the operation writes, if it writes one.
    pub fn entity(&self) -> Option<&Entity> {
        match self {
            WriteOp::Insert(e)
            | WriteOp::Replace(e, _)
            | WriteOp::Merge(e, _)
            | WriteOp::InsertOrReplace(e)
            | WriteOp::InsertOrMerge(e) => Some(e),
            WriteOp::Delete { .. } => None,
        }
    }

    /// Checks the operation against the data model's limits.
    ///
    /// # Errors
    /// The first [`Violation`] found.
    pub fn check(&self) -> Result<(), Violation> {
        self.checked_size().map(drop)
    }

    /// Checks the operation as [`check`](Self::check) does and returns its
    /// [`size`](Self::size), walking the entity once.
    ///
    /// # Errors
    /// The first [`Violation`] found.
    pub fn checked_size(&self) -> Result<usize, Violation> {
        match self.entity() {
            Some(e) => limits::check_entity_sized(e),
            None => {
                let (pk, rk) = self.key();
                limits::check_keys(pk, rk).map(|()| limits::key_size(pk, rk))
            }
        }
    }

    /// The bytes the operation adds to a batch request, estimated from the JSON the table
    /// service receives (binary values travel in base64, typed values with their
    /// `@odata.type` annotation, each operation with its own headers and URL): the 4 MiB
    /// batch limit is a limit on that payload.
    pub fn payload_size(&self) -> usize {
        const PER_OPERATION: usize = 400;
        let (pk, rk) = self.key();
        let keys = 2 * (pk.len() + rk.len()) + 64;
        let properties: usize = self.entity().map_or(0, |e| {
            e.properties
                .iter()
                .map(|(name, value)| {
                    let annotation = name.len() + 36;
                    name.len()
                        + 4
                        + match value {
                            crate::model::Value::String(s) => s.len() + 2,
                            crate::model::Value::Int32(_) => 11,
                            crate::model::Value::Boolean(_) => 5,
                            crate::model::Value::Int64(_) => 22 + annotation,
                            crate::model::Value::Double(_) => 26 + annotation,
                            crate::model::Value::DateTime(_) => 32 + annotation,
                            crate::model::Value::Guid(_) => 38 + annotation,
                            crate::model::Value::Binary(b) => {
                                b.len().div_ceil(3) * 4 + 2 + annotation
                            }
                        }
                })
                .sum()
        });
        PER_OPERATION + keys + properties
    }

    /// The bytes the operation adds to a batch, as the service counts them.
    pub fn size(&self) -> usize {
        match self.entity() {
            Some(e) => limits::entity_size(e),
            None => {
                let (pk, rk) = self.key();
                limits::key_size(pk, rk)
            }
        }
    }
}

/// An entity group transaction: up to 100 operations on distinct entities of one
/// partition, applied all or nothing.
///
/// ```
/// use tablekit_core::{Entity, IfMatch, store::Batch};
///
/// let mut batch = Batch::new();
/// batch.insert(Entity::new("Sales", "empid_000001").with("Age", 30));
/// batch.delete("Sales", "empid_000002", IfMatch::Any);
/// assert_eq!(batch.len(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    ops: Vec<WriteOp>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }

    /// Adds any operation.
    pub fn push(&mut self, op: WriteOp) -> &mut Self {
        self.ops.push(op);
        self
    }

    /// Adds an insert.
    pub fn insert(&mut self, entity: Entity) -> &mut Self {
        self.push(WriteOp::Insert(entity))
    }

    /// Adds a replace.
    pub fn replace(&mut self, entity: Entity, if_match: IfMatch) -> &mut Self {
        self.push(WriteOp::Replace(entity, if_match))
    }

    /// Adds a merge.
    pub fn merge(&mut self, entity: Entity, if_match: IfMatch) -> &mut Self {
        self.push(WriteOp::Merge(entity, if_match))
    }

    /// Adds an insert-or-replace.
    pub fn insert_or_replace(&mut self, entity: Entity) -> &mut Self {
        self.push(WriteOp::InsertOrReplace(entity))
    }

    /// Adds an insert-or-merge.
    pub fn insert_or_merge(&mut self, entity: Entity) -> &mut Self {
        self.push(WriteOp::InsertOrMerge(entity))
    }

    /// Adds a delete.
    pub fn delete(
        &mut self,
        partition_key: impl Into<String>,
        row_key: impl Into<String>,
        if_match: IfMatch,
    ) -> &mut Self {
        self.push(WriteOp::Delete {
            partition_key: partition_key.into(),
            row_key: row_key.into(),
            if_match,
        })
    }

    /// The operations, in order.
    pub fn operations(&self) -> &[WriteOp] {
        &self.ops
    }

    /// Takes the operations out.
    pub fn into_operations(self) -> Vec<WriteOp> {
        self.ops
    }

    /// How many operations the batch holds.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The partition the batch writes (that of its first operation).
    pub fn partition_key(&self) -> Option<&str> {
        self.ops.first().map(|op| op.key().0)
    }

    /// Checks the batch rules: 1 to 100 operations, one partition, one operation per
    /// entity, every operation valid, at most 4 MiB of request payload in all (see
    /// [`WriteOp::payload_size`]).
    ///
    /// # Errors
    /// The first [`Violation`] found; those about one operation name its index.
    pub fn check(&self) -> Result<(), Violation> {
        if self.ops.is_empty() {
            return Err(Violation::BatchEmpty);
        }
        if self.ops.len() > MAX_BATCH_OPERATIONS {
            return Err(Violation::BatchTooManyOperations {
                count: self.ops.len(),
                max: MAX_BATCH_OPERATIONS,
            });
        }
        let partition = self.ops[0].key().0;
        let duplicate = self.first_duplicate();
        let mut previous: Option<&Entity> = None;
        let mut size = 0;
        for (index, op) in self.ops.iter().enumerate() {
            match op.entity() {
                Some(e) => {
                    limits::check_entity_sized_after(e, previous).map_err(|v| v.in_batch(index))?;
                    previous = Some(e);
                }
                None => op.checked_size().map(drop).map_err(|v| v.in_batch(index))?,
            }
            let (pk, rk) = op.key();
            if pk != partition {
                return Err(Violation::BatchMixedPartitions {
                    index,
                    expected: partition.to_owned(),
                    found: pk.to_owned(),
                });
            }
            if let Some((dup_index, first_index)) = duplicate
                && dup_index == index
            {
                return Err(Violation::BatchDuplicateEntity {
                    index,
                    first_index,
                    row_key: rk.to_owned(),
                });
            }
            size += op.payload_size();
        }
        if size > MAX_BATCH_BYTES {
            return Err(Violation::BatchTooLarge {
                size,
                max: MAX_BATCH_BYTES,
            });
        }
        Ok(())
    }
}

impl Batch {
    /// The first operation (in batch order) whose RowKey an earlier one already has, with
    /// the index of that earlier one. Row keys in ascending order, as planners and most
    /// callers build batches, are seen clean in one pass; others are sorted (at most 100).
    fn first_duplicate(&self) -> Option<(usize, usize)> {
        let keys = || self.ops.iter().map(|op| op.key().1);
        if keys().zip(keys().skip(1)).all(|(a, b)| a < b) {
            return None;
        }
        let mut sorted: Vec<(&str, usize)> = keys().zip(0..).collect();
        // Stable on the index: within a run of equal keys the first is the earliest.
        sorted.sort_unstable();
        sorted
            .windows(2)
            .filter(|pair| pair[0].0 == pair[1].0)
            .map(|pair| (pair[1].1, pair[0].1))
            .min()
    }
}

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

/// An entity group transaction planned by [`plan_batches`], with the position of each of
/// its operations in the planner's input.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlannedBatch {
    /// The batch, ready to submit.
    pub batch: Batch,
    /// For each operation of the batch, its index in the planner's input.
    pub inputs: Vec<usize>,
}

/// Plans writes into entity group transactions: grouped by partition (in the order the
/// partitions first appear, each partition's writes kept in their order), at most 100
/// operations and 4 MiB per batch. A second write to an entity already in the batch being
/// filled starts the next batch, so every write applies in input order.
///
/// # Errors
/// The first invalid operation's [`Violation`], naming its input index; nothing is planned.
pub fn plan_batches(
    ops: impl IntoIterator<Item = WriteOp>,
) -> Result<Vec<PlannedBatch>, Violation> {
    struct Filling {
        planned: PlannedBatch,
        size: usize,
        rows: std::collections::HashSet<String>,
    }
    let mut done: Vec<(usize, PlannedBatch)> = Vec::new();
    let mut filling: Vec<Filling> = Vec::new();
    let mut partitions: HashMap<String, usize> = HashMap::new();
    let mut order = 0usize;
    for (input, op) in ops.into_iter().enumerate() {
        op.checked_size().map_err(|v| v.in_batch(input))?;
        let size = op.payload_size();
        let (pk, rk) = op.key();
        let slot = match partitions.get(pk) {
            Some(&slot) => slot,
            None => {
                partitions.insert(pk.to_owned(), filling.len());
                filling.push(Filling {
                    planned: PlannedBatch::default(),
                    size: 0,
                    rows: std::collections::HashSet::new(),
                });
                filling.len() - 1
            }
        };
        let current = &mut filling[slot];
        if current.planned.batch.len() == MAX_BATCH_OPERATIONS
            || current.size + size > MAX_BATCH_BYTES
            || current.rows.contains(rk)
        {
            let full = std::mem::take(&mut current.planned);
            done.push((order, full));
            order += 1;
            current.size = 0;
            current.rows.clear();
        }
        current.rows.insert(rk.to_owned());
        current.size += size;
        current.planned.inputs.push(input);
        current.planned.batch.push(op);
    }
    for current in filling {
        if !current.planned.batch.is_empty() {
            done.push((order, current.planned));
            order += 1;
        }
    }
    done.sort_by_key(|(order, _)| *order);
    Ok(done.into_iter().map(|(_, planned)| planned).collect())
}

impl FromIterator<WriteOp> for Batch {
    fn from_iter<I: IntoIterator<Item = WriteOp>>(iter: I) -> Self {
        Batch {
            ops: iter.into_iter().collect(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn put(pk: &str, rk: usize) -> WriteOp {
        WriteOp::InsertOrReplace(Entity::new(pk, format!("{rk:04}")).with("N", rk as i64))
    }

    #[test]
    fn planning_groups_by_partition_and_keeps_each_partitions_order() {
        let ops = (0..250).map(|i| put(["a", "b"][i % 2], i));
        let plan = plan_batches(ops).expect("valid");
        let shapes: Vec<(Option<&str>, usize)> = plan
            .iter()
            .map(|p| (p.batch.partition_key(), p.batch.len()))
            .collect();
        assert_eq!(
            shapes,
            [
                (Some("a"), 100),
                (Some("b"), 100),
                (Some("a"), 25),
                (Some("b"), 25)
            ]
        );
        for planned in &plan {
            assert!(planned.batch.check().is_ok());
            assert!(planned.inputs.windows(2).all(|w| w[0] < w[1]));
        }
        let mut all: Vec<usize> = plan.iter().flat_map(|p| p.inputs.clone()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..250).collect::<Vec<_>>());
    }

    #[test]
    fn the_first_duplicate_in_batch_order_is_reported_with_its_first_occurrence() {
        let batch = |keys: &[usize]| -> Batch { keys.iter().map(|&k| put("a", k)).collect() };
        let duplicate = |b: &Batch| match b.check() {
            Err(Violation::BatchDuplicateEntity {
                index, first_index, ..
            }) => Some((index, first_index)),
            Err(other) => panic!("unexpected {other:?}"),
            Ok(()) => None,
        };
        assert_eq!(duplicate(&batch(&[1, 2, 3, 4])), None);
        assert_eq!(duplicate(&batch(&[4, 3, 2, 1])), None);
        assert_eq!(duplicate(&batch(&[1, 2, 1])), Some((2, 0)));
        // Key 9 repeats first (index 3), before key 1's second (index 4) and third copy.
        assert_eq!(duplicate(&batch(&[1, 9, 5, 9, 1, 1])), Some((3, 1)));
        assert_eq!(duplicate(&batch(&[7, 3, 3, 7])), Some((2, 1)));
        // Every order of a small multiset agrees with a reference that walks the batch.
        let keys = [1, 2, 2, 3, 3, 3];
        for seed in 0..200u64 {
            let mut shuffled = keys;
            let mut x = seed;
            for i in (1..shuffled.len()).rev() {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                shuffled.swap(i, (x >> 33) as usize % (i + 1));
            }
            let reference = (0..shuffled.len())
                .find_map(|i| (0..i).find(|&j| shuffled[j] == shuffled[i]).map(|j| (i, j)));
            assert_eq!(duplicate(&batch(&shuffled)), reference, "{shuffled:?}");
        }
    }

    #[test]
    fn an_invalid_operation_before_the_duplicate_is_reported_first_and_after_it_is_not() {
        let mut early = Batch::new();
        early
            .push(put("a", 1))
            .push(WriteOp::InsertOrReplace(Entity::new("a", "x/y")))
            .push(put("a", 1));
        assert!(matches!(
            early.check(),
            Err(Violation::InBatch { index: 1, violation })
                if matches!(*violation, Violation::KeyForbiddenCharacter { .. })
        ));
        let mut late = Batch::new();
        late.push(put("a", 1))
            .push(put("a", 1))
            .push(WriteOp::InsertOrReplace(Entity::new("a", "x/y")));
        assert!(matches!(
            late.check(),
            Err(Violation::BatchDuplicateEntity {
                index: 1,
                first_index: 0,
                ..
            })
        ));
    }

    #[test]
    fn a_second_write_to_an_entity_starts_the_next_batch() {
        let plan = plan_batches([put("a", 1), put("a", 2), put("a", 1)]).expect("valid");
        let inputs: Vec<Vec<usize>> = plan.into_iter().map(|p| p.inputs).collect();
        assert_eq!(inputs, [vec![0, 1], vec![2]]);
    }

    #[test]
    fn an_invalid_write_is_refused_with_its_input_position() {
        let bad = WriteOp::Insert(Entity::new("a/b", "x"));
        let error = plan_batches([put("a", 1), bad]).expect_err("invalid key");
        assert_eq!(error.batch_index(), Some(1));
    }
}
