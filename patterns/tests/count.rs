//! `#[count]`: counts kept without a scan — exact once the work is applied, whatever the
//! order, however often each operation is delivered; spread over shards and summed on
//! read; checked and repaired by the audit; backfilled for entities stored before the
//! declaration; on the in-memory store and on a SQLite file.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use support::{Held, Hold};
use tablekit_core::fault::{FaultyStore, Timing};
use tablekit_core::typed::EntityType;
use tablekit_core::{Entity, MemoryStore, SqliteStore, TableStore, Value};
use tablekit_derive::Entity;
use tablekit_patterns::consistency::{Envelope, Unapplied};
use tablekit_patterns::index::internals::count::{COUNT_PROPERTY, COUNTER_ROW_KEY, SyncCount};
use tablekit_patterns::index::{
    AuditOptions, Drift, IndexApplier, IndexOperations, IndexedTable, OutboxSink,
};

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Orders",
    kind = "Order",
    partition_key = "{customer}",
    row_key = "{id:06}",
    crate = "tablekit_core"
)]
#[count(name = "by_status", key = "{status}", shards = 4)]
struct Order {
    customer: String,
    id: u32,
    status: String,
}

/// The same entities as [`Order`], declared before the count was.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Orders",
    kind = "Order",
    partition_key = "{customer}",
    row_key = "{id:06}",
    crate = "tablekit_core"
)]
struct OrderBeforeCount {
    customer: String,
    id: u32,
    status: String,
}

fn order(id: u32, status: &str) -> Order {
    Order {
        customer: format!("c{}", id % 3),
        id,
        status: status.to_owned(),
    }
}

/// A sink that keeps what it is given, like a queue nobody consumes yet.
#[derive(Default)]
struct Queue(Mutex<Vec<Envelope>>);

impl OutboxSink for Queue {
    fn publish<'a>(
        &'a self,
        envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        self.0.lock().unwrap().push(envelope.clone());
        Box::pin(async { Ok(()) })
    }
}

impl Queue {
    fn take(&self) -> Vec<IndexOperations> {
        std::mem::take(&mut *self.0.lock().unwrap())
            .into_iter()
            .filter(|e| e.kind == "index")
            .map(|e| serde_json::from_value(e.payload).unwrap())
            .collect()
    }
}

/// The count of `status`, by scanning every order (the typed table scan, checked against
/// the entities it reads).
async fn scanned<S: TableStore + Clone + 'static>(
    orders: &IndexedTable<Order, S>,
    status: &str,
) -> i64 {
    let counted = orders
        .scan()
        .filter(Order::fields().status.eq(status))
        .count_scan()
        .await
        .unwrap();
    let read = orders
        .scan()
        .filter(Order::fields().status.eq(status))
        .all()
        .await
        .unwrap();
    assert_eq!(usize::try_from(counted).unwrap(), read.len());
    assert!(read.iter().all(|o| o.value.status == status));
    i64::try_from(counted).unwrap()
}

async fn count<S: TableStore + Clone + 'static>(
    orders: &IndexedTable<Order, S>,
    status: &str,
) -> tablekit_patterns::index::internals::count::Count {
    orders
        .count(Order::BY_STATUS)
        .key(status)
        .get()
        .await
        .unwrap()
}

async fn counts_follow_inserts_updates_and_deletes<S: TableStore + Clone + 'static>(store: S) {
    let orders = IndexedTable::<Order, _>::options()
        .inline_apply()
        .open(store)
        .await
        .unwrap();
    for id in 0..30 {
        let status = if id % 3 == 0 { "shipped" } else { "placed" };
        orders.insert(&order(id, status)).await.unwrap();
    }
    assert_eq!(count(&orders, "placed").await.value, 20);
    assert_eq!(count(&orders, "shipped").await.value, 10);
    for id in [1, 2, 4] {
        orders.upsert(&order(id, "shipped")).await.unwrap();
    }
    for id in [0, 3] {
        orders
            .delete(
                &order(id, "shipped").customer,
                &format!("{:06}", id),
                tablekit_core::IfMatch::Any,
            )
            .await
            .unwrap();
    }
    // An update that keeps the value changes nothing.
    orders.upsert(&order(5, "placed")).await.unwrap();
    for status in ["placed", "shipped", "returned"] {
        // Applied inline; an outbox entry handed over is removed off the write's path,
        // and the count says exact once none is left.
        let mut read = count(&orders, status).await;
        for _ in 0..200 {
            if read.exact {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            read = count(&orders, status).await;
        }
        assert_eq!(read.value, scanned(&orders, status).await, "{status}");
        assert!(read.exact, "{status}: applied inline ({})", read.pending);
    }
    assert_eq!(count(&orders, "shipped").await.value, 11);
    assert!(
        orders
            .audit(&AuditOptions::default())
            .await
            .unwrap()
            .is_clean()
    );
}

