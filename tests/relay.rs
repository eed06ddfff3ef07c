//! The consistency engine's recovery path: a relay pass reads what is pending, not the
//! tables; pending markers are leased and cleaned; and a process killed between any two
//! steps of a write's follow-up work (marker, commit, publish, outbox delete) or of the
//! relay's (publish, outbox delete, marker cleanup) loses no work and leaves no marker
//! behind — on a SQLite file and on Azurite.

mod support;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tablekit::core::fault::FaultyStore;
use tablekit::core::{AnyStore, Batch, ETag, Entity, Query, TableStore, Value};
use tablekit::patterns::consistency::pending::PENDING_TABLE;
use tablekit::patterns::consistency::{
    BoxFuture, Engine, EngineOptions, Envelope, InlineSink, outbox,
};
use tablekit::patterns::index::{AuditOptions, IndexedTable, OutboxSink, Relay};
use tablekit::prelude::*;

use support::kill::KilledAfter;

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
struct Employee {
    department: String,
    id: u32,
    email: String,
}

fn employee(department: &str, id: u32) -> Employee {
    Employee {
        department: department.into(),
        id,
        email: format!("e{id}@x"),
    }
}

/// A sink that counts what it is handed.
#[derive(Clone, Default)]
struct CountingSink(Arc<AtomicUsize>);

impl OutboxSink for CountingSink {
    fn publish<'a>(&'a self, _: &'a Envelope) -> BoxFuture<'a, tablekit::patterns::Result<()>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
}

/// The settings of an engine whose writers write their marker at every commit, so a
/// relay with no `late` allowance may clean it as soon as the outbox is empty.
fn unleased<S: TableStore + Clone + 'static>() -> EngineOptions<S> {
    Engine::options().marker_lease(Duration::ZERO)
}

