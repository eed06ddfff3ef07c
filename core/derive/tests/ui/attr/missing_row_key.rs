use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}")]
struct Employee {
    department: String,
    id: String,
}

fn main() {}
