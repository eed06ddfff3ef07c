use tablekit_core::MemoryStore;
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

// `totl` is no field of `Order`.
async fn misspelt(orders: IndexedTable<Order, MemoryStore>) {
    let _ = orders.primary().key("alice").filter(Order::fields().totl.ge(30u32)).all().await;
}

fn main() {}
