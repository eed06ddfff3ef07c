//! The `tablekit-worker` command line: options (every flag also an environment variable)
//! and what each command does. The binary is [`main`]; an application's own worker binary,
//! which adds its operations, is [`main_with`].

use std::net::SocketAddr;
use std::time::Duration;

use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use tablekit_core::blob::BlobStore;
use tablekit_core::{AnyStore, TableStore};
use tablekit_patterns::index::{AuditOptions, AuditReport, OutboxSink, Relay, Sweeper};

use crate::archive::ArchiveOperation;
use crate::error::{Error, Result};
use crate::operation::{Envelope, Registry};
use crate::queue::{AnyQueue, Queue};
use crate::runtime::{Worker, WorkerConfig, install_prometheus, shutdown_signal};

mod process;
pub use process::{DEFAULT_LOG_FILTER, init_logging, main, main_from, main_with};

/// Runs tablekit's queue workers: the idempotent operations that keep copies eventually
/// consistent across partitions, tables and blob storage.
#[derive(Debug, Parser)]
#[command(name = "tablekit-worker", version, long_version = long_version(), about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// How log lines are written on stderr: `text` (coloured only on a terminal, never
    /// when `NO_COLOR` is set) or `json` (one object per line, for log shippers; a
    /// delivery's lines carry its queue and operation id). Levels come from `RUST_LOG`
    /// (default `info`).
    #[arg(long, global = true, env = "TABLEKIT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// The backends this build serves, by feature name (`sqlite`, `rabbitmq`, `amqps`,
/// `azure`): `tablekit-worker --version` lists them, so a script can tell whether a
/// binary can serve a connection string before starting it.
pub fn features() -> &'static [&'static str] {
    &[
        #[cfg(feature = "sqlite")]
        "sqlite",
        #[cfg(feature = "rabbitmq")]
        "rabbitmq",
        #[cfg(feature = "amqps")]
        "amqps",
        #[cfg(feature = "azure")]
        "azure",
    ]
}

fn long_version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| {
        format!(
            "{}\nfeatures: {}",
            env!("CARGO_PKG_VERSION"),
            features().join(" ")
        )
    })
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines; ANSI colour only when stderr is a terminal.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Consume a queue and run its operations until SIGINT or SIGTERM.
    Run(RunArgs),
    /// Inspect or replay the messages of a queue's poison queue.
    Poison {
        /// What to do with the poison queue.
        #[command(subcommand)]
        command: PoisonCommand,
    },
    /// Send an operation to a queue (for scripts).
    Enqueue {
        /// The operation.
        #[command(subcommand)]
        operation: EnqueueCommand,
    },
    /// Print how many messages a queue and its poison queue hold.
    Stats(QueueArgs),
    /// One screen for an operator: each queue's depth, leased and poison messages, the
    /// relay's backlog, and the last audit of every audited table (`--json` for scripts).
    Status(StatusArgs),
    /// Serve the operator's console, a web page: queues, poison messages (replay,
    /// discard), the relay's backlog, audits and background jobs. Loopback only unless
    /// given a token.
    Console(ConsoleArgs),
    /// Check a table's indexes against its primaries: missing, stale and orphaned copies
    /// and id-list entries; repair them with `--repair`. Exits 4 when drift is left.
    Audit(AuditArgs),
    /// Write the entries of an index declared after the table had data.
    Backfill(BackfillArgs),
    /// Rewrite every entity stored under an older version of its type to the current
    /// version, through the write path (indexes, id lists, unique values and change
    /// events follow). The types are those the worker binary registers
    /// (`connections.migrations().register::<T>()` in `cli::main_with`).
    Migrate(MigrateArgs),
    /// Mark the partitions of a table that hold outbox entries written before pending
    /// markers existed, so the relay finds them (once, after an upgrade; scans the table).
    AdoptOutbox(AdoptArgs),
    /// Import entities from a JSON-lines file (one entity per line, as `export-period`
    /// writes them) into a table: entity group transactions per partition, a bounded
    /// number in flight, retryable failures retried, the rest listed with their keys.
    Import(ImportArgs),
    /// Move a cold period table (`<base>YYYYMMDD` or `<base>YYYYMM`) to the blob store:
    /// its entities as JSON lines, checked by reading the blob back, then the table is
    /// deleted.
    ExportPeriod(ExportPeriodArgs),
}

/// Options of `import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The table store: `sqlite:PATH` (a SQLite file), `azure:CONNECTION-STRING` (Azure
    /// Table Storage or Azurite, feature `azure`) or `memory:` (this process only).
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: String,
    /// The table to write (created when missing).
    #[arg(long, env = "TABLEKIT_TABLE")]
    pub table: String,
    /// The JSON-lines file.
    #[arg(long)]
    pub file: std::path::PathBuf,
    /// Batches in flight at most.
    #[arg(long, env = "TABLEKIT_CONCURRENCY", default_value_t = 8)]
    pub concurrency: usize,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// The length of a period, for `export-period`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PeriodArg {
    /// Tables named `<base>YYYYMMDD`.
    Day,
    /// Tables named `<base>YYYYMM`.
    Month,
}

