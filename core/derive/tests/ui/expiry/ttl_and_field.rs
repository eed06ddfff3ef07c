use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Sessions", partition_key = "{user}", row_key = "s_{id}", ttl = "1h")]
struct Session {
    user: String,
    id: u32,
    #[entity(expires)]
    ends: chrono::DateTime<chrono::Utc>,
}

fn main() {}