async fn markers<S: TableStore>(store: &S) -> Vec<Entity> {
    store
        .query_all(PENDING_TABLE, Query::new())
        .await
        .expect("markers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_pass_over_100k_entities_with_3_pending_reads_only_what_is_pending() {
    let store = FaultyStore::new(AnyStore::create("memory:").await.expect("memory"));
    store.create_table("Employees").await.expect("table");
    // 10^5 primaries: 1,000 partitions of 100.
    for p in 0..1_000 {
        let mut batch = Batch::new();
        for r in 0..100 {
            let mut e = Entity::new(format!("dept{p:04}"), format!("empid_{r:06}"));
            e.properties.insert("Age".into(), Value::Int32(r));
            batch.insert(e);
        }
        store.submit_batch("Employees", batch).await.expect("seed");
    }
    let employees = IndexedTable::<Employee, _>::options()
        .engine(unleased().build(store.clone()))
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    for p in 0..3 {
        // No sink: the work stays in the outbox, as after a crash.
        let outcome = employees
            .insert(&employee(&format!("dept{p:04}"), 1_000 + p))
            .await
            .expect("insert");
        assert_eq!((outcome.operations, outcome.published), (1, false));
    }

    store.reset_counters();
    let sink = CountingSink::default();
    let relay = Relay::options()
        .grace(Duration::ZERO)
        .late(Duration::ZERO)
        .build(store.clone(), Arc::new(sink.clone()));
    let report = relay.run_once().await.expect("relay");
    assert_eq!(
        (
            report.partitions,
            report.entries,
            report.published,
            report.cleared
        ),
        (3, 3, 3, 3)
    );
    assert_eq!(sink.0.load(Ordering::SeqCst), 3);
    assert_eq!(
        store.table_scans(),
        vec![PENDING_TABLE.to_owned()],
        "only the pending markers are scanned, never the table (the share leases are \
         read by partition)"
    );
    assert!(
        store.rows_read() <= 6,
        "3 markers and 3 entries, not the table: {} rows read",
        store.rows_read()
    );
    // One marker query; the share leases read (two partitions; their table created the
    // first time), taken and released; one outbox range query, entry delete and marker
    // delete per partition.
    assert!(
        store.calls() <= 1 + 2 + 1 + 2 + 3 * 3,
        "{} calls",
        store.calls()
    );

    store.reset_counters();
    let idle = relay.run_once().await.expect("relay");
    assert_eq!(idle, Default::default(), "nothing pending: nothing read");
    assert_eq!(store.rows_read(), 0);
    assert!(markers(&store).await.is_empty());
    assert!(
        outbox::scan(&store, "Employees")
            .await
            .expect("scan")
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_written_often_writes_its_marker_once_per_lease() {
    let store = FaultyStore::new(AnyStore::create("memory:").await.expect("memory"));
    let employees = IndexedTable::<Employee, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    employees.create().await.expect("open");
    let before = store.writes();
    for id in 0..10 {
        employees
            .insert(&employee("Sales", id))
            .await
            .expect("insert");
    }
    assert_eq!(
        store.writes() - before,
        10 + 1,
        "ten commits and one marker write"
    );
    assert_eq!(markers(&store).await.len(), 1);

    // The lease runs: the relay publishes the work but keeps the marker a writer may
    // still rely on, even with no `late` allowance.
    let relay = Relay::options()
        .grace(Duration::ZERO)
        .late(Duration::ZERO)
        .build(store.clone(), Arc::new(CountingSink::default()));
    let report = relay.run_once().await.expect("relay");
    assert_eq!((report.published, report.cleared), (10, 0));
    assert_eq!(markers(&store).await.len(), 1, "leased marker kept");
    // The default allowance keeps a marker past its lease too.
    let patient = Relay::new(store.clone(), Arc::new(CountingSink::default()));
    assert_eq!(patient.run_once().await.expect("relay").cleared, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marker_renewed_during_a_pass_is_kept() {
    let store = AnyStore::create("memory:").await.expect("memory");
    let engine = unleased().build(store.clone());
    engine.open().await.expect("open");
    tablekit::patterns::consistency::pending::write_marker(
        &store,
        "Employees",
        "Sales",
        chrono::Utc::now() - chrono::Duration::seconds(5),
    )
    .await
    .expect("marker");
    let stale: ETag = markers(&store).await[0].etag.clone().expect("etag");
    // A writer renews it after the relay read it: the relay's delete under the ETag it
    // read is refused.
    tablekit::patterns::consistency::pending::write_marker(
        &store,
        "Employees",
        "Sales",
        chrono::Utc::now(),
    )
    .await
    .expect("renewed");
    let refused = store
        .delete(
            PENDING_TABLE,
            "Employees",
            "Sales",
            tablekit::core::IfMatch::ETag(stale),
        )
        .await;
    assert!(refused.is_err());
    assert_eq!(markers(&store).await.len(), 1);
}

// ---- Process kills between the steps -------------------------------------------------

const CHILD_STORE: &str = "TABLEKIT_TEST_KILL_STORE";
const CHILD_ROLE: &str = "TABLEKIT_TEST_KILL_ROLE";
const CHILD_AFTER: &str = "TABLEKIT_TEST_KILL_AFTER";

/// In the child process: write (or relay) through a store that kills the process after
/// the given write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_child() {
    let (Ok(url), Ok(role), Ok(after)) = (
        std::env::var(CHILD_STORE),
        std::env::var(CHILD_ROLE),
        std::env::var(CHILD_AFTER),
    ) else {
        return; // Only meaningful as the child of the kill tests.
    };
    let store = KilledAfter::new(
        AnyStore::create(&url).await.expect("store"),
        after.parse().expect("a write number"),
    );
    let handlers = tablekit::patterns::index::handlers(store.clone(), None);
    let sink = Arc::new(InlineSink::new(handlers));
    match role.as_str() {
        "writer" => {
            let employees = IndexedTable::<Employee, _>::options()
                .engine(unleased().sink(sink).build(store.clone()))
                .build(store.clone())
                .expect("options");
            employees
                .insert(&employee("Sales", 1))
                .await
                .expect("insert");
            // The outbox entry's removal follows the write; a process waits for it
            // before it stops.
            employees.flush().await;
        }
        _ => {
            // Under the id its restart uses: the restarted relay finds its shares.
            Relay::options()
                .id("kill-test")
                .grace(Duration::ZERO)
                .late(Duration::ZERO)
                .build(store, sink)
                .run_once()
                .await
                .expect("relay");
        }
    }
    // Reaching here means the kill point lay past the last write: the parent says so.
    std::process::exit(3);
}

/// Runs the child; it must have been killed (not finished, not failed).
fn killed(url: &str, role: &str, after: usize) {
    let status = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", "kill_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_STORE, url)
        .env(CHILD_ROLE, role)
        .env(CHILD_AFTER, after.to_string())
        .env("RUST_LOG", "off")
        .status()
        .expect("the child runs");
    assert!(
        !status.success() && status.code().is_none(),
        "{role} killed after write {after}: the child ended with {status:?}"
    );
}

/// After the kill: relay passes finish the work, then the exact final state.
async fn finishes_and_leaves_nothing_behind(url: &str, committed: bool) {
    let store = AnyStore::create(url).await.expect("store");
    let handlers = tablekit::patterns::index::handlers(store.clone(), None);
    // The killed relay restarted under its id: the shares it held are its own again.
    let relay = Relay::options()
        .id("kill-test")
        .grace(Duration::ZERO)
        .late(Duration::ZERO)
        .build(store.clone(), Arc::new(InlineSink::new(handlers)));
    let first = relay.run_once().await.expect("relay");
    assert!(first.partitions <= 1, "{first:?}");
    let second = relay.run_once().await.expect("relay");
    assert_eq!(
        second,
        Default::default(),
        "the first pass finished everything"
    );

    let primary = store
        .get("Employees", "Sales", "empid_000001", None)
        .await
        .expect("get");
    let copy = store
        .get("EmployeesByEmail", "email_Sales", "e1@x", None)
        .await
        .expect("get");
    assert_eq!(primary.is_some(), committed, "the primary iff committed");
    assert_eq!(
        copy.is_some(),
        committed,
        "its copy iff committed: no work lost"
    );
    assert!(
        outbox::scan(&store, "Employees")
            .await
            .expect("scan")
            .is_empty(),
        "no outbox entry left"
    );
    assert!(markers(&store).await.is_empty(), "no marker left");
    let employees = IndexedTable::<Employee, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    assert!(
        employees
            .audit(&AuditOptions::default())
            .await
            .expect("audit")
            .is_clean()
    );
}

async fn kills_at_every_step(url: String) {
    // The writer's writes: 0 marker, 1 commit (primary + outbox entry), 2 the copy (the
    // inline publish), 3 the outbox entry's delete.
    for after in 0..4 {
        let url = format!("{url}{}", scope(after));
        let opened = IndexedTable::<Employee, _>::options()
            .follow_up_elsewhere()
            .build(AnyStore::create(&url).await.expect("store"))
            .expect("options");
        opened.create().await.expect("open");
        killed(&url, "writer", after);
        finishes_and_leaves_nothing_behind(&url, after >= 1).await;
    }
    // The relay's writes after a writer killed right after its commit: 0 the lease of
    // its share, 1 the copy (the publish), 2 the outbox entry's delete, 3 the marker's
    // delete, then the share's release.
    for after in 0..4 {
        let url = format!("{url}{}", scope(10 + after));
        let opened = IndexedTable::<Employee, _>::options()
            .follow_up_elsewhere()
            .build(AnyStore::create(&url).await.expect("store"))
            .expect("options");
        opened.create().await.expect("open");
        killed(&url, "writer", 1);
        killed(&url, "relay", after);
        finishes_and_leaves_nothing_behind(&url, true).await;
    }
}

/// A fresh set of tables per case: a SQLite file of its own, or an Azurite table
/// prefix of its own.
fn scope(case: usize) -> String {
    format!("{case}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writer_or_relay_loses_no_work_and_leaves_no_marker_on_sqlite() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let url = format!("sqlite:{}/case", dir.path().display());
    kills_at_every_step(url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writer_or_relay_loses_no_work_and_leaves_no_marker_on_azurite() {
    if support::azure().await.is_none() {
        return;
    }
    let Some(url) = support::azurite() else {
        return;
    };
    // The prefix ends the connection string: each case appends to it.
    kills_at_every_step(url).await;
}
