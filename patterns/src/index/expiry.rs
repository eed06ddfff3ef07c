//! Expiry (time to live): entities of a type declared with `#[entity(ttl = "30d")]` or an
//! `#[entity(expires)]` field carry their expiry time in `TablekitExpires`. Reads leave
//! expired entities out (point gets, queries, index look-ups, id-list members); the
//! [`Sweeper`] deletes them through the indexed delete, so their copies, id-list entries,
//! unique reservations, blobs and change events follow as for any delete.
//!
//! The sweeper does not scan tables. Every expiring primary has an entry in the **expiry
//! index**, an inter-partition index kept by the same machinery as a declared one (the
//! entry is a copy target, `TablekitExpiry`, in `<table>Expiry`, written and removed as
//! follow-up work and checked by the audit):
//!
//! - PartitionKey `yyyyMMddHH-nn`: the hour the entity expires in, and one of 16 shards
//!   chosen by a hash of the primary's keys, so that writes with the same time to live do
//!   not all append to one partition;
//! - RowKey `yyyyMMddHHmmssffffff-<hash>`: the expiry time to the microsecond, then a hash
//!   of the primary's keys.
//!
//! A pass asks for `PartitionKey lt '<the next hour>' and RowKey lt '<now>~'`: the entries
//! that have expired, in the hours up to now. Its cost follows the number of expired
//! entities (plus the entries of the current hour the service filters out), never the
//! size of the table.
//!
//! Steps and what a crash leaves: the sweeper reads an entry, reads the primary, and
//! deletes it under the ETag it read, if it has expired (a write that renewed it in
//! between wins: the delete is refused and the primary stays). The delete is one indexed
//! write: the primary and its same-partition copies go in one transaction with the
//! follow-up work that removes the rest, the entry included. A crash before the delete
//! leaves the entry for the next pass; after it, the relay finishes the follow-up work.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use futures::{StreamExt, TryStreamExt};
use sha2::{Digest, Sha256};
use tablekit_core::blob::BlobStore;
use tablekit_core::clock::SharedClock;
use tablekit_core::typed::is_expired;
use tablekit_core::{Entity, ErrorKind, IfMatch, Query, TableStore, filter};

use super::record::{EntityRef, Layout, Target, copy_source};
use super::registry::SchemaRecord;
use super::table::{IndexedTable, RawPrimary};
use crate::consistency::{Engine, OutboxSink};
use crate::error::{Error, Result};

/// The name of the expiry index among a primary's targets.
pub const EXPIRY_INDEX: &str = "TablekitExpiry";
/// What names the expiry index's table after its primaries' table.
pub const EXPIRY_TABLE_SUFFIX: &str = "Expiry";
/// The shards of each hour's entries.
const SHARDS: u8 = 16;
/// The entries a pass deletes at once, by default.
const DEFAULT_CONCURRENCY: usize = 8;

/// The expiry index's table for primaries in `table`.
pub fn expiry_table(table: &str) -> String {
    format!("{table}{EXPIRY_TABLE_SUFFIX}")
}

/// When a time to live of `seconds` that starts at `now` ends: at the latest the last
/// second the table service stores (9999-12-31T23:59:59Z).
pub fn ttl_end(now: DateTime<Utc>, seconds: u64) -> DateTime<Utc> {
    let last = DateTime::<Utc>::from_timestamp(LAST_STORED_SECOND, 0).unwrap_or(now);
    let seconds = i64::try_from(seconds).unwrap_or(i64::MAX);
    chrono::Duration::try_seconds(seconds)
        .and_then(|d| now.checked_add_signed(d))
        .map_or(last, |end| end.min(last))
}

/// 9999-12-31T23:59:59Z, seconds since the epoch.
const LAST_STORED_SECOND: i64 = 253_402_300_799;

fn hour(at: DateTime<Utc>) -> String {
    at.format("%Y%m%d%H").to_string()
}

fn instant(at: DateTime<Utc>) -> String {
    at.format("%Y%m%d%H%M%S%6f").to_string()
}

