//! The key and shape patterns on every backend (memory, a SQLite file, Azurite): log
//! tails with .NET-compatible inverted ticks, hash-prefixed keys with fan-out queries,
//! tables per period (high-volume delete, hot/cold export), parallel bulk import.

#![allow(missing_docs)]

#[cfg(feature = "azure")]
#[path = "../core/tests/support/fake_table_service.rs"]
mod fake_table_service;
mod support;

use chrono::{Duration, TimeZone, Utc};
use futures::TryStreamExt;
use tablekit::core::blob::BlobStore;
use tablekit::core::fault::FaultyStore;
use tablekit::core::{AnyStore, ErrorKind, Query, filter};
use tablekit::patterns::buckets::HashBuckets;
use tablekit::patterns::import::{
    ImportOptions, bulk_import, import_records, import_stream, sequential_import,
};
use tablekit::patterns::log_tail;
use tablekit::patterns::periods::{Period, PeriodTables};
use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Events",
    kind = "Event",
    partition_key = "{device}",
    row_key = "{at:ticks_desc}"
)]
struct Event {
    device: String,
    at: chrono::DateTime<Utc>,
    reading: i32,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Orders",
    kind = "Order",
    partition_key = "{id:hash2}",
    row_key = "{id:08}"
)]
struct Order {
    id: u32,
    amount: i64,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Logs",
    kind = "Log",
    partition_key = "{source}",
    row_key = "{n:06}"
)]
struct Log {
    source: String,
    n: u32,
    text: String,
}

async fn log_blobs_by_minute_with_a_range_reader(blobs: BlobStore) {
    use tablekit::patterns::log_blobs::{LogWriter, read_range};
    let start = Utc.with_ymd_and_hms(2026, 11, 22, 23, 58, 0).unwrap();
    let writer = LogWriter::new(
        blobs.clone(),
        "app",
        2_000,
        std::time::Duration::from_secs(3600),
    );
    let mut written = Vec::new();
    for n in 0..200 {
        let at = start + Duration::seconds(n);
        if let Some(name) = writer
            .append(at, &format!("request {n}"))
            .await
            .expect("append")
        {
            written.push(name);
        }
    }
    written.extend(writer.flush().await.expect("flush"));
    assert!(written.len() > 3, "flushed by size: {written:?}");
    assert!(
        written[0].starts_with("app/2026/11/22/2358/000001.log"),
        "{}",
        written[0]
    );
    assert!(
        written.iter().any(|n| n.starts_with("app/2026/11/23/")),
        "past midnight"
    );
    let window = read_range(
        &blobs,
        "app",
        start + Duration::seconds(50),
        start + Duration::seconds(149),
    )
    .await
    .expect("read");
    assert_eq!(window.len(), 100);
    assert_eq!(window[0].1, "request 50");
    assert_eq!(window[99].1, "request 149");
    // The stream reads blob by blob, across midnight, in time order.
    let streamed: Vec<String> = tablekit::patterns::log_blobs::read_range_stream(
        &blobs,
        "app",
        start,
        start + Duration::seconds(199),
    )
    .map_ok(|(_, text)| text)
    .try_collect()
    .await
    .expect("stream");
    assert_eq!(
        streamed,
        (0..200).map(|n| format!("request {n}")).collect::<Vec<_>>()
    );
    assert!(writer.append(start, "two\nlines").await.is_err());
}

#[tokio::test]
async fn log_blobs_on_memory_and_local_files() {
    log_blobs_by_minute_with_a_range_reader(BlobStore::memory()).await;
    let dir = tempfile::tempdir().expect("a temp dir");
    log_blobs_by_minute_with_a_range_reader(BlobStore::local(dir.path()).expect("blobs")).await;
}

#[cfg(feature = "azure")]
#[tokio::test]
async fn log_blobs_on_azure_blob_storage() {
    let Some(base) = support::azurite_blobs() else {
        return;
    };
    let container = format!("tk{}", uuid::Uuid::new_v4().simple());
    tablekit::core::azure::create_blob_container(&base, &container)
        .await
        .expect("container");
    let blobs = BlobStore::connect(&format!("azure:{base};Container={container}")).expect("blobs");
    log_blobs_by_minute_with_a_range_reader(blobs).await;
}

