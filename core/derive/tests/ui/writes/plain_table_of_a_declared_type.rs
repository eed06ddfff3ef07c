use tablekit::core::typed::Table;
use tablekit::core::{IfMatch, MemoryStore};
use tablekit::{Entity, EntityKind};

#[derive(Entity, Clone, Debug)]
#[entity(table = "Orders", partition_key = "{customer}", row_key = "{id}")]
#[index(name = "by_status", table = "OrdersByStatus", partition_key = "{status}", row_key = "{id}")]
struct Order {
    customer: String,
    id: String,
    status: String,
}

#[derive(Entity, Clone, Debug)]
#[entity(table = "Orders", partition_key = "{customer}", row_key = "note_{id}")]
struct Note {
    customer: String,
    id: String,
}

#[derive(EntityKind, Clone, Debug)]
enum OrderRows {
    Order(Order),
    Note(Note),
}

async fn writes(order: Order) {
    let orders = Table::<Order, _>::new(MemoryStore::new());
    // Reads stay open.
    let _ = orders.get("alice", "1").await;
    let _ = orders.primary().key("alice").key("1").get().await;
    // Writes would leave the index behind: they do not compile.
    let _ = orders.insert(&order).await;
    let _ = orders.primary().key("alice").key("1").delete(IfMatch::Any).await;
    // Nor through an enum one of whose kinds declares follow-up work.
    let rows = Table::<OrderRows, _>::new(MemoryStore::new());
    let _ = rows.query(Default::default()).await;
    let _ = rows.upsert(&OrderRows::Order(order)).await;
}

fn main() {
    let _ = writes;
}
