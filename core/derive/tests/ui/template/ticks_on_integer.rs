use tablekit::Entity;

#[derive(Entity)]
#[entity(table = "Logs", partition_key = "{source}", row_key = "{at:ticks_desc}")]
struct LogLine {
    source: String,
    at: i64,
}

fn main() {}
