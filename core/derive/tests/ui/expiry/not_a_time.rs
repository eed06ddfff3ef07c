use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Invites", partition_key = "{team}", row_key = "{code}")]
struct Invite {
    team: String,
    code: String,
    #[entity(expires)]
    ends: String,
}

fn main() {}
