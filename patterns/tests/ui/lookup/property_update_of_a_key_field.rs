use tablekit_core::{IfMatch, MemoryStore};
use tablekit_derive::Entity;
use tablekit_patterns::index::IndexedTable;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Orders", partition_key = "{customer}", row_key = "o_{id:06}",
         crate = "tablekit_core")]
struct Order {
    customer: String,
    id: u32,
    total: u32,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Teams", partition_key = "teams", row_key = "{name}", crate = "tablekit_core")]
struct Team {
    name: String,
    size: u32,
}

// `id` is part of the RowKey: a key change is a delete and an insert, not an update.
async fn key_change(orders: IndexedTable<Order, MemoryStore>) {
    let f = Order::fields();
    let _ = orders.primary().key("alice").key(1u32).update().set(f.id, 2u32).apply(IfMatch::Any).await;
}

fn main() {}