#[tokio::test]
async fn counts_follow_inserts_updates_and_deletes_in_memory() {
    counts_follow_inserts_updates_and_deletes(MemoryStore::new()).await;
}

#[tokio::test]
async fn counts_follow_inserts_updates_and_deletes_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::create(dir.path().join("counts.db"))
        .await
        .unwrap();
    counts_follow_inserts_updates_and_deletes(store).await;
}

#[tokio::test]
async fn every_operation_applied_twice_and_in_reverse_order_counts_once() {
    let store = MemoryStore::new();
    let queue = Arc::new(Queue::default());
    let orders = IndexedTable::<Order, _>::options()
        .sink(queue.clone())
        .open(store.clone())
        .await
        .unwrap();
    for id in 0..12 {
        orders.insert(&order(id, "placed")).await.unwrap();
    }
    for id in 0..6 {
        orders.upsert(&order(id, "shipped")).await.unwrap();
    }
    orders.upsert(&order(0, "placed")).await.unwrap();
    orders
        .delete(
            &order(11, "placed").customer,
            &format!("{:06}", 11),
            tablekit_core::IfMatch::Any,
        )
        .await
        .unwrap();
    let work = queue.take();
    let syncs = work
        .iter()
        .flat_map(|w| &w.operations)
        .filter(|op| op.get::<SyncCount>().is_some())
        .count();
    assert_eq!(
        syncs,
        12 + 6 * 2 + 2 + 1,
        "one operation per membership a write changed"
    );
    // Nothing applied yet: the counts are empty.
    assert_eq!(count(&orders, "placed").await.value, 0);
    let applier = IndexApplier::new(store.clone());
    // Newest first, each twice: a redelivered or late operation does what the primary
    // says, never counts again.
    for message in work.iter().rev() {
        applier.apply_all(message).await.unwrap();
        applier.apply_all(message).await.unwrap();
    }
    for message in &work {
        applier.apply_all(message).await.unwrap();
    }
    assert_eq!(count(&orders, "placed").await.value, 6);
    assert_eq!(count(&orders, "shipped").await.value, 5);
    assert_eq!(
        count(&orders, "placed").await.value,
        scanned(&orders, "placed").await
    );
    assert!(
        orders
            .audit(&AuditOptions::default())
            .await
            .unwrap()
            .is_clean()
    );
}

/// What a crash does to one step of the work's application.
#[derive(Clone, Copy, Debug)]
enum Crash {
    /// The process dies at that write: it and every call after it fail until redelivery.
    Dies,
    /// That write fails without landing.
    Refused,
    /// That write lands and its answer is lost.
    AnswerLost,
}

/// The writes of `counts_after_a_crash_at_every_write`: inserts, updates that move a
/// membership, an update back, a delete; their work taken from the sink, unapplied.
async fn orders_with_pending_work(
    store: &FaultyStore<MemoryStore>,
) -> (
    IndexedTable<Order, FaultyStore<MemoryStore>>,
    Vec<IndexOperations>,
) {
    let queue = Arc::new(Queue::default());
    let orders = IndexedTable::<Order, _>::options()
        .sink(queue.clone())
        .open(store.clone())
        .await
        .unwrap();
    for id in 0..4 {
        orders.insert(&order(id, "placed")).await.unwrap();
    }
    orders.upsert(&order(0, "shipped")).await.unwrap();
    orders.upsert(&order(1, "shipped")).await.unwrap();
    orders.upsert(&order(1, "placed")).await.unwrap();
    orders
        .delete(
            &order(3, "placed").customer,
            &format!("{:06}", 3),
            tablekit_core::IfMatch::Any,
        )
        .await
        .unwrap();
    (orders, queue.take())
}

