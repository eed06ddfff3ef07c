//! Wide entities and data series.
//!
//! A **wide entity** is one logical entity with more properties than the table service
//! allows in one (252), stored as several physical entities in one partition in the
//! chunk layout of declared wide types ([`index::wide`](crate::index::decl::wide), cut and
//! read back by the same functions): chunk 0 at the logical RowKey (it records how many
//! chunks there are and the version each further one was written at), chunk `n` at
//! `<RowKey>~<n:03>`, 250 properties a chunk in name order. The whole entity is written
//! in one entity group transaction and read back as one (read again when a writer moved
//! it on in between); updating one property touches the one chunk that holds it. Chunks
//! written before they carried versions read by their RowKeys.
//!
//! A **data series** is one entity with a property per period (24 hourly counters, 365
//! daily ones), updated by merge under its ETag (retried on conflict) and read with one
//! point get while it fits one entity; past 250 properties it spills into further chunks.
//!
//! ```
//! use tablekit_core::{MemoryStore, Properties, TableStore, Value};
//! use tablekit_patterns::wide::WideTable;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = MemoryStore::new();
//! store.create_table("Counters").await?;
//! let wide = WideTable::new(store, "Counters");
//! let mut year = Properties::new();
//! for day in 1..=365 {
//!     year.insert(format!("d{day:03}"), Value::Int64(0));
//! }
//! wide.write("site1", "2026", year).await?;          // two chunks, one transaction
//! wide.add("site1", "2026", "d200", 5).await?;       // touches one chunk
//! let back = wide.read("site1", "2026").await?.expect("stored");
//! assert_eq!((back.len(), back.get("d200")), (365, Some(&Value::Int64(5))));
//! # Ok::<_, tablekit_patterns::Error>(())
//! # }).unwrap();
//! ```

use tablekit_core::limits::{self, MAX_BATCH_OPERATIONS};
use tablekit_core::{Batch, ETag, Entity, IfMatch, Properties, TableStore, Value, WriteOp};

use crate::address::EntityRef;
use crate::consistency::{Engine, Plan, Planner, lost_race};
use crate::error::{Error, Result};
use crate::index::decl::wide::CHUNKS_PROPERTY;
use crate::index::decl::wide::read::read_listed;
use crate::index::decl::wide::split::{
    FirstChunk, chunk_key, count_of, has_room, is_marker, lists_versions, mark_chunk, mark_chunk0,
    merge, split, versions_of,
};
use crate::index::record::next_version;

/// The most chunks of one wide entity: they are written in one entity group transaction.
const MOST_CHUNKS: usize = MAX_BATCH_OPERATIONS - 1;

/// The wide entities (and data series) of a table.
#[derive(Clone, Debug)]
pub struct WideTable<S> {
    engine: Engine<S>,
    table: String,
}

impl<S: TableStore + Clone + 'static> WideTable<S> {
    /// Wide entities in `table`.
    pub fn new(store: S, table: &str) -> Self {
        WideTable {
            engine: Engine::new(store),
            table: table.to_owned(),
        }
    }
}

impl<S: TableStore> WideTable<S> {
    /// Refuses names a wide entity cannot take: the chunk layout's markers, and RowKeys
    /// with `~` (chunk `n` of `x` is `x~00n`).
    fn check(row_key: &str, name: Option<&str>) -> Result<()> {
        if row_key.contains('~') {
            return Err(Error::Unsupported(format!(
                "a wide entity's RowKey cannot hold `~` (`{row_key}`): its chunks use it"
            )));
        }
        if let Some(name) = name
            && is_marker(name)
        {
            return Err(Error::Unsupported(format!(
                "`{name}` marks the chunks of a wide entity, it is not a property"
            )));
        }
        Ok(())
    }

    /// Cuts properties into chunk 0 and the further chunks (unmarked), checking every
    /// limit before any I/O.
    fn cut(
        partition_key: &str,
        row_key: &str,
        properties: Properties,
    ) -> Result<(Entity, Vec<Entity>)> {
        Self::check(row_key, None)?;
        for (name, value) in &properties {
            Self::check(row_key, Some(name))?;
            limits::check_property(name, value).map_err(tablekit_core::Error::from)?;
        }
        let mut entity = Entity::new(partition_key, row_key);
        entity.properties = properties;
        let (chunk0, chunks) = split(&entity, FirstChunk::Untyped);
        let bytes =
            limits::entity_size(&chunk0) + chunks.iter().map(limits::entity_size).sum::<usize>();
        if bytes > limits::MAX_BATCH_BYTES - 256 * 1024 {
            return Err(Error::Unsupported(format!(
                "a wide entity of {bytes} bytes does not fit one entity group transaction (4 MiB)"
            )));
        }
        let count = chunks.len() + 1;
        if count > MOST_CHUNKS {
            return Err(Error::Unsupported(format!(
                "a wide entity of {count} chunks does not fit one entity group transaction (at most {MOST_CHUNKS})"
            )));
        }
        Ok((chunk0, chunks))
    }