/// Options of `export-period`.
#[derive(Debug, Args)]
pub struct ExportPeriodArgs {
    /// The table store: `sqlite:PATH` (a SQLite file), `azure:CONNECTION-STRING` (Azure
    /// Table Storage or Azurite, feature `azure`) or `memory:` (this process only).
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: String,
    /// The blob store: `file:DIR` (a folder) or `azure:CONNECTION-STRING;Container=NAME`
    /// (Azure Blob Storage, feature `azure`).
    #[arg(long, env = "TABLEKIT_BLOBS")]
    pub blobs: String,
    /// The base name of the period tables.
    #[arg(long)]
    pub base: String,
    /// The length of a period.
    #[arg(long, value_enum)]
    pub period: PeriodArg,
    /// The period's table to export and drop.
    #[arg(long, env = "TABLEKIT_TABLE")]
    pub table: String,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// Options of `adopt-outbox`.
#[derive(Debug, Args)]
pub struct AdoptArgs {
    /// The table store: `sqlite:PATH` (a SQLite file), `azure:CONNECTION-STRING` (Azure
    /// Table Storage or Azurite, feature `azure`) or `memory:` (this process only).
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: String,
    /// The table whose outbox entries to adopt.
    #[arg(long, env = "TABLEKIT_TABLE")]
    pub table: String,
}

/// Options of `audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The table store: `sqlite:PATH` (a SQLite file), `azure:CONNECTION-STRING` (Azure
    /// Table Storage or Azurite, feature `azure`) or `memory:` (this process only).
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: String,
    /// The table of the primaries.
    #[arg(long, env = "TABLEKIT_TABLE")]
    pub table: String,
    /// Repair the drift found.
    #[arg(long)]
    pub repair: bool,
    /// Save a checkpoint under this name and resume from it after an interruption.
    #[arg(long, env = "TABLEKIT_JOB")]
    pub job: Option<String>,
    /// The blob store of blob-stored index entities: `file:DIR` (a folder) or
    /// `azure:CONNECTION-STRING;Container=NAME` (Azure Blob Storage, feature `azure`).
    #[arg(long, env = "TABLEKIT_BLOBS")]
    pub blobs: Option<String>,
    /// Print at most this many findings.
    #[arg(long, default_value_t = 20)]
    pub findings: usize,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// Options of `migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The table store: `sqlite:PATH` (a SQLite file), `azure:CONNECTION-STRING` (Azure
    /// Table Storage or Azurite, feature `azure`) or `memory:` (this process only).
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: String,
    /// The table of the entities.
    #[arg(long, env = "TABLEKIT_TABLE")]
    pub table: String,
    /// The entity kind, when the table holds several registered types.
    #[arg(long)]
    pub kind: Option<String>,
    /// Save a checkpoint under this name and resume from it after an interruption.
    #[arg(long, env = "TABLEKIT_JOB")]
    pub job: Option<String>,
    /// The blob store of blob fields: `file:DIR` (a folder) or
    /// `azure:CONNECTION-STRING;Container=NAME` (Azure Blob Storage, feature `azure`).
    #[arg(long, env = "TABLEKIT_BLOBS")]
    pub blobs: Option<String>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// Options of `backfill`.
#[derive(Debug, Args)]
pub struct BackfillArgs {
    /// The table store: `sqlite:PATH` (a SQLite file), `azure:CONNECTION-STRING` (Azure
    /// Table Storage or Azurite, feature `azure`) or `memory:` (this process only).
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: String,
    /// The table of the primaries.
    #[arg(long, env = "TABLEKIT_TABLE")]
    pub table: String,
    /// The index or index entity to backfill (as declared on the entity type).
    #[arg(long)]
    pub index: String,
    /// Save a checkpoint under this name and resume from it after an interruption.
    #[arg(long, env = "TABLEKIT_JOB")]
    pub job: Option<String>,
    /// The blob store of blob-stored index entities.
    #[arg(long, env = "TABLEKIT_BLOBS")]
    pub blobs: Option<String>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// Which queue, on which broker.
#[derive(Debug, Args)]
pub struct QueueArgs {
    /// The queue's name.
    #[arg(long, env = "TABLEKIT_QUEUE", default_value = "archive")]
    pub queue: String,
    /// The broker: `amqp://user:password@host:port/vhost` (RabbitMQ), `sqlite:PATH` (the
    /// embedded queue file, which several processes may share) or
    /// `azure:CONNECTION-STRING` (Azure Queue Storage, feature `azure`).
    #[arg(long, env = "TABLEKIT_BROKER")]
    pub broker: String,
}

/// Options of `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The broker: `amqp://user:password@host:port/vhost` (RabbitMQ), `sqlite:PATH` (the
    /// embedded queue file) or `azure:CONNECTION-STRING` (Azure Queue Storage, feature
    /// `azure`).
    #[arg(long, env = "TABLEKIT_BROKER")]
    pub broker: String,
    /// The table store: `sqlite:PATH` (a SQLite file), `azure:CONNECTION-STRING` (Azure
    /// Table Storage or Azurite, feature `azure`) or `memory:` (this process only).
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: String,
    /// A queue to show (repeatable); by default `index`, `archive` and the change queues
    /// the registered types declare.
    #[arg(long = "queue")]
    pub queues: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Options of `console`.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// The broker: `amqp://user:password@host:port/vhost` (RabbitMQ), `sqlite:PATH` (the
    /// embedded queue file) or `azure:CONNECTION-STRING` (Azure Queue Storage, feature
    /// `azure`).
    #[arg(long, env = "TABLEKIT_BROKER")]
    pub broker: String,
    /// The table store: `sqlite:PATH` (a SQLite file), `azure:CONNECTION-STRING` (Azure
    /// Table Storage or Azurite, feature `azure`) or `memory:` (this process only).
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: String,
    /// Where the console listens. Any address but loopback needs `--token`.
    #[arg(long, env = "TABLEKIT_CONSOLE_BIND", default_value = crate::console::DEFAULT_BIND)]
    pub bind: SocketAddr,
    /// The token every request must carry (at least 16 characters; the browser signs in
    /// with it once). Required off loopback. Prefer the environment variable: a flag
    /// shows in the process list.
    #[arg(long, env = "TABLEKIT_CONSOLE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A queue to show (repeatable); by default `index`, `archive` and the change queues
    /// the registered types declare.
    #[arg(long = "queue")]
    pub queues: Vec<String>,
    /// A worker's metrics endpoint (`http://HOST:PORT/metrics`, as `run --metrics-addr`
    /// serves it; repeatable, or comma-separated in the variable): the page shows each
    /// index's copy lag and the hot partitions.
    #[arg(
        long = "metrics",
        env = "TABLEKIT_CONSOLE_METRICS",
        value_delimiter = ','
    )]
    pub metrics: Vec<String>,
    /// Seconds between two refreshes of the page.
    #[arg(long, env = "TABLEKIT_CONSOLE_REFRESH", default_value_t = 3,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub refresh: u64,
    /// The blob store of blob-stored index entities (for audits and backfills): `file:DIR`
    /// (a folder) or `azure:CONNECTION-STRING;Container=NAME` (feature `azure`).
    #[arg(long, env = "TABLEKIT_BLOBS")]
    pub blobs: Option<String>,
}

