use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "{id}")]
struct Employee {
    department: String,
    id: String,
    #[entity(skip, rename = "Cache")]
    cache: Option<u32>,
}

fn main() {}
