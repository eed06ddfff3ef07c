//! [`Table`]: the typed view of a table, over any [`TableStore`].

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use chrono::{DateTime, Utc};
use futures::{Stream, StreamExt, TryStreamExt};

use crate::clock::SharedClock;
use crate::error::{Error, ErrorKind, Result};
use crate::filter;
use crate::model::{ETag, Entity, IfMatch};
use crate::query::{ContinuationToken, Query};
use crate::store::{TableStore, WriteOp, plan_batches};

mod options;

pub use options::TableOptions;

use super::template::KeyBounds;
use super::{EXPIRES_PROPERTY, EntityType, PlainWrite, Projection, Record, is_expired};

/// A typed value read from a table, with the entity's keys, ETag and timestamp.
#[derive(Clone, Debug, PartialEq)]
pub struct Stored<T> {
    /// The value.
    pub value: T,
    /// The entity's PartitionKey.
    pub partition_key: String,
    /// The entity's RowKey.
    pub row_key: String,
    /// The entity's ETag, for a conditional replace, merge or delete.
    pub etag: Option<ETag>,
    /// When the entity was last written.
    pub timestamp: Option<DateTime<Utc>>,
    /// The stored version, when it was older than the type's and was upcast on read.
    pub upgraded_from: Option<u32>,
}

impl<T> Stored<T> {
    /// The value alone.
    pub fn into_inner(self) -> T {
        self.value
    }

    /// The condition "unchanged since this read": the ETag, or any when there is none.
    pub fn if_match(&self) -> IfMatch {
        self.etag.clone().map_or(IfMatch::Any, IfMatch::ETag)
    }

    /// The same entity with its value mapped.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Stored<U> {
        Stored {
            value: f(self.value),
            partition_key: self.partition_key,
            row_key: self.row_key,
            etag: self.etag,
            timestamp: self.timestamp,
            upgraded_from: self.upgraded_from,
        }
    }
}

impl<T> Deref for Stored<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for Stored<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

/// One typed write for [`Table::write_all`].
#[derive(Clone, Debug, PartialEq)]
pub enum TypedWrite<R> {
    /// Insert; fails if the keys are taken.
    Insert(R),
    /// Insert, or replace what is stored.
    Upsert(R),
    /// Replace what is stored, under a condition.
    Replace(R, IfMatch),
    /// Merge into what is stored, under a condition.
    Merge(R, IfMatch),
    /// Delete the entity with these keys, under a condition.
    Delete {
        /// The PartitionKey.
        partition_key: String,
        /// The RowKey.
        row_key: String,
        /// The condition.
        if_match: IfMatch,
    },
}

impl<R: Record> TypedWrite<R> {
    fn into_op(self) -> Result<WriteOp> {
        Ok(match self {
            TypedWrite::Insert(value) => WriteOp::Insert(value.to_entity()?),
            TypedWrite::Upsert(value) => WriteOp::InsertOrReplace(value.to_entity()?),
            TypedWrite::Replace(value, if_match) => WriteOp::Replace(value.to_entity()?, if_match),
            TypedWrite::Merge(value, if_match) => WriteOp::Merge(value.to_entity()?, if_match),
            TypedWrite::Delete {
                partition_key,
                row_key,
                if_match,
            } => WriteOp::Delete {
                partition_key,
                row_key,
                if_match,
            },
        })
    }
}

/// What one entity group transaction of [`Table::write_all`] did.
#[derive(Debug)]
pub struct BatchOutcome {
    /// The input positions of the batch's writes, in batch order.
    pub inputs: Vec<usize>,
    /// The new ETag of each write (none for deletes), or why the whole batch failed.
    pub result: Result<Vec<Option<ETag>>>,
}

/// What [`Table::write_all`] did: one outcome per entity group transaction. Batches are
/// atomic one by one, not together: a failed batch wrote nothing, the others are written.
#[derive(Debug, Default)]
pub struct WriteReport {
    /// The batches, in the order they were submitted.
    pub batches: Vec<BatchOutcome>,
}