#[test]
fn log_tail_keys_match_dotnet_ticks() {
    // (instant, DateTime.Ticks in .NET)
    let pairs = [
        (
            Utc.with_ymd_and_hms(1970, 1, 1, 0, 0, 0).unwrap(),
            621_355_968_000_000_000i64,
        ),
        (
            Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).unwrap(),
            630_822_816_000_000_000,
        ),
        (
            Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap(),
            638_396_640_000_000_000,
        ),
        (
            Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap(),
            3_155_378_975_990_000_000,
        ),
    ];
    for (at, ticks) in pairs {
        let key = log_tail::row_key(at).expect("in range");
        assert_eq!(
            key,
            format!("{:019}", 3_155_378_975_999_999_999i64 - ticks),
            "{at}"
        );
        assert_eq!(key.len(), 19);
        assert_eq!(log_tail::instant_of(&key).expect("parses"), at);
    }
    let at = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
    let a = log_tail::unique_row_key(at).expect("key");
    let b = log_tail::unique_row_key(at).expect("key");
    assert_ne!(a, b, "same tick, distinct keys");
    assert!(a.starts_with(&log_tail::row_key(at).expect("key")));
    assert_eq!(log_tail::instant_of(&a).expect("parses"), at);
    let later = log_tail::unique_row_key(at + Duration::milliseconds(1)).expect("key");
    assert!(
        later < a && later < b,
        "a later instant sorts first, suffix or not"
    );
    let ancient = chrono::DateTime::<Utc>::MIN_UTC;
    assert!(
        log_tail::row_key(ancient).is_err(),
        "outside .NET's range: a typed error"
    );
}

async fn log_tail_latest_is_one_query(store: AnyStore) {
    let events = Table::<Event, _>::new(store.clone());
    events.create().await.expect("create");
    let start = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
    for minute in 0..30 {
        events
            .insert(&Event {
                device: "d1".into(),
                at: start + Duration::minutes(minute),
                reading: i32::try_from(minute).expect("small"),
            })
            .await
            .expect("insert");
    }
    let counted = FaultyStore::new(store.clone());
    let view = Table::<Event, _>::new(counted.clone());
    let newest = log_tail::latest(&view, "d1", 5).await.expect("latest");
    assert_eq!(counted.calls(), 1, "one query");
    let readings: Vec<i32> = newest.iter().map(|e| e.reading).collect();
    assert_eq!(readings, [29, 28, 27, 26, 25], "newest first");
    let window = log_tail::between(
        &events,
        "d1",
        start + Duration::minutes(10),
        start + Duration::minutes(12),
    )
    .await
    .expect("between");
    assert_eq!(
        window.iter().map(|e| e.reading).collect::<Vec<_>>(),
        [12, 11, 10]
    );
    // Appends in one tick stay distinct and in order.
    store
        .create_table_if_not_exists("Ticks")
        .await
        .expect("create");
    let now = Utc::now();
    for n in 0..5 {
        log_tail::append(&store, "Ticks", "p", now, Entity::new("", "").with("n", n))
            .await
            .expect("append");
    }
    let rows = store
        .query_all("Ticks", Query::partition("p"))
        .await
        .expect("rows");
    assert_eq!(rows.len(), 5);
}

async fn hash_buckets_spread_keys_and_fan_out_in_key_order(store: AnyStore) {
    let orders = Table::<Order, _>::new(store.clone());
    orders.create().await.expect("create");
    let buckets = HashBuckets::new(2).expect("buckets");
    for id in 0..300u32 {
        orders
            .insert(&Order {
                id,
                amount: i64::from(id) * 10,
            })
            .await
            .expect("insert");
    }
    // A point read computes the bucket from the natural key.
    let id = 123u32;
    let pk = buckets.of(&id.to_string());
    assert_eq!(pk, Order { id, amount: 0 }.partition_key().expect("key"));
    let hit = orders
        .get(&pk, &format!("{id:08}"))
        .await
        .expect("get")
        .expect("there");
    assert_eq!(hit.amount, 1230);
    let used: std::collections::BTreeSet<String> =
        (0..300u32).map(|i| buckets.of(&i.to_string())).collect();
    assert!(
        used.len() > 100,
        "sequential ids spread over many partitions: {}",
        used.len()
    );
    // A range of natural keys: every bucket in parallel, merged into key order.
    let range = buckets
        .fan_out(
            &orders,
            |bucket| {
                Query::with_filter(
                    filter::partition_key().eq(bucket)
                        & filter::row_key().ge("00000100")
                        & filter::row_key().le("00000199"),
                )
            },
            16,
        )
        .await
        .expect("fan out");
    let ids: Vec<u32> = range.iter().map(|o| o.id).collect();
    assert_eq!(ids, (100..=199).collect::<Vec<_>>());
    assert!(HashBuckets::new(0).is_err() && HashBuckets::new(5).is_err());
}

