//! Reads that span several queries page in key order and resume from a serialised cursor
//! in a fresh store handle — memory, a SQLite file, Azurite.

#![allow(missing_docs)]

mod support;

use futures::TryStreamExt;
use tablekit::core::{AnyStore, Query};
use tablekit::patterns::buckets::HashBuckets;
use tablekit::patterns::cursor::Cursor;
use tablekit::patterns::index::IndexedTable;
use tablekit::patterns::periods::{Period, PeriodTables};
use tablekit::prelude::*;
use tablekit::typed::TypedWrite;

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

const ORDERS: u32 = 2_000;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Readings",
    kind = "Reading",
    partition_key = "{device}",
    row_key = "{n:06}"
)]
struct Reading {
    device: String,
    n: u32,
}

fn day(d: u32) -> chrono::DateTime<chrono::Utc> {
    use chrono::TimeZone;
    chrono::Utc
        .with_ymd_and_hms(2026, 11, 1 + d, 12, 0, 0)
        .single()
        .expect("a day")
}

/// 5 days of 120 readings in tables per day, read in pages of 50 through a fresh handle
/// each page: table after table, each in key order.
async fn a_period_span_resumes_from_its_token_in_a_fresh_handle<F, Fut>(connect: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = AnyStore>,
{
    let readings = PeriodTables::new("Readings", Period::Day).expect("periods");
    let store = connect().await;
    let mut expected = Vec::new();
    for d in 0..5 {
        let table = readings
            .table_at::<Reading, _>(&store, day(d))
            .await
            .expect("table");
        let mut rows: Vec<(String, u32)> = (0..120)
            .map(|k| (format!("dev{}", k % 3), d * 1000 + k))
            .collect();
        table
            .write_all(rows.iter().map(|(device, n)| {
                TypedWrite::Upsert(Reading {
                    device: device.clone(),
                    n: *n,
                })
            }))
            .await
            .expect("write")
            .into_result()
            .expect("all written");
        rows.sort();
        expected.extend(rows.into_iter().map(|(_, n)| n));
    }
    let (from, to) = (day(0), day(4));
    let mut token: Option<String> = None;
    let mut got = Vec::new();
    let mut pages = 0;
    loop {
        let store = connect().await;
        let cursor = token
            .as_deref()
            .map(|t| Cursor::parse(t).expect("a cursor"));
        let page = readings
            .query_page::<Reading, _>(&store, from, to, Query::new(), 50, cursor.as_ref())
            .await
            .expect("page");
        assert!(page.items.len() <= 50);
        got.extend(page.items.iter().map(|r| r.n));
        pages += 1;
        token = page.cursor.map(|c| c.to_string());
        if token.is_none() {
            break;
        }
        assert!(pages <= 13, "the read ends");
    }
    assert_eq!(got, expected);
    assert_eq!(pages, 12);
    let store = connect().await;
    let streamed: Vec<u32> = readings
        .query_stream::<Reading, _>(&store, from, to, Query::new(), 33)
        .map_ok(|r| r.n)
        .try_collect()
        .await
        .expect("stream");
    assert_eq!(streamed, expected);
}

async fn seed(store: AnyStore) {
    let orders = Table::<Order, _>::new(store);
    orders.create().await.expect("create");
    let report = orders
        .write_all((0..ORDERS).map(|id| {
            TypedWrite::Upsert(Order {
                id,
                amount: i64::from(id),
            })
        }))
        .await
        .expect("write");
    report.into_result().expect("all written");
}

/// Pages of 50 over 256 buckets, each page read through a store handle of its own from
/// the previous page's token: the sorted set, each order once.
async fn a_fan_out_resumes_from_its_token_in_a_fresh_handle<F, Fut>(connect: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = AnyStore>,
{
    seed(connect().await).await;
    let buckets = HashBuckets::new(2).expect("buckets");
    let mut token: Option<String> = None;
    let mut ids = Vec::new();
    let mut pages = 0;
    loop {
        let orders = Table::<Order, _>::new(connect().await);
        let cursor = token
            .as_deref()
            .map(|t| Cursor::parse(t).expect("a cursor"));
        let page = buckets
            .fan_out_page(&orders, |b: &str| Query::partition(b), 50, cursor.as_ref())
            .await
            .expect("page");
        assert!(page.items.len() <= 50);
        ids.extend(page.items.iter().map(|o| o.id));
        pages += 1;
        token = page.cursor.map(|c| c.to_string());
        if token.is_none() {
            break;
        }
        assert!(pages <= 41, "the read ends");
    }
    assert_eq!(ids, (0..ORDERS).collect::<Vec<_>>(), "key order, each once");
    assert_eq!(pages, 40);

    // The stream pages by itself, in the same order.
    let orders = Table::<Order, _>::new(connect().await);
    let streamed: Vec<u32> = buckets
        .fan_out_stream(&orders, |b: &str| Query::partition(b), 128)
        .map_ok(|o| o.id)
        .try_collect()
        .await
        .expect("stream");
    assert_eq!(streamed, ids);

    // A cursor of another read is refused.
    let other = HashBuckets::new(1).expect("buckets");
    let cursor = Cursor::parse(&token_after_one_page(&buckets, &orders).await).expect("cursor");
    assert!(
        other
            .fan_out_page(&orders, |b: &str| Query::partition(b), 50, Some(&cursor))
            .await
            .is_err()
    );
}

async fn token_after_one_page(buckets: &HashBuckets, orders: &Table<Order, AnyStore>) -> String {
    buckets
        .fan_out_page(orders, |b: &str| Query::partition(b), 10, None)
        .await
        .expect("page")
        .cursor
        .expect("more")
        .to_string()
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    kind = "Employee",
    partition_key = "{department}",
    row_key = "empid_{id:06}"
)]
#[index(
    name = "by_email",
    table = "EmployeesByEmail",
    partition_key = "email_{department}",
    row_key = "{email}"
)]
#[index_entity(name = "last_name", key = "{last_name}")]
struct Employee {
    department: String,
    id: u32,
    last_name: String,
    email: String,
}

