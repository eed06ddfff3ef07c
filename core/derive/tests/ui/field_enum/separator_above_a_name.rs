use tablekit::{Entity, FieldEnum};

#[derive(FieldEnum)]
#[field_enum(rename_all = "snake_case")]
enum Status {
    Placed,
    OnHold,
}

#[derive(Entity)]
#[entity(table = "Orders", partition_key = "orders", row_key = "{status}_{id}")]
struct Order {
    status: Status,
    id: String,
}

fn main() {}