/// What `status` shows.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Status {
    /// Each queue.
    pub queues: Vec<QueueStatus>,
    /// What the relay has left to publish.
    pub relay: tablekit_patterns::consistency::Backlog,
    /// The last audit of each audited table.
    pub audits: Vec<AuditStatus>,
}

/// One queue's state.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QueueStatus {
    /// The queue.
    pub queue: String,
    /// Messages waiting (retry delays included).
    pub waiting: Option<u64>,
    /// Messages leased to a consumer.
    pub leased: Option<u64>,
    /// Messages in its poison queue.
    pub poisoned: Option<u64>,
    /// Whether the queue exists (`false`: no worker has declared it yet).
    #[serde(default = "declared")]
    pub declared: bool,
    /// Why the counts could not be read.
    pub error: Option<String>,
}

fn declared() -> bool {
    true
}

/// A table's last audit.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AuditStatus {
    /// The table.
    pub table: String,
    /// When it finished.
    pub at: chrono::DateTime<chrono::Utc>,
    /// Whether it found no drift.
    pub clean: bool,
    /// Entities scanned.
    pub scanned: u64,
    /// Missing copies or memberships.
    pub missing: u64,
    /// Stale copies.
    pub stale: u64,
    /// Orphaned copies or memberships.
    pub orphaned: u64,
    /// Records that do not read.
    pub unreadable: u64,
    /// Drift repaired.
    pub repaired: u64,
}

/// Reads the status of a deployment.
///
/// # Errors
/// The store's errors (the queues' errors are reported per queue).
pub async fn status<S: TableStore, Q: Queue>(
    store: &S,
    broker: &Q,
    queues: &[String],
) -> Result<Status> {
    let mut names: Vec<String> = queues.to_vec();
    if names.is_empty() {
        names.push(crate::index::DEFAULT_INDEX_QUEUE.to_owned());
        names.push("archive".to_owned());
        for schema in tablekit_patterns::index::SchemaRecord::list(store, None).await? {
            if let Some(queue) = schema.changes {
                names.push(queue);
            }
        }
    }
    // Each queue once, in the order first named.
    let mut seen = std::collections::HashSet::new();
    names.retain(|name| seen.insert(name.clone()));
    let mut statuses = Vec::new();
    for queue in names {
        statuses.push(match broker.stats(&queue).await {
            Ok(stats) => QueueStatus {
                queue,
                waiting: Some(stats.waiting),
                leased: Some(stats.leased),
                poisoned: Some(stats.poisoned),
                declared: true,
                error: None,
            },
            Err(Error::NotDeclared { .. }) => QueueStatus {
                queue,
                waiting: None,
                leased: None,
                poisoned: None,
                declared: false,
                error: None,
            },
            Err(e) => QueueStatus {
                queue,
                waiting: None,
                leased: None,
                poisoned: None,
                declared: true,
                error: Some(e.to_string()),
            },
        });
    }
    let relay = tablekit_patterns::consistency::backlog(store).await?;
    let audits = tablekit_patterns::index::AuditResult::list(store)
        .await?
        .into_iter()
        .map(|(table, result)| AuditStatus {
            table,
            at: result.at,
            clean: result.report.is_clean(),
            scanned: result.report.scanned,
            missing: result.report.missing,
            stale: result.report.stale,
            orphaned: result.report.orphaned,
            unreadable: result.report.unreadable,
            repaired: result.report.repaired,
        })
        .collect();
    Ok(Status {
        queues: statuses,
        relay,
        audits,
    })
}

