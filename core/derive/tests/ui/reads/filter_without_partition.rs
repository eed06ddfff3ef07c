use tablekit::core::typed::Table;
use tablekit::core::MemoryStore;
use tablekit::Entity;

#[derive(Entity, Clone, Debug)]
#[entity(table = "Orders", partition_key = "{customer}", row_key = "{id}")]
struct Order {
    customer: String,
    id: String,
    status: String,
}

fn main() {
    let orders = Table::<Order, _>::new(MemoryStore::new());
    // A table-wide read is `scan()`, not a key with no PartitionKey given.
    let _ = orders.primary().filter(Order::fields().status.eq("placed"));
}
