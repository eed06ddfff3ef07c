//! The index worker end to end, as deployed: a writer process killed right after its
//! commit (before its index work is published) leaves the work in the outbox, and
//! `tablekit-worker run --queue index` relays and applies it — on the SQLite queue and on
//! RabbitMQ; writers publishing straight to the queue; `tablekit-worker audit` finding,
//! reporting (exit code 4) and repairing drift; `tablekit-worker backfill`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tablekit_core::{AnyStore, IfMatch, TableStore};
use tablekit_derive::Entity;
use tablekit_patterns::consistency::{BoxFuture, Envelope, outbox};
use tablekit_patterns::index::{IndexedTable, OutboxSink};
use tablekit_workers::WorkerConfig;
use tablekit_workers::index::QueueSink;
use tablekit_workers::queue::AnyQueue;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    kind = "Employee",
    partition_key = "{department}",
    row_key = "empid_{id:06}",
    crate = "tablekit_core"
)]
#[index(
    name = "email",
    partition_key = "{department}",
    row_key = "email_{email}"
)]
#[index(
    name = "by_email",
    table = "EmployeesByEmail",
    partition_key = "email_{department}",
    row_key = "{email}"
)]
#[index_entity(
    name = "last_name",
    key = "{last_name}",
    storage = "table",
    table = "EmployeesByLastName"
)]
struct Employee {
    department: String,
    id: u32,
    last_name: String,
    email: String,
}

fn employee(id: u32) -> Employee {
    Employee {
        department: "Sales".into(),
        id,
        last_name: "Jones".into(),
        email: format!("e{id}@x"),
    }
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Clients",
    kind = "Client",
    partition_key = "{region}",
    row_key = "c_{id:06}",
    crate = "tablekit_core"
)]
struct ClientV1 {
    region: String,
    id: u32,
    email: String,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Clients",
    kind = "Client",
    partition_key = "{region}",
    row_key = "c_{id:06}",
    crate = "tablekit_core"
)]
#[index(
    name = "by_email",
    table = "ClientsByEmail",
    partition_key = "{region}",
    row_key = "{email}"
)]
struct ClientV2 {
    region: String,
    id: u32,
    email: String,
}

/// A sink that kills its process: the write has committed, its index work is only in
/// the outbox.
struct DieOnPublish;

impl OutboxSink for DieOnPublish {
    fn publish<'a>(&'a self, _: &'a Envelope) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        std::process::abort()
    }
}

const CHILD: &str = "TABLEKIT_TEST_WRITER_STORE";

/// In the child process: write employee 1 and die right after the commit.
#[tokio::test]
async fn writer_child() {
    let Ok(store) = std::env::var(CHILD) else {
        return; // Only meaningful as the child of the kill test.
    };
    let store = AnyStore::create(&store).await.unwrap();
    let employees = IndexedTable::<Employee, _>::options()
        .sink(Arc::new(DieOnPublish))
        .build(store)
        .unwrap();
    employees.create().await.unwrap();
    employees.insert(&employee(1)).await.unwrap();
    unreachable!("the sink ends the process");
}

fn worker() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tablekit-worker"));
    command.env("RUST_LOG", "warn");
    command
}

fn output(command: &mut Command) -> (Option<i32>, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    (status.code(), text)
}