/// The expiry index entry of `source`, which expires at `at`.
pub fn entry_target(source: &EntityRef, at: DateTime<Utc>) -> Target {
    let mut hasher = Sha256::new();
    hasher.update(source.partition_key.as_bytes());
    hasher.update([0]);
    hasher.update(source.row_key.as_bytes());
    let digest = hasher.finalize();
    let hash: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    let shard = digest[0] % SHARDS;
    Target::Copy {
        index: EXPIRY_INDEX.to_owned(),
        at: EntityRef::new(
            expiry_table(&source.table),
            format!("{}-{shard:02}", hour(at)),
            format!("{}-{hash}", instant(at)),
        ),
        properties: Some(Vec::new()),
    }
}

/// The query of the entries expired at `now`: the hours up to `now`, the instants up to
/// `now`.
pub fn expired_query(now: DateTime<Utc>) -> Query {
    let next_hour = now
        .with_minute(0)
        .and_then(|t| t.with_second(0))
        .and_then(|t| t.with_nanosecond(0))
        .and_then(|t| t.checked_add_signed(chrono::Duration::hours(1)))
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    Query::with_filter(
        filter::partition_key().lt(hour(next_hour).as_str())
            & filter::row_key().lt(format!("{}~", instant(now)).as_str()),
    )
}

/// What a sweeper pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// The tables whose expiry index was read.
    pub tables: usize,
    /// The expiry entries read.
    pub entries: usize,
    /// Primaries deleted because they expired.
    pub deleted: usize,
    /// Entries whose primary was renewed (a later expiry, or a write between the read and
    /// the delete): the primary stays; the renewing write's follow-up work removes the
    /// entry.
    pub renewed: usize,
    /// Entries whose primary is gone: the delete's follow-up work (or the audit) removes
    /// them.
    pub gone: usize,
    /// Entries (or registered types) that failed on their own — a malformed entry, a
    /// schema that no longer reads, a delete refused: logged and left for the next pass,
    /// while the others are swept.
    pub failed: usize,
}

/// Deletes expired entities, found through the expiry index of every registered type
/// that expires (or of the tables given).
pub struct Sweeper<S> {
    store: S,
    engine: Engine<S>,
    clock: SharedClock,
    blobs: Option<BlobStore>,
    tables: Option<Vec<String>>,
    concurrency: usize,
}

