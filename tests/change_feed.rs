//! The change feed on every backend (memory, a SQLite file and, with the `azure` feature,
//! Azurite): changes recorded with their writes and sequenced by the relay reach two
//! groups in version order per entity; members of a group divide the shares; a trimmed
//! position is an error; a newcomer from the beginning of a trimmed log reads a snapshot
//! and ends equal to the table.

#![allow(missing_docs)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tablekit::core::{AnyStore, IfMatch};
use tablekit::patterns::changes::ChangeKind;
use tablekit::patterns::feed::{self, FeedChange, Group, Position};
use tablekit::patterns::index::{InlineSink, Relay, handlers};
use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "FeedOrders",
    kind = "FeedOrder",
    partition_key = "{customer}",
    row_key = "o{id:04}"
)]
#[feed(shares = 4)]
struct Order {
    customer: String,
    id: u32,
    total: i64,
}

fn order(customer: &str, id: u32, total: i64) -> Order {
    Order {
        customer: customer.into(),
        id,
        total,
    }
}

async fn sequence_all(store: &AnyStore) {
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

async fn drain(group: &Group<AnyStore>) -> Vec<FeedChange> {
    let mut all = Vec::new();
    loop {
        let changes = group.poll().await.expect("poll");
        if changes.is_empty() {
            return all;
        }
        group.checkpoint(&changes).await.expect("checkpoint");
        all.extend(changes);
    }
}

/// Folds changes per entity (checking versions never go back) into the state they give.
fn fold(changes: &[FeedChange]) -> BTreeMap<(String, String), i64> {
    let mut versions: BTreeMap<(String, String), i64> = BTreeMap::new();
    let mut state = BTreeMap::new();
    for c in changes {
        let key = (c.event.partition_key.clone(), c.event.row_key.clone());
        let seen = versions.entry(key.clone()).or_insert(i64::MIN);
        assert!(c.event.version >= *seen, "{c:?} after version {seen}");
        *seen = c.event.version;
        if c.event.change == ChangeKind::Delete {
            state.remove(&key);
        } else {
            state.insert(
                key,
                c.event
                    .entity
                    .get("total")
                    .and_then(|v| v.as_i64())
                    .unwrap_or(-1),
            );
        }
    }
    state
}

async fn table_state(
    orders: &IndexedTable<Order, AnyStore>,
    ids: u32,
) -> BTreeMap<(String, String), i64> {
    let mut state = BTreeMap::new();
    for id in 0..ids {
        let customer = format!("c{}", id % 5);
        let row_key = format!("o{id:04}");
        if let Some(stored) = orders.get(&customer, &row_key).await.expect("get") {
            state.insert((customer, row_key), stored.value.total);
        }
    }
    state
}

async fn changes_reach_every_group_in_order_and_a_newcomer_reads_a_snapshot(store: AnyStore) {
    let orders = IndexedTable::<Order, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    orders.create().await.expect("create");
    for id in 0..30 {
        orders
            .insert(&order(&format!("c{}", id % 5), id, i64::from(id)))
            .await
            .expect("insert");
    }
    for id in (0..30).step_by(3) {
        orders
            .replace(
                &order(&format!("c{}", id % 5), id, 1_000 + i64::from(id)),
                IfMatch::Any,
            )
            .await
            .expect("replace");
    }
    for id in (0..30).step_by(7) {
        orders
            .delete(&format!("c{}", id % 5), &format!("o{id:04}"), IfMatch::Any)
            .await
            .expect("delete");
    }
    sequence_all(&store).await;

    // Two members of `billing` divide the shares; `audit` reads everything on its own.
    let one = Group::new(store.clone(), "FeedOrders", "billing", 4)
        .expect("group")
        .member("one")
        .expect("id");
    let two = Group::new(store.clone(), "FeedOrders", "billing", 4)
        .expect("group")
        .member("two")
        .expect("id");
    for _ in 0..2 {
        one.balance().await.expect("balance");
        two.balance().await.expect("balance");
    }
    assert_eq!(one.held().len() + two.held().len(), 4);
    let mut billing = drain(&one).await;
    billing.extend(drain(&two).await);
    let audit = Group::new(store.clone(), "FeedOrders", "audit", 4).expect("group");
    let audited = drain(&audit).await;
    assert_eq!(billing.len(), 30 + 10 + 5);
    assert_eq!(audited.len(), billing.len());
    let expected = table_state(&orders, 30).await;
    assert_eq!(fold(&audited), expected);
    billing.sort_by_key(|c| (c.share, c.seq));
    assert_eq!(fold(&billing), expected);

    // Retention trims everything: a checkpoint from before is refused, naming the oldest.
    feed::trim(&store, "FeedOrders", 4, Duration::ZERO)
        .await
        .expect("trim");
    orders.insert(&order("c1", 100, 7)).await.expect("insert");
    sequence_all(&store).await;
    let stale = Group::new(store.clone(), "FeedOrders", "stale", 4)
        .expect("group")
        .from(Position::Checkpoint(feed::Checkpoint::default()));
    let err = stale.poll().await.expect_err("trimmed");
    assert!(
        matches!(err, tablekit::Error::PositionExpired { .. }),
        "{err}"
    );
    // A newcomer from the beginning reads a snapshot, then the log: equal to the table.
    let newcomer = Group::new(store.clone(), "FeedOrders", "newcomer", 4).expect("group");
    let read = drain(&newcomer).await;
    assert!(read.iter().any(|c| c.event.change == ChangeKind::Snapshot));
    let mut expected = table_state(&orders, 30).await;
    expected.insert(("c1".into(), "o0100".into()), 7);
    assert_eq!(fold(&read), expected);
}

on_backends!(changes_reach_every_group_in_order_and_a_newcomer_reads_a_snapshot);