fn spawn_index_worker(store: &str, broker: &str, queue: &str) -> Child {
    worker()
        .args([
            "run", "--queue", queue, "--broker", broker, "--store", store, "--relay",
        ])
        .args([
            "--relay-interval",
            "1",
            "--relay-grace-ms",
            "0",
            "--backoff-ms",
            "20",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn stop(mut child: Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success(), "the worker stops cleanly");
}

async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn killed_writer_then_worker(broker: &str, queue: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite:{}", dir.path().join("store.db").display());
    // The writer process dies between its commit and publishing the index work.
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "writer_child", "--nocapture"])
        .env(CHILD, &store_url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the writer died");
    let store = AnyStore::create(&store_url).await.unwrap();
    assert!(
        store
            .get("Employees", "Sales", "empid_000001", None)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .get("Employees", "Sales", "email_e1@x", None)
            .await
            .unwrap()
            .is_some(),
        "the same-partition copy committed with the primary"
    );
    assert!(
        store
            .get("EmployeesByEmail", "email_Sales", "e1@x", None)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(outbox::scan(&store, "Employees").await.unwrap().len(), 1);

    let running = spawn_index_worker(&store_url, broker, queue);
    wait_for("the relayed copy", async || {
        store
            .get("EmployeesByEmail", "email_Sales", "e1@x", None)
            .await
            .unwrap()
            .is_some()
    })
    .await;
    wait_for("the outbox to empty", async || {
        outbox::scan(&store, "Employees").await.unwrap().is_empty()
    })
    .await;

    // A live writer publishes straight to the queue; the worker applies it.
    let sink = QueueSink::open(AnyQueue::connect(broker).await.unwrap(), queue)
        .await
        .unwrap();
    let employees = IndexedTable::<Employee, _>::options()
        .sink(Arc::new(sink))
        .build(store.clone())
        .unwrap();
    employees.create().await.unwrap();
    for id in 2..=5 {
        let outcome = employees.insert(&employee(id)).await.unwrap();
        assert!(outcome.published, "published at once, outbox entry removed");
    }
    let mut changed = employee(3);
    changed.email = "three@x".into();
    changed.last_name = "Smith".into();
    employees.upsert(&changed).await.unwrap();
    employees
        .delete("Sales", "empid_000004", IfMatch::Any)
        .await
        .unwrap();
    wait_for("every copy", async || {
        let copies = store
            .query_all("EmployeesByEmail", tablekit_core::Query::new())
            .await
            .unwrap();
        let mut keys: Vec<String> = copies.into_iter().map(|c| c.row_key).collect();
        keys.sort();
        keys == ["e1@x", "e2@x", "e5@x", "three@x"]
    })
    .await;
    wait_for("the id lists", async || {
        let jones = employees
            .list_named("last_name")
            .keys(&[&"Jones"])
            .ids()
            .await
            .unwrap();
        let smith = employees
            .list_named("last_name")
            .keys(&[&"Smith"])
            .ids()
            .await
            .unwrap();
        jones.len() == 3 && smith.len() == 1
    })
    .await;
    stop(running);
    let (code, text) = output(worker().args([
        "audit",
        "--store",
        &store_url,
        "--table",
        "Employees",
        "--no-progress",
    ]));
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("missing 0, stale 0, orphaned 0"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writers_index_work_is_relayed_on_the_sqlite_queue() {
    let dir = tempfile::tempdir().unwrap();
    let broker = format!("sqlite:{}", dir.path().join("queue.db").display());
    killed_writer_then_worker(&broker, "index").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writers_index_work_is_relayed_on_rabbitmq() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let queue = support::unique("index");
    killed_writer_then_worker(&url, &queue).await;
    if let AnyQueue::Rabbit(rabbit) = AnyQueue::connect(&url).await.unwrap() {
        rabbit
            .delete_queue(
                &queue,
                // The retry queues the workers declared, with their `--backoff-ms 20`.
                &WorkerConfig {
                    base_backoff: std::time::Duration::from_millis(20),
                    ..WorkerConfig::new(&queue)
                }
                .queue_options(),
            )
            .await
            .unwrap();
        // And those the sending side declared, with the default backoff.
        rabbit
            .delete_queue(&queue, &WorkerConfig::new(&queue).queue_options())
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archiving_an_indexed_entity_leaves_no_index_entry_behind() {
    use tablekit_workers::archive::{ArchiveOperation, ArchiveOutcome, archive};
    let store = AnyStore::create("memory:").await.unwrap();
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .unwrap();
    employees.create().await.unwrap();
    for id in 1..=3 {
        employees.insert(&employee(id)).await.unwrap();
    }
    let operation = ArchiveOperation {
        source_table: "Employees".into(),
        target_table: "Archive".into(),
        partition_key: "Sales".into(),
        row_key: "empid_000002".into(),
    };
    assert_eq!(
        archive(&store, &operation).await.unwrap(),
        ArchiveOutcome::Archived
    );
    assert_eq!(
        archive(&store, &operation).await.unwrap(),
        ArchiveOutcome::AlreadyArchived,
        "a repeated delivery changes nothing"
    );
    assert!(
        store
            .get("Employees", "Sales", "email_e2@x", None)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .get("EmployeesByEmail", "email_Sales", "e2@x", None)
            .await
            .unwrap()
            .is_none()
    );
    let jones = employees
        .list_named("last_name")
        .keys(&[&"Jones"])
        .ids()
        .await
        .unwrap();
    assert_eq!(jones.len(), 2);
    let archived = store
        .get("Archive", "Sales", "empid_000002", None)
        .await
        .unwrap()
        .expect("archived");
    assert!(
        archived.get("TablekitTargets").is_none(),
        "no index record in the archive"
    );
    assert_eq!(
        archived.get("email"),
        Some(&tablekit_core::Value::from("e2@x"))
    );
    let report = employees
        .audit(&tablekit_patterns::index::AuditOptions::default())
        .await
        .unwrap();
    assert!(report.is_clean(), "{:#?}", report.findings);
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Staff",
    kind = "Staff",
    partition_key = "{team}",
    row_key = "{id:06}",
    crate = "tablekit_core"
)]
struct Staff {
    team: String,
    id: u32,
    #[entity(blob)]
    photo: Option<Vec<u8>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archiving_a_large_entity_moves_its_blobs_and_refuses_its_own_table() {
    use tablekit_core::blob::BlobStore;
    use tablekit_patterns::large::LargeTable;
    use tablekit_workers::archive::{ArchiveOperation, ArchiveOutcome, archive_with_blobs};
    let store = AnyStore::create("memory:").await.unwrap();
    let blobs = BlobStore::memory();
    let staff = LargeTable::<Staff, _>::options()
        .inline_cleanup()
        .build(store.clone(), blobs.clone());
    staff.open().await.unwrap();
    let ann = Staff {
        team: "t".into(),
        id: 1,
        photo: Some(vec![5u8; 100_000]),
    };
    staff.insert(&ann).await.unwrap();
    let operation = ArchiveOperation {
        source_table: "Staff".into(),
        target_table: "StaffArchive".into(),
        partition_key: "t".into(),
        row_key: "000001".into(),
    };
    let without = archive_with_blobs(&store, None, &operation).await;
    assert!(
        matches!(&without, Err(e) if !e.is_retryable()),
        "blob-stored properties need the blob store: {without:?}"
    );
    assert_eq!(
        archive_with_blobs(&store, Some(&blobs), &operation)
            .await
            .unwrap(),
        ArchiveOutcome::Archived
    );
    let archived = LargeTable::<Staff, _>::options()
        .name("StaffArchive")
        .build(store.clone(), blobs.clone());
    assert_eq!(
        archived.get("t", "000001").await.unwrap().map(|s| s.value),
        Some(ann)
    );
    let names: Vec<String> = blobs
        .list("large/")
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.name)
        .collect();
    assert_eq!(
        names.len(),
        1,
        "the source's blob went with the source: {names:?}"
    );
    assert!(names[0].starts_with("large/StaffArchive/"), "{names:?}");
    let same = ArchiveOperation {
        target_table: "staff".into(),
        ..operation
    };
    assert!(
        archive_with_blobs(&store, Some(&blobs), &same)
            .await
            .is_err()
    );
}

/// A late move of a version older than the one archived (a delivery that read the source
/// before a newer version was archived): the archive keeps the newer version, and the
/// blobs copied for the older one go (the SQLite soak found them left, referenced by no
/// entity).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_archive_of_an_older_version_leaves_no_blob_behind() {
    use tablekit_core::blob::BlobStore;
    use tablekit_patterns::large::LargeTable;
    use tablekit_workers::archive::{
        ArchiveOperation, ArchiveOutcome, SOURCE_TIMESTAMP_PROPERTY, archive_with_blobs,
    };
    let store = AnyStore::create("memory:").await.unwrap();
    let blobs = BlobStore::memory();
    let staff = LargeTable::<Staff, _>::options()
        .inline_cleanup()
        .build(store.clone(), blobs.clone());
    staff.open().await.unwrap();
    let operation = ArchiveOperation {
        source_table: "Staff".into(),
        target_table: "StaffArchive".into(),
        partition_key: "t".into(),
        row_key: "000002".into(),
    };
    let photo = |byte: u8| Staff {
        team: "t".into(),
        id: 2,
        photo: Some(vec![byte; 100_000]),
    };
    staff.insert(&photo(1)).await.unwrap();
    archive_with_blobs(&store, Some(&blobs), &operation)
        .await
        .unwrap();
    // The archived copy stands for a version newer than any the source will hold.
    let mut newer = store
        .get("StaffArchive", "t", "000002", None)
        .await
        .unwrap()
        .unwrap();
    newer.properties.insert(
        SOURCE_TIMESTAMP_PROPERTY.to_owned(),
        tablekit_core::Value::DateTime(chrono::Utc::now() + chrono::Duration::days(1)),
    );
    store
        .replace("StaffArchive", newer.clone(), IfMatch::Any)
        .await
        .unwrap();
    // The source again, with another photo, moved late.
    staff.insert(&photo(2)).await.unwrap();
    assert_eq!(
        archive_with_blobs(&store, Some(&blobs), &operation)
            .await
            .unwrap(),
        ArchiveOutcome::Archived
    );
    let archived = store
        .get("StaffArchive", "t", "000002", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        archived.get(SOURCE_TIMESTAMP_PROPERTY),
        newer.get(SOURCE_TIMESTAMP_PROPERTY),
        "the newer archived version stays"
    );
    for blob in blobs.list("large/").await.unwrap() {
        assert!(
            tablekit_patterns::large::references(&archived, &blob.name),
            "{} is referenced by no entity",
            blob.name
        );
    }
}

/// A worker died after copying a blob into the archive's folder and before the archived
/// copy's write; the source was then deleted (it expired), so the redelivery found
/// nothing to move. The upload was recorded before it was made: the redelivery settles
/// the record and deletes the blob (the simulation found it left, referenced by no
/// entity: seed 17907).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_that_died_after_copying_its_blobs_leaves_none_behind() {
    use tablekit_core::blob::BlobStore;
    use tablekit_core::fault::FaultyStore;
    use tablekit_patterns::large::LargeTable;
    use tablekit_workers::archive::{
        ArchiveOperation, ArchiveOutcome, archive_with_blobs, is_upload_record,
    };
    let store = FaultyStore::new(AnyStore::create("memory:").await.unwrap());
    let blobs = BlobStore::memory();
    let staff = LargeTable::<Staff, _>::options()
        .inline_cleanup()
        .build(store.inner().clone(), blobs.clone());
    staff.open().await.unwrap();
    store
        .create_table_if_not_exists("StaffArchive")
        .await
        .unwrap();
    staff
        .insert(&Staff {
            team: "t".into(),
            id: 3,
            photo: Some(vec![7; 100_000]),
        })
        .await
        .unwrap();
    let operation = ArchiveOperation {
        source_table: "Staff".into(),
        target_table: "StaffArchive".into(),
        partition_key: "t".into(),
        row_key: "000003".into(),
    };
    // The upload's record lands, the blob is copied, the copy's write dies.
    store.crash_after_writes(1);
    archive_with_blobs(&store, Some(&blobs), &operation)
        .await
        .expect_err("the worker died");
    store.recover();
    assert_eq!(
        blobs.list("large/StaffArchive/").await.unwrap().len(),
        1,
        "the blob was copied before the worker died"
    );
    staff.delete("t", "000003", IfMatch::Any).await.unwrap();
    assert_eq!(
        archive_with_blobs(&store, Some(&blobs), &operation)
            .await
            .unwrap(),
        ArchiveOutcome::Missing
    );
    assert!(
        blobs.list("large/").await.unwrap().is_empty(),
        "{:?}",
        blobs.list("large/").await.unwrap()
    );
    let rows = store
        .query_all("StaffArchive", tablekit_core::Query::new())
        .await
        .unwrap();
    assert!(!rows.iter().any(is_upload_record), "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_command_reports_drift_with_exit_code_4_and_repairs_it() {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite:{}", dir.path().join("store.db").display());
    let store = AnyStore::create(&store_url).await.unwrap();
    let employees = IndexedTable::<Employee, _>::options()
        .inline_apply()
        .build(store.clone())
        .unwrap();
    employees.create().await.unwrap();
    for id in 1..=4 {
        employees.insert(&employee(id)).await.unwrap();
    }
    store
        .delete("EmployeesByEmail", "email_Sales", "e2@x", IfMatch::Any)
        .await
        .unwrap();
    let audit = |repair: bool| {
        let mut command = worker();
        command.args([
            "audit",
            "--store",
            &store_url,
            "--table",
            "Employees",
            "--no-progress",
        ]);
        if repair {
            command.arg("--repair");
        }
        output(&mut command)
    };
    let (code, text) = audit(false);
    assert_eq!(code, Some(4), "{text}");
    assert!(text.contains("missing 1, stale 0, orphaned 0"), "{text}");
    assert!(text.contains("Missing\tby_email"), "{text}");
    let (code, text) = audit(true);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("repaired 1"), "{text}");
    let (code, text) = audit(false);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) =
        output(worker().args(["audit", "--store", &store_url, "--table", "Nothing"]));
    assert_eq!(
        code,
        Some(2),
        "an unregistered table is a usage error: {text}"
    );
    assert!(text.contains("no registered schema"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backfill_command_writes_an_index_declared_later() {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite:{}", dir.path().join("store.db").display());
    let store = AnyStore::create(&store_url).await.unwrap();
    let v1 = tablekit_core::typed::Table::<ClientV1, _>::new(store.clone());
    v1.create().await.unwrap();
    for id in 1..=7 {
        v1.insert(&ClientV1 {
            region: "EU".into(),
            id,
            email: format!("c{id}@x"),
        })
        .await
        .unwrap();
    }
    // Opened to register the schema; the backfill writes the copies.
    let v2 = IndexedTable::<ClientV2, _>::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .unwrap();
    v2.create().await.unwrap();
    let (code, text) = output(worker().args([
        "backfill",
        "--store",
        &store_url,
        "--table",
        "Clients",
        "--index",
        "by_email",
        "--no-progress",
    ]));
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("7 entries written for 7 primaries"), "{text}");
    assert_eq!(
        v2.lookup_named("by_email")
            .keys(&[&"EU"])
            .keys(&[&"c6@x"])
            .get()
            .await
            .unwrap()
            .map(|c| c.id),
        Some(6)
    );
    let (code, text) = output(worker().args([
        "backfill", "--store", &store_url, "--table", "Clients", "--index", "nope",
    ]));
    assert_eq!(code, Some(2), "{text}");
}

/// An invitation that expires at its own time (`#[entity(expires)]`).
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Invites",
    kind = "Invite",
    partition_key = "{team}",
    row_key = "{code}",
    crate = "tablekit_core"
)]
#[index(
    name = "by_code",
    table = "InvitesByCode",
    partition_key = "codes",
    row_key = "{code}"
)]
struct Invite {
    team: String,
    code: String,
    #[entity(expires)]
    ends: Option<chrono::DateTime<chrono::Utc>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_worker_sweeps_expired_entities_with_their_copies() {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite:{}", dir.path().join("store.db").display());
    let broker = format!("sqlite:{}", dir.path().join("queue.db").display());
    let store = AnyStore::create(&store_url).await.unwrap();
    let sink = QueueSink::open(AnyQueue::connect(&broker).await.unwrap(), "index")
        .await
        .unwrap();
    let invites = IndexedTable::<Invite, _>::options()
        .sink(Arc::new(sink))
        .build(store.clone())
        .unwrap();
    invites.create().await.unwrap();
    let soon = chrono::Utc::now() + chrono::Duration::seconds(2);
    for (code, ends) in [("a1", Some(soon)), ("a2", Some(soon)), ("keep", None)] {
        let invite = Invite {
            team: "red".into(),
            code: code.into(),
            ends,
        };
        invites.insert(&invite).await.unwrap();
    }
    let running = worker()
        .args([
            "run",
            "--queue",
            "index",
            "--broker",
            &broker,
            "--store",
            &store_url,
            "--expiry-interval",
            "1",
            "--backoff-ms",
            "20",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the expired invites and their copies to go", async || {
        // A delete's tombstone and its burial stay for a grace period, hidden from reads.
        let mut primaries = store
            .query_all("Invites", tablekit_core::Query::new())
            .await
            .unwrap();
        primaries.retain(|e| {
            !tablekit_patterns::index::record::is_tombstone(e)
                && !tablekit_patterns::consistency::outbox::waiting(e)
        });
        let copies = store
            .query_all("InvitesByCode", tablekit_core::Query::new())
            .await
            .unwrap();
        let entries = store
            .query_all("InvitesExpiry", tablekit_core::Query::new())
            .await
            .unwrap();
        primaries
            .iter()
            .map(|p| p.row_key.as_str())
            .collect::<Vec<_>>()
            == ["keep"]
            && copies
                .iter()
                .map(|c| c.row_key.as_str())
                .collect::<Vec<_>>()
                == ["keep"]
            && entries.is_empty()
    })
    .await;
    stop(running);
    let (code, text) = output(worker().args([
        "audit",
        "--store",
        &store_url,
        "--table",
        "Invites",
        "--no-progress",
    ]));
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("missing 0, stale 0, orphaned 0"), "{text}");
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Visitors",
    kind = "Visitor",
    partition_key = "{site}",
    row_key = "v{id:04}",
    changes = "visitor-changes",
    crate = "tablekit_core"
)]
#[index(
    name = "by_badge",
    table = "VisitorsByBadge",
    partition_key = "{site}",
    row_key = "{badge}"
)]
struct Visitor {
    site: String,
    id: u32,
    badge: String,
}