/// A crash at each write the worker makes while applying the count work, in turn (the
/// process dying there, the write refused, the write landed with its answer lost), then
/// the message delivered again: every count equals the number of live orders with its
/// value and the audit finds nothing, at every step.
#[tokio::test]
async fn counts_after_a_crash_at_every_write_of_the_work_and_a_redelivery() {
    // The writes the work makes without a fault: one per operation (an operation whose
    // member row already agrees touches its shard's counter).
    let store = FaultyStore::new(MemoryStore::new());
    let (_, work) = orders_with_pending_work(&store).await;
    let applier = IndexApplier::new(store.clone());
    let before = store.writes();
    for message in &work {
        applier.apply_all(message).await.unwrap();
    }
    let steps = store.writes() - before;
    assert!(
        steps >= 3,
        "the work writes the memberships it changes ({steps})"
    );

    for crash in [Crash::Dies, Crash::Refused, Crash::AnswerLost] {
        for step in 0..steps {
            let store = FaultyStore::new(MemoryStore::new());
            let (orders, work) = orders_with_pending_work(&store).await;
            let applier = IndexApplier::new(store.clone());
            match crash {
                Crash::Dies => store.crash_after_writes(step),
                Crash::Refused => store.fail_write(step, Timing::BeforeWrite),
                Crash::AnswerLost => store.fail_write(step, Timing::AfterWrite),
            }
            let mut struck = 0;
            for message in &work {
                if applier.apply_all(message).await.is_err() {
                    struck += 1;
                    store.recover();
                    applier.apply_all(message).await.unwrap();
                }
            }
            assert_eq!(struck, 1, "{crash:?} at write {step} strikes once");
            for status in ["placed", "shipped"] {
                assert_eq!(
                    count(&orders, status).await.value,
                    scanned(&orders, status).await,
                    "{status} after {crash:?} at write {step}"
                );
            }
            let audit = orders.audit(&AuditOptions::default()).await.unwrap();
            assert!(
                audit.is_clean(),
                "{crash:?} at write {step}: {:?}",
                audit.findings
            );
        }
    }
}

#[tokio::test]
async fn a_hot_value_is_spread_over_its_shards_and_summed() {
    let store = MemoryStore::new();
    let orders = IndexedTable::<Order, _>::options()
        .inline_apply()
        .open(store.clone())
        .await
        .unwrap();
    for id in 0..200 {
        orders.insert(&order(id, "placed")).await.unwrap();
    }
    assert_eq!(count(&orders, "placed").await.value, 200);
    let mut per_shard = Vec::new();
    for shard in 0..4 {
        let counter = store
            .get(
                "OrdersCounts",
                &format!("by_status|placed|{shard:02}"),
                COUNTER_ROW_KEY,
                None,
            )
            .await
            .unwrap()
            .unwrap();
        match counter.properties.get(COUNT_PROPERTY) {
            Some(Value::Int64(n)) => per_shard.push(*n),
            other => panic!("counter of shard {shard}: {other:?}"),
        }
    }
    assert_eq!(per_shard.iter().sum::<i64>(), 200);
    assert!(
        per_shard.iter().all(|n| *n > 20),
        "every shard takes a share: {per_shard:?}"
    );
}

