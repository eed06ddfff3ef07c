use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "empid/{id:06}")]
struct Employee {
    department: String,
    id: u32,
}

fn main() {}
