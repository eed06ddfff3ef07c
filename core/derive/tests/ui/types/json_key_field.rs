use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "empid_{id:06}")]
struct Employee {
    #[entity(json)]
    department: Vec<String>,
    id: u32,
}

fn main() {}