#[tokio::test]
async fn a_count_is_not_exact_while_work_waits_in_an_outbox() {
    /// A sink whose publishes fail: the work stays in the writers' outboxes (its queue
    /// holds nothing).
    struct Down;
    impl OutboxSink for Down {
        fn publish<'a>(&'a self, _: &'a Envelope) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
            Box::pin(async { Err(tablekit_patterns::Error::Unsupported("down".into())) })
        }
        fn unapplied(&self) -> BoxFuture<'_, tablekit_patterns::Result<Unapplied>> {
            Box::pin(async {
                Ok(Unapplied::Queued {
                    queue: "down".into(),
                    messages: 0,
                })
            })
        }
    }
    let store = MemoryStore::new();
    let orders = IndexedTable::<Order, _>::options()
        .sink(Arc::new(Down))
        .open(store.clone())
        .await
        .unwrap();
    orders.insert(&order(1, "placed")).await.unwrap();
    let read = count(&orders, "placed").await;
    assert_eq!((read.value, read.exact), (0, false));
    assert_eq!(read.pending.outbox_entries, 1);
    let shipped = count(&orders, "shipped").await;
    assert!(
        shipped.exact,
        "no work for another value: {}",
        shipped.pending
    );
    // The relay hands the work on; applied, the count is exact.
    let applied = IndexedTable::<Order, _>::options()
        .inline_apply()
        .open(store.clone())
        .await
        .unwrap();
    let registry = tablekit_patterns::index::handlers(store.clone(), None);
    let relay = tablekit_patterns::index::Relay::options()
        .grace(std::time::Duration::ZERO)
        .late(std::time::Duration::ZERO)
        .build(
            store.clone(),
            Arc::new(tablekit_patterns::index::InlineSink::new(registry)),
        );
    relay.run_once().await.unwrap();
    let read = count(&applied, "placed").await;
    assert_eq!((read.value, read.exact), (1, true));
}

/// A sink that cannot tell what it holds (the default) never lets a count read exact,
/// and a queue holding work keeps it from reading exact.
#[tokio::test]
async fn a_count_is_not_exact_while_its_sink_holds_work_or_cannot_tell() {
    let store = MemoryStore::new();
    let queue = Arc::new(Queue::default());
    let orders = IndexedTable::<Order, _>::options()
        .sink(queue.clone())
        .open(store.clone())
        .await
        .unwrap();
    orders.insert(&order(1, "placed")).await.unwrap();
    let read = count(&orders, "placed").await;
    assert!(!read.exact);
    assert_eq!(read.pending.handed, Unapplied::Unknown);
}

