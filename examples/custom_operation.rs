//! An application's own operation, run by a worker process built in a few lines.
//!
//! `RecountDepartment` recounts a department's employees into its summary entity. It is
//! idempotent: the count is recomputed from the employee rows and written with
//! insert-or-replace, so a message delivered twice writes the same summary twice. The
//! worker process is this binary run as `custom_operation worker run …`: its `main` hands
//! those arguments to `tablekit::workers::cli::main_from` with the handler registered, and
//! gets the flags, `TABLEKIT_*` variables, logging, poison queue, graceful shutdown and
//! exit codes of `tablekit-worker` (an application's own worker binary would call
//! `cli::main_with(operations)` as its whole `main`).
//!
//! Run without arguments, it is the driver, on the embedded backends in a temporary
//! folder (a SQLite store file and the SQLite queue): it seeds employees and a stale
//! summary, enqueues a recount per department (one of them delivered twice) and a message
//! whose payload does not decode, hires one more employee through the consistency engine's
//! commit with a recount as its follow-up work (recorded in the hire's transaction,
//! published to the queue after the commit), starts itself as the worker process, waits until the
//! queue is empty, stops the worker with SIGTERM and checks the summaries and the poison
//! queue, exiting non-zero on any mismatch.
//!
//! `cargo run --example custom_operation`

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tablekit::patterns::consistency::{Engine, Plan, Planner};
use tablekit::prelude::*;
use tablekit::workers::cli::Connections;
use tablekit::workers::index::QueueSink;
use tablekit::workers::queue::poison_table::WithPoisonTable;
use tablekit::workers::queue::{AnyQueue, Queue};
use tablekit::workers::{Envelope, Operation, OperationError, Registry, WorkerConfig};

const QUEUE: &str = "recount";

/// An employee: a row of its department's partition.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    partition_key = "{department}",
    row_key = "empid_{id:06}"
)]
struct Employee {
    department: String,
    id: u32,
}

/// A department's head count, one entity in its partition.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "DepartmentSummaries",
    partition_key = "{department}",
    row_key = "summary"
)]
struct Summary {
    department: String,
    head_count: u64,
}

/// Recount a department's employees into its summary entity.
#[derive(Debug, Serialize, Deserialize)]
struct RecountDepartment {
    department: String,
}

impl Operation for RecountDepartment {
    const KIND: &'static str = "recount-department";
    const VERSION: u32 = 1;
    const QUEUE: &'static str = QUEUE;
}

/// The handler: recounts the employees of the department's partition (their keys only)
/// and upserts the summary, so every delivery converges.
async fn recount(store: &AnyStore, operation: RecountDepartment) -> Result<(), OperationError> {
    let employees = Table::<Employee, _>::new(store.clone());
    let head_count = employees
        .primary()
        .key(&operation.department)
        .count_scan()
        .await?;
    Table::<Summary, _>::new(store.clone())
        .upsert(&Summary {
            department: operation.department,
            head_count,
        })
        .await?;
    Ok(())
}

/// A hire: the employee's row, and its department's recount as follow-up work that the
/// engine commits with it.
struct Hire {
    employee: Employee,
}

impl Planner for Hire {
    type Role = ();

    async fn plan(&mut self) -> tablekit::patterns::Result<Option<Plan<()>>> {
        let recount = RecountDepartment {
            department: self.employee.department.clone(),
        };
        let envelope = Envelope::new(&recount)?;
        let mut plan = Plan::new();
        plan.push(WriteOp::Insert(self.employee.to_entity()?), ());
        plan.follow_up(envelope);
        Ok(Some(plan))
    }

    fn refused(
        &mut self,
        error: tablekit::core::Error,
        _: Option<&()>,
    ) -> tablekit::patterns::Result<()> {
        Err(error)
    }

    fn what(&self) -> String {
        format!("hiring employee {}", self.employee.id)
    }
}

