use tablekit::Entity;

// `_` sorts above letters and digits: `bob_x` would render into `bob`'s keys.
#[derive(Entity)]
#[entity(table = "Orders", partition_key = "{region}", row_key = "{customer}_{id:08}")]
struct Order {
    region: String,
    customer: String,
    id: u32,
}

fn main() {}