impl WriteReport {
    /// Whether every batch was written.
    pub fn is_complete(&self) -> bool {
        self.batches.iter().all(|b| b.result.is_ok())
    }

    /// The number of writes applied.
    pub fn written(&self) -> usize {
        self.batches
            .iter()
            .filter_map(|b| b.result.as_ref().ok().map(Vec::len))
            .sum()
    }

    /// The first failure, with the input position of the write it names (or of the
    /// batch's first write).
    pub fn first_failure(&self) -> Option<(usize, &Error)> {
        self.batches.iter().find_map(|b| match &b.result {
            Ok(_) => None,
            Err(e) => {
                let at = e.batch_index().unwrap_or(0);
                Some((b.inputs.get(at).copied().unwrap_or(0), e))
            }
        })
    }

    /// `Ok` with the ETag of every input write when every batch was written, else the
    /// first failure.
    ///
    /// # Errors
    /// The first failed batch's error.
    pub fn into_result(self) -> Result<Vec<Option<ETag>>> {
        let total = self.batches.iter().map(|b| b.inputs.len()).sum();
        let mut etags = vec![None; total];
        for batch in self.batches {
            for (input, etag) in batch.inputs.into_iter().zip(batch.result?) {
                etags[input] = etag;
            }
        }
        Ok(etags)
    }
}

/// The typed view of a table: values of `R` in, values of `R` out.
///
/// Queries only return `R`'s kind: for an entity type they add `EntityKind eq '<kind>'`
/// to the filter (turn it off with [`TableOptions::without_kind_filter`] to
/// read entities written without a kind); for an `EntityKind` enum every entity must be of
/// one of its kinds.
///
/// A plain `Table` has no blob store: `#[entity(blob)]` fields are stored inline as
/// properties, under the service's 64 KiB property and 1 MiB entity limits (a larger value
/// is refused with a `TooLarge` error). To keep them in a blob store, with the entity
/// holding their addresses, write through `tablekit_patterns::large::LargeTable` or
/// `tablekit_patterns::index::IndexedTable` given a blob store (its options' `blobs`).
///
pub struct Table<R, S> {
    store: S,
    name: String,
    clock: SharedClock,
    kind_filter: bool,
    write_back: bool,
    record: PhantomData<fn() -> R>,
}

impl<R, S: Clone> Clone for Table<R, S> {
    fn clone(&self) -> Self {
        Table {
            store: self.store.clone(),
            name: self.name.clone(),
            clock: self.clock.clone(),
            kind_filter: self.kind_filter,
            write_back: self.write_back,
            record: PhantomData,
        }
    }
}

impl<R, S> std::fmt::Debug for Table<R, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .field("record", &std::any::type_name::<R>())
            .finish()
    }
}

impl<R: Record, S: TableStore> Table<R, S> {
    /// The settings of a table, given in any order, then
    /// built on a store with [`build`](TableOptions::build).
    pub fn options() -> TableOptions<R, S> {
        TableOptions::new()
    }

    /// The table `R` declares, on `store`, with the default settings: the shortcut for
    /// `Table::options().build(store)`.
    pub fn new(store: S) -> Self {
        Self::options().build(store)
    }

