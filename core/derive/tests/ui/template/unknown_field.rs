use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{departmnet}", row_key = "empid_{id:06}")]
struct Employee {
    department: String,
    id: u32,
}

fn main() {}
