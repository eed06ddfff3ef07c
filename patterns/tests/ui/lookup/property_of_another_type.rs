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

// A condition on a `Team` field does not filter `Order`s.
async fn another_type(orders: IndexedTable<Order, MemoryStore>) {
    let _ = orders.primary().key("alice").filter(Team::fields().size.ge(3u32)).all().await;
}

fn main() {}