    /// The clock reads decide expiry with.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Whether an entity is still live (not expired) for reads.
    fn live(&self, entity: &Entity) -> bool {
        !is_expired(entity, self.clock.now())
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Creates the table if it does not exist; `true` when it was created.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn create(&self) -> Result<bool> {
        self.store.create_table_if_not_exists(&self.name).await
    }

    /// Inserts a value; fails with `AlreadyExists` when its keys are taken.
    ///
    /// A plain table keeps no version stamp on its entities, so an insert whose answer
    /// was lost (the store applied it, then timed out) answers a retryable
    /// [`Error::Transient`], and retrying it answers `AlreadyExists` for the write that
    /// landed. Use [`upsert`](Self::upsert) where a retry must succeed, or an
    /// `IndexedTable` of `tablekit-patterns`, which recognises its own landed writes.
    ///
    /// # Errors
    /// Conversion errors of [`Record::to_entity`], the store's errors.
    pub async fn insert(&self, value: &R) -> Result<ETag>
    where
        R: PlainWrite,
    {
        self.store.insert(&self.name, value.to_entity()?).await
    }

    /// Inserts a value, or replaces the stored entity.
    ///
    /// # Errors
    /// As [`insert`](Self::insert).
    pub async fn upsert(&self, value: &R) -> Result<ETag>
    where
        R: PlainWrite,
    {
        self.store
            .insert_or_replace(&self.name, value.to_entity()?)
            .await
    }

    /// Replaces the stored entity if `if_match` holds.
    ///
    /// # Errors
    /// As [`insert`](Self::insert); `NotFound`, `PreconditionFailed`.
    pub async fn replace(&self, value: &R, if_match: IfMatch) -> Result<ETag>
    where
        R: PlainWrite,
    {
        self.store
            .replace(&self.name, value.to_entity()?, if_match)
            .await
    }

    /// Merges the value's properties into the stored entity if `if_match` holds. A `None`
    /// field is an absent property, which a merge leaves as stored: use
    /// [`replace`](Self::replace) to clear it.
    ///
    /// # Errors
    /// As [`replace`](Self::replace).
    pub async fn merge(&self, value: &R, if_match: IfMatch) -> Result<ETag>
    where
        R: PlainWrite,
    {
        self.store
            .merge(&self.name, value.to_entity()?, if_match)
            .await
    }

    /// Deletes the entity with these keys if `if_match` holds.
    ///
    /// # Errors
    /// The store's errors; `NotFound`, `PreconditionFailed`.
    pub async fn delete(&self, partition_key: &str, row_key: &str, if_match: IfMatch) -> Result<()>
    where
        R: PlainWrite,
    {
        self.store
            .delete(&self.name, partition_key, row_key, if_match)
            .await
    }

    /// A read or delete by typed primary key: `employees.primary().key("Sales").key(123)`
    /// then [`get`](super::PrimaryKey::get), [`delete`](super::PrimaryKey::delete), or with
    /// fewer fields [`all`](super::PrimaryKey::all) of the partition or of a RowKey prefix
    /// or [`range`](super::PrimaryKey::range).
    pub fn primary(&self) -> super::PrimaryKey<'_, Self, R::Key>
    where
        R: EntityType,
        S: Sync,
    {
        super::PrimaryKey::new(self)
    }

    /// A read of the whole table: [`filter`](super::TableScan::filter) by typed
    /// properties, then [`stream`](super::TableScan::stream),
    /// [`all`](super::TableScan::all) or [`count_scan`](super::TableScan::count_scan).
    /// **A table scan**: every row is read, page by page.
    pub fn scan(&self) -> super::TableScan<'_, Self>
    where
        R: EntityType,
        S: Sync,
    {
        super::TableScan::new(self)
    }

    /// A partial update: the properties given set (or, with `None`, removed) on the stored
    /// entity with these keys, read first and checked to still read as `E`, then replaced
    /// under the ETag read, if `if_match` holds; with `IfMatch::Any` a concurrent change
    /// is merged into again. Typed updates build the changes from typed properties
    /// (`table.primary().key(..).update().set(..)`).
    ///
    /// # Errors
    /// `NotFound`, `PreconditionFailed`; [`Error::Field`] for a result that does not read
    /// as `E`; the store's errors.
    pub async fn update_properties(
        &self,
        partition_key: &str,
        row_key: &str,
        changes: Vec<(&'static str, Option<crate::model::Value>)>,
        if_match: IfMatch,
    ) -> Result<()>
    where
        R: EntityType + PlainWrite,
    {
        loop {
            let Some(mut current) = self
                .store
                .get(&self.name, partition_key, row_key, None)
                .await?
                .filter(|e| self.live(e))
            else {
                return Err(Error::NotFound {
                    table: self.name.clone(),
                    partition_key: partition_key.to_owned(),
                    row_key: row_key.to_owned(),
                });
            };
            let read = current.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            if let IfMatch::ETag(expected) = &if_match
                && current.etag.as_ref() != Some(expected)
            {
                return Err(Error::PreconditionFailed {
                    table: self.name.clone(),
                    partition_key: partition_key.to_owned(),
                    row_key: row_key.to_owned(),
                });
            }
            super::Update::<R>::apply_to(&changes, &mut current);
            let merged = R::from_entity(current)?.value.to_entity()?;
            match self.store.replace(&self.name, merged, read).await {
                Err(e) if e.kind() == ErrorKind::PreconditionFailed && if_match == IfMatch::Any => {
                }
                outcome => return outcome.map(|_| ()),
            }
        }
    }

    /// Deletes the entity of a value if `if_match` holds.
    ///
    /// # Errors
    /// As [`delete`](Self::delete), and key errors.
    pub async fn delete_value(&self, value: &R, if_match: IfMatch) -> Result<()>
    where
        R: PlainWrite,
    {
        let (pk, rk) = (value.partition_key()?, value.row_key()?);
        self.delete(&pk, &rk, if_match).await
    }

    /// Reads one entity.
    ///
    /// # Errors
    /// The store's errors; [`Error::Field`] when the entity does not read as `R`.
    pub async fn get(&self, partition_key: &str, row_key: &str) -> Result<Option<Stored<R>>> {
        let Some(entity) = self
            .store
            .get(&self.name, partition_key, row_key, None)
            .await?
        else {
            return Ok(None);
        };
        if !self.live(&entity) {
            return Ok(None);
        }
        let mut stored = R::from_entity(entity)?;
        if self.write_back && stored.upgraded_from.is_some() {
            let if_match = stored.if_match();
            match self
                .store
                .replace(&self.name, stored.value.to_entity()?, if_match)
                .await
            {
                Ok(etag) => {
                    stored.etag = Some(etag);
                    stored.upgraded_from = None;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed | ErrorKind::NotFound
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Some(stored))
    }

    /// Reads many entities by key, in the order asked: `None` where no entity (or an
    /// expired one) has the key. The keys are grouped by partition and each group read
    /// by queries of at most [`KEYS_PER_QUERY`](super::KEYS_PER_QUERY) RowKeys (the table
    /// service takes at most 15 comparisons in a filter: the PartitionKey's and 14
    /// RowKeys'), at most [`GET_MANY_CONCURRENCY`](super::GET_MANY_CONCURRENCY) at a time:
    /// 100 keys of one partition cost 8 queries and one round trip in a row, where 100
    /// gets cost 100. Keys may be typed (`table.primary().key("Sales").key(7)`) or
    /// rendered (`("Sales", "empid_000007")`).
    ///
    /// # Errors
    /// Key errors (before any I/O); the store's errors; [`Error::Field`] for an entity that
    /// does not read as `R`.
    pub async fn get_many<K: super::IntoKeys>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Stored<R>>>> {
        self.get_many_entities(keys)
            .await?
            .into_iter()
            .map(|entity| entity.map(R::from_entity).transpose())
            .collect()
    }

    /// [`get_many`](Self::get_many) with the entities as stored (expired ones left out),
    /// for layers that restore what a write moved out of an entity before reading it.
    ///
    /// # Errors
    /// Key errors (before any I/O); the store's errors.
    pub async fn get_many_entities<K: super::IntoKeys>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Entity>>> {
        let asked = keys
            .into_iter()
            .map(super::IntoKeys::into_keys)
            .collect::<Result<Vec<_>>>()?;
        let mut groups: std::collections::BTreeMap<&str, std::collections::BTreeSet<&str>> =
            std::collections::BTreeMap::new();
        for (pk, rk) in &asked {
            groups.entry(pk.as_str()).or_default().insert(rk.as_str());
        }
        let queries: Vec<Query> = groups
            .iter()
            .flat_map(|(pk, rks)| {
                let rks: Vec<&str> = rks.iter().copied().collect();
                rks.chunks(super::KEYS_PER_QUERY)
                    .map(|chunk| {
                        let rows = chunk
                            .iter()
                            .map(|rk| filter::row_key().eq(*rk))
                            .reduce(|a, b| a | b)
                            .unwrap_or_else(|| filter::row_key().eq(""));
                        Query::with_filter(filter::partition_key().eq(*pk) & rows)
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut found = self.entities_by_key(queries).await?;
        let last_use: std::collections::HashMap<&(String, String), usize> =
            asked.iter().enumerate().map(|(i, k)| (k, i)).collect();
        Ok(asked
            .iter()
            .enumerate()
            .map(|(i, key)| {
                // A key asked twice reads the same entity twice.
                if last_use.get(key) == Some(&i) {
                    found.remove(key)
                } else {
                    found.get(key).cloned()
                }
            })
            .collect())
    }

    /// The live entities the key queries of a batch read find, by key.
    async fn entities_by_key(
        &self,
        queries: Vec<Query>,
    ) -> Result<std::collections::HashMap<(String, String), Entity>> {
        let pages: Vec<Vec<Entity>> = futures::stream::iter(queries)
            .map(|query| self.store.query_all(&self.name, query))
            .buffer_unordered(super::GET_MANY_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(pages
            .into_iter()
            .flatten()
            .filter(|e| self.live(e))
            .map(|e| ((e.partition_key.clone(), e.row_key.clone()), e))
            .collect())
    }

    /// How many entities of this table's kind a query matches, reading their keys only
    /// (`$select` of PartitionKey and RowKey; the expiry time too when the type expires),
    /// page after page in bounded memory. Its cost follows what matches: the table
    /// service keeps no counts.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn count_scan(&self, query: Query) -> Result<u64> {
        let mut properties = vec!["PartitionKey".to_owned(), "RowKey".to_owned()];
        if R::expires() {
            properties.push(EXPIRES_PROPERTY.to_owned());
        }
        let query = self.typed_query(query).select(properties);
        let mut rows = std::pin::pin!(self.store.query_stream(&self.name, query));
        let mut count = 0u64;
        while let Some(entity) = rows.next().await {
            if self.live(&entity?) {
                count += 1;
            }
        }
        Ok(count)
    }

    /// Reads the stored entity with the same keys as `value`.
    ///
    /// # Errors
    /// As [`get`](Self::get), and key errors.
    pub async fn get_value(&self, value: &R) -> Result<Option<Stored<R>>> {
        let (pk, rk) = (value.partition_key()?, value.row_key()?);
        self.get(&pk, &rk).await
    }

    fn typed_query(&self, mut query: Query) -> Query {
        if self.kind_filter
            && let Some(kind) = R::kind_filter()
        {
            query.filter = Some(match query.filter.take() {
                Some(filter) => filter & kind,
                None => kind,
            });
        }
        query
    }

    /// One page of a query, and the token of the next page.
    ///
    /// # Errors
    /// The store's errors; [`Error::Field`] for an entity that does not read as `R`.
    pub async fn query_page(
        &self,
        query: Query,
    ) -> Result<(Vec<Stored<R>>, Option<ContinuationToken>)> {
        let page = self
            .store
            .query(&self.name, &self.typed_query(query))
            .await?;
        let now = self.clock.now();
        let values = page
            .entities
            .into_iter()
            .filter(|e| !is_expired(e, now))
            .map(R::from_entity)
            .collect::<Result<_>>()?;
        Ok((values, page.continuation))
    }

    /// Every entity of this table's kind a query matches, as stored (expired ones left
    /// out), page after page: for layers that restore what a write moved out of an entity.
    pub fn stream_entities(&self, query: Query) -> impl Stream<Item = Result<Entity>> + Send + '_
    where
        S: Sized,
    {
        self.store
            .query_stream(&self.name, self.typed_query(query))
            .try_filter(|entity| std::future::ready(self.live(entity)))
    }

    /// Every result of a query, page after page, as a stream.
    pub fn stream(&self, query: Query) -> impl Stream<Item = Result<Stored<R>>> + Send + '_
    where
        S: Sized,
    {
        self.store
            .query_stream(&self.name, self.typed_query(query))
            .try_filter(|entity| std::future::ready(self.live(entity)))
            .map(|entity| entity.and_then(R::from_entity))
    }

    /// Every result of a query.
    ///
    /// # Errors
    /// As [`query_page`](Self::query_page).
    pub async fn query(&self, query: Query) -> Result<Vec<Stored<R>>> {
        self.stream(query).try_collect().await
    }

    /// Every entity of a partition, in RowKey order.
    ///
    /// # Errors
    /// As [`query_page`](Self::query_page).
    pub async fn partition(&self, partition_key: &str) -> Result<Vec<Stored<R>>> {
        self.query(Query::partition(partition_key)).await
    }

    /// The entities of a partition whose RowKeys lie in `bounds` (from a key template's
    /// [`range`](super::KeyTemplate::range) or [`prefix`](super::KeyTemplate::prefix)).
    ///
    /// # Errors
    /// As [`query_page`](Self::query_page).
    pub async fn range(&self, partition_key: &str, bounds: &KeyBounds) -> Result<Vec<Stored<R>>> {
        self.query(Query::with_filter(bounds.in_partition(partition_key)))
            .await
    }

    /// A projected query: only `P`'s properties are read.
    ///
    /// # Errors
    /// As [`query_page`](Self::query_page), for `P`.
    pub async fn select<P: Projection>(&self, query: Query) -> Result<Vec<Stored<P>>> {
        let query = self.typed_query(query).select(
            P::PROPERTIES
                .iter()
                .copied()
                .chain(R::expires().then_some(EXPIRES_PROPERTY)),
        );
        self.store
            .query_stream(&self.name, query)
            .try_filter(|entity| std::future::ready(self.live(entity)))
            .map(|entity| entity.and_then(P::from_entity))
            .try_collect()
            .await
    }

    /// Writes many values: planned per partition into entity group transactions of at
    /// most 100 operations and 4 MiB, submitted one after the other. Every write is
    /// converted and checked before the first batch is sent.
    ///
    /// # Errors
    /// A conversion error or a [`Violation`](crate::Violation) naming the input position;
    /// then nothing was written. Store failures are per batch, in the report.
    pub async fn write_all(
        &self,
        writes: impl IntoIterator<Item = TypedWrite<R>>,
    ) -> Result<WriteReport>
    where
        R: PlainWrite,
    {
        let ops = writes
            .into_iter()
            .enumerate()
            .map(|(i, w)| w.into_op().map_err(|e| e.in_batch(i)))
            .collect::<Result<Vec<_>>>()?;
        let mut report = WriteReport::default();
        for planned in plan_batches(ops)? {
            let result = self.store.submit_batch(&self.name, planned.batch).await;
            report.batches.push(BatchOutcome {
                inputs: planned.inputs,
                result,
            });
        }
        Ok(report)
    }
}

/// The filter of a RowKey range within a partition.
impl<E: EntityType, S: TableStore + Sync> super::PrimaryTable for Table<E, S> {
    type Entity = E;
    type Deleted = ();

    fn read_at(
        &self,
        partition_key: &str,
        row_key: &str,
    ) -> impl Future<Output = Result<Option<Stored<E>>>> + Send {
        self.get(partition_key, row_key)
    }

    fn read_query(&self, query: Query) -> impl Stream<Item = Result<Stored<E>>> + Send + '_ {
        self.stream(query)
    }

    fn count_query(&self, query: Query) -> impl Future<Output = Result<u64>> + Send {
        self.count_scan(query)
    }

    fn read_entities(&self, query: Query) -> impl Stream<Item = Result<Entity>> + Send + '_ {
        self.stream_entities(query)
    }
}

impl<E: EntityType + PlainWrite, S: TableStore + Sync> super::PrimaryWrite for Table<E, S> {
    fn update_at(
        &self,
        partition_key: &str,
        row_key: &str,
        changes: Vec<(&'static str, Option<crate::model::Value>)>,
        if_match: IfMatch,
    ) -> impl Future<Output = Result<()>> + Send {
        self.update_properties(partition_key, row_key, changes, if_match)
    }

    fn delete_at(
        &self,
        partition_key: &str,
        row_key: &str,
        if_match: IfMatch,
    ) -> impl Future<Output = Result<()>> + Send {
        self.delete(partition_key, row_key, if_match)
    }
}
