//! Typed properties: filters, partial updates and projections built from
//! `Order::fields()`, on the core table and through the one write path of an indexed
//! table (its index copies and id lists follow a typed update).

#![allow(missing_docs)]

use tablekit::core::{IfMatch, MemoryStore};
use tablekit::prelude::*;
use tablekit::typed::Table;

#[derive(FieldEnum, Clone, Copy, Debug, PartialEq, Eq)]
#[field_enum(rename_all = "snake_case")]
enum Status {
    Placed,
    Shipped,
    OnHold,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Orders", partition_key = "{customer}", row_key = "o_{id:06}")]
#[index(
    name = "by_status",
    partition_key = "{customer}",
    row_key = "s_{status},{id:06}"
)]
#[index_entity(
    name = "status_list",
    key = "{status}",
    storage = "table",
    table = "OrdersByStatus"
)]
struct Order {
    customer: String,
    id: u32,
    total: u32,
    status: Status,
    note: Option<String>,
}

fn order(id: u32, total: u32, status: Status) -> Order {
    Order {
        customer: "alice".into(),
        id,
        total,
        status,
        note: None,
    }
}

async fn seeded() -> IndexedTable<Order, MemoryStore> {
    let orders = IndexedTable::<Order, _>::options()
        .inline_apply()
        .open(MemoryStore::new())
        .await
        .expect("open");
    orders.create().await.expect("create");
    for (id, total, status) in [
        (1, 10, Status::Placed),
        (2, 20, Status::Shipped),
        (3, 30, Status::Placed),
        (4, 40, Status::OnHold),
    ] {
        orders
            .insert(&order(id, total, status))
            .await
            .expect("insert");
    }
    orders
}

fn ids(found: &[Stored<Order>]) -> Vec<u32> {
    found.iter().map(|o| o.value.id).collect()
}

#[tokio::test]
async fn typed_filters_compare_fields_with_values_of_their_types() {
    let orders = seeded().await;
    let f = Order::fields();
    let found = orders
        .primary()
        .key("alice")
        .filter(f.total.ge(20) & !f.status.eq(Status::OnHold))
        .all()
        .await
        .expect("filter");
    assert_eq!(ids(&found), [2, 3]);
    let found = orders
        .primary()
        .key("alice")
        .filter(f.status.eq(Status::Placed) | f.total.gt(35))
        .filter(f.id.ne(1))
        .all()
        .await
        .expect("or, then and");
    assert_eq!(ids(&found), [3, 4]);
    let rendered = (f.total.ge(20) & f.status.eq(Status::OnHold))
        .into_filter()
        .expect("filter")
        .to_string();
    assert_eq!(rendered, "total ge 20L and status eq 'on_hold'");
    // A value its property cannot hold is an error naming the property, not a mismatch.
    #[derive(Entity, Clone, Debug, PartialEq)]
    #[entity(table = "Big", partition_key = "p", row_key = "{id}")]
    struct Big {
        id: String,
        n: u64,
    }
    let error = Big::fields()
        .n
        .eq(u64::MAX)
        .into_filter()
        .expect_err("too big");
    assert!(error.to_string().contains('n'), "{error}");
}

