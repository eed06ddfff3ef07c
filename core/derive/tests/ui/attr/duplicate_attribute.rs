use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", table = "Staff", partition_key = "{department}", row_key = "{id}")]
struct Employee {
    department: String,
    id: String,
}

fn main() {}
