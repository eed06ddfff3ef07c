//! Several OS processes share one SQLite file: concurrent read-modify-write cycles with
//! ETag conditions lose no update, concurrent inserts lose no entity, and the query plans
//! of point and range queries search the primary key instead of scanning.
//!
//! The test binary re-runs itself as the child processes: a child is the same test
//! function started with `TABLEKIT_CHILD` set, which does its share of the work and exits.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;

use tablekit_core::prelude::*;

const TABLE: &str = "Shared";
const PROCESSES: usize = 3;
const INCREMENTS: i64 = 300;
const INSERTS: usize = 300;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// One child's share: `INCREMENTS` read-modify-write increments of the shared counter,
/// retried on a failed ETag condition or a busy file, and `INSERTS` entities of its own.
async fn child_work(path: &Path, id: usize) {
    let store = SqliteStore::create(path).await.expect("child open");
    for _ in 0..INCREMENTS {
        loop {
            let counter = store
                .get(TABLE, "counter", "c", None)
                .await
                .expect("read counter")
                .expect("counter exists");
            let n = counter
                .get("N")
                .and_then(Value::as_i64)
                .expect("N is Int64");
            let update = Entity::new("counter", "c").with("N", n + 1);
            match store
                .replace(
                    TABLE,
                    update,
                    IfMatch::ETag(counter.etag.clone().expect("etag")),
                )
                .await
            {
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::PreconditionFailed || e.is_retryable() => {
                    continue;
                }
                Err(e) => panic!("child {id}: unexpected error {e}"),
            }
        }
    }
    for chunk in (0..INSERTS).collect::<Vec<_>>().chunks(25) {
        let mut batch = Batch::new();
        for i in chunk {
            batch.insert(Entity::new(format!("child{id}"), format!("{i:05}")).with("I", *i as i64));
        }
        loop {
            match store.submit_batch(TABLE, batch.clone()).await {
                Ok(_) => break,
                Err(e) if e.is_retryable() => continue,
                Err(e) => panic!("child {id}: batch failed: {e}"),
            }
        }
    }
}

fn spawn_child(path: &PathBuf, id: usize) -> std::process::Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "concurrent_processes_lose_no_update_and_no_insert",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TABLEKIT_CHILD", format!("{id}"))
        .env("TABLEKIT_DB", path)
        // The child's own test-harness summary would read like a second test run.
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn child process")
}

#[test]
fn concurrent_processes_lose_no_update_and_no_insert() {
    if let Ok(id) = std::env::var("TABLEKIT_CHILD") {
        let path = PathBuf::from(std::env::var("TABLEKIT_DB").expect("TABLEKIT_DB"));
        let id: usize = id.parse().expect("child id");
        runtime().block_on(child_work(&path, id));
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("shared.db");
    let rt = runtime();
    rt.block_on(async {
        let store = SqliteStore::create(&path).await.expect("open");
        store.create_table(TABLE).await.expect("create");
        store
            .insert(TABLE, Entity::new("counter", "c").with("N", 0i64))
            .await
            .expect("seed counter");
    });
    let children: Vec<_> = (0..PROCESSES).map(|id| spawn_child(&path, id)).collect();
    for mut child in children {
        let status = child.wait().expect("wait for child");
        assert!(status.success(), "a child process failed: {status}");
    }
    rt.block_on(async {
        let store = SqliteStore::create(&path).await.expect("reopen");
        let counter = store
            .get(TABLE, "counter", "c", None)
            .await
            .expect("read")
            .expect("counter");
        assert_eq!(
            counter.get("N"),
            Some(&Value::Int64(PROCESSES as i64 * INCREMENTS)),
            "every increment from every process must survive"
        );
        for id in 0..PROCESSES {
            let rows = store
                .query_all(TABLE, Query::partition(format!("child{id}")))
                .await
                .expect("query");
            assert_eq!(rows.len(), INSERTS, "child {id} lost inserts");
            let ids: Vec<i64> = rows.iter().filter_map(|e| e.get("I")?.as_i64()).collect();
            assert_eq!(ids, (0..INSERTS as i64).collect::<Vec<_>>());
        }
    });
}

#[test]
fn point_and_range_queries_search_the_primary_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime().block_on(async {
        let store = SqliteStore::create(dir.path().join("plan.db"))
            .await
            .expect("open");
        store.create_table("Plans").await.expect("create");
        let cases = [
            ("PartitionKey eq 'Sales' and RowKey eq '1'", "pk=? AND rk=?"),
            (
                "PartitionKey eq 'Sales' and RowKey ge 'a' and RowKey lt 'b'",
                "pk=? AND rk>? AND rk<?",
            ),
            ("PartitionKey eq 'Sales' and Age gt 3", "pk=?"),
            (
                "PartitionKey ge 'a' and PartitionKey lt 'b'",
                "pk>? AND pk<?",
            ),
        ];
        for (filter, expected) in cases {
            let plan = store
                .explain_sql("Plans", &Query::parse(filter).expect("filter"))
                .await
                .expect("explain");
            let text = plan.join(" | ");
            assert!(
                text.contains("SEARCH") && text.contains("PRIMARY KEY") && text.contains(expected),
                "{filter}: plan was {text}"
            );
            assert!(!text.contains("SCAN"), "{filter}: plan scans: {text}");
        }
        let resumed =
            Query::partition("Sales").continue_from(Some(ContinuationToken::new("Sales", "m")));
        let text = store
            .explain_sql("Plans", &resumed)
            .await
            .expect("explain")
            .join(" | ");
        assert!(
            text.contains("SEARCH") && text.contains("rk>?"),
            "resumed page: {text}"
        );
        let table_resume = Query::new().continue_from(Some(ContinuationToken::new("S", "m")));
        let text = store
            .explain_sql("Plans", &table_resume)
            .await
            .expect("explain")
            .join(" | ");
        assert!(
            text.contains("SEARCH") && text.contains("(pk,rk)>(?,?)"),
            "resumed scan: {text}"
        );
    });
}