/// `status` as text: one screen.
pub fn status_text(status: &Status) -> String {
    use std::fmt::Write as _;
    let mut text = String::from("queues\n");
    let count = |n: Option<u64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    for q in &status.queues {
        if !q.declared {
            let _ = writeln!(
                text,
                "  {:<28} not declared yet (a worker declares it when it starts)",
                q.queue
            );
            continue;
        }
        let _ = write!(
            text,
            "  {:<28} waiting {:>8}  leased {:>6}  poison {:>6}",
            q.queue,
            count(q.waiting),
            count(q.leased),
            count(q.poisoned)
        );
        if let Some(error) = &q.error {
            let _ = write!(text, "  ({error})");
        }
        text.push('\n');
    }
    let _ = writeln!(
        text,
        "relay backlog: {} entries in {} partitions{}",
        status.relay.entries,
        status.relay.partitions,
        status
            .relay
            .oldest
            .map(|at| format!(", oldest written {}", at.to_rfc3339()))
            .unwrap_or_default()
    );
    if status.relay.delayed > 0 {
        let _ = writeln!(
            text,
            "  and {} tombstone burials waiting for their grace period",
            status.relay.delayed
        );
    }
    text.push_str("last audits\n");
    if status.audits.is_empty() {
        text.push_str("  none yet (tablekit-worker audit --table …)\n");
    }
    for a in &status.audits {
        let _ = writeln!(
            text,
            "  {:<28} {}  {}  scanned {}, missing {}, stale {}, orphaned {}, unreadable {}, repaired {}",
            a.table,
            if a.clean { "clean" } else { "DRIFT" },
            a.at.to_rfc3339(),
            a.scanned,
            a.missing,
            a.stale,
            a.orphaned,
            a.unreadable,
            a.repaired
        );
    }
    text.trim_end().to_owned()
}

/// Options of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The queue and broker.
    #[command(flatten)]
    pub queue: QueueArgs,
    /// The table store the operations write: `sqlite:PATH` (a SQLite file), `azure:CONNECTION-STRING` (Azure
    /// Table Storage or Azurite, feature `azure`) or `memory:` (this process only).
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: String,
    /// How many messages are handled at once.
    #[arg(long, env = "TABLEKIT_CONCURRENCY", default_value_t = 4)]
    pub concurrency: usize,
    /// After this many deliveries without success a message goes to `<queue>-poison`.
    #[arg(long, env = "TABLEKIT_MAX_DELIVERIES", default_value_t = 5)]
    pub max_deliveries: u32,
    /// Seconds to let in-flight messages finish after SIGINT/SIGTERM.
    #[arg(long, env = "TABLEKIT_SHUTDOWN_TIMEOUT", default_value_t = 30)]
    pub shutdown_timeout: u64,
    /// Seconds a received message stays invisible to other workers (SQLite queue).
    #[arg(long, env = "TABLEKIT_LEASE", default_value_t = 60)]
    pub lease: u64,
    /// Milliseconds of the first retry delay (doubled per retry, with jitter).
    #[arg(long, env = "TABLEKIT_BACKOFF_MS", default_value_t = 250)]
    pub backoff_ms: u64,
    /// Serve Prometheus metrics at `http://ADDRESS/metrics`.
    #[arg(long, env = "TABLEKIT_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Seconds between refreshes of the queue gauges and the hot partitions (with
    /// `--metrics-addr`), 1 to 300: a gauge not set for ten minutes leaves the page.
    #[arg(long, env = "TABLEKIT_STATS_INTERVAL", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub stats_interval: u64,
    /// The blob store of blob-stored index entities: `file:DIR` (a folder) or
    /// `azure:CONNECTION-STRING;Container=NAME` (Azure Blob Storage, feature `azure`).
    #[arg(long, env = "TABLEKIT_BLOBS")]
    pub blobs: Option<String>,
    /// Run the outbox relay, publishing to this queue what writers left in their outboxes
    /// (on by default for `--queue index`).
    #[arg(long, env = "TABLEKIT_RELAY")]
    pub relay: bool,
    /// Seconds between two relay passes.
    #[arg(long, env = "TABLEKIT_RELAY_INTERVAL", default_value_t = 5)]
    pub relay_interval: u64,
    /// Milliseconds an outbox entry is left to its writer before the relay takes it.
    #[arg(long, env = "TABLEKIT_RELAY_GRACE_MS", default_value_t = 2000)]
    pub relay_grace_ms: u64,
    /// Milliseconds the relay keeps a pending marker past its lease (the longest a
    /// commit may take to land, plus clock skew between processes).
    #[arg(long, env = "TABLEKIT_RELAY_LATE_MS", default_value_t = 60_000)]
    pub relay_late_ms: u64,
    /// Serve the operator's console from this worker process at this address (as the
    /// `console` command does, reading this process's metrics when `--metrics-addr` is
    /// set). Any address but loopback needs `--console-token`.
    #[arg(long, env = "TABLEKIT_CONSOLE_BIND")]
    pub console: Option<SocketAddr>,
    /// The console's token (at least 16 characters).
    #[arg(long, env = "TABLEKIT_CONSOLE_TOKEN", hide_env_values = true)]
    pub console_token: Option<String>,
    /// Seconds between two passes of the expiry sweeper, which runs beside the relay and
    /// deletes the entities of expiring types (`#[entity(ttl)]`, `#[entity(expires)]`)
    /// whose time is up; 0 turns it off.
    #[arg(long, env = "TABLEKIT_EXPIRY_INTERVAL", default_value_t = 30)]
    pub expiry_interval: u64,
}