/// Keeps what it is handed.
#[derive(Clone, Default)]
struct Kept(Arc<std::sync::Mutex<Vec<Envelope>>>);

impl OutboxSink for Kept {
    fn publish<'a>(
        &'a self,
        envelope: &'a Envelope,
    ) -> BoxFuture<'a, tablekit_patterns::Result<()>> {
        self.0.lock().unwrap().push(envelope.clone());
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archives_change_event_goes_to_the_queue_without_the_relay() {
    use tablekit_patterns::changes::ChangeEvent;
    use tablekit_workers::archive::{ArchiveOperation, archive_with_blobs, archive_with_events};
    let store = AnyStore::create("memory:").await.unwrap();
    let visitors = IndexedTable::<Visitor, _>::options()
        .inline_apply()
        .build(store.clone())
        .unwrap();
    visitors.create().await.unwrap();
    let events = Kept::default();
    for id in 1..=2 {
        let visitor = Visitor {
            site: "north".into(),
            id,
            badge: format!("b{id}"),
        };
        visitors.insert(&visitor).await.unwrap();
    }
    visitors.flush().await;
    let archived = |id: u32| ArchiveOperation {
        source_table: "Visitors".into(),
        target_table: "VisitorsArchive".into(),
        partition_key: "north".into(),
        row_key: format!("v{id:04}"),
    };
    let left = |store: AnyStore| async move {
        outbox::scan(&store, "Visitors")
            .await
            .unwrap()
            .into_iter()
            .filter(|e| !tablekit_patterns::consistency::outbox::waiting(e))
            .count()
    };
    // (The inserts' change events wait for the relay: the inline sink applies index work
    // only.)
    let before = left(store.clone()).await;
    // The worker process's way: the delete's event goes to the events sink at once, its
    // index work is applied here, and nothing is left for the relay.
    archive_with_events(&store, None, Some(Arc::new(events.clone())), &archived(1))
        .await
        .unwrap();
    let handed: Vec<Envelope> = events.0.lock().unwrap().clone();
    assert_eq!(handed.len(), 1, "{handed:?}");
    assert_eq!(ChangeEvent::queue_of(&handed[0]), Some("visitor-changes"));
    assert!(
        store
            .get("VisitorsByBadge", "north", "b1", None)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(left(store.clone()).await, before, "nothing for the relay");
    // Without an events sink the event waits in the outbox for the relay.
    archive_with_blobs(&store, None, &archived(2))
        .await
        .unwrap();
    assert_eq!(left(store.clone()).await, before + 1);
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Orders",
    kind = "Order",
    partition_key = "{customer}",
    row_key = "{id:06}",
    crate = "tablekit_core"
)]
#[count(name = "by_status", key = "{status}", shards = 4)]
struct Order {
    customer: String,
    id: u32,
    status: String,
}

