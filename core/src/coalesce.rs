//! Group commit for single writes: [`CoalescingStore`] wraps a store so that the single
//! writes to one partition that arrive while another is in flight go together, in the
//! next entity group transaction (up to 100), instead of each waiting its own round trip.
//! With many concurrent writers of one partition — an index worker applying deliveries
//! whose copies share an index partition, an archive worker moving a partition's entities
//! — the store sees one request per round trip per partition, not one per write.
//!
//! Each write keeps its own outcome: a transaction answers each operation's ETag; when the
//! store refuses it (one operation's condition failed, a limit), every operation in it is
//! made again on its own, so each gets the answer it would have had alone. A transient
//! failure of the transaction (its answer lost) reaches each of its writes as a transient
//! error, as a lost answer of a single write does. A write alone in its partition is made
//! at once, as a single write: nothing waits for company.
//!
//! Hand-written: no maintained crate batches writes into a table service's entity group
//! transactions.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::limits::MAX_BATCH_OPERATIONS;
use crate::model::{ETag, Entity};
use crate::query::{Page, Query};
use crate::store::{Batch, KeyOrder, TableStore, WriteOp};

/// A store whose single writes to one partition share entity group transactions while
/// another write of the partition is in flight (see the module docs). Clones share their
/// partitions' queues.
#[derive(Clone, Debug)]
pub struct CoalescingStore<S> {
    inner: S,
    partitions: Arc<Mutex<HashMap<(String, String), Partition>>>,
}

/// A partition with a write in flight, and the writes waiting for it.
#[derive(Debug, Default)]
struct Partition {
    waiting: VecDeque<Waiting>,
}

#[derive(Debug)]
struct Waiting {
    op: WriteOp,
    answer: oneshot::Sender<Turn>,
}

/// Where a write stands when it arrives.
enum Queued {
    /// No write of its partition in flight: it leads.
    First(WriteOp),
    /// Behind the partition's write in flight.
    Behind(oneshot::Receiver<Turn>),
    /// Made on its own.
    Alone(WriteOp),
}

/// What a waiting write is told.
#[derive(Debug)]
enum Turn {
    /// Its outcome: it went in another write's transaction.
    Done(Result<Option<ETag>>),
    /// It leads the next transaction of the partition (its operation handed back).
    Lead(WriteOp),
}

impl<S: TableStore> CoalescingStore<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        CoalescingStore {
            inner,
            partitions: Arc::default(),
        }
    }

    /// The store underneath.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Makes `own` with the writes waiting for the partition (up to a transaction's
    /// worth, one per entity), answers them, and hands the partition to the next waiting
    /// write (or frees it) — also when this future is dropped half way.
    async fn lead(
        &self,
        table: &str,
        key: &(String, String),
        own: WriteOp,
    ) -> Result<Option<ETag>> {
        let handover = Handover {
            partitions: &self.partitions,
            key,
        };
        let mut rows: HashSet<String> = HashSet::from([own.key().1.to_owned()]);
        let company: Vec<Waiting> = match self.partitions.lock() {
            Ok(mut partitions) => match partitions.get_mut(key) {
                Some(partition) => {
                    let mut taken = Vec::new();
                    let mut left = VecDeque::new();
                    while let Some(waiting) = partition.waiting.pop_front() {
                        let row = waiting.op.key().1.to_owned();
                        if taken.len() + 1 < MAX_BATCH_OPERATIONS && !rows.contains(&row) {
                            rows.insert(row);
                            taken.push(waiting);
                        } else {
                            left.push_back(waiting);
                        }
                    }
                    partition.waiting = left;
                    taken
                }
                None => Vec::new(),
            },
            Err(_) => Vec::new(),
        };
        let outcome = if company.is_empty() {
            self.inner.execute(table, own).await
        } else {
            self.together(table, own, company).await
        };
        drop(handover);
        outcome
    }

    /// One transaction for `own` and `company`; each alone when the store refuses it.
    async fn together(
        &self,
        table: &str,
        own: WriteOp,
        company: Vec<Waiting>,
    ) -> Result<Option<ETag>> {
        let batch: Batch = std::iter::once(own.clone())
            .chain(company.iter().map(|w| w.op.clone()))
            .collect();
        match self.inner.submit_batch(table, batch).await {
            Ok(etags) => {
                let mut etags = etags.into_iter();
                let mine = etags.next().flatten();
                for (waiting, etag) in company.into_iter().zip(etags) {
                    let _ = waiting.answer.send(Turn::Done(Ok(etag)));
                }
                Ok(mine)
            }
            // The answer is lost or the store is busy: the transaction may have landed.
            Err(e) if e.is_retryable() => {
                for waiting in company {
                    let _ = waiting.answer.send(Turn::Done(Err(Error::Transient {
                        message: format!("a transaction of coalesced writes failed: {e}"),
                    })));
                }
                Err(e)
            }
            // Refused whole (one operation's condition, a limit): each on its own.
            Err(_) => {
                let alone = company.into_iter().map(|waiting| async move {
                    let outcome = self.inner.execute(table, waiting.op).await;
                    let _ = waiting.answer.send(Turn::Done(outcome));
                });
                let (mine, _) = futures::join!(
                    self.inner.execute(table, own),
                    futures::future::join_all(alone)
                );
                mine
            }
        }
    }
}

