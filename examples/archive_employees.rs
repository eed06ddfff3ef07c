//! The archive-employees example, end to end: the eventually consistent transaction
//! pattern of the design guide. Employees and departments are declared with
//! `#[derive(Entity)]` (an email index in the department's partition, an email index in
//! another table, last-name id lists); the Current table is seeded; a client enqueues an
//! archive request per leaver; separate worker processes (the `tablekit-worker` code,
//! started from this binary) move them into the Archive table and keep the indexes; the
//! run ends with a report: counts, the audit of every index, any operation poisoned,
//! time and rate.
//!
//! `cargo run --example archive_employees` — the embedded default: a SQLite file, the
//! SQLite queue and local blobs in `./archive-data`, no set-up. Each employee's badge photo
//! lives in the blob store (a `blob` field), moved with the employee when archived. Flags:
//! `--departments 5 --employees 200 --leavers 10 (percent) --workers 2`,
//! `--broker amqp://guest:guest@localhost:5672/%2f` for RabbitMQ,
//! `--store azure:UseDevelopmentStorage=true` for Azurite's tables (feature `azure`; the
//! blobs then go to the same account),
//! `--broker azure:UseDevelopmentStorage=true` for Azure Queue Storage (Azure Storage
//! alone: tables, queues and blobs on one account, no broker to run),
//! `--blobs azure:…;Container=NAME` or `--blobs file:DIR` for another blob store,
//! `--chaos` to kill and restart worker processes at random during the run,
//! `--early-kills 8` to kill that many worker processes (the index worker's first start
//! among them) within the first second of their life, as they connect and declare. Those
//! runs raise the workers' `--max-deliveries` to 25: a killed worker's messages each count
//! a delivery.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use rand::Rng;
use tablekit::patterns::index::AuditOptions;
use tablekit::prelude::*;
use tablekit::workers::archive::ArchiveOperation;
use tablekit::workers::index::QueueSink;
use tablekit::workers::queue::poison_table::WithPoisonTable;
use tablekit::workers::queue::{AnyQueue, Queue};
use tablekit::workers::{Envelope, WorkerConfig};

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Current",
    kind = "Employee",
    version = 1,
    partition_key = "{department}",
    row_key = "empid_{id:06}"
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
#[index_entity(name = "last_name", key = "{last_name}")]
struct Employee {
    department: String,
    id: u32,
    first_name: String,
    last_name: String,
    age: i32,
    email: String,
    /// The badge photo, kept in the blob store.
    #[entity(blob)]
    photo: Vec<u8>,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Current",
    kind = "Department",
    partition_key = "{department}",
    row_key = "department"
)]
struct Department {
    department: String,
    manager_id: u32,
    head_count: i32,
}

/// The archive-employees example (see the file's docs).
#[derive(Debug, Parser)]
struct Args {
    #[command(subcommand)]
    worker: Option<WorkerMode>,
    /// Departments to seed.
    #[arg(long, default_value_t = 5)]
    departments: u32,
    /// Employees per department.
    #[arg(long, default_value_t = 200)]
    employees: u32,
    /// Percent of the employees who leave (and are archived).
    #[arg(long, default_value_t = 10)]
    leavers: u32,
    /// Archive worker processes.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// The folder of the embedded files (SQLite store and queue, blobs).
    #[arg(long, default_value = "archive-data")]
    data: PathBuf,
    /// The queue broker: `sqlite:PATH` (default: in the data folder), `amqp://…` or
    /// `azure:CONNECTION-STRING` (Azure Queue Storage).
    #[arg(long)]
    broker: Option<String>,
    /// The blob store: `file:DIR` or `azure:CONNECTION-STRING;Container=NAME` (default:
    /// the Azure store's account, else the data folder).
    #[arg(long)]
    blobs: Option<String>,
    /// The table store: `sqlite:PATH` (default: in the data folder) or `azure:…`.
    #[arg(long)]
    store: Option<String>,
    /// Kill and restart worker processes at random during the run.
    #[arg(long)]
    chaos: bool,
    /// Kill this many worker processes within the first second of their life (the index
    /// worker among them), restarting each; the run ends after the last.
    #[arg(long, default_value_t = 0)]
    early_kills: usize,
    /// Seconds to wait for the workers before giving up.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
}

