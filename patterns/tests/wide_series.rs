//! Typed wide entities and data series on the one write path: chunks written in the
//! write's transaction and read back whole, one field's change touching chunk 0 and the
//! chunk holding it, shrinking and deleting dropping chunks, a lost answer recognised,
//! indexes and change events declared on them working, the audit checking their chunks;
//! series points added under the span's ETag and read by range.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use tablekit_core::fault::{FaultyStore, Timing};
use tablekit_core::typed::{EntityType, Points};
use tablekit_core::{Entity, IfMatch, MemoryStore, Query, TableStore, filter};
use tablekit_derive::Entity;
use tablekit_patterns::consistency::Engine;
use tablekit_patterns::index::wide::{CHUNK_OF_PROPERTY, CHUNKS_PROPERTY};
use tablekit_patterns::index::{AuditOptions, Drift, IndexedTable, Layout, SchemaRecord};

mod support;
use support::{Held, Hold, Kept};

#[derive(Entity, Clone, Debug, Default, PartialEq)]
#[entity(
    table = "Sensors",
    partition_key = "{site}",
    row_key = "{sensor}",
    changes = "sensor-changes",
    crate = "tablekit_core"
)]
#[index(
    name = "by_model",
    table = "SensorsByModel",
    partition_key = "{model}",
    row_key = "{site},{sensor}",
    properties = ["model"]
)]
#[wide(chunks = 8)]
struct Sensor {
    site: String,
    sensor: String,
    model: String,
    #[wide]
    readings: BTreeMap<String, f64>,
}

fn sensor(n: usize, bias: f64) -> Sensor {
    Sensor {
        site: "north".into(),
        sensor: "s1".into(),
        model: "m7".into(),
        readings: (0..n)
            .map(|i| (format!("r{i:04}"), i as f64 + bias))
            .collect(),
    }
}

/// The stored rows of sensor `s1` (chunk 0 and its chunks), outbox entries left out.
async fn rows<S: TableStore>(store: &S, table: &str) -> Vec<Entity> {
    store
        .query_all(
            table,
            Query::with_filter(
                filter::partition_key().eq("north")
                    & filter::row_key().ge("s1")
                    & filter::row_key().lt("s1~~"),
            ),
        )
        .await
        .expect("query")
}

async fn sensors(
    store: &FaultyStore<MemoryStore>,
    sink: Arc<Kept>,
) -> IndexedTable<Sensor, FaultyStore<MemoryStore>> {
    let engine = Engine::options()
        .sink(sink)
        .removal_in_line()
        .build(store.clone());
    let table = IndexedTable::options()
        .engine(engine)
        .build(store.clone())
        .expect("options");
    table.create().await.expect("open");
    table
}

#[tokio::test]
async fn a_wide_entity_is_stored_in_chunks_and_read_back_whole() {
    assert_eq!(Sensor::schema().wide().map(|w| w.chunks), Some(8));
    assert_eq!(Layout::of(Sensor::schema()).wide(), Some(8));
    let record = SchemaRecord::of(Sensor::schema(), "Sensors");
    assert!(
        record.declared.iter().all(|d| d.attribute != "wide"),
        "the registry does not record a type's chunks: {:?}",
        record.declared
    );
    assert_eq!(record.layout().expect("lays out").wide(), None);
    let store = FaultyStore::new(MemoryStore::new());
    let sink = Arc::new(Kept::default());
    let table = sensors(&store, sink.clone()).await;
    let value = sensor(600, 0.5);
    table.insert(&value).await.expect("insert");
    let stored = rows(store.inner(), "Sensors").await;
    // 600 readings and 3 fields: chunk 0 and two more, each within the service's limits.
    assert_eq!(
        stored.len(),
        3,
        "{:?}",
        stored.iter().map(|e| &e.row_key).collect::<Vec<_>>()
    );
    assert!(stored.iter().all(|e| e.properties.len() <= 252));
    assert_eq!(stored[1].row_key, "s1~001");
    assert!(stored[1].properties.contains_key(CHUNK_OF_PROPERTY));
    assert!(stored[0].properties.contains_key(CHUNKS_PROPERTY));
    let back = table
        .get("north", "s1")
        .await
        .expect("get")
        .expect("stored");
    assert_eq!(back.value, value);
    // The chunk rows are not entities of their own to a reader.
    assert!(table.get("north", "s1~001").await.expect("get").is_none());
    // The index copy and the change event, handed on as follow-up work.
    table.flush().await;
    let kinds: Vec<String> = sink
        .kept()
        .expect("kept")
        .iter()
        .map(|e| e.kind.clone())
        .collect();
    assert!(kinds.contains(&"index".to_owned()), "{kinds:?}");
    assert!(kinds.contains(&"change".to_owned()), "{kinds:?}");
}