/// The poison commands.
#[derive(Debug, Subcommand)]
pub enum PoisonCommand {
    /// List the poison messages with their reasons, oldest first.
    List {
        /// The queue and broker.
        #[command(flatten)]
        queue: QueueArgs,
        /// At most this many.
        #[arg(long, env = "TABLEKIT_LIMIT", default_value_t = 100)]
        limit: usize,
    },
    /// Move poison messages back to the queue, with a fresh delivery count.
    Replay {
        /// The queue and broker.
        #[command(flatten)]
        queue: QueueArgs,
        /// Only the message with this id (all when absent).
        #[arg(long, env = "TABLEKIT_MESSAGE_ID")]
        id: Option<String>,
    },
}

/// The operations `enqueue` sends.
#[derive(Debug, Subcommand)]
pub enum EnqueueCommand {
    /// Move an entity from one table to another.
    Archive {
        /// The queue and broker.
        #[command(flatten)]
        queue: QueueArgs,
        /// The table the entity leaves.
        #[arg(long, env = "TABLEKIT_SOURCE_TABLE")]
        source: String,
        /// The table it moves to.
        #[arg(long, env = "TABLEKIT_TARGET_TABLE")]
        target: String,
        /// Its PartitionKey.
        #[arg(long)]
        partition_key: String,
        /// Its RowKey.
        #[arg(long)]
        row_key: String,
    },
}

/// Exit code: a setting or argument was invalid.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: the broker or the store could not be reached.
pub const EXIT_UNAVAILABLE: u8 = 3;
/// Exit code: any other failure.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code: an audit found drift it did not repair.
pub const EXIT_DRIFT: u8 = 4;

/// The exit code for an error.
pub fn exit_code(error: &Error) -> u8 {
    match error {
        Error::InvalidBroker { .. } | Error::InvalidQueueName { .. } | Error::Config(_) => {
            EXIT_USAGE
        }
        Error::Store(e) if e.kind() == tablekit_core::ErrorKind::InvalidInput => EXIT_USAGE,
        Error::Pattern(e) if e.kind() == tablekit_core::ErrorKind::InvalidInput => EXIT_USAGE,
        Error::Drift(_) => EXIT_DRIFT,
        e if e.is_retryable() => EXIT_UNAVAILABLE,
        _ => EXIT_FAILURE,
    }
}

/// The operations a worker process handles, over `store`: archive and index work
/// (without blob-stored index entities; see [`registry_with_blobs`]).
pub fn registry(store: AnyStore) -> Registry {
    registry_with_blobs(store, None)
}

/// The operations a worker process handles, over `store` and, for blob-stored index
/// entities, `blobs`.
pub fn registry_with_blobs(store: AnyStore, blobs: Option<BlobStore>) -> Registry {
    let archive_store = store.clone();
    let archive_blobs = blobs.clone();
    let registry = Registry::new().register(move |operation: ArchiveOperation| {
        let store = archive_store.clone();
        let blobs = archive_blobs.clone();
        async move {
            let outcome =
                crate::archive::archive_with_blobs(&store, blobs.as_ref(), &operation).await?;
            tracing::debug!(?outcome, row_key = %operation.row_key, "archive");
            Ok(())
        }
    });
    crate::index::register(registry, store, blobs)
}

/// What a worker process connected to before it builds its registry: the table store of
/// `--store` and, with `--blobs`, the blob store. Handlers clone what they need.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Connections {
    /// The table store (`--store`).
    pub store: AnyStore,
    /// The blob store (`--blobs`), if any.
    pub blobs: Option<BlobStore>,
    migrations: crate::migrate::Migrations,
}

impl Connections {
    /// The connections to `store` and, optionally, `blobs`.
    pub fn new(store: AnyStore, blobs: Option<BlobStore>) -> Self {
        Connections {
            store,
            blobs,
            migrations: crate::migrate::Migrations::new(),
        }
    }

    /// The entity types this worker binary can migrate (`migrate`, the console's migrate
    /// job): register the application's types here, beside its operations.
    pub fn migrations(&self) -> &crate::migrate::Migrations {
        &self.migrations
    }
}

/// The operations a worker process handles: the built-in ones of
/// [`registry_with_blobs`] over `connections`, then whatever `operations` registers (an
/// operation registered under a built-in kind replaces the built-in handler).
///
/// The registry the `run` command builds in [`run_with`] and [`main_with`].
pub fn registry_with_operations<F>(connections: &Connections, operations: F) -> Registry
where
    F: FnOnce(Registry, &Connections) -> Registry,
{
    let built_in = registry_with_blobs(connections.store.clone(), connections.blobs.clone());
    operations(built_in, connections)
}

fn blob_store(connection: Option<&str>) -> Result<Option<BlobStore>> {
    connection
        .map(|c| BlobStore::connect(c).map_err(Error::from))
        .transpose()
}

/// The entities of a JSON-lines file, read on a thread of their own a bounded number
/// ahead; a line that does not read ends the stream and leaves its error in the slot.
#[allow(clippy::type_complexity)]
fn json_lines(
    file: std::path::PathBuf,
) -> (
    impl futures::Stream<Item = tablekit_core::Entity> + Send,
    Arc<std::sync::Mutex<Option<Error>>>,
) {
    let unreadable: Arc<std::sync::Mutex<Option<Error>>> = Arc::default();
    let slot = Arc::clone(&unreadable);
    let (send, receive) = tokio::sync::mpsc::channel::<tablekit_core::Entity>(1024);
    tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        let fail = |e: Error| {
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(e);
            }
        };
        let reader = match std::fs::File::open(&file) {
            Ok(f) => std::io::BufReader::new(f),
            Err(e) => return fail(Error::Config(format!("reading {}: {e}", file.display()))),
        };
        for (n, line) in reader.lines().enumerate() {
            let entity = line
                .map_err(|e| Error::Config(format!("reading {}: {e}", file.display())))
                .and_then(|line| {
                    serde_json::from_str::<tablekit_core::Entity>(&line).map_err(|e| {
                        Error::Config(format!(
                            "{} line {}: not an entity: {e}",
                            file.display(),
                            n + 1
                        ))
                    })
                });
            match entity {
                Ok(entity) => {
                    if send.blocking_send(entity).is_err() {
                        return;
                    }
                }
                Err(e) => return fail(e),
            }
        }
    });
    let entities = futures::stream::unfold(receive, |mut receive| async move {
        receive.recv().await.map(|entity| (entity, receive))
    });
    (entities, unreadable)
}

