use tablekit::Entity;
use tablekit::typed::Points;

#[derive(Entity, Clone)]
#[entity(table = "Clicks", partition_key = "{page}", row_key = "{day}")]
#[series(start = "day", points = "clicks", every = "1m", span = "1d")]
struct Clicks {
    page: String,
    day: chrono::DateTime<chrono::Utc>,
    clicks: Points<i64>,
}

fn main() {}
