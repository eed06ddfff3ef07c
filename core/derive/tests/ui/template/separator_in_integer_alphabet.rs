use tablekit::Entity;

// An unpadded integer followed by `_`, which sorts above the digits: the keys of ids 1
// and 10 interleave. The fix is a padded field (`{id:08}`) or a separator below `0`
// (`,`).
#[derive(Entity)]
#[entity(table = "Orders", partition_key = "{region}", row_key = "o_{id}_{customer}")]
struct Order {
    region: String,
    customer: String,
    id: u32,
}

fn main() {}
