//! Sequencing: the relay moves the changes a partition's writes left waiting (in their own
//! transactions) into the log of the partition's share, numbered from 1 with no gap.
//!
//! For each run of up to [`CHUNK`] waiting changes, in version order:
//! 1. **mark**: one entity group transaction in the partition gives each its number
//!    (`Seq`, from the share's head), each under its ETag;
//! 2. **append**: one entity group transaction in the share's log inserts the rows and
//!    moves the head, under the head's ETag — so two relays never number alike;
//! 3. **remove**: one transaction in the partition deletes the changes, each under the
//!    ETag its mark returned.
//!
//! A crash, a refusal or a lost answer between the steps leaves changes marked; the next
//! pass tells by the head and one point read per marked change whether its row was
//! appended (then it only removes it) or not (then it numbers it again). A change is never
//! dropped before its row is in the log, and appended at most once unless its mark is
//! older than what the log still keeps (then it may be appended twice, never lost).

use tablekit_core::{Batch, Entity, ErrorKind, IfMatch, TableStore, Value, WriteOp};

use super::feed_log::{self as log, FEED_TABLE, Head};
use crate::error::Result;

/// The most changes one step of sequencing moves (a log transaction holds them and the
/// head, within the 100 operations of an entity group transaction).
pub(crate) const CHUNK: usize = 99;
/// The most payload one log transaction carries (under the 4 MiB of a batch).
const CHUNK_BYTES: usize = 3 * 1024 * 1024;

/// What sequencing one partition did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sequenced {
    /// Changes appended to their share's log.
    pub appended: usize,
    /// Changes left waiting (a lost race, a fence reached): the next pass takes them.
    pub left: usize,
}

/// Moves a partition's waiting changes (read by the relay, in key order) into their
/// share's log; `held` says whether the relay may still act on the partition.
///
/// # Errors
/// The store's errors other than a lost race.
pub(crate) async fn sequence<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    waiting: Vec<Entity>,
    locks: &ShareLocks,
    held: &(dyn Fn() -> bool + Sync),
) -> Result<Sequenced> {
    let mut sequenced = Sequenced::default();
    // One feed per type, so one share count; a type whose share count changed has both.
    let mut by_shares: std::collections::BTreeMap<u32, Vec<Entity>> = Default::default();
    for entry in waiting {
        by_shares
            .entry(log::shares_of(&entry))
            .or_default()
            .push(entry);
    }
    for (shares, entries) in by_shares {
        let share = log::share_of(table, partition_key, shares);
        let count = entries.len();
        let (appended, stayed) =
            sequence_share(store, table, partition_key, share, entries, locks, held).await?;
        sequenced.appended += appended;
        // Appended but not removed (a store failure) stays waiting too: the partition
        // stays marked, and the next pass finds them appended and removes them.
        sequenced.left += count.saturating_sub(appended) + stayed;
    }
    Ok(sequenced)
}

/// A refusal that means another relay acted first: the next pass sees what it did.
fn lost(e: &tablekit_core::Error) -> bool {
    super::super::lost_race(e)
}

/// One lock per share log, kept by one relay: the relay drains partitions concurrently,
/// and partitions of one share would otherwise race for its head (correct under its ETag,
/// but a lost race leaves changes for the next pass). Each relay keeps its own, as relays
/// of other processes have theirs: the head's ETag orders relays; the lock only spares one
/// relay's own drains a lost race. (A process-wide table keyed by table name, as it was,
/// tied together relays of unrelated stores, and the simulations that run side by side in
/// one test process, through a lock neither's scheduler saw.)
#[derive(Debug, Default)]
pub(crate) struct ShareLocks(
    std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
);

impl ShareLocks {
    fn of(&self, table: &str, share: u32) -> std::sync::Arc<tokio::sync::Mutex<()>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(log::log_partition(table, share))
            .or_default()
            .clone()
    }
}

