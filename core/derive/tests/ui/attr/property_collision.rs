use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Employees", partition_key = "{department}", row_key = "{id}")]
struct Employee {
    department: String,
    id: String,
    #[entity(rename = "department")]
    team: String,
    #[entity(rename = "EntityKind")]
    kind: String,
}

fn main() {}
