use tablekit::{Entity, EntityKind};

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "{id}")]
struct Employee {
    department: String,
    id: String,
}

#[derive(EntityKind)]
enum Org {
    Employee(Employee),
    Department { name: String },
    Nothing(String),
}

fn main() {}