async fn sequence_share<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    share: u32,
    entries: Vec<Entity>,
    locks: &ShareLocks,
    held: &(dyn Fn() -> bool + Sync),
) -> Result<(usize, usize)> {
    let lock = locks.of(table, share);
    let _serialized = lock.lock().await;
    let mut head = log::head(store, table, share).await?;
    // Marked before: appended already (remove them) or not (number them again).
    // (One point read per marked change, all at once: only after a crash or a lost race.)
    let checks = entries.into_iter().map(|entry| {
        let head = &head;
        async move {
            let appended = log::appended(store, table, share, head, &entry).await?;
            Ok::<_, tablekit_core::Error>((entry, appended))
        }
    });
    let mut appended_before = Vec::new();
    let mut todo = Vec::new();
    for checked in futures::future::join_all(checks).await {
        let (entry, appended) = checked?;
        if appended {
            appended_before.push(entry);
        } else {
            todo.push(entry);
        }
    }
    let mut done = appended_before.len();
    let mut stayed = remove(store, table, partition_key, appended_before).await;
    todo.sort_by(|a, b| a.row_key.cmp(&b.row_key));
    let mut rest = todo.into_iter().peekable();
    while rest.peek().is_some() {
        if !held() {
            break;
        }
        let mut chunk: Vec<Entity> = Vec::new();
        let mut bytes = 0;
        while let Some(next) = rest.peek() {
            let size = WriteOp::Insert(next.clone()).payload_size();
            if !chunk.is_empty() && (chunk.len() == CHUNK || bytes + size > CHUNK_BYTES) {
                break;
            }
            bytes += size;
            chunk.extend(rest.next());
        }
        // Steps 1 and 2, again (a few times) when another process's relay moved the head
        // between them: the marks are given again under the ETags they returned.
        let mut attempts = 0;
        let chunk = loop {
            attempts += 1;
            // 1. Mark each with its number.
            let mut marks = Batch::new();
            for (i, entry) in chunk.iter().enumerate() {
                let seq = head.next + i as u64;
                let mark = Entity::new(partition_key, &entry.row_key)
                    .with(log::SEQ, Value::Int64(seq as i64));
                marks.merge(mark, entry.etag.clone().map_or(IfMatch::Any, IfMatch::ETag));
            }
            let etags = match store.submit_batch(table, marks).await {
                Ok(etags) => etags,
                Err(e) if lost(&e) => return Ok((done, stayed)),
                Err(e) => return Err(e),
            };
            chunk = chunk
                .into_iter()
                .zip(etags)
                .map(|(entry, etag)| Entity { etag, ..entry })
                .collect();
            // 2. Append the rows and move the head.
            let at = tablekit_core::clock::now();
            let mut rows = Batch::new();
            for (i, entry) in chunk.iter().enumerate() {
                rows.insert(log::log_row(table, share, head.next + i as u64, entry, at));
            }
            let moved = Head {
                next: head.next + chunk.len() as u64,
                oldest: head.oldest,
                etag: head.etag.clone(),
            };
            rows.push(moved.write(table, share));
            let answer = match store.submit_batch(FEED_TABLE, rows.clone()).await {
                Err(e) if e.kind() == ErrorKind::TableNotFound => {
                    store.create_table_if_not_exists(FEED_TABLE).await?;
                    store.submit_batch(FEED_TABLE, rows).await
                }
                answer => answer,
            };
            match answer {
                Ok(etags) => {
                    head = Head {
                        etag: etags.last().cloned().flatten(),
                        ..moved
                    };
                    break chunk;
                }
                Err(e) if lost(&e) && attempts < 3 && held() => {
                    head = log::head(store, table, share).await?;
                }
                Err(e) if lost(&e) => return Ok((done, stayed)),
                Err(e) => return Err(e),
            }
        };
        // 3. Remove them from the partition, each under the ETag its mark returned.
        let marked = chunk;
        done += marked.len();
        stayed += remove(store, table, partition_key, marked).await;
    }
    Ok((done, stayed))
}

/// Deletes appended changes from their partition, in transactions of up to 100, through
/// the outbox's removal (a change that is gone or changed drops out; one a store failure
/// leaves is found appended by the next pass and removed then). Returns how many stay.
async fn remove<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    entries: Vec<Entity>,
) -> usize {
    let mut stayed = 0;
    for chunk in entries.chunks(100) {
        let conditions = chunk
            .iter()
            .map(|entry| {
                let if_match = entry.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                (entry.row_key.clone(), if_match)
            })
            .collect();
        let (_, stay) =
            super::super::outbox::remove_entries(store, table, partition_key, conditions).await;
        stayed += stay;
    }
    stayed
}