/// With the worker stopped, 1,000 writes' count work waits in the queue: the count reads
/// not exact, naming the queue and its messages, until a worker has drained it; then it
/// reads exact and right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_reads_not_exact_until_the_stopped_workers_queue_is_drained() {
    use tablekit_patterns::consistency::Unapplied;
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite:{}", dir.path().join("store.db").display());
    let broker = format!("sqlite:{}", dir.path().join("queue.db").display());
    let store = AnyStore::create(&store_url).await.unwrap();
    let queue = AnyQueue::connect(&broker).await.unwrap();
    let sink = QueueSink::open(queue, "index").await.unwrap();
    let orders = IndexedTable::<Order, _>::options()
        .sink(Arc::new(sink))
        .open(store.clone())
        .await
        .unwrap();
    for id in 0..1000 {
        let order = Order {
            customer: format!("c{}", id % 10),
            id,
            status: "placed".into(),
        };
        orders.insert(&order).await.unwrap();
    }
    let count = async || {
        orders
            .count(Order::BY_STATUS)
            .key("placed")
            .get()
            .await
            .unwrap()
    };
    let read = count().await;
    assert!(!read.exact, "nothing applied yet: {}", read.pending);
    assert_eq!(read.value, 0);
    assert_eq!(
        read.pending.handed,
        Unapplied::Queued {
            queue: "index".into(),
            messages: 1000
        }
    );

    let worker = spawn_index_worker(&store_url, &broker, "index");
    wait_for("the count to read exact", async || count().await.exact).await;
    stop(worker);
    let read = count().await;
    assert_eq!((read.value, read.exact), (1000, true), "{}", read.pending);
}
