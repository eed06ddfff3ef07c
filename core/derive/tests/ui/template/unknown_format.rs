use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department:upper}", row_key = "empid_{id:6}")]
struct Employee {
    department: String,
    id: u32,
}

fn main() {}
