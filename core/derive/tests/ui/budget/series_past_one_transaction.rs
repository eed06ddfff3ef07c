use tablekit::Entity;
use tablekit::typed::Points;

#[derive(Entity, Clone)]
#[entity(table = "Clicks", partition_key = "{page}", row_key = "{month}")]
#[series(start = "month", points = "clicks", every = "1m", span = "30d", spill = "chunks")]
struct Clicks {
    page: String,
    month: chrono::DateTime<chrono::Utc>,
    clicks: Points<i64>,
}

fn main() {}
