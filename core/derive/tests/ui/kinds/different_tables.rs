use tablekit::{Entity, EntityKind};

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "{id}")]
struct Employee {
    department: String,
    id: String,
}

#[derive(Entity)]
#[entity(table = "Departments", partition_key = "{name}", row_key = "department")]
struct Department {
    name: String,
}

#[derive(EntityKind)]
enum Org {
    Employee(Employee),
    Department(Department),
}

fn main() {}