/// What this application adds to the worker's built-in operations.
fn operations(registry: Registry, connections: &Connections) -> Registry {
    let store = connections.store.clone();
    registry.register(move |operation: RecountDepartment| {
        let store = store.clone();
        async move { recount(&store, operation).await }
    })
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.peek().is_some_and(|first| first == "worker") {
        // The worker process: `tablekit-worker` with our operation, in one call.
        return tablekit::workers::cli::main_from(args, operations);
    }
    let result = tokio::runtime::Runtime::new()
        .map_err(Into::into)
        .and_then(|runtime| runtime.block_on(drive()));
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("custom_operation: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The worker process, killed if the driver gives up before stopping it.
struct WorkerProcess(Option<Child>);

impl WorkerProcess {
    fn start(store: &str, broker: &str) -> std::io::Result<Self> {
        let child = Command::new(std::env::current_exe()?)
            .args(["worker", "run", "--queue", QUEUE])
            .args(["--store", store, "--broker", broker])
            .args(["--shutdown-timeout", "10"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()?;
        Ok(WorkerProcess(Some(child)))
    }

    /// Stops the worker with SIGTERM (it finishes what it holds) and returns its report.
    fn stop(mut self) -> tablekit::Result<String> {
        let id = self.0.as_ref().map_or(0, |child| child.id());
        // Should the signal not be sent, the drop kills the worker and waits for it.
        Command::new("kill")
            .args(["-TERM", &id.to_string()])
            .status()?;
        let child = self.0.take().expect("a worker is stopped once");
        let output = child.wait_with_output()?;
        if !output.status.success() {
            return Err(
                std::io::Error::other(format!("the worker exited with {}", output.status)).into(),
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

async fn send(queue: &impl Queue, envelope: &Envelope) -> tablekit::Result<()> {
    let id = envelope.id.to_string();
    queue.send(QUEUE, &id, &envelope.to_bytes()?).await
}

/// Prints a check and counts it if it failed.
fn expect(failures: &mut usize, what: &str, ok: bool) {
    println!("{} {what}", if ok { "ok  " } else { "FAIL" });
    if !ok {
        *failures += 1;
    }
}

/// Seeds, enqueues, runs the worker process, and checks; `false` on any mismatch.
async fn drive() -> tablekit::Result<bool> {
    let dir = tempfile::tempdir()?;
    let store_url = format!("sqlite:{}", dir.path().join("store.db").display());
    let broker = format!("sqlite:{}", dir.path().join("queue.db").display());
    let store = AnyStore::create(&store_url).await?;
    // The worker keeps what it gives up on in the store's poison table: read through it.
    let queue = WithPoisonTable::for_store(AnyQueue::connect(&broker).await?, &store);
    println!("store {store_url}\nbroker {broker}");

    // Three employees in Sales, two in Ops; Sales's summary is stale.
    let employees = Table::<Employee, _>::new(store.clone());
    let summaries = Table::<Summary, _>::new(store.clone());
    employees.create().await?;
    summaries.create().await?;
    for (department, id) in [
        ("Sales", 1),
        ("Sales", 2),
        ("Sales", 3),
        ("Ops", 4),
        ("Ops", 5),
    ] {
        employees
            .upsert(&Employee {
                department: department.into(),
                id,
            })
            .await?;
    }
    summaries
        .upsert(&Summary {
            department: "Sales".into(),
            head_count: 10,
        })
        .await?;

    // A recount per department, Sales's delivered twice (as an at-least-once queue may),
    // and one whose payload does not decode.
    queue
        .declare(QUEUE, &WorkerConfig::new(QUEUE).queue_options())
        .await?;
    let sales = Envelope::new(&RecountDepartment {
        department: "Sales".into(),
    })?;
    send(&queue, &sales).await?;
    send(&queue, &sales).await?;
    send(
        &queue,
        &Envelope::new(&RecountDepartment {
            department: "Ops".into(),
        })?,
    )
    .await?;
    let mut malformed = Envelope::new(&RecountDepartment {
        department: "R&D".into(),
    })?;
    malformed.payload = serde_json::json!({ "departement": "R&D" });
    send(&queue, &malformed).await?;
    println!("enqueued 4 messages on `{QUEUE}`");

    // A hire in Ops, committed with its recount as follow-up work: the engine writes the
    // row and the recount's outbox entry in one transaction, then publishes the recount
    // (a crash in between leaves it to the relay of `tablekit-worker run --relay`).
    let sink = QueueSink::open(AnyQueue::connect(&broker).await?, QUEUE).await?;
    let engine = Engine::options().sink(Arc::new(sink)).build(store.clone());
    engine.open().await?;
    let mut hire = Hire {
        employee: Employee {
            department: "Ops".into(),
            id: 6,
        },
    };
    let partition = hire.employee.partition_key()?;
    let committed = engine
        .commit(Employee::schema().table, &partition, &mut hire)
        .await?;
    let published = committed.is_some_and(|c| c.published);
    println!("hired employee 6 in Ops; its recount published: {published}");

    let worker = WorkerProcess::start(&store_url, &broker)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = queue.stats(QUEUE).await?;
        if stats.waiting == 0 && stats.leased == 0 && stats.poisoned >= 1 {
            break;
        }
        if Instant::now() > deadline {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("timed out waiting for the worker: {stats:?}"),
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = worker.stop()?;
    println!("worker: {report}");

    let head_count = async |department: &str| {
        let summary = summaries.primary().key(department).get().await?;
        Ok::<_, tablekit::Error>(summary.map(|s| s.value.head_count))
    };
    let (sales, ops) = (head_count("Sales").await?, head_count("Ops").await?);
    let poison = queue.poison_list(QUEUE, 10).await?;
    for message in &poison {
        println!("poisoned {}: {}", message.id, message.reason);
    }

    let mut failures = 0;
    expect(
        &mut failures,
        &format!("Sales head count {sales:?} is 3"),
        sales == Some(3),
    );
    expect(
        &mut failures,
        &format!("Ops head count {ops:?} is 3, the hire counted"),
        ops == Some(3),
    );
    expect(
        &mut failures,
        "the malformed message, and only it, is in the poison queue with its reason",
        poison.len() == 1
            && poison[0].id == malformed.id.to_string()
            && poison[0]
                .reason
                .contains("invalid `recount-department` payload"),
    );
    expect(
        &mut failures,
        "the hire's recount was published right after its commit",
        published,
    );
    expect(
        &mut failures,
        "the worker processed 4 and poisoned 1",
        report.contains("processed 4, retried 0, poisoned 1"),
    );
    println!("result: {}", if failures == 0 { "OK" } else { "FAILED" });
    Ok(failures == 0)
}
