use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "empid_{id:06}")]
#[index(name = "email", partition = "{department}", row_key = "email_{email}")]
struct Employee {
    department: String,
    id: u32,
    email: String,
}

fn main() {}