#[tokio::test]
async fn changing_one_field_writes_chunk_zero_and_the_chunk_holding_it() {
    let store = FaultyStore::new(MemoryStore::new());
    let table = sensors(&store, Arc::default()).await;
    let mut value = sensor(600, 0.0);
    table.insert(&value).await.expect("insert");
    let before = rows(store.inner(), "Sensors").await;
    // r0590 sorts into the last chunk.
    value.readings.insert("r0590".into(), -1.0);
    let stored = table
        .get("north", "s1")
        .await
        .expect("get")
        .expect("stored");
    table
        .replace(&value, IfMatch::ETag(stored.etag.expect("etag")))
        .await
        .expect("replace");
    let after = rows(store.inner(), "Sensors").await;
    let changed: Vec<&str> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b.etag != a.etag)
        .map(|(b, _)| b.row_key.as_str())
        .collect();
    assert_eq!(changed, ["s1", "s1~002"]);
    assert_eq!(
        table
            .get("north", "s1")
            .await
            .expect("get")
            .expect("stored")
            .value,
        value
    );
    // A stale ETag is refused, and nothing changes.
    let err = table
        .replace(&sensor(10, 0.0), IfMatch::ETag(stored_etag(&before)))
        .await
        .expect_err("stale");
    assert_eq!(err.kind(), tablekit_core::ErrorKind::PreconditionFailed);
    assert_eq!(rows(store.inner(), "Sensors").await, after);
}

fn stored_etag(rows: &[Entity]) -> tablekit_core::ETag {
    rows[0].etag.clone().expect("etag")
}

#[tokio::test]
async fn shrinking_and_deleting_drop_the_chunks_and_the_audit_finds_orphans() {
    let store = FaultyStore::new(MemoryStore::new());
    let table = IndexedTable::<Sensor, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    table.create().await.expect("open");
    table.insert(&sensor(600, 0.0)).await.expect("insert");
    table.upsert(&sensor(300, 1.0)).await.expect("shrink");
    assert_eq!(rows(store.inner(), "Sensors").await.len(), 2);
    assert_eq!(
        table
            .get("north", "s1")
            .await
            .expect("get")
            .expect("stored")
            .value,
        sensor(300, 1.0)
    );
    let report = table.audit(&AuditOptions::default()).await.expect("audit");
    assert_eq!(
        report.orphaned + report.missing + report.stale,
        0,
        "{report:?}"
    );
    // A chunk no chunk 0 lists: an orphan, repaired by deleting it.
    let mut stray = Entity::new("north", "s1~005");
    stray
        .properties
        .insert(CHUNK_OF_PROPERTY.to_owned(), tablekit_core::Value::Int64(1));
    store.inner().insert("Sensors", stray).await.expect("plant");
    let report = table.audit(&AuditOptions::default()).await.expect("audit");
    assert_eq!(report.orphaned, 1, "{report:?}");
    assert_eq!(report.findings[0].drift, Drift::Orphaned);
    let repair = AuditOptions {
        repair: true,
        ..AuditOptions::default()
    };
    let report = table.audit(&repair).await.expect("repair");
    assert_eq!(report.repaired, 1, "{report:?}");
    table
        .delete("north", "s1", IfMatch::Any)
        .await
        .expect("delete");
    let left = rows(store.inner(), "Sensors").await;
    // No chunk is left, only the delete's tombstone (buried after the grace period).
    assert!(left.iter().all(|e| e.row_key == "s1"), "{left:?}");
    let copies = store
        .inner()
        .query_all("SensorsByModel", Query::default())
        .await
        .expect("copies");
    assert!(copies.is_empty(), "{copies:?}");
    assert!(table.get("north", "s1").await.expect("get").is_none());
}

#[tokio::test]
async fn a_wide_write_whose_answer_was_lost_answers_ok() {
    let store = FaultyStore::new(MemoryStore::new());
    let table = sensors(&store, Arc::default()).await;
    table.insert(&sensor(600, 0.0)).await.expect("insert");
    store.fail_write(0, Timing::AfterWrite);
    table
        .upsert(&sensor(700, 2.0))
        .await
        .expect("recognised as landed");
    assert_eq!(
        table
            .get("north", "s1")
            .await
            .expect("get")
            .expect("stored")
            .value,
        sensor(700, 2.0)
    );
}

