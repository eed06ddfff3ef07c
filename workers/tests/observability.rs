//! What an operator sees (spans are in `tests/spans.rs`): after a small run of the worker
//! binary with metrics on, the series of the README's operations section on `/metrics`
//! with plausible values (a copy-lag observation per copy written, no poison); the
//! `status` command's JSON (queues, relay backlog, last audit).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tablekit_core::AnyStore;
use tablekit_derive::Entity;
use tablekit_patterns::index::IndexedTable;
use tablekit_workers::cli::Status;
use tablekit_workers::index::QueueSink;
use tablekit_workers::queue::sqlite::SqliteQueue;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    kind = "Employee",
    partition_key = "{department}",
    row_key = "empid_{id:06}",
    crate = "tablekit_core"
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

fn employee(id: u32) -> Employee {
    Employee {
        department: "Sales".into(),
        id,
        email: format!("e{id}@contoso.com"),
    }
}

fn worker_binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tablekit-worker"));
    command.env("RUST_LOG", "warn");
    command
}

/// The value of the series `name{labels}` (labels in the order they were recorded),
/// from a `/metrics` page.
fn series(page: &str, name: &str, labels: &str) -> Option<f64> {
    let wanted = if labels.is_empty() {
        name.to_owned()
    } else {
        format!("{name}{{{labels}}}")
    };
    page.lines()
        .find_map(|line| line.strip_prefix(&wanted)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_show_queues_lag_store_calls_and_hot_partitions_and_status_sums_up() {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite:{}", dir.path().join("s.db").display());
    let broker = format!("sqlite:{}", dir.path().join("q.db").display());
    let store = AnyStore::create(&store_url).await.unwrap();
    let queue = SqliteQueue::open(dir.path().join("q.db")).await.unwrap();
    let sink = QueueSink::open(queue, "index").await.unwrap();
    let employees = IndexedTable::<Employee, _>::options()
        .sink(Arc::new(sink))
        .build(store.clone())
        .unwrap();
    employees.create().await.unwrap();
    let copies = 5;
    for id in 1..=copies {
        employees.insert(&employee(id)).await.unwrap();
    }

    let port = support::free_port();
    let mut running = worker_binary()
        .args([
            "run",
            "--queue",
            "index",
            "--broker",
            &broker,
            "--store",
            &store_url,
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
            "--stats-interval",
            "1",
            "--relay-interval",
            "1",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let page = loop {
        let page = support::http_get(port, "/metrics").unwrap_or_default();
        let lag = series(
            &page,
            "tablekit_copy_lag_seconds_count",
            "index=\"by_email\",table=\"Employees\"",
        );
        // The copies' partition shows at the first refresh after their writes; other
        // partitions (the activity sampler's) may show before it.
        let hot = series(
            &page,
            "tablekit_hot_partition_writes_per_second",
            "table=\"EmployeesByEmail\",partition_key=\"email_Sales\"",
        )
        .is_some();
        let queue = series(&page, "tablekit_queue_poison_messages", "queue=\"index\"");
        // The queue gauge is sampled every second (`--stats-interval 1`): it reads zero a
        // sample after the last copy.
        let waiting = series(&page, "tablekit_queue_messages", "queue=\"index\"");
        if lag == Some(f64::from(copies)) && hot && queue.is_some() && waiting == Some(0.0) {
            break page;
        }
        assert!(
            Instant::now() < deadline,
            "the series did not appear:\n{page}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // The running worker's relay shows in `status` under its id, with its shares.
    let output = worker_binary()
        .args([
            "status", "--broker", &broker, "--store", &store_url, "--json",
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let status: Status = serde_json::from_slice(&output.stdout).unwrap();
    let relay = format!("-{}", running.id());
    assert!(
        status
            .relays
            .iter()
            .any(|r| r.live && r.id.ends_with(&relay)),
        "{:?}",
        status.relays
    );
    let _ = Command::new("kill")
        .args(["-TERM", &running.id().to_string()])
        .status();
    assert!(running.wait().unwrap().success());
    // A relay that stops leaves: its heartbeat is gone.
    let output = worker_binary()
        .args([
            "status", "--broker", &broker, "--store", &store_url, "--json",
        ])
        .output()
        .unwrap();
    let status: Status = serde_json::from_slice(&output.stdout).unwrap();
    assert!(status.relays.is_empty(), "{:?}", status.relays);

    assert_eq!(
        series(&page, "tablekit_queue_poison_messages", "queue=\"index\""),
        Some(0.0)
    );
    assert_eq!(
        series(&page, "tablekit_queue_messages", "queue=\"index\""),
        Some(0.0),
        "every message handled"
    );
    let lag_sum = series(
        &page,
        "tablekit_copy_lag_seconds_sum",
        "index=\"by_email\",table=\"Employees\"",
    )
    .expect("the lag's sum");
    assert!(
        (0.0..600.0).contains(&lag_sum),
        "five copies within minutes of their writes: {lag_sum}"
    );
    assert!(
        page.contains(
            "tablekit_copy_lag_seconds_bucket{index=\"by_email\",table=\"Employees\",le=\"0.001\"}"
        ),
        "the lag is a histogram with buckets"
    );
    // The copies' writes: single writes, and transactions where copies of one partition
    // were in flight together (the worker coalesces them): at least the first alone and
    // the rest.
    let writes = series(
        &page,
        "tablekit_store_operations_total",
        "backend=\"sqlite\",operation=\"execute\",outcome=\"ok\"",
    )
    .expect("the store's writes");
    let batches = series(
        &page,
        "tablekit_store_operations_total",
        "backend=\"sqlite\",operation=\"submit_batch\",outcome=\"ok\"",
    )
    .unwrap_or(0.0);
    assert!(
        writes >= 1.0 && writes + batches >= 2.0,
        "{writes} + {batches}"
    );
    assert!(
        page.contains(
            "tablekit_store_operation_seconds_bucket{backend=\"sqlite\",operation=\"get\""
        ),
        "store latency histograms"
    );
    assert!(
        page.contains(
            "tablekit_hot_partition_writes_per_second{table=\"EmployeesByEmail\",partition_key=\"email_Sales\"}"
        ),
        "the copies' partition is the hot one:\n{page}"
    );
    assert!(series(&page, "tablekit_relay_passes_total", "").is_some_and(|n| n >= 1.0));
    assert_eq!(
        series(&page, "tablekit_relay_published_total", ""),
        Some(0.0)
    );
    assert_eq!(
        series(
            &page,
            "tablekit_worker_processed_total",
            "queue=\"index\",kind=\"index\""
        ),
        Some(f64::from(copies))
    );

    // Every series the dashboard charts is one the worker serves (counters of events
    // this run had none of appear with their first event).
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/grafana/tablekit.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut charted = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(at) = rest.find("tablekit_") {
                let name: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[at + name.len()..];
                charted.push(name);
            }
        }
    }
    assert!(charted.len() >= 10, "{charted:?}");
    for name in charted {
        let on_event = [
            "tablekit_worker_retried_total",
            "tablekit_worker_poisoned_total",
        ];
        assert!(
            on_event.contains(&name.as_str()) || page.contains(&format!("\n{name}")),
            "the dashboard charts `{name}`, which the worker does not serve"
        );
    }

    // The status command, after an audit.
    let audit = worker_binary()
        .args([
            "audit",
            "--store",
            &store_url,
            "--table",
            "Employees",
            "--no-progress",
        ])
        .output()
        .unwrap();
    assert!(audit.status.success(), "{audit:?}");
    let output = worker_binary()
        .args([
            "status", "--broker", &broker, "--store", &store_url, "--json",
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let status: Status = serde_json::from_slice(&output.stdout).unwrap();
    let index = status
        .queues
        .iter()
        .find(|q| q.queue == "index")
        .expect("the index queue");
    assert_eq!(
        (index.waiting, index.leased, index.poisoned),
        (Some(0), Some(0), Some(0))
    );
    assert_eq!((status.relay.entries, status.relay.partitions), (0, 0));
    let audit = status
        .audits
        .iter()
        .find(|a| a.table == "Employees")
        .expect("the audit's result");
    assert!(audit.clean);
    assert_eq!(audit.missing + audit.stale + audit.orphaned, 0);
    assert!(audit.scanned >= u64::from(copies));
    let text = worker_binary()
        .args(["status", "--broker", &broker, "--store", &store_url])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("relay backlog: 0 entries"), "{text}");
    assert!(
        text.contains("Employees") && text.contains("clean"),
        "{text}"
    );
}
