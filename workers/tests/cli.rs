//! The `tablekit-worker` binary end to end on the embedded backends: enqueue, stats, run
//! with a metrics endpoint, poison list and replay, environment variables, exit codes.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use tablekit_core::{Entity, SqliteStore, TableStore};
use tablekit_workers::queue::Queue;
use tablekit_workers::queue::sqlite::SqliteQueue;

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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_enqueues_runs_reports_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("store.db");
    let store = SqliteStore::open(&store_path).await.unwrap();
    store.create_table("Current").await.unwrap();
    store
        .insert(
            "Current",
            Entity::new("Sales", "empid_000001").with("Name", "Ann"),
        )
        .await
        .unwrap();
    let broker = format!("sqlite:{}", dir.path().join("queue.db").display());
    let store_url = format!("sqlite:{}", store_path.display());

    let id = ok(worker()
        .args([
            "enqueue", "archive", "--broker", &broker, "--queue", "archive",
        ])
        .args(["--source", "Current", "--target", "Archive"])
        .args(["--partition-key", "Sales", "--row-key", "empid_000001"])
        .output()
        .unwrap());
    assert_eq!(id.trim().len(), 36, "prints the operation id: {id}");
    // Every flag is also an environment variable.
    let stats = ok(worker()
        .args(["stats"])
        .env("TABLEKIT_BROKER", &broker)
        .env("TABLEKIT_QUEUE", "archive")
        .output()
        .unwrap());
    assert!(stats.starts_with("waiting 1\t"), "{stats}");

    // A message no worker can read.
    let queue = SqliteQueue::open(dir.path().join("queue.db"))
        .await
        .unwrap();
    queue
        .send("archive", "garbage-1", b"\x00not json")
        .await
        .unwrap();

    let port = free_port();
    let mut running = worker()
        .args([
            "run", "--queue", "archive", "--broker", &broker, "--store", &store_url,
        ])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let stats = queue.stats("archive").await.unwrap();
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

    let listed = ok(worker()
        .args(["poison", "list", "--broker", &broker, "--queue", "archive"])
        .output()
        .unwrap());
    assert!(
        listed.contains("garbage-1") && listed.contains("malformed operation envelope"),
        "{listed}"
    );
    assert!(listed.ends_with("1 poison messages\n"), "{listed}");
    let replayed = ok(worker()
        .args([
            "poison",
            "replay",
            "--broker",
            &broker,
            "--queue",
            "archive",
            "--id",
            "garbage-1",
        ])
        .output()
        .unwrap());
    assert_eq!(replayed, "replayed 1 messages\n");
    assert_eq!(queue.stats("archive").await.unwrap().waiting, 1);
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