impl<S: TableStore + Clone + 'static> Sweeper<S> {
    /// A sweeper over `store`, on the wall clock. Without a sink, the follow-up work of
    /// its deletes waits in the primaries' partitions for the relay; see
    /// [`with_sink`](Self::with_sink).
    pub fn new(store: S) -> Self {
        Sweeper {
            engine: Engine::new(store.clone()),
            store,
            clock: tablekit_core::clock::system(),
            blobs: None,
            tables: None,
            concurrency: DEFAULT_CONCURRENCY,
        }
    }

    /// Hands the follow-up work of each delete to `sink` (the index worker's queue).
    pub fn with_sink(mut self, sink: Arc<dyn OutboxSink>) -> Self {
        self.engine = self.engine.with_sink(sink);
        self
    }

    /// Deletes through `engine`.
    pub fn with_engine(mut self, engine: Engine<S>) -> Self {
        self.engine = engine;
        self
    }

    /// Decides what expired with `clock`.
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The blob store of the primaries' blob fields.
    pub fn with_blobs(mut self, blobs: BlobStore) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// Only these primaries' tables.
    pub fn tables(mut self, tables: Vec<String>) -> Self {
        self.tables = Some(tables);
        self
    }

    /// How many expired entities a pass deletes at once (default 8).
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// One pass: every expired entry of every expiring type's table, page by page.
    ///
    /// A registered type whose layout does not read (a newer schema met during a rolling
    /// upgrade, say) is logged and counted in [`SweepReport::failed`]; its expired
    /// entities stay, counted as failed, until a sweeper that reads it runs.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn sweep(&self) -> Result<SweepReport> {
        let mut report = SweepReport::default();
        // Every registered expiring type, by its primaries' table.
        let mut kinds: Vec<(String, Kind<S>)> = Vec::new();
        for schema in SchemaRecord::list(&self.store, None).await? {
            if schema.expiry.is_none()
                || self
                    .tables
                    .as_ref()
                    .is_some_and(|t| !t.contains(&schema.table))
            {
                continue;
            }
            let primaries = match schema.layout() {
                Ok(layout) => Some(self.primaries(layout)),
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(
                        table = %schema.table,
                        kind = %schema.kind,
                        error = %e,
                        "expiry sweep skips a registered type whose layout does not read"
                    );
                    None
                }
            };
            kinds.push((
                schema.table,
                Kind {
                    property: schema.kind_property,
                    name: schema.kind,
                    primaries,
                },
            ));
        }
        let mut tables: Vec<&str> = kinds
            .iter()
            .filter(|(_, kind)| kind.primaries.is_some())
            .map(|(table, _)| table.as_str())
            .collect();
        tables.sort_unstable();
        tables.dedup();
        let now = self.clock.now();
        for table in tables {
            report.tables += 1;
            let table_kinds: Vec<&Kind<S>> = kinds
                .iter()
                .filter(|(t, _)| t == table)
                .map(|(_, kind)| kind)
                .collect();
            let index = expiry_table(table);
            let entries = self.store.query_stream(&index, expired_query(now));
            let outcomes = entries
                .map(|entry| {
                    let kinds = &table_kinds;
                    let index = &index;
                    async move {
                        let entry = match entry {
                            Ok(entry) => entry,
                            Err(e) if e.kind() == ErrorKind::TableNotFound => return Ok(None),
                            Err(e) => return Err(Error::from(e)),
                        };
                        Ok(Some(match self.expire(&entry, kinds, now).await {
                            Ok(outcome) => outcome,
                            Err(e) => {
                                tracing::warn!(
                                    entry = %format_args!("{}/{}", entry.partition_key, entry.row_key),
                                    table = %index,
                                    error = %e,
                                    "expiry sweep failed on an entry; the next pass tries it again"
                                );
                                Outcome::Failed
                            }
                        }))
                    }
                })
                .buffer_unordered(self.concurrency);
            let mut outcomes = std::pin::pin!(outcomes);
            while let Some(outcome) = outcomes.try_next().await? {
                let Some(outcome) = outcome else { break };
                report.entries += 1;
                match outcome {
                    Outcome::Deleted => report.deleted += 1,
                    Outcome::Renewed => report.renewed += 1,
                    Outcome::Gone => report.gone += 1,
                    Outcome::Failed => report.failed += 1,
                }
            }
        }
        Ok(report)
    }

    /// The untyped indexed table of a layout's primaries.
    fn primaries(&self, layout: Layout) -> IndexedTable<RawPrimary, S> {
        let mut table = IndexedTable::for_layout(self.store.clone(), layout)
            .with_engine(self.engine.clone())
            .with_clock(self.clock.clone());
        if let Some(blobs) = &self.blobs {
            table = table.with_blobs(blobs.clone());
        }
        table
    }

    /// Deletes the primary of one expiry entry, if it expired, through the layout of its
    /// kind among the table's `kinds`.
    async fn expire(
        &self,
        entry: &Entity,
        kinds: &[&Kind<S>],
        now: DateTime<Utc>,
    ) -> Result<Outcome> {
        let Some((source, _)) = copy_source(entry) else {
            return Err(Error::malformed(
                format!("expiry entry {}/{}", entry.partition_key, entry.row_key),
                "it names no primary",
            ));
        };
        let Some(primary) = self
            .store
            .get_if_table_exists(&source.table, &source.partition_key, &source.row_key)
            .await?
            .filter(|p| !super::record::is_tombstone(p))
        else {
            return Ok(Outcome::Gone);
        };
        if !is_expired(&primary, now) {
            return Ok(Outcome::Renewed);
        }
        let kind_in = |property: &str| match primary.properties.get(property) {
            Some(tablekit_core::Value::String(kind)) => Some(kind.as_str()),
            _ => None,
        };
        let table = match kinds.iter().find(|k| kind_in(&k.property) == Some(&k.name)) {
            Some(Kind {
                primaries: Some(table),
                ..
            }) => table,
            Some(Kind { name, .. }) => {
                return Err(Error::malformed(
                    format!("{source}"),
                    format!("its type {name:?} has a registered layout this sweeper does not read"),
                ));
            }
            // Deleting through another type's layout would leave this one's copies
            // behind: only an entity that names no kind takes the table's first type.
            None => match kinds.iter().find_map(|k| kind_in(&k.property)) {
                Some(name) => {
                    return Err(Error::malformed(
                        format!("{source}"),
                        format!("its type {name:?} is not registered as expiring"),
                    ));
                }
                None => match kinds.iter().find_map(|k| k.primaries.as_ref()) {
                    Some(table) => table,
                    None => return Ok(Outcome::Gone),
                },
            },
        };
        let if_match = primary.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        match table
            .delete(&source.partition_key, &source.row_key, if_match)
            .await
        {
            Ok(_) => Ok(Outcome::Deleted),
            Err(e) if e.kind() == ErrorKind::PreconditionFailed => Ok(Outcome::Renewed),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(Outcome::Gone),
            Err(e) => Err(e),
        }
    }

    /// Runs a pass every `interval` until `shutdown` completes; a failed pass is logged
    /// and the next one runs on time.
    pub async fn run(&self, interval: Duration, shutdown: impl std::future::Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let report = self.sweep().await;
            match &report {
                Ok(report) if report.deleted > 0 => {
                    tracing::info!(
                        deleted = report.deleted,
                        entries = report.entries,
                        renewed = report.renewed,
                        "expiry sweep deleted expired entities"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "expiry sweep failed; trying again"),
            }
            if let Ok(SweepReport { failed, .. }) = &report
                && *failed > 0
            {
                tracing::warn!(failed, "expiry sweep left entries it could not sweep");
            }
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(interval) => {}
            }
        }
    }
}

