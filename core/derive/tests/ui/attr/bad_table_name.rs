use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "1-employees", partition_key = "{department}", row_key = "{id}")]
struct Employee {
    department: String,
    id: String,
}

fn main() {}
