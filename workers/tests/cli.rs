//! The `tablekit-worker` binary end to end on the embedded backends: enqueue, stats, run
//! with a metrics endpoint, poison list and replay, environment variables, exit codes; and
//! the registry of a worker binary built with `cli::main_with`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tablekit_core::{AnyStore, Entity, MemoryStore, SqliteStore, TableStore};
use tablekit_workers::cli::{self, Connections};
use tablekit_workers::queue::poison_table::WithPoisonTable;
use tablekit_workers::queue::{AnyQueue, Queue};
use tablekit_workers::{Envelope, Operation, OperationError, Registry};

fn worker() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tablekit-worker"));
    command.env("RUST_LOG", "warn");
    command
}

fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "{:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

use support::{free_port, http_get};

#[tokio::test]
async fn the_binary_enqueues_runs_reports_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    let broker = format!("sqlite:{}", path.display());
    let queue = AnyQueue::connect(&broker).await.unwrap();
    let garbage = async {
        queue
            .send("archive", "garbage-1", b"\x00not json")
            .await
            .unwrap();
        Some("garbage-1".to_owned())
    };
    enqueue_run_report_and_replay(&broker, "archive", &queue, garbage).await;
}

#[cfg(feature = "azure")]
#[tokio::test]
async fn the_binary_runs_on_azure_queues() {
    let Some(connection) = support::azure_queues() else {
        return;
    };
    let broker = format!("azure:{connection}");
    let name = support::azure_name("cli");
    let queue = AnyQueue::connect(&broker).await.unwrap();
    let azure = tablekit_workers::queue::azure::AzureQueue::connect(&connection).unwrap();
    queue
        .declare(
            &name,
            &tablekit_workers::WorkerConfig::new(&name).queue_options(),
        )
        .await
        .unwrap();
    // Another producer's text (not tablekit's wire form): received as it is and poisoned
    // with the reason, under the service's message id.
    let garbage = async {
        azure.send_text(&name, "<not an operation>").await.unwrap();
        None
    };
    enqueue_run_report_and_replay(&broker, &name, &queue, garbage).await;
    azure.delete_queue(&name).await.unwrap();
}

