use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Invites", partition_key = "{team}", row_key = "{code}")]
struct Invite {
    team: String,
    code: String,
    #[entity(expires)]
    ends: chrono::DateTime<chrono::Utc>,
    #[entity(expires)]
    purge: chrono::DateTime<chrono::Utc>,
}

fn main() {}
