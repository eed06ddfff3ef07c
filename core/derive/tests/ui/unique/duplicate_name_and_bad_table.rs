use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Users", partition_key = "{team}", row_key = "u_{id}")]
#[index_entity(name = "email", key = "{email}")]
#[unique(name = "email", key = "{email}", table = "user-emails")]
struct User {
    team: String,
    id: u32,
    email: String,
}

fn main() {}
