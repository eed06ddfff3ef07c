use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Users", partition_key = "{team}", row_key = "u_{id}")]
#[unique(name = "email")]
struct User {
    team: String,
    id: u32,
    email: String,
}

fn main() {}
