use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "{id}")]
#[index(name = "email", partition_key = "{department}", row_key = "{email}")]
struct Employee {
    department: String,
    id: String,
    email: String,
}

fn main() {}