async fn period_tables_route_span_drop_and_export(store: AnyStore) {
    let logs = PeriodTables::new("Logs", Period::Day).expect("periods");
    let day = |d: u32| Utc.with_ymd_and_hms(2026, 11, d, 12, 0, 0).unwrap();
    for d in 1..=5u32 {
        let table = logs
            .table_at::<Log, _>(&store, day(d))
            .await
            .expect("table");
        assert_eq!(table.name(), format!("Logs202611{d:02}"));
        for n in 0..3 {
            table
                .insert(&Log {
                    source: "api".into(),
                    n,
                    text: format!("day {d}"),
                })
                .await
                .expect("insert");
        }
    }
    let spanned = logs
        .query::<Log, _>(&store, day(2), day(4), Query::partition("api"))
        .await
        .expect("span");
    assert_eq!(spanned.len(), 9, "three days, oldest first");
    assert_eq!(spanned[0].text, "day 2");
    assert_eq!(spanned[8].text, "day 4");
    // Retention of two days on the 5th: the 1st and 2nd go, as whole tables.
    let dropped = logs
        .drop_older_than(&store, Duration::days(2), day(5))
        .await
        .expect("drop");
    assert_eq!(dropped, ["Logs20261101", "Logs20261102"]);
    assert_eq!(logs.existing(&store).await.expect("list").len(), 3);
    // Hot/cold: a cold table exported to blobs, then dropped.
    let blobs = BlobStore::memory();
    let (name, count) = logs
        .export_to_blobs(&store, "Logs20261103", &blobs)
        .await
        .expect("export");
    assert!(
        name.starts_with("cold/Logs20261103-") && name.ends_with(".jsonl"),
        "{name}"
    );
    assert_eq!(count, 3);
    let body =
        String::from_utf8(blobs.get(&name).await.expect("get").expect("there")).expect("utf8");
    assert_eq!(body.lines().count(), 3);
    assert!(body.contains("day 3"));
    assert_eq!(
        logs.existing(&store).await.expect("list"),
        ["Logs20261104", "Logs20261105"]
    );
    let months = PeriodTables::new("Sales", Period::Month).expect("periods");
    assert_eq!(
        months.tables_between(day(1), Utc.with_ymd_and_hms(2027, 2, 3, 0, 0, 0).unwrap()),
        ["Sales202611", "Sales202612", "Sales202701", "Sales202702"]
    );
    assert!(PeriodTables::new("Logs2", Period::Day).is_err());
}

async fn bulk_import_writes_everything_in_batches_and_runs_again(store: AnyStore) {
    store
        .create_table_if_not_exists("Imported")
        .await
        .expect("create");
    let entities: Vec<Entity> = (0..1000)
        .map(|i| Entity::new(format!("p{:02}", i % 30), format!("{i:06}")).with("n", i))
        .collect();
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let report = bulk_import(&store, "Imported", entities.clone(), 4, |done, total| {
        calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert!(done <= total);
    })
    .await
    .expect("import");
    assert_eq!(report.written, 1000);
    assert!(report.failed.is_empty());
    assert!(
        report.batches >= 30 && report.batches <= 60,
        "{}",
        report.batches
    );
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::Relaxed),
        report.batches
    );
    let rows = store
        .query_all("Imported", Query::new())
        .await
        .expect("rows");
    assert_eq!(rows.len(), 1000);
    // Running it again converges to the same table.
    let again = bulk_import(&store, "Imported", entities.clone(), 4, |_, _| {})
        .await
        .expect("again");
    assert_eq!(again.written, 1000);
    assert_eq!(
        store
            .query_all("Imported", Query::new())
            .await
            .expect("rows")
            .len(),
        1000
    );
    store
        .create_table_if_not_exists("Sequential")
        .await
        .expect("create");
    assert_eq!(
        sequential_import(&store, "Sequential", entities[..50].to_vec())
            .await
            .expect("sequential"),
        50
    );
}

