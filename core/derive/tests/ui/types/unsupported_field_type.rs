use std::collections::HashMap;
use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "empid_{id:06}")]
struct Employee {
    department: String,
    id: u32,
    tags: HashMap<String, String>,
}

fn main() {}
