use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "empid_{id:06}")]
#[index(name = "email", partition_key = "{department}")]
#[index_entity(name = "last_name", key = "{last_name}", storage = "queue")]
struct Employee {
    department: String,
    id: u32,
    email: String,
    last_name: String,
}

fn main() {}
