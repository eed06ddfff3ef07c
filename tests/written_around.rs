//! A declared type written around its declarations — by another language's SDK, an older
//! program's plain `Table`, a hand edit (a plain `Table` of a declared type no longer
//! compiles: `core/derive/tests/ui/writes`) — is found by the audit, which walks the
//! primaries' table itself, and repaired through the one write path: its copy, its
//! id-list membership, its count and its feed change follow.

#![allow(missing_docs)]

use std::sync::Arc;

use tablekit::core::{Entity, MemoryStore, TableStore};
use tablekit::patterns::feed::Group;
use tablekit::patterns::index::{AuditOptions, Drift, InlineSink, Relay, handlers};
use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "AroundOrders",
    kind = "AroundOrder",
    partition_key = "{customer}",
    row_key = "o{id:04}"
)]
#[index(
    name = "by_status",
    table = "AroundOrdersByStatus",
    partition_key = "{status}",
    row_key = "{customer},{id:04}"
)]
#[index_entity(
    name = "status_list",
    key = "{status}",
    storage = "table",
    table = "AroundOrdersByStatusList"
)]
#[count(name = "per_status", key = "{status}")]
#[feed(shares = 2)]
struct Order {
    customer: String,
    id: u32,
    status: String,
}

fn order(customer: &str, id: u32, status: &str) -> Order {
    Order {
        customer: customer.into(),
        id,
        status: status.into(),
    }
}

async fn placed(orders: &IndexedTable<Order, MemoryStore>) -> (i64, usize, usize) {
    let count = orders
        .count(Order::PER_STATUS)
        .key("placed")
        .get()
        .await
        .expect("count")
        .value;
    let copies = orders
        .lookup(Order::BY_STATUS)
        .key("placed")
        .all()
        .await
        .expect("lookup")
        .len();
    let members = orders
        .list(Order::STATUS_LIST)
        .key("placed")
        .ids()
        .await
        .expect("list")
        .len();
    (count, copies, members)
}

async fn sequence_all(store: &MemoryStore) {
    let relay = Relay::options().alone().build(
        store.clone(),
        Arc::new(InlineSink::new(handlers(store.clone(), None))),
    );
    for _ in 0..10 {
        if relay.run_once().await.expect("relay").sequenced == 0 {
            return;
        }
    }
}

#[tokio::test]
async fn the_audit_finds_rows_written_around_the_table_and_repair_brings_their_declarations() {
    let store = MemoryStore::new();
    let orders = IndexedTable::<Order, _>::options()
        .inline_apply()
        .open(store.clone())
        .await
        .expect("open");
    for id in 0..3 {
        orders
            .insert(&order("alice", id, "placed"))
            .await
            .expect("insert");
    }
    // What a plain `Table` wrote before it was refused: the typed entity, kind included.
    let typed = order("bob", 7, "placed").to_entity().expect("entity");
    store.insert("AroundOrders", typed).await.expect("insert");
    // What another language's SDK writes: the properties alone, no kind.
    store
        .insert(
            "AroundOrders",
            Entity::new("carol", "o0009")
                .with("customer", "carol")
                .with("id", 9i64)
                .with("status", "placed"),
        )
        .await
        .expect("insert");
    assert_eq!(placed(&orders).await, (3, 3, 3), "nothing followed them");
    let scanned = orders.scan().count_scan().await.expect("scan");
    assert_eq!(scanned, 4, "the kind-less row is not read as an order");

    let found = orders.audit(&AuditOptions::default()).await.expect("audit");
    assert_eq!(found.primaries, 5, "{found:?}");
    assert_eq!(found.missing, 2, "{found:?}");
    assert!(!found.is_clean());
    let around: Vec<_> = found
        .findings
        .iter()
        .filter(|f| f.drift == Drift::Missing)
        .collect();
    assert!(
        around
            .iter()
            .all(|f| f.target.contains("written around the write path") && !f.repaired),
        "{around:?}"
    );
    assert!(
        around[0].target.contains("count `per_status`") && around[0].target.contains("feed `"),
        "the finding names what is missing: {}",
        around[0].target
    );

    let repair = AuditOptions {
        repair: true,
        ..AuditOptions::default()
    };
    let repaired = orders.audit(&repair).await.expect("repair");
    assert_eq!(repaired.repaired, 2, "{repaired:?}");
    assert_eq!(placed(&orders).await, (5, 5, 5));
    // The kind-less row now records its kind: typed reads find it.
    assert_eq!(orders.scan().count_scan().await.expect("scan"), 5);
    let carol = orders
        .get("carol", "o0009")
        .await
        .expect("get")
        .expect("found");
    assert_eq!(carol.value, order("carol", 9, "placed"));
    let again = orders.audit(&AuditOptions::default()).await.expect("audit");
    assert!(again.is_clean(), "{again:?}");

    // Their feed changes follow: a group reading from the start gets all five.
    sequence_all(&store).await;
    let group = Group::new(store.clone(), "AroundOrders", "billing", 2).expect("group");
    let mut seen = std::collections::BTreeSet::new();
    loop {
        let changes = group.poll().await.expect("poll");
        if changes.is_empty() {
            break;
        }
        group.checkpoint(&changes).await.expect("checkpoint");
        seen.extend(
            changes
                .iter()
                .map(|c| (c.event.partition_key.clone(), c.event.row_key.clone())),
        );
    }
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(seen.contains(&("bob".to_owned(), "o0007".to_owned())));
    assert!(seen.contains(&("carol".to_owned(), "o0009".to_owned())));
}

#[tokio::test]
async fn a_repair_the_write_path_refuses_is_reported_with_its_reason() {
    let store = MemoryStore::new();
    let orders = IndexedTable::<Order, _>::options()
        .inline_apply()
        .open(store.clone())
        .await
        .expect("open");
    orders
        .insert(&order("alice", 1, "placed"))
        .await
        .expect("insert");
    // A row whose key field holds the separator after it in the index's template: the
    // write path refuses to render its copy's key.
    store
        .insert(
            "AroundOrders",
            Entity::new("dave", "o0002")
                .with("EntityKind", "AroundOrder")
                .with("customer", "da,ve")
                .with("id", 2i64)
                .with("status", "placed"),
        )
        .await
        .expect("insert");
    let repair = AuditOptions {
        repair: true,
        ..AuditOptions::default()
    };
    let report = orders.audit(&repair).await.expect("audit");
    let finding = report
        .findings
        .iter()
        .find(|f| f.target.contains("written around"))
        .expect("found");
    assert!(!finding.repaired);
    assert!(
        finding.target.contains("not repaired"),
        "{}",
        finding.target
    );
    assert_eq!(report.repaired, 0, "{report:?}");
    assert_eq!(
        placed(&orders).await,
        (1, 1, 1),
        "the refused row changed nothing"
    );
}
