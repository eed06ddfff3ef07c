use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Sessions", partition_key = "{user}", row_key = "s_{id}", ttl = "30 days")]
struct Session {
    user: String,
    id: u32,
}

#[derive(Entity)]
#[entity(table = "Tokens", partition_key = "{user}", row_key = "t_{id}", ttl = "0s")]
struct Token {
    user: String,
    id: u32,
}

fn main() {}