#[tokio::test]
async fn a_wide_entity_past_its_chunks_is_refused_before_any_write() {
    let store = FaultyStore::new(MemoryStore::new());
    let table = sensors(&store, Arc::default()).await;
    store.reset_counters();
    let err = table
        .insert(&sensor(2500, 0.0))
        .await
        .expect_err("too wide");
    assert!(err.to_string().contains("more than the 8"), "{err}");
    assert_eq!(store.writes(), 0);
    // A reading name a property cannot take is refused too.
    let mut bad = sensor(1, 0.0);
    bad.readings.insert("not a name".into(), 1.0);
    assert!(table.insert(&bad).await.is_err());
    assert_eq!(store.writes(), 0);
}

#[derive(Entity, Clone, Debug, Default, PartialEq)]
#[entity(
    table = "PageViews",
    partition_key = "{page}",
    row_key = "{day}",
    changes = "view-changes",
    crate = "tablekit_core"
)]
#[series(start = "day", points = "views", every = "1h", span = "1d")]
struct DailyViews {
    page: String,
    day: DateTime<Utc>,
    views: Points<i64>,
}

#[derive(Entity, Clone, Debug, Default, PartialEq)]
#[entity(
    table = "Readings",
    partition_key = "{meter}",
    row_key = "{month}",
    crate = "tablekit_core"
)]
#[series(
    start = "month",
    points = "kwh",
    every = "1h",
    span = "30d",
    spill = "chunks"
)]
struct MonthlyUse {
    meter: String,
    month: DateTime<Utc>,
    kwh: Points<f64>,
}

fn at(day: u32, hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, day, hour, 15, 0).unwrap()
}

#[tokio::test]
async fn series_points_add_under_the_span_etag_and_read_by_range() {
    let store = FaultyStore::new(MemoryStore::new());
    let sink = Arc::new(Kept::default());
    let engine = Engine::options().sink(sink.clone()).build(store.clone());
    let views = IndexedTable::<DailyViews, _>::options()
        .engine(engine)
        .build(store.clone())
        .expect("options");
    views.create().await.expect("open");
    let home = DailyViews {
        page: "home".into(),
        ..Default::default()
    };
    assert_eq!(views.add(&home, at(26, 9), 3).await.expect("add"), 3);
    assert_eq!(views.add(&home, at(26, 9), 4).await.expect("add"), 7);
    assert_eq!(views.add(&home, at(27, 1), 1).await.expect("add"), 1);
    // A lost answer: recognised, counted once.
    store.fail_write(0, Timing::AfterWrite);
    assert_eq!(views.add(&home, at(26, 10), 2).await.expect("landed"), 2);
    let day = views
        .span(&home, at(26, 0))
        .await
        .expect("span")
        .expect("stored");
    assert_eq!(day.value.views.len(), 24);
    assert_eq!(day.value.views.get(9), Some(&7));
    assert_eq!(day.value.views.get(10), Some(&2));
    let range = views
        .points(&home, at(26, 8), at(27, 3))
        .await
        .expect("range");
    // 08:00 (holding 08:15) to 02:00 the next day: 19 points, the 27th read too.
    assert_eq!(range.first().map(|p| p.1), Some(0));
    assert_eq!(range.len(), 19 + 1);
    let total: i64 = range.iter().map(|p| p.1).sum();
    assert_eq!(total, 10);
    views.flush().await;
    let changes = sink
        .kept()
        .expect("kept")
        .iter()
        .filter(|e| e.kind == "change")
        .count();
    assert_eq!(changes, 4, "one change event per add");
}

#[tokio::test]
async fn a_series_that_spills_to_chunks_touches_the_chunk_of_its_point() {
    assert_eq!(
        <MonthlyUse as tablekit_core::typed::SeriesType>::POINTS,
        720
    );
    assert!(MonthlyUse::schema().wide().is_some());
    let store = FaultyStore::new(MemoryStore::new());
    let meters = IndexedTable::<MonthlyUse, _>::options()
        .build(store.clone())
        .expect("a series in chunks needs no follow-up work");
    meters.create().await.expect("open");
    let meter = MonthlyUse {
        meter: "m1".into(),
        ..Default::default()
    };
    meters.add(&meter, at(20, 5), 1.5).await.expect("add");
    let all = store
        .inner()
        .query_all("Readings", Query::default())
        .await
        .expect("rows");
    assert_eq!(all.len(), 3, "720 points: chunk 0 and two more");
    let before = all.clone();
    // A point late in the span sorts into the last chunk.
    meters.add(&meter, at(29, 23), 2.0).await.expect("add");
    let after = store
        .inner()
        .query_all("Readings", Query::default())
        .await
        .expect("rows");
    let changed: Vec<&str> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b.etag != a.etag)
        .map(|(b, _)| b.row_key.as_str())
        .collect();
    assert_eq!(changed.len(), 2, "{changed:?}");
    let span = meters
        .span(&meter, at(20, 0))
        .await
        .expect("span")
        .expect("stored");
    let sum: f64 = span.value.kwh.iter().sum();
    assert!((sum - 3.5).abs() < 1e-9, "{sum}");
}