    async fn chunk0(&self, partition_key: &str, row_key: &str) -> Result<Option<Entity>> {
        self.engine
            .store()
            .get_if_table_exists(&self.table, partition_key, row_key)
            .await
    }

    /// Chunk 0 and the chunks it lists, as one read: one point get while there is one
    /// chunk, one range query more otherwise.
    async fn chunks(
        &self,
        partition_key: &str,
        row_key: &str,
    ) -> Result<Option<(Entity, Vec<Entity>)>> {
        let Some(first) = self.chunk0(partition_key, row_key).await? else {
            return Ok(None);
        };
        read_listed(self.engine.store(), &self.table, first, |_: &Entity| false).await
    }

    /// Writes a whole wide entity, replacing what is stored, in one entity group
    /// transaction (the chunks it no longer needs are deleted in it); the last writer
    /// wins.
    ///
    /// # Errors
    /// Limit violations before any I/O; [`Error::Unsupported`] past 99 chunks, or for a
    /// property named as one of the chunk layout's markers; the store's errors;
    /// [`Error::Contention`].
    pub async fn write(
        &self,
        partition_key: &str,
        row_key: &str,
        properties: Properties,
    ) -> Result<()> {
        self.write_if(partition_key, row_key, properties, IfMatch::Any)
            .await
            .map(drop)
    }

    /// Writes a whole wide entity if `if_match` holds for what is stored (the ETag of
    /// [`read_with_etag`](Self::read_with_etag), which changes with every whole write and
    /// every update of chunk 0's properties), and returns the new ETag. `IfMatch::ETag`
    /// with nothing stored is `NotFound`.
    ///
    /// # Errors
    /// As [`write`](Self::write); `PreconditionFailed`, `NotFound`.
    pub async fn write_if(
        &self,
        partition_key: &str,
        row_key: &str,
        properties: Properties,
        if_match: IfMatch,
    ) -> Result<ETag> {
        let (chunk0, chunks) = Self::cut(partition_key, row_key, properties)?;
        let mut write = WholeWrite {
            wide: self,
            partition_key,
            row_key,
            chunk0,
            chunks,
            if_match,
        };
        let committed = self
            .engine
            .commit(&self.table, partition_key, &mut write)
            .await?;
        Ok(committed
            .and_then(|c| c.etags.into_iter().next().flatten())
            .unwrap_or_else(|| ETag::new("")))
    }

    /// Reads a wide entity with the ETag a conditional [`write_if`](Self::write_if) takes.
    ///
    /// # Errors
    /// The store's errors; [`Error::Malformed`] when its chunks are not the ones chunk 0
    /// lists; [`Error::Contention`] when writers keep rewriting it while it is read.
    pub async fn read_with_etag(
        &self,
        partition_key: &str,
        row_key: &str,
    ) -> Result<Option<(Properties, ETag)>> {
        let Some((chunk0, chunks)) = self.chunks(partition_key, row_key).await? else {
            return Ok(None);
        };
        let etag = chunk0.etag.clone().unwrap_or_else(|| ETag::new(""));
        Ok(Some((merge(chunk0, chunks).properties, etag)))
    }

    /// Reads a wide entity back as one set of properties.
    ///
    /// # Errors
    /// As [`read_with_etag`](Self::read_with_etag).
    pub async fn read(&self, partition_key: &str, row_key: &str) -> Result<Option<Properties>> {
        Ok(self
            .read_with_etag(partition_key, row_key)
            .await?
            .map(|(properties, _)| properties))
    }

