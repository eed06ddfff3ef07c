use tablekit::{Entity, FieldEnum};

#[derive(FieldEnum)]
enum Status {
    Placed,
    Shipped,
}

#[derive(FieldEnum)]
#[field_enum(repr = "int")]
enum Delta {
    Down = -1,
    Up = 1,
}

#[derive(Entity)]
#[entity(table = "Orders", partition_key = "{status:02}", row_key = "{delta:02}")]
struct Order {
    status: Status,
    delta: Delta,
}

fn main() {}
