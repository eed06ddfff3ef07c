use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Accounts", partition_key = "{team}", row_key = "a_{id}", changes = true)]
struct Account {
    team: String,
    id: u32,
}

fn main() {}
