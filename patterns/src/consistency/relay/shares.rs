//! How several relays divide the pending partitions: each partition belongs to one of a
//! fixed number of *shares* (a hash of its table and partition key), and a relay drains a
//! partition only while it holds the lease of its share. The leases live in the table
//! [`RELAYS_TABLE`]:
//!
//! - partition `share`, one row per share (RowKey: its number, zero-padded): `Owner`, the
//!   relay holding it, and `Until`, when the lease ends. A relay takes a share that has no
//!   row or whose lease ended, renews the shares it keeps and releases the ones it gives
//!   up — all of it one entity group transaction per pass (the rows share a partition),
//!   each write conditional on the ETag it read, so two relays never both take a share.
//! - partition `relay`, one row per relay (RowKey: its id): `Until` (its heartbeat),
//!   `Shares` held, `Published` so far and `Rate` (entries per second of its last pass
//!   that published) — the relays' membership, which `status` and the console show.
//!
//! A relay aims for its fair part of the pending partitions (their count over the live
//! relays, rounded up): it keeps its loaded shares up to that, releases the rest, and
//! takes free loaded shares (in an order of its own, so relays starting together rarely
//! collide) until it has its part. A relay that stops renewing loses its shares when
//! their lease ends; the others take them over. Shares without pending partitions are
//! not held by anyone.
//!
//! The fence: a relay stops publishing a share's partitions once less than a quarter of
//! the lease is left by its own monotonic clock (the lease was measured from before the
//! write that took it), so a partition is drained by one relay at a time unless a
//! process stalls for longer than that quarter — a case the idempotent operations absorb
//! as a duplicate publish.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use sha2::{Digest, Sha256};
use tablekit_core::{Batch, ETag, Entity, ErrorKind, IfMatch, Query, TableStore, Value, WriteOp};
use tokio::time::Instant;

use crate::consistency::outbox::after;
use crate::consistency::pending::{UNTIL_PROPERTY as UNTIL, until};
use crate::error::Result;

/// The table of share leases and relay heartbeats.
pub const RELAYS_TABLE: &str = "TablekitRelays";
/// The partition of share leases.
pub(crate) const SHARE_PARTITION: &str = "share";
/// The partition of relay heartbeats.
pub(crate) const RELAY_PARTITION: &str = "relay";
/// How many shares the partitions are hashed into by default. Every relay of a
/// deployment must use the same number.
pub const DEFAULT_SHARES: u32 = 256;
/// How long a share's lease lasts by default (renewed every pass).
pub const DEFAULT_SHARE_LEASE: Duration = Duration::from_secs(30);

const OWNER: &str = "Owner";
const SHARES: &str = "Shares";
const PUBLISHED: &str = "Published";
const RATE: &str = "Rate";

/// The share a partition of a table belongs to, out of `shares`.
pub fn share_of(table: &str, partition_key: &str, shares: u32) -> u32 {
    let mut hash = Sha256::new();
    hash.update(table.as_bytes());
    hash.update([0]);
    hash.update(partition_key.as_bytes());
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) % u64::from(shares.max(1))) as u32
}

fn share_row_key(share: u32) -> String {
    format!("{share:05}")
}

/// Who holds a share's lease.
fn owner(row: &Entity) -> Option<&str> {
    row.get(OWNER).and_then(Value::as_str)
}

fn count(row: &Entity, name: &str) -> u64 {
    row.get(name)
        .and_then(Value::as_i64)
        .map_or(0, |n| n.max(0) as u64)
}

/// One relay as its heartbeat shows it (see [`relays`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RelayStatus {
    /// The relay's id.
    pub id: String,
    /// When its heartbeat lapses (it is live until then).
    pub until: DateTime<Utc>,
    /// Whether its heartbeat is still running.
    pub live: bool,
    /// The shares it held at its last pass.
    pub shares: u64,
    /// The entries it published since it started.
    pub published: u64,
    /// Entries per second over its last pass that published anything.
    pub rate: f64,
}

