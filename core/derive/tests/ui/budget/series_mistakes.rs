use tablekit::Entity;
use tablekit::typed::Points;

#[derive(Entity, Clone)]
#[entity(table = "Clicks", partition_key = "{page}", row_key = "c")]
#[series(start = "day", points = "clicks", every = "7h", span = "1d")]
struct Uneven {
    page: String,
    day: chrono::DateTime<chrono::Utc>,
    clicks: Points<i64>,
}

#[derive(Entity, Clone)]
#[entity(table = "Clicks", partition_key = "{page}", row_key = "{day}")]
#[series(start = "day", points = "clicks", every = "1 hour", span = "1d", spill = "disk")]
struct Misspelt {
    page: String,
    day: chrono::DateTime<chrono::Utc>,
    clicks: Vec<i64>,
}

#[derive(Entity)]
#[entity(table = "Sensors", partition_key = "p", row_key = "{id}")]
#[wide(chunks = 200)]
struct TooManyChunks {
    id: String,
}

fn main() {}