#[tokio::test]
async fn a_typed_update_goes_through_the_write_path_and_moves_the_index_entries() {
    let orders = seeded().await;
    let f = Order::fields();
    orders
        .primary()
        .key("alice")
        .key(1)
        .update()
        .set(f.status, Status::Shipped)
        .set(f.note, "gift")
        .apply(IfMatch::Any)
        .await
        .expect("update");
    let stored = orders
        .primary()
        .key("alice")
        .key(1)
        .get()
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(stored.value.status, Status::Shipped);
    assert_eq!(stored.value.note.as_deref(), Some("gift"));
    assert_eq!(stored.value.total, 10, "fields not set are kept");
    // The same-partition index and the id list follow the update.
    let shipped = orders
        .lookup(Order::BY_STATUS)
        .key("alice")
        .key(Status::Shipped)
        .all()
        .await
        .expect("index");
    assert_eq!(ids(&shipped), [1, 2]);
    let placed = orders
        .list(Order::STATUS_LIST)
        .key(Status::Placed)
        .all()
        .await
        .expect("list");
    assert_eq!(ids(&placed), [3]);
    let report = orders
        .audit(&tablekit::patterns::index::AuditOptions::default())
        .await
        .expect("audit");
    assert!(report.is_clean(), "{report:?}");

    // An Option set to None loses its property; a stale ETag changes nothing.
    orders
        .primary()
        .key("alice")
        .key(1)
        .update()
        .set(f.note, None::<String>)
        .apply(IfMatch::Any)
        .await
        .expect("clear");
    let stale = orders
        .primary()
        .key("alice")
        .key(1)
        .update()
        .set(f.total, 99)
        .apply(stored.if_match())
        .await;
    assert!(stale.is_err(), "{stale:?}");
    let now = orders
        .get("alice", "o_000001")
        .await
        .expect("get")
        .expect("there");
    assert_eq!((now.value.note, now.value.total), (None, 10));
    // A missing entity is NotFound, and nothing is created.
    let missing = orders
        .primary()
        .key("alice")
        .key(77)
        .update()
        .set(f.total, 1)
        .apply(IfMatch::Any)
        .await;
    assert_eq!(
        missing.expect_err("missing").kind(),
        tablekit::ErrorKind::NotFound
    );
}

#[tokio::test]
async fn projections_read_chosen_fields_into_a_tuple() {
    let orders = seeded().await;
    let f = Order::fields();
    let rows = orders
        .primary()
        .key("alice")
        .filter(f.total.lt(40))
        .select((f.id, f.status, f.note))
        .await
        .expect("select");
    assert_eq!(
        rows,
        [
            (1, Status::Placed, None),
            (2, Status::Shipped, None),
            (3, Status::Placed, None)
        ]
    );
}

/// The same shape without declarations: a plain `Table` writes only a type whose writes
/// nothing follows.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Receipts",
    partition_key = "{customer}",
    row_key = "r_{id:06}"
)]
struct Receipt {
    customer: String,
    id: u32,
    total: u32,
}

#[tokio::test]
async fn the_core_table_takes_the_same_typed_forms() {
    let orders = Table::<Receipt, _>::new(MemoryStore::new());
    orders.create().await.expect("create");
    for id in 1..=3 {
        orders
            .insert(&Receipt {
                customer: "alice".into(),
                id,
                total: id * 10,
            })
            .await
            .expect("insert");
    }
    let f = Receipt::fields();
    orders
        .primary()
        .key("alice")
        .key(2)
        .update()
        .set(f.total, 25)
        .apply(IfMatch::Any)
        .await
        .expect("update");
    let totals = orders
        .primary()
        .key("alice")
        .filter(f.total.gt(10))
        .select((f.id, f.total))
        .await
        .expect("select");
    assert_eq!(totals, [(2, 25), (3, 30)]);
    let count = orders
        .primary()
        .key("alice")
        .filter(f.total.gt(10))
        .count_scan()
        .await
        .expect("count");
    assert_eq!(count, 2);
}

#[tokio::test]
async fn counts_read_keys_only_for_a_key_a_filter_or_a_look_up() {
    let orders = seeded().await;
    let f = Order::fields();
    let all = orders
        .primary()
        .key("alice")
        .count_scan()
        .await
        .expect("count");
    assert_eq!(all, 4, "the primaries, not their index copies");
    let placed = orders
        .lookup(Order::BY_STATUS)
        .key("alice")
        .key(Status::Placed)
        .count_scan()
        .await
        .expect("look-up count");
    assert_eq!(placed, 2);
    let big = orders
        .primary()
        .key("alice")
        .filter(f.total.ge(30))
        .count_scan()
        .await
        .expect("filtered count");
    assert_eq!(big, 2);
    orders
        .primary()
        .key("alice")
        .key(3)
        .delete(IfMatch::Any)
        .await
        .expect("delete");
    let after = orders
        .primary()
        .key("alice")
        .count_scan()
        .await
        .expect("count");
    assert_eq!(after, 3, "a deleted entity is not counted");
}