/// Every relay's heartbeat, live ones first.
///
/// # Errors
/// The store's errors (no relay table reads as no relay).
pub async fn relays<S: TableStore>(store: &S) -> Result<Vec<RelayStatus>> {
    let query = Query::with_filter(tablekit_core::filter::partition_key().eq(RELAY_PARTITION));
    let rows: Vec<Entity> = match store.query_stream(RELAYS_TABLE, query).try_collect().await {
        Ok(rows) => rows,
        Err(e) if e.kind() == ErrorKind::TableNotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let now = tablekit_core::clock::now();
    let mut relays: Vec<RelayStatus> = rows
        .iter()
        .map(|row| RelayStatus {
            id: row.row_key.clone(),
            until: until(row),
            live: until(row) > now,
            shares: count(row, SHARES),
            published: count(row, PUBLISHED),
            rate: row.get(RATE).and_then(Value::as_f64).unwrap_or(0.0),
        })
        .collect();
    relays.sort_by(|a, b| b.live.cmp(&a.live).then_with(|| a.id.cmp(&b.id)));
    Ok(relays)
}

/// Who holds the lease of `share` and until when, as stored (`None` when nobody took it
/// or its holder released it).
///
/// # Errors
/// The store's errors (no relay table reads as no lease).
pub async fn share_holder<S: TableStore>(
    store: &S,
    share: u32,
) -> Result<Option<(String, chrono::DateTime<chrono::Utc>)>> {
    let row = match store
        .get(RELAYS_TABLE, SHARE_PARTITION, &share_row_key(share), None)
        .await
    {
        Ok(row) => row,
        Err(e) if e.kind() == ErrorKind::TableNotFound => None,
        Err(e) => return Err(e),
    };
    Ok(row.and_then(|row| {
        let owner = owner(&row)?.to_owned();
        (!owner.is_empty()).then(|| (owner, until(&row)))
    }))
}

/// The leases one relay holds, and what it knows of the others.
#[derive(Debug)]
pub(crate) struct Leases {
    pub(crate) id: String,
    pub(crate) shares: u32,
    pub(crate) lease: Duration,
    /// The shares held, with the ETag of each lease row (to release it).
    held: Mutex<HashMap<u32, ETag>>,
    /// When the heartbeat was last written.
    beat: Mutex<Option<Instant>>,
    /// The published count it showed.
    reported: std::sync::atomic::AtomicU64,
    /// Loaded shares nobody held after the last pass: taken beyond the fair part, since
    /// a relay counted live did not take them for a whole pass (it stopped, or ran once).
    idle: Mutex<HashSet<u32>>,
}

/// The shares a relay holds for one pass, each with the instant its lease ends by the
/// relay's own clock.
pub(crate) type Held = HashMap<u32, Instant>;

impl Leases {
    pub(crate) fn new(id: String, shares: u32, lease: Duration) -> Self {
        Leases {
            id,
            shares: shares.max(1),
            lease,
            held: Mutex::default(),
            beat: Mutex::default(),
            reported: std::sync::atomic::AtomicU64::new(0),
            idle: Mutex::default(),
        }
    }

    /// When a relay stops publishing the partitions of a share whose lease ends at
    /// `ends`: a quarter of the lease before (the fence).
    pub(crate) fn fence(&self, ends: Instant) -> Instant {
        ends.checked_sub(self.lease / 4).unwrap_or(ends)
    }

    /// The published count the last heartbeat showed.
    pub(crate) fn reported(&self) -> u64 {
        self.reported.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the heartbeat is due (half a lease since the last).
    pub(crate) fn beat_due(&self) -> bool {
        self.beat
            .lock()
            .map(|beat| beat.is_none_or(|at| at.elapsed() >= self.lease / 2))
            .unwrap_or(true)
    }

    /// Writes this relay's heartbeat with what it holds and has done.
    pub(crate) async fn heartbeat<S: TableStore>(
        &self,
        store: &S,
        published: u64,
        rate: f64,
    ) -> Result<()> {
        let held = self.held.lock().map(|h| h.len()).unwrap_or(0);
        let mut row = Entity::new(RELAY_PARTITION, self.id.clone());
        row.properties.insert(
            UNTIL.to_owned(),
            Value::DateTime(after(tablekit_core::clock::now(), self.lease)),
        );
        row.properties
            .insert(SHARES.to_owned(), Value::Int64(held as i64));
        row.properties
            .insert(PUBLISHED.to_owned(), Value::Int64(published as i64));
        row.properties.insert(RATE.to_owned(), Value::Double(rate));
        let started = Instant::now();
        match store.insert_or_replace(RELAYS_TABLE, row.clone()).await {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::TableNotFound => {
                store.create_table_if_not_exists(RELAYS_TABLE).await?;
                store.insert_or_replace(RELAYS_TABLE, row).await?;
            }
            Err(e) => return Err(e),
        }
        if let Ok(mut beat) = self.beat.lock() {
            *beat = Some(started);
        }
        self.reported
            .store(published, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Settles this pass's shares for the pending partitions `load` (partitions per
    /// share): renews and takes up to this relay's fair part, releases the rest. Returns
    /// the shares held for the pass.
    ///
    /// # Errors
    /// The store's errors reading the leases; a refused write only loses its share.
    pub(crate) async fn settle<S: TableStore>(
        &self,
        store: &S,
        load: &BTreeMap<u32, usize>,
    ) -> Result<Held> {
        // Both partitions at once, each a partition query (never a table scan).
        let partition = |key: &'static str| {
            store
                .query_stream(
                    RELAYS_TABLE,
                    Query::with_filter(tablekit_core::filter::partition_key().eq(key)),
                )
                .try_collect::<Vec<Entity>>()
        };
        let rows: Vec<Entity> =
            match tokio::join!(partition(RELAY_PARTITION), partition(SHARE_PARTITION)) {
                (Ok(mut relays), Ok(shares)) => {
                    relays.extend(shares);
                    relays
                }
                (Err(e), _) | (_, Err(e)) if e.kind() == ErrorKind::TableNotFound => {
                    store.create_table_if_not_exists(RELAYS_TABLE).await?;
                    Vec::new()
                }
                (Err(e), _) | (_, Err(e)) => return Err(e),
            };
        let now = tablekit_core::clock::now();
        let mut live: HashSet<&str> = HashSet::from([self.id.as_str()]);
        let mut leases: HashMap<u32, &Entity> = HashMap::new();
        for row in &rows {
            match row.partition_key.as_str() {
                RELAY_PARTITION if until(row) > now => {
                    live.insert(row.row_key.as_str());
                }
                SHARE_PARTITION => {
                    if let Ok(share) = row.row_key.parse::<u32>() {
                        leases.insert(share, row);
                    }
                }
                _ => {}
            }
        }
        let total: usize = load.values().sum();
        let fair = total.div_ceil(live.len().max(1));
        let me = Some(self.id.as_str());
        let mine = |share: u32| leases.get(&share).is_some_and(|row| owner(row) == me);
        let free = |share: u32| match leases.get(&share) {
            None => true,
            Some(row) => until(row) <= now || owner(row) == me,
        };

        // Keep the loaded shares held, largest first, up to the fair part.
        let mut kept: Vec<u32> = load.keys().copied().filter(|s| mine(*s)).collect();
        kept.sort_by_key(|s| std::cmp::Reverse(load[s]));
        let mut part = 0;
        let mut keep = Vec::new();
        let mut release = Vec::new();
        for share in kept {
            if part < fair {
                part += load[&share];
                keep.push(share);
            } else {
                release.push(share);
            }
        }
        // Shares held without pending partitions are released too.
        for (share, row) in &leases {
            if owner(row) == me && until(row) > now && !load.contains_key(share) {
                release.push(*share);
            }
        }
        // Take free loaded shares, in this relay's own order, up to the fair part.
        let mut candidates: Vec<u32> = load
            .keys()
            .copied()
            .filter(|s| !mine(*s) && free(*s))
            .collect();
        // Rendezvous hashing: a share's home is the live relay that weighs it most, so
        // relays that see the same members take disjoint shares first, then top up.
        let weight = |relay: &str, share: u32| share_of(relay, &share_row_key(share), u32::MAX);
        let home = |share: u32| {
            live.iter()
                .max_by_key(|relay| (weight(relay, share), **relay))
                .is_some_and(|relay| *relay == self.id)
        };
        candidates.sort_by_key(|s| (!home(*s), weight(&self.id, *s)));
        let idle = self.idle.lock().map(|i| i.clone()).unwrap_or_default();
        let mut take = Vec::new();
        let mut left = Vec::new();
        for share in candidates {
            if part < fair || idle.contains(&share) {
                part += load[&share];
                take.push(share);
            } else {
                left.push(share);
            }
        }

        let until_value = after(now, self.lease);
        let lease_row = |share: u32| {
            let mut row = Entity::new(SHARE_PARTITION, share_row_key(share));
            row.properties
                .insert(OWNER.to_owned(), Value::String(self.id.clone()));
            row.properties
                .insert(UNTIL.to_owned(), Value::DateTime(until_value));
            row
        };
        let condition = |share: u32| {
            leases
                .get(&share)
                .and_then(|row| row.etag.clone())
                .map(IfMatch::ETag)
        };
        // (share, write, whether the write holds the share afterwards)
        let mut writes: Vec<(u32, WriteOp, bool)> = Vec::new();
        for share in keep.iter().chain(&take) {
            let op = match condition(*share) {
                Some(if_match) => WriteOp::Replace(lease_row(*share), if_match),
                None => WriteOp::Insert(lease_row(*share)),
            };
            writes.push((*share, op, true));
        }
        for share in &release {
            if let Some(if_match) = condition(*share) {
                writes.push((
                    *share,
                    WriteOp::Delete {
                        partition_key: SHARE_PARTITION.to_owned(),
                        row_key: share_row_key(*share),
                        if_match,
                    },
                    false,
                ));
            }
        }
        let started = Instant::now();
        let ends = started + self.lease;
        let landed = submit_each_batch(store, writes).await;
        if let Ok(mut idle) = self.idle.lock() {
            *idle = left.into_iter().collect();
        }
        let mut held = Held::new();
        if let Ok(mut mine) = self.held.lock() {
            mine.clear();
            for (share, etag) in landed {
                if let Some(etag) = etag {
                    mine.insert(share, etag);
                    held.insert(share, ends);
                }
            }
        }
        Ok(held)
    }

    /// Releases every share this relay holds (at shutdown, or after a one-off pass), so
    /// others take them at once rather than when their lease ends.
    pub(crate) async fn release_all<S: TableStore>(&self, store: &S) {
        let held: Vec<(u32, ETag)> = match self.held.lock() {
            Ok(mut held) => held.drain().collect(),
            Err(_) => return,
        };
        let writes = held
            .into_iter()
            .map(|(share, etag)| {
                (
                    share,
                    WriteOp::Delete {
                        partition_key: SHARE_PARTITION.to_owned(),
                        row_key: share_row_key(share),
                        if_match: IfMatch::ETag(etag),
                    },
                    false,
                )
            })
            .collect();
        submit_each_batch(store, writes).await;
    }

    /// Removes this relay's heartbeat (at shutdown).
    pub(crate) async fn leave<S: TableStore>(&self, store: &S) {
        self.release_all(store).await;
        if let Err(e) = store
            .delete_if_exists(RELAYS_TABLE, RELAY_PARTITION, &self.id)
            .await
        {
            tracing::debug!(error = %e, "removing a relay's heartbeat failed; it lapses");
        }
    }
}

/// Submits share writes in entity group transactions of up to 100, concurrently; a
/// write refused for its condition (another relay took or changed the share) drops out
/// and the rest go again. Returns each landed write's share with its new ETag (`None` for
/// a release). A failure of the store leaves the batch's shares unheld (logged).
async fn submit_each_batch<S: TableStore>(
    store: &S,
    writes: Vec<(u32, WriteOp, bool)>,
) -> Vec<(u32, Option<ETag>)> {
    let mut chunks: Vec<Vec<(u32, WriteOp, bool)>> = Vec::new();
    for write in writes {
        match chunks.last_mut() {
            Some(chunk) if chunk.len() < tablekit_core::limits::MAX_BATCH_OPERATIONS => {
                chunk.push(write);
            }
            _ => chunks.push(vec![write]),
        }
    }
    let landed = futures::future::join_all(chunks.into_iter().map(|mut chunk| async move {
        loop {
            if chunk.is_empty() {
                return Vec::new();
            }
            let batch: Batch = chunk.iter().map(|(_, op, _)| op.clone()).collect();
            match store.submit_batch(RELAYS_TABLE, batch).await {
                Ok(etags) => {
                    return chunk
                        .iter()
                        .zip(etags)
                        .map(|((share, _, holds), etag)| (*share, etag.filter(|_| *holds)))
                        .collect();
                }
                Err(e)
                    if e.batch_index().is_some_and(|i| i < chunk.len())
                        && matches!(
                            e.kind(),
                            ErrorKind::PreconditionFailed
                                | ErrorKind::AlreadyExists
                                | ErrorKind::NotFound
                        ) =>
                {
                    if let Some(i) = e.batch_index() {
                        chunk.remove(i);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "writing relay share leases failed; the shares wait for the next pass");
                    return Vec::new();
                }
            }
        }
    }))
    .await;
    landed.into_iter().flatten().collect()
}