/// A progress bar on stderr for a scan (hidden when stderr is not a terminal).
fn progress_bar(hidden: bool, what: &str) -> indicatif::ProgressBar {
    let bar = if hidden {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new_spinner()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_message(format!("{what}: starting"));
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// A migration's report in one line: counts by stored version, then what it did.
pub fn migrate_summary(
    migration: &crate::migrate::Migration,
    report: &tablekit_patterns::index::MigrateReport,
) -> String {
    let versions = if report.versions.is_empty() {
        "none".to_owned()
    } else {
        report
            .versions
            .iter()
            .map(|(v, n)| format!("v{v} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "migrate of {} ({} to v{}): read {} entities in {:.1} s{}; by stored version: {versions}; rewritten {}, left to a concurrent write {}, unreadable {}",
        migration.table,
        migration.kind,
        migration.version,
        report.scanned,
        report.seconds,
        if report.resumed { " (resumed)" } else { "" },
        report.rewritten,
        report.conflicts,
        report.unreadable
    )
}

fn summary(what: &str, report: &AuditReport) -> String {
    format!(
        "{what}: scanned {} entities ({} primaries, {} entries checked) in {:.1} s ({:.0}/s); missing {}, stale {}, orphaned {}, repaired {}{}",
        report.scanned,
        report.primaries,
        report.checked,
        report.seconds,
        report.rate(),
        report.missing,
        report.stale,
        report.orphaned,
        report.repaired,
        if report.resumed { " (resumed)" } else { "" }
    )
}

/// Runs a command; what it prints goes to `out`.
///
/// # Errors
/// The command's failure; [`exit_code`] maps it to the process exit code.
pub async fn run(cli: Cli, out: &mut (dyn std::io::Write + Send)) -> Result<()> {
    run_with(cli, out, |registry, _| registry).await
}

/// Runs a command as [`run`] does; the worker of the `run` command handles the built-in
/// operations and those `operations` registers (see [`registry_with_operations`]).
///
/// # Errors
/// The command's failure; [`exit_code`] maps it to the process exit code.
pub async fn run_with<F>(
    cli: Cli,
    out: &mut (dyn std::io::Write + Send),
    operations: F,
) -> Result<()>
where
    F: FnOnce(Registry, &Connections) -> Registry,
{
    let write = |out: &mut (dyn std::io::Write + Send), text: String| {
        writeln!(out, "{text}").map_err(|e| Error::Config(format!("writing output: {e}")))
    };
    match cli.command {
        Command::Run(args) => {
            // Installed first, so a stop requested while connecting is honoured.
            let shutdown = shutdown_signal();
            if let Some(address) = args.metrics_addr {
                install_prometheus(address)?;
            }
            let store = AnyStore::connect(&args.store).await?;
            let queue = AnyQueue::connect(&args.queue.broker).await?;
            let config = WorkerConfig {
                concurrency: args.concurrency,
                max_deliveries: args.max_deliveries,
                shutdown_timeout: Duration::from_secs(args.shutdown_timeout),
                lease: Duration::from_secs(args.lease),
                base_backoff: Duration::from_millis(args.backoff_ms.max(1)),
                stats_interval: Duration::from_secs(args.stats_interval.max(1)),
                ..WorkerConfig::new(args.queue.queue.clone())
            };
            let blobs = blob_store(args.blobs.as_deref())?;
            let relay = args.relay || args.queue.queue == crate::index::DEFAULT_INDEX_QUEUE;
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let relay_task = if relay {
                let sink = crate::index::QueueSink::open(
                    AnyQueue::connect(&args.queue.broker).await?,
                    &args.queue.queue,
                )
                .await?;
                let sink: Arc<dyn OutboxSink> = Arc::new(sink);
                let relay = Relay::new(store.clone(), sink.clone())
                    .grace(Duration::from_millis(args.relay_grace_ms))
                    .late(Duration::from_millis(args.relay_late_ms));
                let interval = Duration::from_secs(args.relay_interval.max(1));
                let sweeper = (args.expiry_interval > 0).then(|| {
                    let sweeper = Sweeper::new(store.clone()).with_sink(sink);
                    match &blobs {
                        Some(blobs) => sweeper.with_blobs(blobs.clone()),
                        None => sweeper,
                    }
                });
                let expiry_interval = Duration::from_secs(args.expiry_interval.max(1));
                let mut stopped = stopped;
                Some(tokio::spawn(async move {
                    let mut sweeper_stopped = stopped.clone();
                    let sweep = async move {
                        if let Some(sweeper) = sweeper {
                            sweeper
                                .run(expiry_interval, async move {
                                    let _ = sweeper_stopped.wait_for(|s| *s).await;
                                })
                                .await;
                        }
                    };
                    let relay = relay.run(interval, async move {
                        let _ = stopped.wait_for(|s| *s).await;
                    });
                    tokio::join!(relay, sweep);
                }))
            } else {
                None
            };
            let connections = Connections::new(store.clone(), blobs.clone());
            let registry = registry_with_operations(&connections, operations);
            let console_task = match args.console {
                Some(bind) => {
                    let mut options = crate::console::ConsoleOptions::new(bind, args.console_token);
                    options.blobs = blobs;
                    options.migrations = connections.migrations().clone();
                    if let Some(address) = args.metrics_addr {
                        let host = if address.ip().is_unspecified() {
                            std::net::IpAddr::from([127, 0, 0, 1])
                        } else {
                            address.ip()
                        };
                        options.metrics = vec![format!(
                            "http://{}/metrics",
                            SocketAddr::new(host, address.port())
                        )];
                    }
                    let console = crate::console::bind(
                        store,
                        AnyQueue::connect(&args.queue.broker).await?,
                        options,
                    )
                    .await?;
                    tracing::info!(address = %console.local_addr()?, "console");
                    let mut stopped = stop.subscribe();
                    Some(tokio::spawn(console.serve(async move {
                        let _ = stopped.wait_for(|s| *s).await;
                    })))
                }
                None => None,
            };
            let report = Worker::new(queue, registry, config).run(shutdown).await;
            let _ = stop.send(true);
            if let Some(task) = console_task {
                let _ = task.await;
            }
            if let Some(task) = relay_task {
                let _ = task.await;
            }
            let report = report?;
            write(
                out,
                format!(
                    "processed {}, retried {}, poisoned {}, lost leases {}",
                    report.processed, report.retried, report.poisoned, report.lost_leases
                ),
            )
        }
        Command::Poison {
            command: PoisonCommand::List { queue, limit },
        } => {
            let broker = AnyQueue::connect(&queue.broker).await?;
            let messages = broker.poison_list(&queue.queue, limit).await?;
            for m in &messages {
                write(
                    out,
                    format!(
                        "{}\t{} deliveries\t{}\t{}",
                        m.id,
                        m.delivery_count,
                        m.reason,
                        String::from_utf8_lossy(&m.body)
                    ),
                )?;
            }
            write(out, format!("{} poison messages", messages.len()))
        }
        Command::Poison {
            command: PoisonCommand::Replay { queue, id },
        } => {
            let broker = AnyQueue::connect(&queue.broker).await?;
            let moved = broker.poison_replay(&queue.queue, id.as_deref()).await?;
            write(out, format!("replayed {moved} messages"))
        }
        Command::Enqueue {
            operation:
                EnqueueCommand::Archive {
                    queue,
                    source,
                    target,
                    partition_key,
                    row_key,
                },
        } => {
            let broker = AnyQueue::connect(&queue.broker).await?;
            broker
                .declare(
                    &queue.queue,
                    &WorkerConfig::new(&queue.queue).queue_options(),
                )
                .await?;
            let envelope = Envelope::new(&ArchiveOperation {
                source_table: source,
                target_table: target,
                partition_key,
                row_key,
            })?;
            broker
                .send(
                    &queue.queue,
                    &envelope.id.to_string(),
                    &envelope.to_bytes()?,
                )
                .await?;
            write(out, envelope.id.to_string())
        }
        Command::Audit(args) => {
            let store = AnyStore::connect(&args.store).await?;
            let bar = progress_bar(args.no_progress, "audit");
            let progress_bar = bar.clone();
            let options = AuditOptions {
                repair: args.repair,
                job: args.job,
                blobs: blob_store(args.blobs.as_deref())?,
                progress: Some(Arc::new(move |p| {
                    progress_bar.set_message(format!(
                        "{}: {} scanned, {} out of step",
                        p.table, p.scanned, p.drift
                    ));
                })),
                ..AuditOptions::default()
            };
            let report = tablekit_patterns::index::audit(&store, &args.table, &options).await;
            bar.finish_and_clear();
            let report = report?;
            write(out, summary(&format!("audit of {}", args.table), &report))?;
            for finding in report.findings.iter().take(args.findings) {
                write(
                    out,
                    format!(
                        "{:?}\t{}\t{}\t{}{}",
                        finding.drift,
                        finding.index,
                        finding
                            .source
                            .as_ref()
                            .map_or_else(String::new, ToString::to_string),
                        finding.target,
                        if finding.repaired { "\trepaired" } else { "" }
                    ),
                )?;
            }
            let found = report.missing + report.stale + report.orphaned;
            let left = if args.repair {
                found.saturating_sub(report.repaired)
            } else {
                found
            };
            if left > 0 {
                return Err(Error::Drift(left));
            }
            Ok(())
        }
        Command::Import(args) => {
            let store = AnyStore::connect(&args.store).await?;
            store.create_table_if_not_exists(&args.table).await?;
            let bar = progress_bar(args.no_progress, "import");
            let (entities, unreadable) = json_lines(args.file.clone());
            let options = tablekit_patterns::import::ImportOptions {
                concurrency: args.concurrency.max(1),
                ..Default::default()
            };
            let report = tablekit_patterns::import::import_stream(
                &store,
                &args.table,
                entities,
                &options,
                |r| {
                    bar.set_message(format!(
                        "import: {} written, {} retried, {} failed",
                        r.written,
                        r.retried,
                        r.failed.len()
                    ));
                },
            )
            .await;
            bar.finish_and_clear();
            let report = report?;
            if let Some(e) = unreadable.lock().ok().and_then(|mut e| e.take()) {
                return Err(e);
            }
            for failed in &report.failed {
                for (pk, rk) in &failed.keys {
                    write(out, format!("failed {pk}/{rk}: {}", failed.error))?;
                }
            }
            write(
                out,
                format!(
                    "imported {} entities into {} in {} batches ({} retried)",
                    report.written, args.table, report.batches, report.retried
                ),
            )?;
            let failed: usize = report.failed.iter().map(|f| f.keys.len()).sum();
            if failed > 0 {
                return Err(Error::Incomplete(failed));
            }
            Ok(())
        }
        Command::ExportPeriod(args) => {
            use tablekit_patterns::periods::{Period, PeriodTables};
            let store = AnyStore::connect(&args.store).await?;
            let blobs = BlobStore::connect(&args.blobs)?;
            let period = match args.period {
                PeriodArg::Day => Period::Day,
                PeriodArg::Month => Period::Month,
            };
            let tables = PeriodTables::new(&args.base, period)?;
            if tables.period_of(&args.table).is_none() {
                return Err(Error::Config(format!(
                    "`{}` is not a {:?} table of `{}`",
                    args.table, args.period, args.base
                )));
            }
            let bar = progress_bar(args.no_progress, "export");
            let exported = tables
                .export_to_blobs_with_progress(&store, &args.table, &blobs, |n| {
                    bar.set_message(format!("export: {n} entities written"));
                })
                .await;
            bar.finish_and_clear();
            let (name, count) = exported?;
            write(
                out,
                format!(
                    "exported {count} entities of {} to {name}; the table is deleted",
                    args.table
                ),
            )
        }
        Command::AdoptOutbox(args) => {
            let store = AnyStore::connect(&args.store).await?;
            let marked =
                tablekit_patterns::consistency::pending::adopt(&store, &args.table).await?;
            write(
                out,
                format!(
                    "marked {marked} partitions of {} holding outbox entries",
                    args.table
                ),
            )
        }
        Command::Backfill(args) => {
            let store = AnyStore::connect(&args.store).await?;
            let bar = progress_bar(args.no_progress, "backfill");
            let progress_bar = bar.clone();
            let options = AuditOptions {
                repair: true,
                job: args.job,
                blobs: blob_store(args.blobs.as_deref())?,
                progress: Some(Arc::new(move |p| {
                    progress_bar.set_message(format!("{}: {} scanned", p.table, p.scanned));
                })),
                ..AuditOptions::default()
            };
            let report =
                tablekit_patterns::index::backfill(&store, &args.table, &args.index, &options)
                    .await;
            bar.finish_and_clear();
            let report = report?;
            write(
                out,
                format!(
                    "backfill of `{}` in {}: {} entries written for {} primaries ({} scanned in {:.1} s)",
                    args.index,
                    args.table,
                    report.repaired,
                    report.primaries,
                    report.scanned,
                    report.seconds
                ),
            )
        }
        Command::Console(args) => {
            let shutdown = shutdown_signal();
            let store = AnyStore::connect(&args.store).await?;
            let broker = AnyQueue::connect(&args.broker).await?;
            let mut options = crate::console::ConsoleOptions::new(args.bind, args.token);
            options.queues = args.queues;
            options.refresh = args.refresh;
            options.metrics = args.metrics;
            options.blobs = blob_store(args.blobs.as_deref())?;
            // The application's types, registered beside its operations.
            let connections = Connections::new(store.clone(), options.blobs.clone());
            let _ = registry_with_operations(&connections, operations);
            options.migrations = connections.migrations().clone();
            let console = crate::console::bind(store, broker, options).await?;
            let address = console.local_addr()?;
            write(out, format!("console: http://{address}/"))?;
            let _ = out.flush();
            console.serve(shutdown).await
        }
        Command::Migrate(args) => {
            let store = AnyStore::connect(&args.store).await?;
            let blobs = blob_store(args.blobs.as_deref())?;
            let connections = Connections::new(store.clone(), blobs.clone());
            let _ = registry_with_operations(&connections, operations);
            let migration = connections
                .migrations()
                .find(&args.table, args.kind.as_deref())?;
            let bar = progress_bar(args.no_progress, "migrate");
            let progress_bar = bar.clone();
            let options = AuditOptions {
                job: args.job,
                progress: Some(Arc::new(move |p| {
                    progress_bar.set_message(format!("{}: {} read", p.table, p.scanned));
                })),
                ..AuditOptions::default()
            };
            let report = migration.run(store, blobs, options).await;
            bar.finish_and_clear();
            let report = report?;
            write(out, migrate_summary(&migration, &report))
        }
        Command::Status(args) => {
            let store = AnyStore::connect(&args.store).await?;
            let broker = AnyQueue::connect(&args.broker).await?;
            let status = status(&store, &broker, &args.queues).await?;
            let text = if args.json {
                serde_json::to_string_pretty(&status)
                    .map_err(|e| Error::Config(format!("status as JSON: {e}")))?
            } else {
                status_text(&status)
            };
            write(out, text)
        }
        Command::Stats(queue) => {
            let broker = AnyQueue::connect(&queue.broker).await?;
            let stats = broker.stats(&queue.queue).await?;
            write(
                out,
                format!(
                    "waiting {}\tleased {}\tpoisoned {}",
                    stats.waiting, stats.leased, stats.poisoned
                ),
            )
        }
    }
}
