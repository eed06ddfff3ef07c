//! Pending markers: how the relay finds the partitions that may hold outbox entries
//! without scanning any table.
//!
//! Before a write commits follow-up work in a partition, its writer makes sure a marker
//! for that partition exists in the table [`PENDING_TABLE`] (PartitionKey: the table,
//! RowKey: the partition key). A marker is a lease: it holds `Until`, the instant up to
//! which writers of this process rely on it without writing it again, so a partition
//! written often costs one marker write per lease (30 s by default), not one per write.
//! The relay reads the markers (what is pending, never the tables), inspects each
//! partition's outbox with one RowKey range query, and deletes a marker — under its ETag,
//! so a writer that renewed it keeps it — once the partition's outbox is empty and
//! `Until` lies more than the relay's `late` allowance in the past.
//!
//! Why that is safe: a writer commits only while its marker's lease runs (checked before
//! each attempt) and renews the marker after a commit that returned past the lease,
//! before publishing. A commit that relied on a marker therefore landed before `Until`
//! plus the time one request can take; the relay's `late` allowance (60 s by default,
//! twice the table service's 30 s server timeout, and room for clock skew) covers it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

use chrono::{DateTime, Utc};
use tablekit_core::{Entity, ErrorKind, TableStore, Value};

use super::outbox::{MARKER_PROPERTY, after};
use crate::error::Result;

/// The next entity of a store's stream, with a table that does not exist read as the
/// end: the markers' table, and a partition's table, appear with their first write.
///
/// # Errors
/// The store's other errors.
pub(crate) async fn next_or_end<St>(stream: &mut St) -> Result<Option<Entity>>
where
    St: futures::Stream<Item = Result<Entity>> + Unpin,
{
    match futures::TryStreamExt::try_next(stream).await {
        Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(None),
        next => next,
    }
}

/// The table of pending markers.
pub const PENDING_TABLE: &str = "TablekitPending";
/// The marker of a pending marker entity.
pub const PENDING_KIND: &str = "TablekitPending";
/// The property holding the instant a lease runs until (markers, relay shares and
/// heartbeats).
pub(crate) const UNTIL_PROPERTY: &str = "Until";
/// How long a writer relies on a marker it wrote before writing it again.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// How many partitions a process remembers markers for; past that it forgets the
/// expired ones, then all (forgetting costs only marker writes).
const REMEMBERED: usize = 65_536;

/// The marker entity of a partition of a table.
pub fn marker(table: &str, partition_key: &str, until: DateTime<Utc>) -> Entity {
    let mut entity = Entity::new(table, partition_key);
    entity.properties.insert(
        MARKER_PROPERTY.to_owned(),
        Value::String(PENDING_KIND.to_owned()),
    );
    entity
        .properties
        .insert(UNTIL_PROPERTY.to_owned(), Value::DateTime(until));
    entity
}

/// Until when writers rely on a marker (the earliest instant for one that does not say).
pub fn until(marker: &Entity) -> DateTime<Utc> {
    match marker.properties.get(UNTIL_PROPERTY) {
        Some(Value::DateTime(until)) => *until,
        _ => DateTime::<Utc>::MIN_UTC,
    }
}

/// Writes the marker of a partition (creating the marker table when needed).
///
/// # Errors
/// The store's errors.
pub async fn write_marker<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    until: DateTime<Utc>,
) -> Result<()> {
    let entity = marker(table, partition_key, until);
    match store.insert_or_replace(PENDING_TABLE, entity.clone()).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::TableNotFound => {
            store.create_table_if_not_exists(PENDING_TABLE).await?;
            store.insert_or_replace(PENDING_TABLE, entity).await?;
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Marks every partition of `table` that holds outbox entries or feed changes waiting to
/// be sequenced (`crate::feed`), by scanning the table
/// once: for entries written before pending markers existed (an upgrade), which the relay
/// would not find otherwise. Returns the partitions marked.
///
/// # Errors
/// The store's errors.
pub async fn adopt<S: TableStore>(store: &S, table: &str) -> Result<usize> {
    use futures::TryStreamExt;
    let query = tablekit_core::Query::with_filter(
        tablekit_core::filter::property_named(MARKER_PROPERTY).eq(super::outbox::OUTBOX_KIND)
            | tablekit_core::filter::property_named(MARKER_PROPERTY)
                .eq(super::outbox::WAITING_KIND),
    );
    let mut entries = std::pin::pin!(store.query_stream(table, query));
    let mut last: Option<String> = None;
    let mut marked = 0;
    loop {
        let entry = match entries.try_next().await {
            Ok(Some(entry)) => entry,
            Ok(None) => return Ok(marked),
            Err(e) if e.kind() == ErrorKind::TableNotFound => return Ok(marked),
            Err(e) => return Err(e),
        };
        // Entries come in key order: a partition's entries are consecutive.
        if last.as_deref() != Some(entry.partition_key.as_str()) {
            write_marker(
                store,
                table,
                &entry.partition_key,
                tablekit_core::clock::now(),
            )
            .await?;
            marked += 1;
            last = Some(entry.partition_key);
        }
    }
}

/// The markers this process wrote and may still rely on.
#[derive(Debug)]
pub struct Markers {
    lease: Duration,
    written: Mutex<HashMap<(String, String), Instant>>,
}

impl Default for Markers {
    fn default() -> Self {
        Markers::new(DEFAULT_LEASE)
    }
}

impl Markers {
    /// Markers relied on for `lease` after each write (zero: every commit writes one).
    pub fn new(lease: Duration) -> Self {
        Markers {
            lease,
            written: Mutex::default(),
        }
    }

    /// The lease.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// When the lease this process holds on a partition's marker ends, if it runs.
    fn running(&self, table: &str, partition_key: &str) -> Option<Instant> {
        let written = self.written.lock().ok()?;
        let ends = *written.get(&(table.to_owned(), partition_key.to_owned()))?;
        (Instant::now() < ends).then_some(ends)
    }

    /// Makes sure the partition's marker is leased for a commit starting now, writing it
    /// when this process holds no running lease. Returns when the lease ends.
    ///
    /// # Errors
    /// The store's errors (the commit must not go ahead without its marker).
    pub async fn ensure<S: TableStore>(
        &self,
        store: &S,
        table: &str,
        partition_key: &str,
    ) -> Result<Instant> {
        match self.running(table, partition_key) {
            Some(ends) => Ok(ends),
            None => self.renew(store, table, partition_key).await,
        }
    }

    /// Writes the partition's marker with a new lease. Returns when the lease ends.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn renew<S: TableStore>(
        &self,
        store: &S,
        table: &str,
        partition_key: &str,
    ) -> Result<Instant> {
        // Both clocks are read before the write: the lease never outlives `Until`.
        let ends = Instant::now() + self.lease;
        write_marker(
            store,
            table,
            partition_key,
            after(tablekit_core::clock::now(), self.lease),
        )
        .await?;
        if !self.lease.is_zero()
            && let Ok(mut written) = self.written.lock()
        {
            if written.len() >= REMEMBERED {
                let now = Instant::now();
                written.retain(|_, ends| *ends > now);
                if written.len() >= REMEMBERED {
                    written.clear();
                }
            }
            written.insert((table.to_owned(), partition_key.to_owned()), ends);
        }
        Ok(ends)
    }
}
