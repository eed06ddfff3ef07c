//! Poison messages kept in the store: the [`PoisonTable`], and [`WithPoisonTable`], a
//! queue whose workers record there the messages they give up on, and whose poison
//! listing, counting, grouping, redriving and discarding read and act on the table — the
//! same code and the same answers on every broker, exact under concurrent readers (reading
//! takes nothing off a queue).
//!
//! # Who writes it
//!
//! A worker that gives up on a message records it (body, headers, reason, deliveries,
//! times, kind) and only then acknowledges it on the broker; when the store refuses, it
//! moves the message to the broker's `<queue>-poison` queue instead. Messages the broker
//! dead-letters by itself (TTL, length limit, a client outside tablekit) and those a store
//! failure left there are **swept into the table by the workers**: at their start and
//! every [`SWEEP_INTERVAL`] ([`WithPoisonTable::sweep`]) — recorded first, then taken off
//! the broker, so a message is never shown from two places for longer than a sweep.
//!
//! # Table layout
//!
//! Table [`POISON_TABLE`], one partition per queue (its name with `%`, `/`, `\`, `#`, `?`
//! and control characters percent-encoded):
//!
//! | RowKey | What |
//! |---|---|
//! | `t.<time key>` | a message, whole: read oldest first |
//! | `n.<inverted time key>` | the same message, newest first (the log-tail pattern) |
//! | `i.<id key>` | the message id's marker: recording the same message again is a no-op |
//! | `b.<time key>.<n>` | a piece of a body over 768 KiB |
//! | `c.<shard>` | a share of the queue's count |
//! | `g.<group hash>.<shard>` | a share of a reason group's count, with the group and an example |
//! | `k.<kind hash>.<shard>` | a share of an operation kind's count |
//! | `p.<kind hash>.<group hash>.<shard>` | a share of the count of a kind and a group together (views filtered by kind or group) |
//! | `r.<inverted time key>` | a trim of the retention cap: when, how many (newest first) |
//!
//! A time key is the poisoning's microseconds since the epoch, then the id key's first
//! digits: it is the message's *handle*. The id key is a hash of the message id (of the
//! id and the body when another message of that id is already kept, of the body,
//! reason and headers when the message has no id). A message's rows and every count they
//! change are written in one entity group transaction, each count bound to the ETag it was
//! read with: counts are exact without a scan, and counts of 16 shares keep workers that
//! poison at once off each other's rows.
//!
//! # Redrive, step by step
//!
//! 1. the id marker is deleted and both rows are marked *redriving* (one transaction):
//!    from here, a new poisoning of the same message is recorded anew, not merged;
//! 2. the message is sent to the target queue with its id and body;
//! 3. both rows and their counts go (one transaction, bound to the row's ETag).
//!
//! Each step is idempotent: a redrive stopped after step 1 or 2 is shown *redriving* and
//! completed by the next redrive of it (the message sent once more, by id: operations are
//! idempotent); a discard is step 3 alone.

mod read;
mod rows;
mod take;
mod trim;
mod wrap;

use std::sync::Arc;
use std::time::Duration;

use tablekit_core::{AnyStore, Batch, Entity, ErrorKind, TableStore, Value, WriteOp};

use crate::error::{Error, Result};

pub use rows::PoisonRecord;
pub use take::TakeSteps;
pub use trim::{Retention, Trim};
pub use wrap::{PoisonTableConsumer, PoisonTableDelivery, WithPoisonTable};

use rows::*;

/// The table the poison messages are kept in.
pub const POISON_TABLE: &str = "TablekitPoison";

/// How often a worker sweeps its broker's poison queue into the table.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// The most rows a filtered page or count reads before answering with what it found so
/// far (a page then carries a cursor to read on).
pub const SCAN_BUDGET: usize = 10_000;

/// How many times a write whose counts changed under it is tried.
const ATTEMPTS: usize = 64;

/// What [`PoisonTable::record`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// The message is recorded; its handle.
    New(String),
    /// The message was recorded before (same id, same body); its handle.
    Already(String),
}

/// The poison table of a store (see the module docs).
#[derive(Clone, Debug)]
pub struct PoisonTable<S = AnyStore> {
    store: S,
    created: Arc<tokio::sync::OnceCell<()>>,
}