/// `enqueue`, `stats`, `run` with metrics, `poison list` and `poison replay` through the
/// binary on `broker`; `garbage` puts a message no worker can read on `queue` and gives its
/// id when the sender knows it.
async fn enqueue_run_report_and_replay(
    broker: &str,
    queue_name: &str,
    queue: &AnyQueue,
    garbage: impl std::future::Future<Output = Option<String>>,
) {
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store.db");
    let store = SqliteStore::create(&store_path).await.unwrap();
    store.create_table("Current").await.unwrap();
    store
        .insert(
            "Current",
            Entity::new("Sales", "empid_000001").with("Name", "Ann"),
        )
        .await
        .unwrap();
    let store_url = format!("sqlite:{}", store_path.display());
    // The worker keeps its poison messages in the store's poison table.
    let kept = WithPoisonTable::new(queue.clone(), AnyStore::Sqlite(store.clone()));

    let id = ok(worker()
        .args([
            "enqueue", "archive", "--broker", broker, "--queue", queue_name,
        ])
        .args(["--source", "Current", "--target", "Archive"])
        .args(["--partition-key", "Sales", "--row-key", "empid_000001"])
        .output()
        .unwrap());
    assert_eq!(id.trim().len(), 36, "prints the operation id: {id}");
    // Every flag is also an environment variable.
    let stats = ok(worker()
        .args(["stats"])
        .env("TABLEKIT_BROKER", broker)
        .env("TABLEKIT_QUEUE", queue_name)
        .output()
        .unwrap());
    assert!(stats.starts_with("waiting 1\t"), "{stats}");

    // A message no worker can read.
    let garbage_id = garbage.await;

    let port = free_port();
    let mut running = worker()
        .args([
            "run", "--queue", queue_name, "--broker", broker, "--store", &store_url,
        ])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let stats = kept.stats(queue_name).await.unwrap();
        if stats.waiting == 0 && stats.leased == 0 && stats.poisoned == 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{stats:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let metrics = http_get(port, "/metrics").expect("the metrics endpoint answers");
    assert!(
        metrics.contains("tablekit_worker_processed_total"),
        "{metrics}"
    );
    assert!(
        metrics.contains("tablekit_worker_poisoned_total"),
        "{metrics}"
    );
    assert!(
        metrics.contains("tablekit_worker_handler_seconds"),
        "{metrics}"
    );
    let status = Command::new("kill")
        .args(["-TERM", &running.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut out = String::new();
    running
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(running.wait().unwrap().success());
    assert!(out.contains("processed 1, retried 0, poisoned 1"), "{out}");
    assert!(
        store
            .get("Archive", "Sales", "empid_000001", None)
            .await
            .unwrap()
            .is_some()
    );

    let garbage_id = match garbage_id {
        Some(id) => id,
        None => kept.poison_list(queue_name, 10).await.unwrap()[0]
            .id
            .clone(),
    };
    let listed = ok(worker()
        .args(["poison", "list", "--broker", broker, "--queue", queue_name])
        .args(["--store", &store_url])
        .output()
        .unwrap());
    assert!(
        listed.contains(&garbage_id) && listed.contains("malformed operation envelope"),
        "{listed}"
    );
    assert!(listed.ends_with("1 poison messages\n"), "{listed}");
    let replayed = ok(worker()
        .args([
            "poison",
            "replay",
            "--broker",
            broker,
            "--queue",
            queue_name,
            "--id",
            &garbage_id,
            "--store",
            &store_url,
        ])
        .output()
        .unwrap());
    assert_eq!(replayed, "replayed 1 messages\n");
    assert_eq!(queue.stats(queue_name).await.unwrap().waiting, 1);
    assert_eq!(kept.stats(queue_name).await.unwrap().poisoned, 0);
}

/// A poison message whose id and reason are not UTF-8 (written by another program into
/// the queue's file) is listed with U+FFFD in their place, beside the others, instead of
/// failing the whole listing.
#[tokio::test]
async fn poison_list_shows_an_id_and_reason_that_are_not_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    let broker = format!("sqlite:{}", path.display());
    let queue = AnyQueue::connect(&broker).await.unwrap();
    // The SQLite queue answers for the queues declared in its file.
    queue
        .declare("bytes", &tablekit_workers::queue::QueueOptions::default())
        .await
        .unwrap();
    queue.send("bytes", "good-1", b"{}").await.unwrap();
    let file = rusqlite::Connection::open(&path).unwrap();
    file.execute(
        "INSERT INTO tablekit_queue (queue, id, body, sent_at, visible_at, dequeue_count, reason) \
         VALUES ('bytes-poison', CAST(X'6261642DFF2D6964' AS TEXT), X'00FF', 0, 0, 3, CAST(X'6E6F2DFE2D72656173' AS TEXT))",
        [],
    )
    .unwrap();
    drop(file);
    // Put there by another program: swept into the poison table, then listed.
    SqliteStore::create(dir.path().join("store.db"))
        .await
        .unwrap();
    let store_url = format!("sqlite:{}", dir.path().join("store.db").display());
    let listed = ok(worker()
        .args(["poison", "list", "--broker", &broker, "--queue", "bytes"])
        .args(["--store", &store_url])
        .output()
        .unwrap());
    assert!(
        listed.contains("bad-\u{FFFD}-id\t3 deliveries\tno-\u{FFFD}-reas\t"),
        "{listed}"
    );
    assert!(listed.ends_with("1 poison messages\n"), "{listed}");
    // Its handle names it alone: discarded by it.
    let handle = listed
        .strip_prefix("handle ")
        .and_then(|rest| rest.split('\t').next())
        .unwrap_or_else(|| panic!("a handle in {listed}"));
    let discarded = ok(worker()
        .args([
            "poison", "discard", "--broker", &broker, "--queue", "bytes", "--handle", handle,
            "--store", &store_url,
        ])
        .output()
        .unwrap());
    assert_eq!(discarded, "discarded 1 messages\n");
    assert_eq!(queue.stats("bytes").await.unwrap().poisoned, 0);
}
#[test]
fn bad_arguments_exit_with_the_usage_code_and_say_why() {
    let output = worker()
        .args(["stats", "--broker", "kafka://somewhere", "--queue", "q"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("invalid broker `kafka://somewhere`"),
        "{stderr}"
    );

    let output = worker().args(["run", "--queue", "q"]).output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(2),
        "missing --broker and --store"
    );

    let help = ok(worker().args(["run", "--help"]).output().unwrap());
    for flag in [
        "--broker",
        "TABLEKIT_BROKER",
        "--store",
        "--concurrency",
        "--max-deliveries",
        "--metrics-addr",
    ] {
        assert!(help.contains(flag), "{flag} in --help:\n{help}");
    }
}

/// An application's own operation: stamps a department as reviewed.
#[derive(Serialize, Deserialize)]
struct Review {
    department: String,
}

impl Operation for Review {
    const KIND: &'static str = "review";
    const VERSION: u32 = 1;
}

/// What an application passes to `cli::main_with`.
fn review_operations(registry: Registry, connections: &Connections) -> Registry {
    let store = connections.store.clone();
    registry.register(move |review: Review| {
        let store = store.clone();
        async move {
            let stamp = Entity::new(review.department, "reviewed").with("Reviewed", true);
            store.insert_or_replace("Reviews", stamp).await?;
            Ok::<_, OperationError>(())
        }
    })
}

#[tokio::test]
async fn a_worker_binary_handles_its_own_operations_beside_the_built_in_ones() {
    let store = MemoryStore::new();
    store.create_table("Reviews").await.unwrap();
    let connections = Connections::new(AnyStore::Memory(store.clone()), None);
    let registry = cli::registry_with_operations(&connections, review_operations);
    assert_eq!(registry.kinds(), ["archive", "index", "reclaim", "review"]);

    let review = Envelope::new(&Review {
        department: "Sales".into(),
    })
    .unwrap();
    assert_eq!(registry.handle(review).await, Ok(()));
    let stamp = store
        .get("Reviews", "Sales", "reviewed", None)
        .await
        .unwrap();
    assert_eq!(
        stamp.and_then(|e| e.get("Reviewed").cloned()),
        Some(true.into())
    );

    // The built-in operations are still there: an archive of a missing entity is a no-op.
    let archive = Envelope::new(&tablekit_workers::archive::ArchiveOperation {
        source_table: "Current".into(),
        target_table: "Archive".into(),
        partition_key: "Sales".into(),
        row_key: "empid_000001".into(),
    })
    .unwrap();
    assert_eq!(registry.handle(archive).await, Ok(()));

    // A kind nobody registered is still refused, permanently (the worker poisons it).
    let mut unknown = Envelope::new(&Review {
        department: "Sales".into(),
    })
    .unwrap();
    unknown.kind = "recount".into();
    let refused = registry.handle(unknown).await;
    assert!(
        matches!(&refused, Err(OperationError::Permanent(m)) if m.contains("unknown operation kind `recount`")),
        "{refused:?}"
    );

    // Without them, the same kind is refused: the application's operations are its own.
    let built_in = cli::registry_with_operations(&connections, |registry, _| registry);
    assert_eq!(built_in.kinds(), ["archive", "index", "reclaim"]);
    let review = Envelope::new(&Review {
        department: "Ops".into(),
    })
    .unwrap();
    assert!(
        built_in
            .handle(review)
            .await
            .is_err_and(|e| !e.is_retryable())
    );
}

/// An application's operation on a queue of its own.
#[derive(Serialize, Deserialize)]
struct Recount {
    department: String,
}

impl Operation for Recount {
    const KIND: &'static str = "recount";
    const VERSION: u32 = 1;
    const QUEUE: &'static str = "recounts";
}

#[test]
fn the_registry_names_the_queues_of_the_built_in_and_registered_operations() {
    let connections = Connections::new(AnyStore::Memory(MemoryStore::new()), None);
    let built_in = cli::registry_with_operations(&connections, |registry, _| registry);
    assert_eq!(built_in.queues(), ["archive", "index"]);
    let with_own = cli::registry_with_operations(&connections, |registry, _| {
        registry.register(|_: Recount| async { Ok::<_, OperationError>(()) })
    });
    assert_eq!(with_own.queues(), ["archive", "index", "recounts"]);
}

/// Runs `tablekit-worker run` with `args` until `done` holds, then stops it with SIGTERM;
/// its stdout and its log (level `info`).
async fn run_until(args: &[&str], done: impl AsyncFn() -> bool) -> (String, String) {
    let mut running = worker()
        .env("RUST_LOG", "info")
        .env_remove("TABLEKIT_QUEUE")
        .arg("run")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(std::time::Instant::now() < deadline, "the worker never did");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stopped = Command::new("kill")
        .args(["-TERM", &running.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let (mut out, mut log) = (String::new(), String::new());
    running
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    running
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(running.wait().unwrap().success(), "{log}");
    (out, log)
}

/// The line the worker logs when it starts: the queues it serves.
fn serving(log: &str) -> &str {
    log.lines()
        .find(|line| line.contains("serving"))
        .unwrap_or_else(|| panic!("no `serving` line in:\n{log}"))
}

#[tokio::test]
async fn run_without_a_queue_serves_every_queue_of_its_operations_and_a_queue_named_only() {
    let dir = tempfile::tempdir().unwrap();
    let broker = format!("sqlite:{}", dir.path().join("queue.db").display());
    let queue = AnyQueue::connect(&broker).await.unwrap();
    for name in ["archive", "index", "elsewhere"] {
        let options = tablekit_workers::WorkerConfig::new(name).queue_options();
        queue.declare(name, &options).await.unwrap();
    }
    // An archive of an entity that is not there (done at once), a message no worker reads
    // on the index queue (poisoned at once), and one on a queue no operation travels on.
    let archive = Envelope::new(&tablekit_workers::archive::ArchiveOperation {
        source_table: "Current".into(),
        target_table: "Archive".into(),
        partition_key: "Sales".into(),
        row_key: "empid_000001".into(),
    })
    .unwrap();
    let id = archive.id.to_string();
    queue
        .send("archive", &id, &archive.to_bytes().unwrap())
        .await
        .unwrap();
    queue.send("index", "garbage-1", b"not json").await.unwrap();
    queue
        .send("elsewhere", "garbage-2", b"not json")
        .await
        .unwrap();
    let settled = async |name: &str| {
        let stats = queue.stats(name).await.unwrap();
        stats.waiting == 0 && stats.leased == 0
    };
    let common = [
        "--broker",
        &broker,
        "--store",
        "memory:",
        "--expiry-interval",
        "0",
    ];

    // No `--queue`: the built-in operations' queues, `archive` and `index`, both served.
    let (out, log) = run_until(&common, async || {
        settled("archive").await && settled("index").await
    })
    .await;
    assert!(out.contains("processed 1, retried 0, poisoned 1"), "{out}");
    let line = serving(&log);
    assert!(line.contains("queues=archive, index kinds="), "{line}");
    assert_eq!(queue.stats("index").await.unwrap().poisoned, 1);
    // A queue no operation travels on is left alone.
    assert_eq!(queue.stats("elsewhere").await.unwrap().waiting, 1);

    // `--queue archive`: the archive queue only; the index queue keeps its message.
    queue
        .send("archive", "garbage-3", b"not json")
        .await
        .unwrap();
    queue.send("index", "garbage-4", b"not json").await.unwrap();
    let args = [&common[..], &["--queue", "archive"]].concat();
    let (out, log) = run_until(&args, async || settled("archive").await).await;
    assert!(out.contains("processed 0, retried 0, poisoned 1"), "{out}");
    let line = serving(&log);
    assert!(line.contains("queues=archive kinds="), "{line}");
    let index = queue.stats("index").await.unwrap();
    assert_eq!((index.waiting, index.poisoned), (1, 1), "{index:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_outbox_marks_the_partitions_of_entries_written_without_markers() {
    use tablekit_patterns::consistency::pending::PENDING_TABLE;
    use tablekit_patterns::consistency::{Envelope as Work, outbox};

    #[derive(Serialize, Deserialize)]
    struct Note {
        text: String,
    }
    impl Operation for Note {
        const KIND: &'static str = "note";
        const VERSION: u32 = 1;
    }

    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store.db");
    let store = SqliteStore::create(&store_path).await.unwrap();
    store.create_table("Orders").await.unwrap();
    // Entries left by a writer that knew no markers, in two partitions.
    for (pk, text) in [("east", "a"), ("east", "b"), ("west", "c")] {
        let work = Work::new(&Note { text: text.into() }).unwrap();
        store
            .insert("Orders", outbox::entry(pk, &work).unwrap())
            .await
            .unwrap();
    }
    let out = ok(worker()
        .args(["adopt-outbox", "--table", "Orders"])
        .env("TABLEKIT_STORE", format!("sqlite:{}", store_path.display()))
        .output()
        .unwrap());
    assert!(out.contains("marked 2 partitions of Orders"), "{out}");
    let markers = store
        .query_all(PENDING_TABLE, tablekit_core::Query::new())
        .await
        .unwrap();
    let marked: Vec<(&str, &str)> = markers
        .iter()
        .map(|m| (m.partition_key.as_str(), m.row_key.as_str()))
        .collect();
    assert_eq!(marked, vec![("Orders", "east"), ("Orders", "west")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_period_and_import_round_trip_a_cold_table_through_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store.db");
    let store_url = format!("sqlite:{}", store_path.display());
    let blobs_dir = dir.path().join("blobs");
    std::fs::create_dir_all(&blobs_dir).unwrap();
    let store = SqliteStore::create(&store_path).await.unwrap();
    store.create_table("Sales20261101").await.unwrap();
    for i in 0..1_500u32 {
        store
            .insert(
                "Sales20261101",
                Entity::new(format!("shop{}", i % 7), format!("{i:06}")).with("n", i64::from(i)),
            )
            .await
            .unwrap();
    }
    let out = ok(worker()
        .args([
            "export-period",
            "--base",
            "Sales",
            "--period",
            "day",
            "--table",
            "Sales20261101",
            "--no-progress",
        ])
        .env("TABLEKIT_STORE", &store_url)
        .env("TABLEKIT_BLOBS", format!("file:{}", blobs_dir.display()))
        .output()
        .unwrap());
    assert!(
        out.contains("exported 1500 entities of Sales20261101"),
        "{out}"
    );
    assert!(
        store.list_tables("Sales").await.unwrap().is_empty(),
        "dropped"
    );
    let blob = walk(&blobs_dir)
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .expect("the exported blob");

    let out = ok(worker()
        .args(["import", "--table", "Restored", "--no-progress"])
        .arg("--file")
        .arg(&blob)
        .env("TABLEKIT_STORE", &store_url)
        .output()
        .unwrap());
    assert!(
        out.contains("imported 1500 entities into Restored"),
        "{out}"
    );
    let rows = store
        .query_all("Restored", tablekit_core::Query::new())
        .await
        .unwrap();
    assert_eq!(rows.len(), 1_500);

    // A line that is not an entity stops the import with its line number.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"partition_key\":\"a\"\nnot json\n").unwrap();
    let output = worker()
        .args(["import", "--table", "Restored", "--no-progress"])
        .arg("--file")
        .arg(&bad)
        .env("TABLEKIT_STORE", &store_url)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("line 1"), "{stderr}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn an_operators_first_minutes_are_quiet_and_clear() {
    // Every help text names every backend.
    let help = ok(worker().arg("--help").output().unwrap());
    assert!(help.contains("Azure Queue Storage"), "{help}");
    for command in ["run", "status", "console", "audit"] {
        let help = ok(worker().args([command, "--help"]).output().unwrap());
        for backend in ["sqlite:PATH", "azure:CONNECTION-STRING", "memory:"] {
            assert!(
                help.contains(backend),
                "{command} --help lacks {backend}:\n{help}"
            );
        }
    }
    // `--version` lists the backends built in.
    let version = ok(worker().arg("--version").output().unwrap());
    assert!(version.contains("features: sqlite rabbitmq"), "{version}");

    // The console refuses to listen off loopback without a token.
    let dir = tempfile::tempdir().unwrap();
    let broker = format!("sqlite:{}", dir.path().join("q.db").display());
    let output = worker()
        .args(["console", "--broker", &broker, "--store", "memory:"])
        .args(["--bind", "0.0.0.0:0"])
        .env_remove("TABLEKIT_CONSOLE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("give it a token"), "{stderr}");

    // Logs written to a file carry no colour codes; `--log-format json` writes JSON lines.
    let output = worker()
        .env("RUST_LOG", "info")
        .args(["stats", "--broker", &broker, "--queue", "q"])
        .output()
        .unwrap();
    assert!(
        !output.stderr.contains(&0x1b),
        "{:?}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = worker()
        .env("RUST_LOG", "info")
        .args(["--log-format", "json", "console", "--broker", &broker])
        .args(["--store", "memory:", "--bind", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("error: "), "{stderr}");
}

#[test]
fn status_names_a_queue_not_declared_yet_without_the_amqp_clients_error_lines() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let queue = support::unique("never-declared");
    let output = worker()
        .env_remove("RUST_LOG")
        .args([
            "status", "--broker", &url, "--store", "memory:", "--queue", &queue,
        ])
        .output()
        .unwrap();
    let stdout = ok(output.clone());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.contains(&queue) && stdout.contains("not declared yet"),
        "{stdout}"
    );
    assert!(!stderr.contains("ERROR"), "{stderr}");
    assert!(!stderr.contains("NOT_FOUND"), "{stderr}");
}

/// Messages in `queue` on `broker`, declared as a worker declares it.
async fn waiting_messages(broker: &str, queue: &str, count: usize) -> AnyQueue {
    let any = AnyQueue::connect(broker).await.unwrap();
    any.declare(
        queue,
        &tablekit_workers::WorkerConfig::new(queue).queue_options(),
    )
    .await
    .unwrap();
    for n in 0..count {
        any.send(queue, &format!("m-{n}"), b"{}").await.unwrap();
    }
    any
}

#[tokio::test]
async fn status_warns_of_a_queue_whose_messages_no_consumer_has_taken() {
    let dir = tempfile::tempdir().unwrap();
    let broker = format!("sqlite:{}", dir.path().join("q.db").display());
    waiting_messages(&broker, "archive", 2).await;
    let status = |after: &str| {
        ok(worker()
            .args(["status", "--broker", &broker, "--store", "memory:"])
            .args(["--queue", "archive", "--unconsumed-after", after])
            .output()
            .unwrap())
    };
    // Within the threshold: counts, no warning.
    let quiet = status("300");
    assert!(
        quiet.contains("archive") && !quiet.contains("warning"),
        "{quiet}"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let text = status("1");
    let warning = text
        .lines()
        .find(|l| l.contains("warning: Queue `archive`"))
        .unwrap_or_else(|| panic!("no warning in:\n{text}"));
    assert!(
        warning.contains("holds 2 messages that no consumer has taken since ")
            && warning.ends_with("Start a worker for it: tablekit-worker run --queue archive"),
        "{warning}"
    );
}

#[tokio::test]
async fn over_rabbitmq_status_warns_when_the_broker_counts_no_consumer() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let queue = support::unique("unconsumed");
    let any = waiting_messages(&url, &queue, 3).await;
    let status = || {
        ok(worker()
            .args([
                "status", "--broker", &url, "--store", "memory:", "--queue", &queue,
            ])
            .output()
            .unwrap())
    };
    let text = status();
    assert!(
        text.contains(&format!(
            "warning: Queue `{queue}` holds 3 messages and has no consumer attached (the broker counts none now; it does not say since when)"
        )),
        "{text}"
    );
    assert!(text.contains("consumers   0"), "{text}");
    // A consumer attached: no warning.
    let consumer = any
        .consume(&queue, tablekit_workers::queue::ConsumeOptions::default())
        .await
        .unwrap();
    let text = status();
    assert!(!text.contains("warning: Queue"), "{text}");
    tablekit_workers::queue::Consumer::close(consumer).await;
    if let AnyQueue::Rabbit(rabbit) = &any {
        let _ = rabbit
            .delete_queue(
                &queue,
                &tablekit_workers::WorkerConfig::new(&queue).queue_options(),
            )
            .await;
    }
}

/// A worker serving `index` looks at `archive`, the other queue of its registry: messages
/// that wait there with no consumer are a warning in its log, naming what to run.
#[tokio::test]
async fn a_worker_warns_in_its_log_of_another_queue_of_its_registry_that_nothing_consumes() {
    let dir = tempfile::tempdir().unwrap();
    let broker = format!("sqlite:{}", dir.path().join("q.db").display());
    waiting_messages(&broker, "archive", 2).await;
    let mut child = worker()
        .args(["run", "--queue", "index", "--broker", &broker])
        .args(["--store", "memory:", "--expiry-interval", "0"])
        .args(["--unconsumed-after", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines, read) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines() {
            if lines.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    let warning = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match read.recv_timeout(left) {
            Ok(line) if line.contains("Queue `archive`") => break line,
            Ok(line) => seen.push(line),
            Err(_) => panic!("no warning within 20 s:\n{}", seen.join("\n")),
        }
    };
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    assert!(warning.contains("WARN"), "{warning}");
    assert!(
        warning.contains("holds 2 messages that no consumer has taken since")
            && warning.contains("tablekit-worker run --queue archive"),
        "{warning}"
    );
}

#[tokio::test]
async fn json_log_lines_carry_the_queue_and_the_operation_id() {
    let dir = tempfile::tempdir().unwrap();
    let broker = format!("sqlite:{}", dir.path().join("q.db").display());
    let queue = AnyQueue::connect(&broker).await.unwrap();
    queue
        .declare(
            "jq",
            &tablekit_workers::WorkerConfig::new("jq").queue_options(),
        )
        .await
        .unwrap();
    // A message that is not an operation: poisoned at once, logged with its id.
    queue.send("jq", "m-1", b"not json").await.unwrap();
    let mut child = worker()
        .env("RUST_LOG", "info")
        .args([
            "--log-format",
            "json",
            "run",
            "--queue",
            "jq",
            "--broker",
            &broker,
        ])
        .args(["--store", "memory:", "--expiry-interval", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while queue.stats("jq").await.unwrap().poisoned == 0 {
        assert!(std::time::Instant::now() < deadline, "not poisoned");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let _ = child.wait();
    let poisoned = stderr
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("a JSON line"))
        .find(|line| line["fields"]["message"] == "poisoned")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(poisoned["span"]["queue"], "jq", "{poisoned}");
    assert_eq!(poisoned["span"]["operation_id"], "m-1", "{poisoned}");
}

mod migrations {
    use super::*;
    use clap::Parser;
    use tablekit_derive::Entity;
    use tablekit_patterns::index::IndexedTable;

    #[derive(Entity, Clone, Debug, PartialEq)]
    #[entity(
        table = "Crew",
        kind = "Sailor",
        version = 1,
        partition_key = "{ship}",
        row_key = "s_{id:03}",
        crate = "tablekit_core"
    )]
    pub(super) struct SailorV1 {
        ship: String,
        id: u32,
    }

    #[derive(Entity, Clone, Debug, PartialEq)]
    #[entity(
        table = "Crew",
        kind = "Sailor",
        version = 2,
        partition_key = "{ship}",
        row_key = "s_{id:03}",
        crate = "tablekit_core"
    )]
    #[index(
        name = "by_id",
        table = "CrewById",
        partition_key = "all",
        row_key = "{id:03}"
    )]
    pub(super) struct Sailor {
        ship: String,
        id: u32,
    }

    async fn run(args: &[&str], register: bool) -> (tablekit_workers::Result<()>, String) {
        let cli =
            cli::Cli::parse_from(std::iter::once("tablekit-worker").chain(args.iter().copied()));
        let mut out = Vec::new();
        let result = cli::run_with(cli, &mut out, |registry, connections| {
            if register {
                connections.migrations().register::<Sailor>();
            }
            registry
        })
        .await;
        (result, String::from_utf8(out).unwrap())
    }

    #[tokio::test]
    async fn migrate_rewrites_the_registered_types_older_entities() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let store = AnyStore::create(&format!("sqlite:{}", path.display()))
            .await
            .unwrap();
        let old = IndexedTable::<SailorV1, _>::options()
            .inline_apply()
            .build(store.clone())
            .unwrap();
        old.create().await.unwrap();
        for id in 0..12 {
            old.insert(&SailorV1 {
                ship: format!("ship{}", id % 3),
                id,
            })
            .await
            .unwrap();
        }
        let store_arg = format!("sqlite:{}", path.display());
        let args = [
            "migrate",
            "--store",
            &store_arg,
            "--table",
            "Crew",
            "--no-progress",
        ];

        // Not registered in this binary: a usage error that says how to register.
        let (refused, _) = run(&args, false).await;
        let refused = refused.expect_err("no type registered");
        assert_eq!(cli::exit_code(&refused), cli::EXIT_USAGE);
        assert!(
            refused.to_string().contains("migrations().register"),
            "{refused}"
        );

        let (result, out) = run(&args, true).await;
        result.unwrap();
        assert!(out.contains("by stored version: v1 12"), "{out}");
        assert!(
            out.contains("rewritten 12, left to a concurrent write 0"),
            "{out}"
        );
        // The new index's copies are follow-up work in the outbox, as for every write
        // of a worker process: the relay (the index worker's) publishes it.
        let handlers = tablekit_patterns::index::handlers(store.clone(), None);
        let sink: std::sync::Arc<dyn tablekit_patterns::index::OutboxSink> =
            std::sync::Arc::new(tablekit_patterns::index::InlineSink::new(handlers));
        let relay = tablekit_patterns::index::Relay::options()
            .grace(Duration::ZERO)
            .build(store.clone(), sink);
        relay.run_once().await.unwrap();
        let copies = store
            .query_all("CrewById", tablekit_core::Query::new())
            .await
            .unwrap();
        assert_eq!(copies.len(), 12, "the new version's index followed");
        let (result, out) = run(&args, true).await;
        result.unwrap();
        assert!(
            out.contains("by stored version: v2 12; rewritten 0"),
            "{out}"
        );
    }
}

/// A worker never creates a store: a mistyped `--store` path is an error naming it, and
/// nothing is created; `?mode=rwc` is refused.
#[test]
fn a_worker_given_a_store_that_does_not_exist_fails_at_once_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("app.bd");
    let broker = format!("sqlite:{}", dir.path().join("queue.db").display());
    for store in [
        format!("sqlite:{}", typo.display()),
        format!("sqlite:{}?mode=rwc", typo.display()),
    ] {
        let output = worker()
            .args(["audit", "--store", &store, "--table", "Employees"])
            .output()
            .unwrap();
        assert!(!output.status.success(), "{store}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("app.bd"), "{store}: {stderr}");
        assert!(
            stderr.contains("no store at") || stderr.contains("never creates a store"),
            "{store}: {stderr}"
        );
        let output = worker()
            .args([
                "run", "--queue", "index", "--broker", &broker, "--store", &store,
            ])
            .output()
            .unwrap();
        assert!(
            !output.status.success(),
            "{store}: the worker does not start"
        );
        assert!(!typo.exists(), "{store}: nothing created");
    }
}

/// Plain `status` lists every queue the broker's registry holds, not only the ones
/// tablekit's workers consume, and warns at once about one holding messages that no
/// tablekit worker consumes (here a sink given the mistyped name `indexes`).
#[tokio::test]
async fn status_lists_every_declared_queue_and_warns_at_once_of_one_nothing_consumes() {
    use tablekit_workers::index::QueueSink;
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store.db");
    SqliteStore::create(&store_path).await.unwrap();
    let broker = format!("sqlite:{}", dir.path().join("queue.db").display());
    let queue = AnyQueue::connect(&broker).await.unwrap();
    let sink = QueueSink::open(queue.clone(), "indexes").await.unwrap();
    let envelope = Envelope::new(&Review {
        department: "Sales".into(),
    })
    .unwrap();
    tablekit_patterns::consistency::OutboxSink::publish(&sink, &envelope)
        .await
        .unwrap();
    let text = ok(worker()
        .args([
            "status",
            "--broker",
            &broker,
            "--store",
            &format!("sqlite:{}", store_path.display()),
        ])
        .output()
        .unwrap());
    assert!(text.contains("  index "), "{text}");
    assert!(
        text.contains("  indexes "),
        "the mistyped queue is listed: {text}"
    );
    assert!(
        text.contains("warning: Queue `indexes` holds 1 messages"),
        "warned at once: {text}"
    );
    assert!(!text.contains("warning: Queue `index` "), "{text}");
}