/// A registered expiring type of one table: the property its entities name it in, its
/// name, and the indexed table that deletes them (`None`: its registered layout does not
/// read, so none of its entities is deleted).
struct Kind<S> {
    property: String,
    name: String,
    primaries: Option<IndexedTable<RawPrimary, S>>,
}

enum Outcome {
    Deleted,
    Renewed,
    Gone,
    Failed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_to_live_ends_by_the_last_stored_second() {
        let now = DateTime::parse_from_rfc3339("2026-11-24T06:30:15Z")
            .expect("time")
            .with_timezone(&Utc);
        assert_eq!(ttl_end(now, 3600).to_rfc3339(), "2026-11-24T07:30:15+00:00");
        let last = "9999-12-31T23:59:59+00:00";
        assert_eq!(ttl_end(now, 10_000 * 365 * 86_400).to_rfc3339(), last);
        assert_eq!(ttl_end(now, u64::MAX).to_rfc3339(), last);
    }

    #[test]
    fn entries_sort_by_expiry_and_the_query_takes_the_expired_ones() {
        let source = EntityRef::new("Sessions", "p", "r");
        let at = DateTime::parse_from_rfc3339("2026-11-24T06:30:15.123456Z")
            .expect("time")
            .with_timezone(&Utc);
        let Target::Copy { at: entry, .. } = entry_target(&source, at) else {
            panic!("an expiry entry is a copy target");
        };
        assert_eq!(entry.table, "SessionsExpiry");
        assert!(entry.partition_key.starts_with("2026112406-"));
        assert!(entry.row_key.starts_with("20261124063015123456-"));
        let matches = |now: DateTime<Utc>| {
            expired_query(now)
                .filter
                .expect("a filter")
                .matches(&Entity::new(
                    entry.partition_key.clone(),
                    entry.row_key.clone(),
                ))
        };
        assert!(!matches(at - chrono::Duration::microseconds(1)));
        assert!(matches(at));
        assert!(matches(at + chrono::Duration::hours(5)));
    }
}