async fn an_import_from_a_stream_of_100k_entities_completes(store: AnyStore) {
    store
        .create_table_if_not_exists("Streamed")
        .await
        .expect("create");
    // Generated lazily: the import holds a bounded number of them at a time.
    let entities = futures::stream::iter((0..100_000u32).map(|i| {
        Entity::new(format!("p{:03}", i % 500), format!("{i:08}")).with("n", i64::from(i))
    }));
    let mut reports = 0;
    let options = ImportOptions {
        buffered: 5_000,
        ..ImportOptions::default()
    };
    let report = import_stream(&store, "Streamed", entities, &options, |r| {
        reports += 1;
        assert!(r.written <= 100_000);
    })
    .await
    .expect("import");
    assert_eq!((report.written, report.failed.len()), (100_000, 0));
    assert_eq!(reports, report.batches);
    assert!(report.batches >= 1_000, "{}", report.batches);
    let mut rows = std::pin::pin!(store.query_stream("Streamed", Query::new()));
    let mut count = 0;
    while let Some(row) = futures::TryStreamExt::try_next(&mut rows)
        .await
        .expect("row")
    {
        assert!(row.get("n").is_some());
        count += 1;
    }
    assert_eq!(count, 100_000);

    // Typed records, from an iterator turned stream; the last of repeated keys wins.
    let orders = Table::<Order, _>::new(store.clone());
    orders.create().await.expect("create");
    let records = futures::stream::iter(
        (0..300u32)
            .map(|id| Order { id, amount: 1 })
            .chain((0..300u32).map(|id| Order { id, amount: 2 })),
    );
    let report = import_records(&orders, records, &ImportOptions::default(), |_| {})
        .await
        .expect("records");
    assert_eq!(report.failed.len(), 0);
    let all = orders.query(Query::new()).await.expect("orders");
    assert_eq!(all.len(), 300);
    assert!(
        all.iter().all(|o| o.amount == 2),
        "the last write of each key"
    );
}

/// A period table larger than one upload part (5 MiB) goes to the blob store in parts,
/// read back as a stream and checked, on local files and Azurite's blob service.
async fn a_large_period_table_exports_in_parts(blobs: BlobStore) {
    let store = AnyStore::create("memory:").await.expect("memory");
    let logs = PeriodTables::new("Big", Period::Day).expect("periods");
    let table = logs.table_for(Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap());
    store.create_table(&table).await.expect("create");
    let text = "x".repeat(400);
    let entities = futures::stream::iter((0..20_000u32).map(|i| {
        Entity::new(format!("p{}", i % 20), format!("{i:06}")).with("Text", text.as_str())
    }));
    import_stream(&store, &table, entities, &ImportOptions::default(), |_| {})
        .await
        .expect("seed");
    let mut seen = Vec::new();
    let (name, count) = logs
        .export_to_blobs_with_progress(&store, &table, &blobs, |n| seen.push(n))
        .await
        .expect("export");
    assert_eq!(count, 20_000);
    assert_eq!(seen.last(), Some(&20_000));
    assert!(seen.len() >= 20, "progress per page: {}", seen.len());
    let mut lines = 0;
    let mut bytes = 0;
    let mut chunks = std::pin::pin!(
        blobs
            .read_stream(&name)
            .await
            .expect("read")
            .expect("there")
    );
    while let Some(chunk) = futures::TryStreamExt::try_next(&mut chunks)
        .await
        .expect("chunk")
    {
        lines += chunk.iter().filter(|b| **b == b'\n').count();
        bytes += chunk.len();
    }
    assert_eq!(lines, 20_000);
    assert!(bytes > 8 * 1024 * 1024, "more than one part: {bytes}");
    assert!(
        logs.existing(&store).await.expect("list").is_empty(),
        "dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_period_table_exports_in_parts_to_local_files() {
    let dir = tempfile::tempdir().expect("a temp dir");
    a_large_period_table_exports_in_parts(BlobStore::local(dir.path()).expect("blobs")).await;
}

#[cfg(feature = "azure")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_period_table_exports_in_parts_to_azure_blob_storage() {
    let Some(base) = support::azurite_blobs() else {
        return;
    };
    let container = format!("export{}", uuid::Uuid::new_v4().simple());
    tablekit::core::azure::create_blob_container(&base, &container)
        .await
        .expect("container");
    let blobs = BlobStore::connect(&format!("azure:{base};Container={container}")).expect("blobs");
    a_large_period_table_exports_in_parts(blobs).await;
}