#[tokio::test]
async fn the_audit_recounts_and_repairs() {
    let store = MemoryStore::new();
    let orders = IndexedTable::<Order, _>::options()
        .inline_apply()
        .open(store.clone())
        .await
        .unwrap();
    for id in 0..20 {
        orders.insert(&order(id, "placed")).await.unwrap();
    }
    // Drift of every kind: a counter set wrong, a member row taken away (its counter
    // left), a member row no primary claims (its counter raised with it).
    let shard = "by_status|placed|00";
    let mut counter = store
        .get("OrdersCounts", shard, COUNTER_ROW_KEY, None)
        .await
        .unwrap()
        .unwrap();
    let right = match counter.properties.get(COUNT_PROPERTY) {
        Some(Value::Int64(n)) => *n,
        other => panic!("{other:?}"),
    };
    counter
        .properties
        .insert(COUNT_PROPERTY.to_owned(), Value::Int64(right + 7));
    store
        .insert_or_replace("OrdersCounts", counter)
        .await
        .unwrap();
    let members = store
        .query_all(
            "OrdersCounts",
            tablekit_core::Query::with_filter(
                tablekit_core::filter::partition_key().eq("by_status|placed|01"),
            ),
        )
        .await
        .unwrap();
    let member = members
        .iter()
        .find(|m| m.row_key != COUNTER_ROW_KEY)
        .unwrap();
    store
        .delete(
            "OrdersCounts",
            &member.partition_key,
            &member.row_key,
            tablekit_core::IfMatch::Any,
        )
        .await
        .unwrap();
    let mut orphan = Entity::new("by_status|placed|02", "Orders,nobody,000999");
    orphan.properties = member.properties.clone();
    orphan.properties.insert(
        "TablekitMemberOf".to_owned(),
        Value::String(r#"{"table":"Orders","partition_key":"nobody","row_key":"000999"}"#.into()),
    );
    store.insert("OrdersCounts", orphan).await.unwrap();

    let found = orders.audit(&AuditOptions::default()).await.unwrap();
    let drifts: Vec<Drift> = found.findings.iter().map(|f| f.drift).collect();
    assert!(drifts.contains(&Drift::Stale), "{drifts:?}");
    assert!(drifts.contains(&Drift::Missing), "{drifts:?}");
    assert!(drifts.contains(&Drift::Orphaned), "{drifts:?}");
    assert!(found.findings.iter().all(|f| f.index == "by_status"));
    let repair = AuditOptions {
        repair: true,
        ..AuditOptions::default()
    };
    orders.audit(&repair).await.unwrap();
    // The repair of a member row moves its counter with it: audit once more for a
    // counter a repair left off by one.
    orders.audit(&repair).await.unwrap();
    assert!(
        orders
            .audit(&AuditOptions::default())
            .await
            .unwrap()
            .is_clean()
    );
    assert_eq!(count(&orders, "placed").await.value, 20);
}

#[tokio::test]
async fn a_count_declared_later_is_backfilled() {
    let store = MemoryStore::new();
    let before = IndexedTable::<OrderBeforeCount, _>::options()
        .inline_apply()
        .open(store.clone())
        .await
        .unwrap();
    for id in 0..15 {
        let status = if id < 9 { "placed" } else { "shipped" };
        before
            .insert(&OrderBeforeCount {
                customer: format!("c{}", id % 3),
                id,
                status: status.into(),
            })
            .await
            .unwrap();
    }
    let orders = IndexedTable::<Order, _>::options()
        .inline_apply()
        .open(store.clone())
        .await
        .unwrap();
    assert_eq!(count(&orders, "placed").await.value, 0);
    let report = orders
        .backfill("by_status", &AuditOptions::default())
        .await
        .unwrap();
    assert_eq!(report.repaired, 15, "{report:?}");
    assert_eq!(count(&orders, "placed").await.value, 9);
    assert_eq!(count(&orders, "shipped").await.value, 6);
    // Twice changes nothing.
    orders
        .backfill("by_status", &AuditOptions::default())
        .await
        .unwrap();
    assert_eq!(count(&orders, "placed").await.value, 9);
    assert!(
        orders
            .audit(&AuditOptions::default())
            .await
            .unwrap()
            .is_clean()
    );
}

#[test]
fn the_schema_describes_the_count() {
    let schema = Order::schema();
    let count = schema.declared("count", "by_status").unwrap();
    assert_eq!(count.key.as_ref().map(|k| k.source()), Some("{status}"));
    assert_eq!(count.setting("shards"), Some("4"));
    assert_eq!(Order::BY_STATUS.name(), "by_status");
    assert_eq!(Order::BY_STATUS.attribute(), "count");
}

/// The older of two writes' work, read before the newer write and stalled at its commit
/// until the newer write's work was applied (the simulation's seed 621438: an older
/// message applied after a newer one of the same entity), counts nothing the primary no
/// longer says: the newer work's application touches the shard's counter even when its
/// member row already agrees, so the stalled commit fails on the counter's ETag and reads
/// again.
#[tokio::test]
async fn an_older_delivery_stalled_past_a_newer_writes_work_leaves_no_member_row() {
    let store = Held::new(Hold::Commit(COUNTER_ROW_KEY));
    let queue = Arc::new(Queue::default());
    let orders = IndexedTable::<Order, _>::options()
        .sink(queue.clone())
        .open(store.inner.clone())
        .await
        .unwrap();
    orders.insert(&order(1, "placed")).await.unwrap();
    let older = queue.take();
    assert_eq!(older.len(), 1);

    // The older work reads the shard and the primary, then stalls at its commit.
    store.arm();
    let stalled = tokio::spawn({
        let applier = IndexApplier::new(store.clone());
        let work = older[0].clone();
        async move { applier.apply_all(&work).await }
    });
    store.reached().await;

    // The newer write, and its work applied in full, while the older one waits.
    orders.upsert(&order(1, "shipped")).await.unwrap();
    let newer = queue.take();
    let applier = IndexApplier::new(store.inner.clone());
    for work in &newer {
        applier.apply_all(work).await.unwrap();
    }
    store.release();
    stalled.await.unwrap().unwrap();

    assert_eq!(count(&orders, "placed").await.value, 0);
    assert_eq!(count(&orders, "shipped").await.value, 1);
    let audit = orders.audit(&AuditOptions::default()).await.unwrap();
    assert!(audit.is_clean(), "{:?}", audit.findings);
}