#[derive(Debug, Subcommand)]
enum WorkerMode {
    /// Run as a worker process (what the example starts; the `tablekit-worker` code).
    Worker {
        /// The arguments of `tablekit-worker`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// The worker processes and how to start them again.
struct Workers {
    exe: PathBuf,
    /// The `tablekit-worker` binary beside this example, when it serves this run.
    binary: Option<PathBuf>,
    store: String,
    broker: String,
    blobs: String,
    /// The workers' log (appended to by every worker process).
    log: std::fs::File,
    children: Vec<Worker>,
    killed: usize,
    /// Early kills still to make (`--early-kills`).
    early_kills_left: usize,
    /// Early kills made.
    killed_early: usize,
    /// The workers' `--max-deliveries`, when the run kills them.
    max_deliveries: Option<u32>,
}

/// A worker process: its queue, and when it is to be killed in its first second.
struct Worker {
    queue: String,
    child: Child,
    kill_at: Option<Instant>,
}

impl Workers {
    fn spawn(&self, queue: &str) -> std::io::Result<Child> {
        // The `tablekit-worker` binary when it was built beside this example (`cargo
        // build`), else this binary in worker mode: the same code.
        let mut command = match &self.binary {
            Some(path) => Command::new(path),
            None => {
                let mut command = Command::new(&self.exe);
                command.arg("worker");
                command
            }
        };
        command
            .args([
                "run",
                "--queue",
                queue,
                "--broker",
                &self.broker,
                "--store",
                &self.store,
                "--blobs",
                &self.blobs,
            ])
            // The index worker also relays what killed writers left in their outboxes.
            .args(if queue.starts_with("index-") {
                &["--relay"][..]
            } else {
                &[]
            })
            .args(["--relay-interval", "1", "--shutdown-timeout", "10"])
            // A killed worker's leased messages come back after 5 s (the SQLite and Azure
            // queues; RabbitMQ returns them when the connection drops).
            .args(["--lease", "5", "--relay-grace-ms", "500"]);
        if let Some(limit) = self.max_deliveries {
            command.args(["--max-deliveries", &limit.to_string()]);
        }
        command
            // Warnings and errors of every worker go to `workers.log` in the data folder.
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(self.log.try_clone()?)
            .spawn()
    }

    fn start(&mut self, queue: &str) -> std::io::Result<()> {
        // While early kills are left, every worker started (the index worker first of all)
        // dies at a random moment of its first second: connecting, declaring, relaying.
        let pending = self.children.iter().filter(|w| w.kill_at.is_some()).count();
        let kill_at = (self.early_kills_left > pending)
            .then(|| Instant::now() + Duration::from_millis(rand::rng().random_range(0..1000)));
        let child = self.spawn(queue)?;
        self.children.push(Worker {
            queue: queue.to_owned(),
            child,
            kill_at,
        });
        Ok(())
    }

    /// Kills a random worker with SIGKILL and starts it again.
    fn chaos(&mut self) -> std::io::Result<()> {
        if self.children.is_empty() {
            return Ok(());
        }
        let at = rand::rng().random_range(0..self.children.len());
        let mut worker = self.children.swap_remove(at);
        worker.child.kill()?;
        worker.child.wait()?;
        self.killed += 1;
        if worker.kill_at.is_some() {
            // Its early kill is spent on this one.
            self.early_kills_left -= 1;
            self.killed_early += 1;
        }
        self.start(&worker.queue)
    }

    /// Kills (SIGKILL) the workers whose moment in their first second came, and starts
    /// each again; returns when the next such moment is, if any.
    fn early_kills(&mut self) -> std::io::Result<Option<Instant>> {
        let now = Instant::now();
        while let Some(at) = self
            .children
            .iter()
            .position(|w| w.kill_at.is_some_and(|t| t <= now))
        {
            let mut worker = self.children.swap_remove(at);
            worker.child.kill()?;
            worker.child.wait()?;
            self.killed += 1;
            self.killed_early += 1;
            self.early_kills_left -= 1;
            self.start(&worker.queue)?;
        }
        Ok(self.children.iter().filter_map(|w| w.kill_at).min())
    }

    /// The pause before the next look at the workers: 100 ms, shorter when an early kill
    /// is due sooner.
    fn pause(&mut self) -> std::io::Result<Duration> {
        let pause = Duration::from_millis(100);
        Ok(match self.early_kills()? {
            Some(at) => pause.min(at.saturating_duration_since(Instant::now())),
            None => pause,
        })
    }

    /// Starts again any worker that exited by itself (it reports why on stderr); a worker
    /// that refused its settings (exit code 2) would refuse them again: that ends the run.
    fn revive(&mut self) -> std::io::Result<()> {
        let mut exited = Vec::new();
        for (i, worker) in self.children.iter_mut().enumerate() {
            if let Some(status) = worker.child.try_wait()? {
                if status.code() == Some(i32::from(tablekit::workers::cli::EXIT_USAGE)) {
                    return Err(std::io::Error::other(format!(
                        "a worker of `{}` refused its settings ({status}); its reason is in the workers' log",
                        worker.queue
                    )));
                }
                eprintln!(
                    "a worker of `{}` exited ({status}); starting it again",
                    worker.queue
                );
                exited.push(i);
            }
        }
        // Highest index first: swap_remove moves only the last element.
        for i in exited.into_iter().rev() {
            let worker = self.children.swap_remove(i);
            self.start(&worker.queue)?;
        }
        Ok(())
    }

    fn stop(&mut self) {
        for worker in &mut self.children {
            let _ = Command::new("kill")
                .args(["-TERM", &worker.child.id().to_string()])
                .status();
        }
        for worker in &mut self.children {
            let _ = worker.child.wait();
        }
    }
}

fn main() -> tablekit::Result<()> {
    let args = Args::parse();
    let size = args.departments.checked_mul(args.employees);
    if args.worker.is_none() && size.is_none_or(|n| n > 10_000_000) {
        return Err(tablekit::Error::Config(
            "--departments × --employees must be at most 10,000,000".into(),
        ));
    }
    let runtime = tokio::runtime::Runtime::new()?;
    if let Some(WorkerMode::Worker { args }) = &args.worker {
        let cli = tablekit::workers::cli::Cli::parse_from(
            std::iter::once("tablekit-worker".to_owned()).chain(args.iter().cloned()),
        );
        let mut out = std::io::sink();
        if let Err(e) = runtime.block_on(tablekit::workers::cli::run(cli, &mut out)) {
            eprintln!("worker: {e}");
            std::process::exit(i32::from(tablekit::workers::cli::exit_code(&e)));
        }
        return Ok(());
    }
    runtime.block_on(run(args))
}

/// Says what the run leaves in the outboxes and why: everything due was drained before
/// the report; what is left is delayed work (each deleted employee's index tombstones,
/// buried after a grace period), which the next relaying index worker publishes.
async fn left_for_later(
    store: &AnyStore,
    broker: &str,
    store_url: &str,
    blobs_url: &str,
) -> tablekit::Result<()> {
    let backlog = tablekit::patterns::consistency::backlog(store).await?;
    if backlog.entries == 0 && backlog.delayed == 0 {
        println!("left for later: nothing (every outbox entry is published)");
        return Ok(());
    }
    println!(
        "left for later: {} tombstone burials, delayed work{} — each deleted employee's index tombstones are buried {} min after the delete",
        backlog.delayed,
        backlog
            .delayed_next
            .map(|at| format!(" due from {}", at.format("%H:%M:%S UTC")))
            .unwrap_or_default(),
        tablekit::patterns::consistency::DEFAULT_TOMBSTONE_GRACE.as_secs() / 60,
    );
    if backlog.entries > 0 {
        println!(
            "  and {} entries due now: burials whose grace period passed while the run ended",
            backlog.entries
        );
    }
    println!(
        "  this run's workers have stopped; any index worker that relays publishes them once due (to its own queue), e.g.:\n  cargo run --example archive_employees -- worker run --queue index --relay --broker {broker} --store {store_url} --blobs {blobs_url}"
    );
    println!(
        "  the console (the README's next command) shows them under \"Relay backlog\" with their due time"
    );
    Ok(())
}

/// Sends a write again while it is refused as retryable (contention, a busy store),
/// backing off as tablekit's own loops do. The writes here can be sent again: upserts,
/// creating the blob container, and operations whose handler is idempotent. This run's
/// relay takes an outbox entry after 500 ms (the workers' `--relay-grace-ms 500`): on a
/// busy machine a write that stalls longer is undone and refused with nothing written,
/// and lands when sent again.
async fn retried<T, Fut>(mut write: impl FnMut() -> Fut) -> tablekit::Result<T>
where
    Fut: std::future::Future<Output = tablekit::Result<T>>,
{
    let policy = tablekit::core::retry::RetryPolicy::azure().attempts(6);
    let mut attempt = 1;
    loop {
        match write().await {
            Err(e) if e.is_retryable() && attempt < policy.max_attempts => {
                eprintln!("{e}; sending it again");
                attempt += 1;
                tokio::time::sleep(policy.backoff(attempt)).await;
            }
            other => return other,
        }
    }
}

/// The workers' last log lines (their warnings and errors), to see why a run went wrong.
fn print_workers_log(data: &std::path::Path) {
    let path = data.join("workers.log");
    let log = std::fs::read_to_string(&path).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(40).collect();
    eprintln!("the workers' last log lines ({}):", path.display());
    for line in tail.into_iter().rev() {
        eprintln!("  {line}");
    }
}

/// How many employees `table` (`Current` or `Archive`) holds: a typed table reads its own
/// kind only (not the index copies, the departments or tablekit's entities), keys only.
async fn count_employees(store: &AnyStore, table: &str) -> tablekit::Result<usize> {
    let employees = Table::<Employee, _>::options()
        .name(table)
        .build(store.clone());
    match employees.count_scan(Query::new()).await {
        Ok(n) => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
        Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// The `tablekit-worker` binary built beside this example (`cargo build`), if it serves
/// every connection string of the run: its `--version` lists the backends it was built
/// with. Otherwise the workers are this binary in worker mode (the same code, built with
/// this example's features), and the reason is said.
fn worker_binary(exe: &std::path::Path, connections: &[&str]) -> Option<PathBuf> {
    let path = exe
        .parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("tablekit-worker"))
        .filter(|path| path.exists())?;
    let version = Command::new(&path).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&version.stdout);
    let features: Vec<&str> = text
        .lines()
        .find_map(|line| line.strip_prefix("features:"))
        .map(|list| list.split_whitespace().collect())
        .unwrap_or_default();
    let needs = |connection: &str| {
        [
            ("azure:", "azure"),
            ("amqp://", "rabbitmq"),
            ("amqps://", "amqps"),
            ("sqlite:", "sqlite"),
        ]
        .into_iter()
        .find(|(scheme, _)| connection.starts_with(scheme))
        .map(|(_, feature)| feature)
    };
    let mut missing: Vec<&str> = connections
        .iter()
        .filter_map(|c| needs(c))
        .filter(|feature| !features.contains(feature))
        .collect();
    missing.dedup();
    if missing.is_empty() {
        Some(path)
    } else {
        println!(
            "{} was built without the `{}` feature this run needs; the workers are this example in worker mode",
            path.display(),
            missing.join("`, `")
        );
        None
    }
}

async fn run(args: Args) -> tablekit::Result<()> {
    std::fs::create_dir_all(&args.data)?;
    let data = std::fs::canonicalize(&args.data)?;
    let store_url = args
        .store
        .clone()
        .unwrap_or_else(|| format!("sqlite:{}", data.join("store.db").display()));
    let broker = args
        .broker
        .clone()
        .unwrap_or_else(|| format!("sqlite:{}", data.join("queue.db").display()));
    let blobs_url = match &args.blobs {
        Some(blobs) => blobs.clone(),
        // The store's account holds the blobs too.
        None => match store_url.strip_prefix("azure:") {
            Some(account) => format!(
                "azure:{};Container=tablekit-archive-example",
                account
                    .split(';')
                    .filter(|part| !part.trim().to_ascii_lowercase().starts_with("tableprefix="))
                    .collect::<Vec<_>>()
                    .join(";")
            ),
            None => format!("file:{}", data.join("blobs").display()),
        },
    };
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    // On Azure every run has its own tables (a `TablePrefix`), as it has its own queues:
    // a second run on one account does not count the first run's employees.
    let (store_url, run_tables) = match store_url.strip_prefix("azure:") {
        Some(account)
            if !account
                .split(';')
                .any(|part| part.trim().to_ascii_lowercase().starts_with("tableprefix=")) =>
        {
            let prefix = format!("ae{run_id}");
            (
                format!("{};TablePrefix={prefix}", store_url.trim_end_matches(';')),
                Some(prefix),
            )
        }
        _ => (store_url, None),
    };
    let (archive_queue, index_queue) = (format!("archive-{run_id}"), format!("index-{run_id}"));
    let store = AnyStore::create(&store_url).await?;
    #[cfg(feature = "azure")]
    if let Some(account) = blobs_url.strip_prefix("azure:") {
        let container = account
            .split(';')
            .find_map(|part| part.trim().strip_prefix("Container="))
            .ok_or_else(|| {
                tablekit::Error::Config("an azure: blob store names its Container=".into())
            })?;
        retried(|| tablekit::core::azure::create_blob_container(account, container)).await?;
    }
    let blobs = tablekit::core::blob::BlobStore::connect(&blobs_url)?;
    let queue = AnyQueue::connect(&broker).await?;
    queue
        .declare(
            &archive_queue,
            &WorkerConfig::new(&archive_queue).queue_options(),
        )
        .await?;
    let sink = QueueSink::open(AnyQueue::connect(&broker).await?, &index_queue).await?;
    let employees = IndexedTable::<Employee, _>::options()
        .sink(Arc::new(sink))
        .blobs(blobs.clone())
        .open(store.clone())
        .await?;
    let departments = Table::<Department, _>::new(store.clone());
    println!("store {store_url}\nbroker {broker}\nblobs {blobs_url}");

    // The workers: separate processes sharing the store and the queue.
    let exe = std::env::current_exe()?;
    let binary = worker_binary(&exe, &[&store_url, &broker, &blobs_url]);
    let mut workers = Workers {
        exe,
        binary,
        store: store_url.clone(),
        broker: broker.clone(),
        blobs: blobs_url.clone(),
        log: std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data.join("workers.log"))?,
        children: Vec::new(),
        killed: 0,
        early_kills_left: args.early_kills,
        killed_early: 0,
        // A worker killed holding a message counts a delivery of it (up to `--concurrency`
        // messages held at once): under `--chaos` on a busy machine one message can be
        // held by five workers in a row that are all killed, which the default limit
        // takes for a message that kills its consumers and poisons. The kills here are
        // the run's own, so the limit is set well above what they reach.
        max_deliveries: (args.chaos || args.early_kills > 0).then_some(25),
    };
    workers.start(&index_queue)?;
    for _ in 0..args.workers.max(1) {
        workers.start(&archive_queue)?;
    }
    let started = Instant::now();
    let result = drive(
        &args,
        &store,
        &queue,
        &employees,
        &departments,
        &mut workers,
        &archive_queue,
        &index_queue,
    )
    .await;
    workers.stop();
    // What the workers gave up on, read before the queues go: a clean run poisons nothing.
    // The workers keep their poison messages in the store's poison table.
    let kept = WithPoisonTable::for_store(queue.clone(), &store);
    let mut poisoned = Vec::new();
    for name in [&archive_queue, &index_queue] {
        let count = kept.stats(name).await?.poisoned;
        if count > 0 {
            let messages = kept.poison_list(name, 10).await?;
            poisoned.push(format!("{count} from `{name}`"));
            poisoned.extend(messages.iter().map(|m| {
                format!(
                    "  {} (delivered {} times): {}",
                    m.id, m.delivery_count, m.reason
                )
            }));
        }
    }
    // Each run's queues are its own: the broker keeps none of them.
    for name in [&archive_queue, &index_queue] {
        match &queue {
            AnyQueue::Rabbit(rabbit) => {
                let options = WorkerConfig::new(name.as_str()).queue_options();
                let _ = rabbit.delete_queue(name, &options).await;
            }
            #[cfg(feature = "azure")]
            AnyQueue::Azure(azure) => {
                let _ = azure.delete_queue(name).await;
            }
            _ => {}
        }
    }
    let (leavers, total) = match result {
        Ok(counts) => counts,
        Err(e) => {
            print_workers_log(&data);
            return Err(e);
        }
    };
    if args.chaos || args.early_kills > 0 {
        println!(
            "chaos: {} worker processes killed and restarted, {} of them in their first second",
            workers.killed, workers.killed_early
        );
    }
    let elapsed = started.elapsed().as_secs_f64();

    // The report.
    let current = count_employees(&store, "Current").await?;
    let archived = count_employees(&store, "Archive").await?;
    let audit = employees.audit(&AuditOptions::default()).await?;
    println!(
        "current employees: {current} (expected {})",
        total - leavers
    );
    println!("archived employees: {archived} (expected {leavers})");
    println!(
        "audit of every index: {} (scanned {}, missing {}, stale {}, orphaned {})",
        if audit.is_clean() { "clean" } else { "DRIFT" },
        audit.scanned,
        audit.missing,
        audit.stale,
        audit.orphaned
    );
    println!(
        "elapsed {elapsed:.1} s, {:.0} operations/s ({} writes and archive moves)",
        (total + leavers) as f64 / elapsed,
        total + leavers
    );
    let photos = archived_photos(&store, &blobs).await?;
    println!("archived photos read back from the blob store: {photos} (expected {leavers})");
    if poisoned.is_empty() {
        println!("poisoned operations: none");
    } else {
        println!("poisoned operations: {}", poisoned.join("\n"));
    }
    let ok = current == total - leavers
        && archived == leavers
        && photos == leavers
        && audit.is_clean()
        && poisoned.is_empty();
    println!("report: {}", if ok { "OK" } else { "FAILED" });
    if !ok {
        print_workers_log(&data);
    }
    if run_tables.is_none() {
        left_for_later(&store, &broker, &store_url, &blobs_url).await?;
    }
    if let Some(prefix) = &run_tables {
        if ok {
            // The run's own tables go with it, as its queues do.
            for table in store.list_tables("").await? {
                store.delete_table(&table).await?;
            }
            println!("this run's tables (prefix {prefix}) are deleted");
        } else {
            println!("this run's tables are kept for a look: `TablePrefix={prefix}`");
        }
    }
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}

/// An employee's badge photo: 2 KiB that differ per employee.
fn photo(id: u32) -> Vec<u8> {
    (0..2048u32)
        .map(|i| (i.wrapping_mul(31) ^ id.wrapping_mul(2_654_435_761)) as u8)
        .collect()
}

/// The archived employees whose photo reads back whole from the blob store (the archive
/// moved each photo with its employee), read page by page.
async fn archived_photos(
    store: &AnyStore,
    blobs: &tablekit::core::blob::BlobStore,
) -> tablekit::Result<usize> {
    use futures::TryStreamExt;
    let mut whole = 0;
    // The archived employees as stored (their photos' blob addresses), to restore here.
    let archive = Table::<Employee, _>::options()
        .name("Archive")
        .build(store.clone());
    let mut rows = std::pin::pin!(archive.stream_entities(Query::new()));
    while let Some(entity) = rows.try_next().await? {
        let entity = tablekit::patterns::large::restore(blobs, "Archive", entity).await?;
        let employee = Employee::from_entity(entity)?.value;
        if employee.photo == photo(employee.id) {
            whole += 1;
        }
    }
    Ok(whole)
}

#[allow(clippy::too_many_arguments)]
async fn drive(
    args: &Args,
    store: &AnyStore,
    queue: &AnyQueue,
    employees: &IndexedTable<Employee, AnyStore>,
    departments: &Table<Department, AnyStore>,
    workers: &mut Workers,
    archive_queue: &str,
    index_queue: &str,
) -> tablekit::Result<(usize, usize)> {
    let total = args.departments as usize * args.employees as usize;
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:>10} {bar:40} {pos}/{len}")
            .expect("a valid progress template"),
    );
    bar.set_message("seeding");
    for d in 0..args.departments {
        let department = format!("D{d:02}");
        let head_count = i32::try_from(args.employees)
            .map_err(|_| tablekit::Error::Config("--employees is too large".into()))?;
        let row = Department {
            department: department.clone(),
            manager_id: d * args.employees,
            head_count,
        };
        retried(|| departments.upsert(&row)).await?;
        for n in 0..args.employees {
            let id = d * args.employees + n;
            let employee = Employee {
                department: department.clone(),
                id,
                first_name: format!("First{id}"),
                last_name: ["Jones", "Smith", "Cao", "Ng", "Lee"][(id % 5) as usize].to_owned(),
                age: 20 + (id % 40) as i32,
                email: format!("e{id}@contoso.com"),
                photo: photo(id),
            };
            retried(|| employees.upsert(&employee)).await?;
            bar.inc(1);
            // Workers start while the table is seeded: their first second may end here.
            workers.early_kills()?;
        }
    }
    // A client asks for the leavers to be archived.
    let mut leavers = 0;
    // Exactly `--leavers` percent, spread evenly over the ids.
    let percent = u64::from(args.leavers.min(100));
    for id in (0..args.departments * args.employees)
        .filter(|id| (u64::from(*id) * percent) % 100 < percent)
    {
        // The keys rendered from the typed key: the department, then the id.
        let department = format!("D{:02}", id / args.employees);
        let (partition_key, row_key) = employees.primary().key(department).key(id).keys()?;
        let envelope = Envelope::new(&ArchiveOperation {
            source_table: "Current".into(),
            target_table: "Archive".into(),
            partition_key,
            row_key,
        })?;
        let (id, body) = (envelope.id.to_string(), envelope.to_bytes()?);
        // Sent twice after an unknown outcome, the move runs twice: it is idempotent.
        retried(|| queue.send(archive_queue, &id, &body)).await?;
        leavers += 1;
        workers.early_kills()?;
    }
    bar.set_length(leavers as u64);
    bar.set_position(0);
    bar.set_message("archiving");
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let mut next_chaos = Instant::now();
    loop {
        let archived = count_employees(store, "Archive").await?;
        bar.set_position(archived as u64);
        let stats = queue.stats(archive_queue).await?;
        // Done, or stopped short: a poisoned move is left to the report.
        if (archived >= leavers || stats.poisoned > 0) && stats.waiting == 0 && stats.leased == 0 {
            break;
        }
        if Instant::now() > deadline {
            bar.abandon();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("timed out: {archived} of {leavers} archived, queue {stats:?}"),
            )
            .into());
        }
        workers.revive()?;
        if args.chaos && Instant::now() > next_chaos {
            workers.chaos()?;
            next_chaos = Instant::now() + Duration::from_millis(rand::rng().random_range(200..800));
        }
        tokio::time::sleep(workers.pause()?).await;
    }
    // The index worker finishes what the writes and moves left.
    bar.set_message("indexing");
    loop {
        let stats = queue.stats(index_queue).await?;
        // The relay's backlog, read from the pending markers: what is left in the
        // outboxes. Delayed work (a deleted entity's tombstone, buried after a grace
        // period) is not the worker's yet and is not counted.
        let backlog = tablekit::patterns::consistency::backlog(store).await?;
        let left = backlog.tables.get("Current").copied().unwrap_or(0);
        // Every early kill asked for is made before the run ends.
        if stats.waiting == 0 && stats.leased == 0 && left == 0 && workers.early_kills_left == 0 {
            break;
        }
        if Instant::now() > deadline {
            bar.abandon();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "timed out waiting for the index worker: {stats:?}, {left} outbox entries left in `Current` ({} partitions with entries)",
                    backlog.partitions
                ),
            )
            .into());
        }
        workers.revive()?;
        tokio::time::sleep(workers.pause()?).await;
    }
    bar.finish_and_clear();
    Ok((leavers, total))
}