/// Hands a partition to its next waiting write when the leader is done (or dropped).
struct Handover<'a> {
    partitions: &'a Mutex<HashMap<(String, String), Partition>>,
    key: &'a (String, String),
}

impl Drop for Handover<'_> {
    fn drop(&mut self) {
        let Ok(mut partitions) = self.partitions.lock() else {
            return;
        };
        let Some(partition) = partitions.get_mut(self.key) else {
            return;
        };
        while let Some(next) = partition.waiting.pop_front() {
            // A caller that stopped waiting cannot lead: the next one.
            if next.answer.send(Turn::Lead(next.op)).is_ok() {
                return;
            }
        }
        partitions.remove(self.key);
    }
}

impl<S: TableStore> TableStore for CoalescingStore<S> {
    async fn create_table(&self, table: &str) -> Result<()> {
        self.inner.create_table(table).await
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        self.inner.delete_table(table).await
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        self.inner.list_tables(prefix).await
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        self.inner.get(table, partition_key, row_key, select).await
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        self.inner.query(table, query).await
    }

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        let key = (table.to_owned(), op.key().0.to_owned());
        let waiting = match self.partitions.lock() {
            Ok(mut partitions) => match partitions.get_mut(&key) {
                Some(partition) => {
                    let (answer, turn) = oneshot::channel();
                    partition.waiting.push_back(Waiting { op, answer });
                    Queued::Behind(turn)
                }
                None => {
                    partitions.insert(key.clone(), Partition::default());
                    Queued::First(op)
                }
            },
            // A poisoned lock: no coalescing.
            Err(_) => Queued::Alone(op),
        };
        let own = match waiting {
            Queued::First(op) => op,
            Queued::Alone(op) => return self.inner.execute(table, op).await,
            Queued::Behind(turn) => match turn.await {
                Ok(Turn::Done(outcome)) => return outcome,
                Ok(Turn::Lead(op)) => op,
                Err(_) => {
                    return Err(Error::Transient {
                        message: "the coalesced write's leader stopped before answering".into(),
                    });
                }
            },
        };
        self.lead(table, &key, own).await
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        self.inner.submit_batch(table, batch).await
    }

    fn key_order(&self) -> KeyOrder {
        self.inner.key_order()
    }

    fn preserves_negative_zero(&self) -> bool {
        self.inner.preserves_negative_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryStore;
    use crate::model::IfMatch;
    use crate::roundtrip::{Latency, RoundTripStore};

    fn paused() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime")
    }

    async fn store() -> (
        CoalescingStore<RoundTripStore<MemoryStore>>,
        RoundTripStore<MemoryStore>,
    ) {
        let inner = RoundTripStore::new(MemoryStore::new(), Latency::None);
        inner.create_table("Tab").await.expect("table");
        inner.trips().set_latency(Latency::millis(20));
        (CoalescingStore::new(inner.clone()), inner)
    }

    #[test]
    fn writes_to_one_partition_in_flight_together_share_a_transaction() {
        paused().block_on(async {
            let (store, inner) = store().await;
            let writes = (0..10).map(|i| {
                let store = store.clone();
                async move {
                    store
                        .execute("Tab", WriteOp::Insert(Entity::new("p", format!("r{i}"))))
                        .await
                }
            });
            let started = tokio::time::Instant::now();
            let outcomes = futures::future::join_all(writes).await;
            assert!(
                outcomes.iter().all(|o| matches!(o, Ok(Some(_)))),
                "{outcomes:?}"
            );
            let counts = inner.trips().counts();
            // The first alone, the nine that came while it was in flight together.
            assert_eq!((counts.writes, counts.batches), (1, 1), "{counts}");
            assert_eq!(started.elapsed().as_millis(), 40);
            for i in 0..10 {
                let stored = inner.inner().get("Tab", "p", &format!("r{i}"), None).await;
                assert!(stored.expect("get").is_some(), "r{i}");
            }
            // Other partitions are not held back.
            let (a, b) = tokio::join!(
                store.execute("Tab", WriteOp::Insert(Entity::new("a", "1"))),
                store.execute("Tab", WriteOp::Insert(Entity::new("b", "1")))
            );
            assert!(a.is_ok() && b.is_ok());
        });
    }

    #[test]
    fn a_refused_write_in_a_transaction_leaves_the_others_their_own_outcome() {
        paused().block_on(async {
            let (store, inner) = store().await;
            inner
                .inner()
                .insert("Tab", Entity::new("p", "taken"))
                .await
                .expect("seed");
            let first = store.execute("Tab", WriteOp::Insert(Entity::new("p", "first")));
            let taken = store.execute("Tab", WriteOp::Insert(Entity::new("p", "taken")));
            let free = store.execute("Tab", WriteOp::Insert(Entity::new("p", "free")));
            let stale = store.execute(
                "Tab",
                WriteOp::Replace(
                    Entity::new("p", "taken"),
                    IfMatch::ETag(ETag::new("W/\"stale\"")),
                ),
            );
            let (first, taken, free, stale) = tokio::join!(first, taken, free, stale);
            assert!(first.is_ok(), "{first:?}");
            assert_eq!(
                taken.expect_err("taken").kind(),
                crate::ErrorKind::AlreadyExists
            );
            assert!(free.is_ok(), "{free:?}");
            assert_eq!(
                stale.expect_err("stale").kind(),
                crate::ErrorKind::PreconditionFailed
            );
            assert!(
                inner
                    .inner()
                    .get("Tab", "p", "free", None)
                    .await
                    .expect("get")
                    .is_some()
            );
        });
    }

    #[test]
    fn two_writes_of_one_entity_never_share_a_transaction() {
        paused().block_on(async {
            let (store, inner) = store().await;
            let put = |row: &str, n: i32| {
                store.execute(
                    "Tab",
                    WriteOp::InsertOrReplace(Entity::new("p", row).with("N", n)),
                )
            };
            // x alone; then y with z (the second y waits for the next transaction).
            let (x, y1, y2, z) = tokio::join!(put("x", 1), put("y", 1), put("y", 2), put("z", 1));
            assert!(x.is_ok() && y1.is_ok() && y2.is_ok() && z.is_ok());
            let y = inner
                .inner()
                .get("Tab", "p", "y", None)
                .await
                .expect("get")
                .expect("y");
            assert_eq!(y.get("N"), Some(&crate::Value::Int32(2)));
            let counts = inner.trips().counts();
            assert_eq!((counts.writes, counts.batches), (2, 1), "{counts}");
        });
    }

    #[test]
    fn a_leader_dropped_half_way_hands_the_partition_on() {
        paused().block_on(async {
            let (store, inner) = store().await;
            let mut leader = Box::pin(store.execute("Tab", WriteOp::Insert(Entity::new("p", "a"))));
            let mut follower =
                Box::pin(store.execute("Tab", WriteOp::Insert(Entity::new("p", "b"))));
            // The leader starts its write, the follower waits for it; the leader's caller
            // gives up.
            assert!(futures::poll!(&mut leader).is_pending());
            assert!(futures::poll!(&mut follower).is_pending());
            drop(leader);
            // The follower leads now, alone.
            assert!(follower.await.is_ok());
            assert!(
                inner
                    .inner()
                    .get("Tab", "p", "b", None)
                    .await
                    .expect("get")
                    .is_some()
            );
            // And the partition is free again.
            assert!(
                store
                    .execute("Tab", WriteOp::Insert(Entity::new("p", "c")))
                    .await
                    .is_ok()
            );
        });
    }
}