    /// Deletes a wide entity (every chunk, in one transaction).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn delete(&self, partition_key: &str, row_key: &str) -> Result<bool> {
        let Some(first) = self.chunk0(partition_key, row_key).await? else {
            return Ok(false);
        };
        let mut batch = Batch::new();
        let etag = first.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        batch.delete(partition_key, row_key, etag);
        for n in 1..count_of(&first) {
            batch.delete(partition_key, chunk_key(row_key, n), IfMatch::Any);
        }
        self.engine.store().submit_batch(&self.table, batch).await?;
        Ok(true)
    }

    /// Sets one property, touching only the chunk that holds it (or one with room, or a
    /// new chunk with chunk 0's count, in one transaction).
    ///
    /// # Errors
    /// Limit violations; the store's errors; [`Error::Contention`].
    pub async fn set(
        &self,
        partition_key: &str,
        row_key: &str,
        name: &str,
        value: Value,
    ) -> Result<()> {
        self.update(partition_key, row_key, name, |_| Some(value.clone()))
            .await
            .map(drop)
    }

    /// Adds `delta` to an integer property (a counter of a data series; absent counts as
    /// 0), under the chunk's ETag, retried on conflict. Returns the new value.
    ///
    /// # Errors
    /// As [`set`](Self::set); [`Error::Unsupported`] when the property is not an Int64.
    pub async fn add(
        &self,
        partition_key: &str,
        row_key: &str,
        name: &str,
        delta: i64,
    ) -> Result<i64> {
        let mut wrong_type = false;
        let value = self
            .update(partition_key, row_key, name, |current| match current {
                None => Some(Value::Int64(delta)),
                Some(Value::Int64(n)) => Some(Value::Int64(n.saturating_add(delta))),
                Some(Value::Int32(n)) => Some(Value::Int64(i64::from(*n).saturating_add(delta))),
                Some(_) => {
                    wrong_type = true;
                    None
                }
            })
            .await?;
        match value {
            Some(Value::Int64(n)) => Ok(n),
            _ if wrong_type => Err(Error::Unsupported(format!(
                "`{name}` of {row_key} is not an integer counter"
            ))),
            _ => Ok(0),
        }
    }

    async fn update(
        &self,
        partition_key: &str,
        row_key: &str,
        name: &str,
        mut change: impl FnMut(Option<&Value>) -> Option<Value> + Send,
    ) -> Result<Option<Value>> {
        Self::check(row_key, Some(name))?;
        let mut update = PropertyUpdate {
            wide: self,
            partition_key,
            row_key,
            name,
            change: &mut change,
            value: None,
        };
        self.engine
            .commit(&self.table, partition_key, &mut update)
            .await?;
        Ok(update.value)
    }
}

/// Refusals a wide entity's writes retry: a concurrent writer changed a chunk.
fn retry_lost_race(error: tablekit_core::Error) -> Result<()> {
    if lost_race(&error) {
        Ok(())
    } else {
        Err(error)
    }
}

/// A whole wide entity's write: every chunk, and the deletion of chunks no longer
/// needed, under chunk 0's ETag.
struct WholeWrite<'a, S> {
    wide: &'a WideTable<S>,
    partition_key: &'a str,
    row_key: &'a str,
    /// Chunk 0 of the new value, unmarked.
    chunk0: Entity,
    /// The further chunks of the new value, unmarked.
    chunks: Vec<Entity>,
    /// The caller's condition on chunk 0.
    if_match: IfMatch,
}

impl<S> WholeWrite<'_, S> {
    fn refusal(&self, not_found: bool) -> Error {
        let at = EntityRef::new(self.wide.table.as_str(), self.partition_key, self.row_key);
        if not_found {
            at.not_found()
        } else {
            at.precondition_failed()
        }
    }
}

impl<S: TableStore> Planner for WholeWrite<'_, S> {
    type Role = ();

    async fn plan(&mut self) -> Result<Option<Plan<()>>> {
        let old = self.wide.chunk0(self.partition_key, self.row_key).await?;
        if let IfMatch::ETag(expected) = &self.if_match {
            match &old {
                None => return Err(self.refusal(true)),
                Some(o) if o.etag.as_ref() != Some(expected) => return Err(self.refusal(false)),
                Some(_) => {}
            }
        }
        let old_count = old.as_ref().map_or(0, count_of);
        // Every further chunk is written at a version above any the old value lists, so
        // a reader holding the old chunk 0 does not take the new chunks for its own.
        let version = next_version(old.as_ref().and_then(|o| versions_of(o).into_iter().max()));
        let mut chunk0 = self.chunk0.clone();
        mark_chunk0(&mut chunk0, &vec![version; self.chunks.len()]);
        let first = match &old {
            Some(o) => WriteOp::Replace(chunk0, o.etag.clone().map_or(IfMatch::Any, IfMatch::ETag)),
            None => WriteOp::Insert(chunk0),
        };
        let mut plan = Plan::new();
        plan.push(first, ());
        for chunk in &self.chunks {
            let mut chunk = chunk.clone();
            mark_chunk(&mut chunk, version);
            plan.push(WriteOp::InsertOrReplace(chunk), ());
        }
        for n in self.chunks.len() + 1..old_count {
            let delete = WriteOp::Delete {
                partition_key: self.partition_key.to_owned(),
                row_key: chunk_key(self.row_key, n),
                if_match: IfMatch::Any,
            };
            plan.push(delete, ());
        }
        Ok(Some(plan))
    }

    fn refused(&mut self, error: tablekit_core::Error, _: Option<&()>) -> Result<()> {
        // Under the caller's ETag a change of chunk 0 is theirs to see, not to retry.
        if self.if_match != IfMatch::Any && error.batch_index() == Some(0) {
            return Err(self.refusal(error.kind() == tablekit_core::ErrorKind::NotFound));
        }
        retry_lost_race(error)
    }

    fn what(&self) -> String {
        format!("wide entity {}", self.row_key)
    }
}