/// The table service refuses to create a table for a while after deleting it
/// (`TableBeingDeleted`): a period table dropped and then written again (a late event, a
/// replay) is created once the service lets go, within the store's bound, and past the
/// bound the error says so instead of reporting a table that does not exist.
#[cfg(feature = "azure")]
#[tokio::test]
async fn a_dropped_period_table_is_created_again_once_the_service_finishes_deleting_it() {
    use tablekit::core::AzureTableStore;
    use tablekit::core::azure::RetryPolicy;

    let service = fake_table_service::FakeTableService::start(3).await;
    let store = |wait_ms| {
        AzureTableStore::options()
            .retry_policy(RetryPolicy {
                base: std::time::Duration::from_millis(10),
                ..RetryPolicy::azure()
            })
            .being_deleted_wait(std::time::Duration::from_millis(wait_ms))
            .connect(&service.connection_string())
            .expect("a connection string")
    };
    let logs = PeriodTables::new("Logs", Period::Day).expect("periods");
    let day = |d: u32| Utc.with_ymd_and_hms(2026, 11, d, 12, 0, 0).unwrap();
    let patient = store(30_000);
    logs.table_at::<Log, _>(&patient, day(1))
        .await
        .expect("created");
    let dropped = logs
        .drop_older_than(&patient, Duration::days(1), day(3))
        .await
        .expect("drop");
    assert_eq!(dropped, ["Logs20261101"]);
    let again = logs
        .table_at::<Log, _>(&patient, day(1))
        .await
        .expect("created again after the wait");
    assert_eq!(again.name(), "Logs20261101");
    assert_eq!(
        service.creates(),
        5,
        "created, three refusals, created again"
    );
    assert_eq!(service.tables(), ["Logs20261101"]);

    service.being_deleted("Logs20261101", usize::MAX);
    let error = logs
        .table_at::<Log, _>(&store(50), day(1))
        .await
        .expect_err("still being deleted");
    assert_eq!(error.kind(), ErrorKind::TableBeingDeleted);
    assert!(error.is_retryable());
}

#[tokio::test]
async fn an_import_retries_transient_failures_and_reports_the_rest_with_their_keys() {
    let store = FaultyStore::new(AnyStore::create("memory:").await.expect("memory"));
    store.create_table("Imported").await.expect("create");
    store.fail_write(0, tablekit::core::fault::Timing::BeforeWrite);
    let too_big = Entity::new("p0", "huge").with("Blob", vec![0u8; 70_000]);
    let entities: Vec<Entity> = (0..250u32)
        .map(|i| Entity::new(format!("p{}", i % 2), format!("{i:06}")))
        .chain(std::iter::once(too_big))
        .collect();
    let report = import_stream(
        &store,
        "Imported",
        futures::stream::iter(entities),
        &ImportOptions::default(),
        |_| {},
    )
    .await
    .expect("import");
    assert_eq!(report.written, 250, "everything valid is written");
    assert_eq!(report.retried, 1, "the failed batch was retried");
    assert_eq!(report.failed.len(), 1);
    assert_eq!(
        report.failed[0].keys,
        vec![("p0".to_owned(), "huge".to_owned())]
    );
    assert_eq!(report.failed[0].error.kind(), ErrorKind::TooLarge);
}

on_backends!(
    log_tail_latest_is_one_query,
    hash_buckets_spread_keys_and_fan_out_in_key_order,
    period_tables_route_span_drop_and_export,
    bulk_import_writes_everything_in_batches_and_runs_again,
    an_import_from_a_stream_of_100k_entities_completes,
);