/// An index range and an id list's members, in pages of 50 through a fresh handle each
/// page.
async fn an_index_range_resumes_from_its_token_in_a_fresh_handle<F, Fut>(connect: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = AnyStore>,
{
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(connect().await)
        .expect("options");
    employees.create().await.expect("open");
    for id in 0..220u32 {
        employees
            .insert(&Employee {
                department: "Sales".into(),
                id,
                last_name: if id % 2 == 0 { "Jones" } else { "Smith" }.into(),
                // Emails sort in another order than ids.
                email: format!("{:04}@x", (id * 7919) % 10_000),
            })
            .await
            .expect("insert");
    }
    let mut expected: Vec<(String, u32)> = (0..220u32)
        .map(|id| (format!("{:04}@x", (id * 7919) % 10_000), id))
        .filter(|(email, _)| email.as_str() >= "1000" && email.as_str() <= "8999~")
        .collect();
    expected.sort();
    let expected: Vec<u32> = expected.into_iter().map(|(_, id)| id).collect();
    assert!(expected.len() > 100);

    let (mut token, mut got, mut pages) = (None::<String>, Vec::new(), 0);
    loop {
        // A reader in a process of its own: its writes, if any, are left to a relay.
        let employees = IndexedTable::<Employee, _>::options()
            .follow_up_elsewhere()
            .build(connect().await)
            .expect("options");
        let cursor = token
            .as_deref()
            .map(|t| Cursor::parse(t).expect("a cursor"));
        let page = employees
            .lookup_named("by_email")
            .keys(&[&"Sales"])
            .keys(&[])
            .range(&"1000", &"8999~")
            .page(50, cursor.as_ref())
            .await
            .expect("page");
        assert!(page.items.len() <= 50);
        got.extend(page.items.iter().map(|e| e.id));
        pages += 1;
        token = page.cursor.map(|c| c.to_string());
        if token.is_none() {
            break;
        }
        assert!(pages <= 10, "the read ends");
    }
    assert_eq!(got, expected, "index order, each once");

    let mut jones: Vec<u32> = (0..220u32).filter(|id| id % 2 == 0).collect();
    jones.sort_by_key(|id| format!("empid_{id:06}"));
    let (mut token, mut got) = (None::<String>, Vec::new());
    loop {
        // A reader in a process of its own: its writes, if any, are left to a relay.
        let employees = IndexedTable::<Employee, _>::options()
            .follow_up_elsewhere()
            .build(connect().await)
            .expect("options");
        let cursor = token
            .as_deref()
            .map(|t| Cursor::parse(t).expect("a cursor"));
        let page = employees
            .list_named("last_name")
            .in_partition("Sales")
            .keys(&[&"Jones"])
            .concurrency(8)
            .page(50, cursor.as_ref())
            .await
            .expect("page");
        got.extend(page.items.iter().map(|e| e.id));
        token = page.cursor.map(|c| c.to_string());
        if token.is_none() {
            break;
        }
    }
    assert_eq!(got, jones);
    let employees = IndexedTable::<Employee, _>::options()
        .follow_up_elsewhere()
        .build(connect().await)
        .expect("options");
    let streamed: Vec<u32> = employees
        .list_named("last_name")
        .in_partition("Sales")
        .keys(&[&"Jones"])
        .concurrency(8)
        .stream(30)
        .map_ok(|e| e.id)
        .try_collect()
        .await
        .expect("stream");
    assert_eq!(streamed, jones);
}

/// One test per backend for each read; `connect` gives a fresh handle on the same data.
macro_rules! on_backends_with_fresh_handles {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let store = super::AnyStore::create("memory:").await.expect("memory");
                    super::$case(|| {
                        let store = store.clone();
                        async move { store }
                    })
                    .await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let dir = tempfile::tempdir().expect("a temp dir");
                    let url = format!("sqlite:{}", dir.path().join("cursor.db").display());
                    super::$case(|| {
                        let url = url.clone();
                        async move { super::AnyStore::create(&url).await.expect("sqlite") }
                    })
                    .await;
                }
            )*
        }
        mod azure {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    if crate::support::azure().await.is_none() {
                        return;
                    }
                    let Some(url) = crate::support::azurite() else {
                        return;
                    };
                    super::$case(|| {
                        let url = url.clone();
                        async move { super::AnyStore::create(&url).await.expect("azurite") }
                    })
                    .await;
                }
            )*
        }
    };
}

on_backends_with_fresh_handles!(
    an_index_range_resumes_from_its_token_in_a_fresh_handle,
    a_fan_out_resumes_from_its_token_in_a_fresh_handle,
    a_period_span_resumes_from_its_token_in_a_fresh_handle,
);
