use tablekit::Entity;

#[derive(Entity)]
#[entity(tabel = "Employees", partition_key = "{department}", row_key = "{id}")]
struct Employee {
    department: String,
    id: String,
}

fn main() {}
