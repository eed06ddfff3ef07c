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

/// What a primary says of one membership: whether its record lists it, and at which
/// version.
#[derive(Debug, PartialEq, Eq)]
struct Said {
    wanted: bool,
    version: Option<i64>,
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
        })
    }

    /// Makes the member row of `source` at `at` agree with the primary's record, and its
    /// shard's counter with it, in one entity group transaction under the counter's ETag
    /// — also when the member row already agrees, when the counter is written back
    /// unchanged (a *touch*).
    ///
    /// Why that is exact whatever the order of deliveries (an older message applied after
    /// a newer one, a delivery that failed half way while another settled the message):
    /// the counter row is read first, the member row and the primary after it, and every
    /// application commits under the counter's ETag. A member row changes only with its
    /// counter, so a commit whose ETag still holds read the member row as it was when
    /// the counter was read; and the applications of one shard are ordered by their
    /// commits, each having read the primary after the commit before it. The last write that changed this membership hands on its own
    /// operation, which reads the primary after that write and commits; any commit after
    /// it read the primary later still, so every commit from then on agrees with the
    /// last write. Without the touch, an application that found nothing to do left no
    /// trace, and an older delivery that had read the primary before the newer write
    /// could still commit its member row after it.
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
        loop {
            retry
                .next(|| format!("count `{count}` of {source} at {at}"))
                .await?;
            // The counter first; the member row and the primary after it (see above).
            let counter = EntityRef::new(&at.table, &at.partition_key, COUNTER_ROW_KEY);
            let counter = get_or_none(&self.store, &counter).await?;
            let (member, said) = futures::try_join!(
                get_or_none(&self.store, at),
                self.said(source, count, at)
            )?;
            let mut batch = Batch::new();
            let change = match (&member, said.wanted) {
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
                // The member row agrees with the primary: the counter is touched.
                _ => 0,
            };
            match &counter {
                Some(row) => {
                    let updated = counter_row(&at.partition_key, count_of(row) + change);
                    let if_match = row.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                    batch.replace(updated, if_match);
                }
                None => {
                    batch.insert(counter_row(&at.partition_key, change));
                }
            }
            match self.store.submit_batch(&at.table, batch).await {
                Ok(_) if change == 0 => return Ok(Applied::Unchanged),
                Ok(_) => return Ok(Applied::Changed),
                // Another worker changed the shard meanwhile (or an answer was lost and
                // the change landed): read everything again.
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed
                            | ErrorKind::AlreadyExists
                            | ErrorKind::NotFound
                    ) => {}
                Err(e) if e.kind() == ErrorKind::TableNotFound => {
                    self.store.create_table_if_not_exists(&at.table).await?;
                }
                Err(e) => return Err(e),
            }
        }
    }
}
