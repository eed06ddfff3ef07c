use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "{last_name}{first_name}")]
struct Employee {
    department: String,
    first_name: String,
    last_name: String,
}

fn main() {}