impl<S: TableStore> PoisonTable<S> {
    /// The poison table of `store` (created at its first write).
    pub fn new(store: S) -> Self {
        PoisonTable {
            store,
            created: Arc::default(),
        }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    async fn create(&self) -> Result<()> {
        self.created
            .get_or_try_init(|| async {
                self.store.create_table_if_not_exists(POISON_TABLE).await?;
                Ok::<_, Error>(())
            })
            .await?;
        Ok(())
    }

    /// Records a poison message of `queue`. Recording a message again (same id and body,
    /// not redriven since) changes nothing.
    ///
    /// # Errors
    /// The store's errors; [`Error::Contention`] when the counts kept changing.
    pub async fn record(&self, queue: &str, record: &PoisonRecord) -> Result<Recorded> {
        self.create().await?;
        let partition = crate::activity::encode_queue(queue);
        let body_hash = hash(&[&record.body], 32);
        // An id that was not UTF-8 is told apart by its exact bytes.
        let id_bytes = record.raw.id.as_deref().unwrap_or(record.id.as_bytes());
        let mut id_key = if id_bytes.is_empty() {
            let headers = serde_json::to_vec(&record.headers).unwrap_or_default();
            hash(&[b"", &record.body, record.reason.as_bytes(), &headers], 32)
        } else {
            hash(&[id_bytes], 32)
        };
        let mut twin = false;
        for _ in 0..ATTEMPTS {
            let marker = self
                .store
                .get(POISON_TABLE, &partition, &format!("{IDS}{id_key}"), None)
                .await?;
            if let Some(marker) = marker {
                if str_of(&marker, BODY_HASH) == body_hash {
                    return Ok(Recorded::Already(str_of(&marker, AT).to_owned()));
                }
                if twin {
                    return Err(Error::malformed(
                        "a poison message's id marker",
                        "two markers of one id and body",
                    ));
                }
                // Another message with this id is kept: this one is kept beside it.
                twin = true;
                id_key = hash(&[id_bytes, &record.body], 32);
                continue;
            }
            let time_key = time_key(record.poisoned_at, &id_key);
            let rows = message_rows(&partition, record, &id_key, &body_hash, &time_key);
            // A large body's pieces first, under the rows' time key (a record stopped
            // here leaves pieces no row names; its retry writes its own).
            for piece in rows.pieces {
                self.store.insert_or_replace(POISON_TABLE, piece).await?;
            }
            let shard = shard_of(&id_key);
            let group = str_of(&rows.oldest, GROUP).to_owned();
            let kind = str_of(&rows.oldest, KIND).to_owned();
            let mut batch = Batch::new();
            batch.insert(
                Entity::new(&partition, format!("{IDS}{id_key}"))
                    .with(AT, time_key.as_str())
                    .with(BODY_HASH, body_hash.as_str()),
            );
            batch.insert(rows.oldest);
            batch.insert(rows.newest);
            for op in self
                .count_writes(&partition, shard, &group, &record.reason, &kind, 1)
                .await?
            {
                batch.push(op);
            }
            match self.store.submit_batch(POISON_TABLE, batch).await {
                Ok(_) => return Ok(Recorded::New(time_key)),
                // Someone recorded it, or changed a count, meanwhile: read again.
                Err(e) if conflicted(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::Contention {
            what: format!("the poison table's counts of queue {queue}"),
            attempts: ATTEMPTS,
        })
    }

    /// The writes that add `delta` to the counts of a message of `shard`, `group` and
    /// `kind`, each bound to the ETag of the share it reads.
    async fn count_writes(
        &self,
        partition: &str,
        shard: u8,
        group: &str,
        reason: &str,
        kind: &str,
        delta: i64,
    ) -> Result<Vec<WriteOp>> {
        let keys = [
            (count_key(COUNTS, None, shard), vec![]),
            (
                count_key(GROUPS, Some(group), shard),
                vec![(GROUP, Value::from(group)), (EXAMPLE, Value::from(reason))],
            ),
            (
                count_key(KINDS, Some(kind), shard),
                vec![(KIND, Value::from(kind))],
            ),
            (
                pair_key(kind, group, shard),
                vec![
                    (KIND, Value::from(kind)),
                    (GROUP, Value::from(group)),
                    (EXAMPLE, Value::from(reason)),
                ],
            ),
        ];
        let mut writes = Vec::with_capacity(4);
        for (key, extra) in keys {
            let current = self.store.get(POISON_TABLE, partition, &key, None).await?;
            if let Some(op) = count_write(partition, key, current.as_ref(), delta, &extra) {
                writes.push(op);
            }
        }
        Ok(writes)
    }
}

/// Whether a write failed because what it was bound to changed (a key taken, an ETag
/// moved, a row gone): read again and retry.
fn conflicted(error: &Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::AlreadyExists | ErrorKind::PreconditionFailed | ErrorKind::NotFound
    )
}

/// Whether an error says the table does not exist yet: nothing was ever recorded.
fn missing_table(error: &Error) -> bool {
    error.kind() == ErrorKind::TableNotFound
}
