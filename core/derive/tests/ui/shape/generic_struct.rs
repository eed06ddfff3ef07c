use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "{id}")]
struct Employee<T> {
    department: String,
    id: String,
    extra: T,
}

fn main() {}
