use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", version = -1, partition_key = "{department}", row_key = "{id}")]
struct Employee {
    department: String,
    id: String,
}

fn main() {}