/// One property's update: a merge of the chunk holding it (or one with room) under that
/// chunk's ETag, or a new chunk with chunk 0's count (and versions) in one transaction.
struct PropertyUpdate<'a, S, F> {
    wide: &'a WideTable<S>,
    partition_key: &'a str,
    row_key: &'a str,
    name: &'a str,
    change: &'a mut F,
    /// The value the last plan writes.
    value: Option<Value>,
}

impl<S, F> Planner for PropertyUpdate<'_, S, F>
where
    S: TableStore,
    F: FnMut(Option<&Value>) -> Option<Value> + Send,
{
    type Role = ();

    async fn plan(&mut self) -> Result<Option<Plan<()>>> {
        let (partition_key, row_key, name) = (self.partition_key, self.row_key, self.name);
        let chunks: Vec<Entity> = match self.wide.chunks(partition_key, row_key).await? {
            Some((chunk0, rest)) => std::iter::once(chunk0).chain(rest).collect(),
            None => Vec::new(),
        };
        let holder = chunks.iter().position(|c| c.properties.contains_key(name));
        let current = holder
            .and_then(|h| chunks.get(h))
            .and_then(|c| c.properties.get(name));
        self.value = (self.change)(current);
        let Some(value) = self.value.clone() else {
            return Ok(None);
        };
        limits::check_property(name, &value).map_err(tablekit_core::Error::from)?;
        let room = holder.or_else(|| {
            chunks
                .iter()
                .enumerate()
                .position(|(n, c)| has_room(c, n, FirstChunk::Untyped, name, &value))
        });
        let patch = |n: usize| {
            let mut e = Entity::new(partition_key, chunk_key(row_key, n));
            e.properties.insert(name.to_owned(), value.clone());
            e
        };
        let mut plan = Plan::new();
        match (room.and_then(|n| Some((n, chunks.get(n)?))), chunks.first()) {
            (Some((n, chunk)), _) => {
                let etag = chunk.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                plan.push(WriteOp::Merge(patch(n), etag), ());
            }
            (None, None) => {
                plan.push(WriteOp::Insert(patch(0)), ());
            }
            (None, Some(first)) => {
                let n = chunks.len();
                if n + 1 > MOST_CHUNKS {
                    return Err(Error::Unsupported(format!(
                        "wide entity {row_key} is full ({n} chunks)"
                    )));
                }
                let mut count = Entity::new(partition_key, row_key);
                let mut chunk = patch(n);
                if n == 1 || lists_versions(first) {
                    let mut versions = versions_of(first);
                    let version = next_version(versions.iter().max().copied());
                    versions.push(version);
                    mark_chunk0(&mut count, &versions);
                    mark_chunk(&mut chunk, version);
                } else {
                    // Chunks written before they carried versions stay unmarked.
                    let chunks = i32::try_from(n + 1).unwrap_or(i32::MAX);
                    count
                        .properties
                        .insert(CHUNKS_PROPERTY.to_owned(), Value::Int32(chunks));
                }
                let etag = first.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                plan.push(WriteOp::Merge(count, etag), ());
                plan.push(WriteOp::Insert(chunk), ());
            }
        }
        Ok(Some(plan))
    }

    fn refused(&mut self, error: tablekit_core::Error, _: Option<&()>) -> Result<()> {
        retry_lost_race(error)
    }

    fn what(&self) -> String {
        format!("property `{}` of wide entity {}", self.name, self.row_key)
    }
}
