use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "{email}")]
struct Employee {
    department: String,
    email: Option<String>,
}

fn main() {}