#[tokio::test]
async fn a_read_that_meets_a_writer_between_its_chunks_reads_one_whole_value() {
    let store = Held::new(Hold::Query);
    // The copies in `SensorsByModel` and the change events are left to a relay.
    let table = IndexedTable::<Sensor, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    table.create().await.expect("open");
    let old = sensor(600, 0.0);
    table.insert(&old).await.expect("insert");
    // The reader holds after chunk 0, before the other chunks.
    store.arm();
    let reader = {
        let table = table.clone();
        tokio::spawn(async move { table.get("north", "s1").await })
    };
    store.reached().await;
    // A writer changes chunk 0's fields and a reading in the last chunk meanwhile.
    let mut new = sensor(600, 0.0);
    new.model = "m8".into();
    new.readings.insert("r0599".into(), 99.0);
    table.upsert(&new).await.expect("upsert");
    store.release();
    let read = reader
        .await
        .expect("joined")
        .expect("read")
        .expect("stored")
        .value;
    assert!(
        read == new || read == old,
        "a mixed value: model {} r0599 {:?}",
        read.model,
        read.readings.get("r0599")
    );
    assert_eq!(read, new, "read again once the writer moved on");
}

#[derive(Entity, Clone, Debug, Default, PartialEq)]
#[entity(
    table = "Minutes",
    partition_key = "{meter}",
    row_key = "{day}",
    crate = "tablekit_core"
)]
#[series(
    start = "day",
    points = "per_minute",
    every = "1m",
    span = "1d",
    spill = "blob"
)]
struct MinuteUse {
    meter: String,
    day: DateTime<Utc>,
    per_minute: Points<i64>,
}

#[tokio::test]
async fn a_series_that_spills_to_a_blob_keeps_its_points_in_the_blob_store() {
    let store = MemoryStore::new();
    let blobs = tablekit_core::blob::BlobStore::memory();
    let minutes = IndexedTable::<MinuteUse, _>::options()
        .blobs(blobs.clone())
        .inline_apply()
        .build(store.clone())
        .expect("options");
    minutes.create().await.expect("open");
    let meter = MinuteUse {
        meter: "m1".into(),
        ..Default::default()
    };
    minutes.add(&meter, at(26, 0), 2).await.expect("add");
    assert_eq!(minutes.add(&meter, at(26, 23), 5).await.expect("add"), 5);
    let rows = store
        .query_all(
            "Minutes",
            Query::with_filter(filter::partition_key().eq("m1")),
        )
        .await
        .expect("rows");
    let span = rows
        .iter()
        .find(|r| !r.row_key.starts_with('~'))
        .expect("the span");
    assert!(
        span.properties.len() < 20,
        "{} properties",
        span.properties.len()
    );
    assert!(!blobs.list("").await.expect("blobs").is_empty());
    let read = minutes
        .span(&meter, at(26, 0))
        .await
        .expect("span")
        .expect("stored");
    assert_eq!(read.value.per_minute.len(), 1440);
    assert_eq!(read.value.per_minute.get(15), Some(&2));
    assert_eq!(read.value.per_minute.get(23 * 60 + 15), Some(&5));
}

#[tokio::test]
async fn a_wide_entity_missing_a_chunk_reads_as_malformed_not_as_a_partial_value() {
    let store = MemoryStore::new();
    let table = IndexedTable::<Sensor, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    table.create().await.expect("open");
    table.insert(&sensor(600, 0.0)).await.expect("insert");
    store
        .delete("Sensors", "north", "s1~001", IfMatch::Any)
        .await
        .expect("a chunk removed behind tablekit's back");
    let err = table.get("north", "s1").await.expect_err("malformed");
    assert_eq!(err.kind(), tablekit_core::ErrorKind::InvalidData, "{err}");
}
