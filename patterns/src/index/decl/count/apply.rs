//! How the worker applies a count's operation: the member row of a primary made to
//! agree with the primary's record, its shard's counter changed with it in one entity
//! group transaction (see [`super`] for why that is exact).

use tablekit_core::{Batch, Entity, ErrorKind, IfMatch, TableStore, Value};

use super::record::{CountTarget, SyncCount};
use super::{COUNT_PROPERTY, COUNTER_KIND, COUNTER_ROW_KEY, MEMBER_KIND, MEMBER_OF_PROPERTY};
use crate::error::Result;
use crate::index::operation::{Applied, IndexApplier};
use crate::index::record::{
    EntityRef, IndexRecord, MARKER_PROPERTY, VERSION_PROPERTY, is_tombstone, version_of,
};
use crate::index::stored::get_or_none;
use crate::index::upkeep::{Applies, Applying};

impl<S: TableStore + Clone + 'static> Applies<S> for SyncCount {
    fn apply<'a>(&'a self, applier: &'a IndexApplier<S>) -> Applying<'a> {
        Box::pin(applier.sync_count(&self.source, &self.count, &self.at))
    }
}

/// What a primary says of one membership: whether its record lists it, and the state it
/// was read in (to tell whether it moved on).
#[derive(Debug, PartialEq, Eq)]
struct Said {
    wanted: bool,
    version: Option<i64>,
    etag: Option<String>,
}

/// The count in a counter row.
pub(crate) fn count_of(counter: &Entity) -> i64 {
    match counter.properties.get(COUNT_PROPERTY) {
        Some(Value::Int64(n)) => *n,
        Some(Value::Int32(n)) => i64::from(*n),
        _ => 0,
    }
}

/// A counter row holding `count`.
pub(crate) fn counter_row(partition_key: &str, count: i64) -> Entity {
    let mut entity = Entity::new(partition_key, COUNTER_ROW_KEY);
    entity.properties.insert(
        MARKER_PROPERTY.to_owned(),
        Value::String(COUNTER_KIND.to_owned()),
    );
    entity
        .properties
        .insert(COUNT_PROPERTY.to_owned(), Value::Int64(count));
    entity
}

impl<S: TableStore> IndexApplier<S> {
    /// What the primary at `source` says of the membership `at` of `count`.
    async fn said(&self, source: &EntityRef, count: &str, at: &EntityRef) -> Result<Said> {
        let primary = get_or_none(&self.store, source).await?;
        let Some(primary) = primary else {
            return Ok(Said {
                wanted: false,
                version: None,
                etag: None,
            });
        };
        let wanted = !is_tombstone(&primary)
            && IndexRecord::read(&primary)?.is_some_and(|record| {
                record.targets.iter().any(|t| {
                    t.get::<CountTarget>()
                        .is_some_and(|c| c.count == count && c.at == *at)
                })
            });
        Ok(Said {
            wanted,
            version: version_of(&primary),
            etag: primary.etag.map(|e| e.to_string()),
        })
    }

    /// Makes the member row of `source` at `at` agree with the primary's record, and its
    /// shard's counter with it; reads the primary again after a change and agrees again
    /// while it moved on.
    ///
    /// # Errors
    /// The store's errors; [`Error::Contention`](crate::Error::Contention) when other
    /// workers keep changing the shard.
    pub(crate) async fn sync_count(
        &self,
        source: &EntityRef,
        count: &str,
        at: &EntityRef,
    ) -> Result<Applied> {
        let mut retry = self.retry.start();
        let mut applied = Applied::Unchanged;
        let mut said = self.said(source, count, at).await?;
        loop {
            retry
                .next(|| format!("count `{count}` of {source} at {at}"))
                .await?;
            let counter = EntityRef::new(&at.table, &at.partition_key, COUNTER_ROW_KEY);
            let (member, counter) = futures::try_join!(
                get_or_none(&self.store, at),
                get_or_none(&self.store, &counter)
            )?;
            let mut batch = Batch::new();
            let now = match (&member, said.wanted) {
                (None, true) => {
                    let mut row = Entity::new(&at.partition_key, &at.row_key);
                    row.properties.insert(
                        MARKER_PROPERTY.to_owned(),
                        Value::String(MEMBER_KIND.to_owned()),
                    );
                    row.properties.insert(
                        MEMBER_OF_PROPERTY.to_owned(),
                        Value::String(crate::error::json("a member's primary", source)?),
                    );
                    if let Some(version) = said.version {
                        row.properties
                            .insert(VERSION_PROPERTY.to_owned(), Value::Int64(version));
                    }
                    batch.insert(row);
                    1
                }
                (Some(member), false) => {
                    let if_match = member.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                    batch.delete(&at.partition_key, &at.row_key, if_match);
                    -1
                }
                // The member row agrees with the primary.
                _ => 0,
            };
            if now == 0 {
                // Nothing written: nothing of an older state left behind.
                return Ok(applied);
            }
            {
                match &counter {
                    Some(row) => {
                        let updated = counter_row(&at.partition_key, count_of(row) + now);
                        let if_match = row.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                        batch.replace(updated, if_match);
                    }
                    None => {
                        batch.insert(counter_row(&at.partition_key, now));
                    }
                }
                match self.store.submit_batch(&at.table, batch).await {
                    Ok(_) => applied = Applied::Changed,
                    // Another worker changed the shard meanwhile (or an answer was lost and
                    // the change landed): read everything again.
                    Err(e)
                        if matches!(
                            e.kind(),
                            ErrorKind::PreconditionFailed
                                | ErrorKind::AlreadyExists
                                | ErrorKind::NotFound
                        ) =>
                    {
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::TableNotFound => {
                        self.store.create_table_if_not_exists(&at.table).await?;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            // The primary may have moved on while the member row was read and written:
            // the row must agree with its state after that.
            let again = self.said(source, count, at).await?;
            if again == said {
                return Ok(applied);
            }
            said = again;
        }
    }
}
