//! The command line of `tablekit-worker`: its commands and options (every flag also an
//! environment variable).

use std::net::SocketAddr;

use clap::{Args, Parser, Subcommand};

mod console;
pub use console::ConsoleArgs;
use console::parse_cidr;

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
    /// Consume queues and run their operations until SIGINT or SIGTERM: every queue the
    /// worker's operations travel on (`archive` and `index` for the built-in ones), or
    /// those named with `--queue`.
    Run(RunArgs),
    /// Inspect, replay or discard the poison messages of a queue, kept in the store's
    /// poison table (what the broker's own poison queue holds is swept in first).
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
    /// Declare queues (with their poison queues) as a worker does at its start, with the
    /// default options, so they exist before any worker runs: messages sent or replayed to
    /// them wait, and the console accepts them as targets.
    Declare(DeclareArgs),
    /// One screen for an operator: each queue's depth, leased and poison messages, the
    /// relay's backlog, and the last audit of every audited table (`--json` for scripts).
    Status(StatusArgs),
    /// Change feeds (`#[feed]`): print a table's changes as they come (`tail`), or a
    /// group's parked changes (`parked`).
    Feed {
        /// What to do.
        #[command(subcommand)]
        command: FeedCommand,
    },
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

/// Options of `declare`.
#[derive(Debug, Args)]
pub struct DeclareArgs {
    /// A queue to declare (repeatable); not a poison queue (`<queue>-poison`), which comes
    /// with its queue.
    #[arg(long = "queue", required = true)]
    pub queues: Vec<String>,
    /// The broker: `amqp://user:password@host:port/vhost` (RabbitMQ), `sqlite:PATH` (the
    /// embedded queue file) or `azure:CONNECTION-STRING` (Azure Queue Storage, feature
    /// `azure`).
    #[arg(long, env = "TABLEKIT_BROKER")]
    pub broker: String,
    /// The store whose registry of declared queues records them (as a worker's start
    /// does): the console shows them and replays, redrives and pauses only queues it
    /// records. Without it the queues are declared on the broker only.
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: Option<String>,
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
    /// Seconds a queue may hold messages that no consumer takes before the status warns
    /// (RabbitMQ: it warns at once when the broker counts no consumer attached; one look
    /// cannot say since when).
    #[arg(long, env = "TABLEKIT_UNCONSUMED_AFTER", default_value_t = UNCONSUMED_AFTER_SECS)]
    pub unconsumed_after: u64,
}

/// The default of `--unconsumed-after`: [`crate::status::UNCONSUMED_AFTER`] in seconds.
const UNCONSUMED_AFTER_SECS: u64 = crate::status::UNCONSUMED_AFTER.as_secs();

/// Options of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// A queue to consume (repeatable, or comma-separated in the variable). By default
    /// every queue the worker's operations travel on: `archive` and `index` for the
    /// built-in ones, and the queues of those the worker binary registers. The worker
    /// logs the queues it serves when it starts.
    #[arg(long = "queue", env = "TABLEKIT_QUEUE", value_delimiter = ',')]
    pub queues: Vec<String>,
    /// The broker: `amqp://user:password@host:port/vhost` (RabbitMQ), `sqlite:PATH` (the
    /// embedded queue file, which several processes may share) or
    /// `azure:CONNECTION-STRING` (Azure Queue Storage, feature `azure`).
    #[arg(long, env = "TABLEKIT_BROKER")]
    pub broker: String,
    /// The table store the operations write: `sqlite:PATH` (a SQLite file), `azure:CONNECTION-STRING` (Azure
    /// Table Storage or Azurite, feature `azure`) or `memory:` (this process only).
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: String,
    /// How many messages are handled at once, per queue served.
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
    /// Run the outbox relay, publishing what writers left in their outboxes to the `index`
    /// queue when the worker serves it, else to the first queue it serves (on whenever the
    /// worker serves `index`, as it does by default).
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
    /// The relay's name among the relays that divide the pending partitions (shown by
    /// `status` and the console); a process restarted under its name takes its shares
    /// back at once. Default: the host name and the process id.
    #[arg(long, env = "TABLEKIT_RELAY_ID")]
    pub relay_id: Option<String>,
    /// Partitions the relay drains at once, 1 to 256.
    #[arg(long, env = "TABLEKIT_RELAY_CONCURRENCY", default_value_t = 8,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub relay_concurrency: u16,
    /// Serve the operator's console from this worker process at this address (as the
    /// `console` command does, reading this process's metrics when `--metrics-addr` is
    /// set). Any address but loopback needs `--console-token`.
    #[arg(long, env = "TABLEKIT_RUN_CONSOLE")]
    pub console: Option<SocketAddr>,
    /// The console's token (at least 128 bits, 8 different characters, no whitespace:
    /// `openssl rand -hex 32`).
    #[arg(long, env = "TABLEKIT_RUN_CONSOLE_TOKEN", hide_env_values = true)]
    pub console_token: Option<String>,
    /// The console's viewer token, for reading only (the same rules as
    /// `--console-token`, and different from it; only with `--console-token`).
    #[arg(
        long,
        env = "TABLEKIT_RUN_CONSOLE_VIEWER_TOKEN",
        hide_env_values = true
    )]
    pub console_viewer_token: Option<String>,
    /// The console is reached through HTTPS (a proxy that ends TLS): its sign-in cookie
    /// is marked `Secure`.
    #[arg(long, env = "TABLEKIT_RUN_CONSOLE_BEHIND_TLS")]
    pub console_behind_tls: bool,
    /// A proxy in front of the console (as `console --trusted-proxy`).
    #[arg(long = "console-trusted-proxy", env = "TABLEKIT_RUN_CONSOLE_TRUSTED_PROXY", value_delimiter = ',', value_parser = parse_cidr)]
    pub console_trusted_proxies: Vec<ipnet::IpNet>,
    /// The console's action log (as `console --action-log`).
    #[arg(long, env = "TABLEKIT_RUN_CONSOLE_ACTION_LOG")]
    pub console_action_log: Option<std::path::PathBuf>,
    /// Seconds between two passes of the expiry sweeper, which runs beside the relay and
    /// deletes the entities of expiring types (`#[entity(ttl)]`, `#[entity(expires)]`)
    /// whose time is up; 0 turns it off.
    #[arg(long, env = "TABLEKIT_EXPIRY_INTERVAL", default_value_t = 30)]
    pub expiry_interval: u64,
    /// Keep no activity in the store. By default the worker writes, in the table
    /// `TablekitActivity` of `--store`, its counts per queue and minute (processed,
    /// failed, poisoned, redelivered; rolled up per hour after a day, kept 30 days) and a
    /// heartbeat every 10 s (host, queues, deliveries in flight, rate): the console's
    /// history and list of workers.
    #[arg(long, env = "TABLEKIT_NO_ACTIVITY")]
    pub no_activity: bool,
    /// The most poison messages each queue served keeps in the poison table
    /// (`TablekitPoison` of `--store`): the workers trim the oldest beyond it every
    /// minute, and record each trim.
    #[arg(long, env = "TABLEKIT_POISON_KEEP", default_value_t = 10_000)]
    pub poison_keep: u64,
    /// How many days a poison message is kept in the poison table.
    #[arg(long, env = "TABLEKIT_POISON_KEEP_DAYS", default_value_t = 180)]
    pub poison_keep_days: u64,
    /// How long the console keeps listing this process after its last heartbeat or its
    /// stop, in seconds (at least 60); then its record is forgotten.
    #[arg(long, env = "TABLEKIT_FORGET_AFTER", default_value_t = 86_400)]
    pub forget_after: u64,
    /// Seconds a queue the worker's operations travel on, and that this process does not
    /// serve, may hold messages that no consumer takes before the worker warns in its log
    /// (and its `--console` on its page); 0 turns the worker's look off.
    #[arg(long, env = "TABLEKIT_UNCONSUMED_AFTER", default_value_t = UNCONSUMED_AFTER_SECS)]
    pub unconsumed_after: u64,
}

/// The feed commands.
#[derive(Debug, Subcommand)]
pub enum FeedCommand {
    /// Print a table's changes from a position, then as they come, until stopped
    /// (read-only: no group, lease or checkpoint is written).
    Tail(FeedTailArgs),
    /// List the changes a group's handler could not take, with their reasons.
    Parked {
        /// The table store (as `status --store`).
        #[arg(long, env = "TABLEKIT_STORE")]
        store: String,
        /// The table whose feed the group reads.
        #[arg(long)]
        table: String,
        /// The group.
        #[arg(long)]
        group: String,
    },
}

/// `feed tail`.
#[derive(Debug, clap::Args)]
pub struct FeedTailArgs {
    /// The table store (as `status --store`).
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: String,
    /// The table whose feed to print (its type declares `#[feed]` and is registered).
    #[arg(long)]
    pub table: String,
    /// Where to start: `beginning`, `now`, or a time (RFC 3339, e.g.
    /// `2026-11-01T00:00:00Z`: every change committed at or after it).
    #[arg(long, default_value = "now")]
    pub from: String,
    /// Stop once caught up instead of waiting for more.
    #[arg(long)]
    pub once: bool,
    /// Stop after this many changes.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Print one JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Milliseconds between two reads once caught up.
    #[arg(long, default_value_t = 500)]
    pub interval_ms: u64,
}

/// The poison commands.
#[derive(Debug, Subcommand)]
pub enum PoisonCommand {
    /// List the poison messages with their reasons, oldest first.
    List {
        /// The queue and broker.
        #[command(flatten)]
        queue: QueueArgs,
        /// The table store keeping the poison table (as `run --store`).
        #[arg(long, env = "TABLEKIT_STORE")]
        store: String,
        /// At most this many.
        #[arg(long, env = "TABLEKIT_LIMIT", default_value_t = 100)]
        limit: usize,
    },
    /// Move poison messages back to the queue, with a fresh delivery count.
    Replay {
        /// The queue and broker.
        #[command(flatten)]
        queue: QueueArgs,
        /// The table store keeping the poison table (as `run --store`).
        #[arg(long, env = "TABLEKIT_STORE")]
        store: String,
        /// Only the message with this id (all when absent).
        #[arg(long, env = "TABLEKIT_MESSAGE_ID", conflicts_with = "handle")]
        id: Option<String>,
        /// Only the messages with these handles (as `list` shows them; repeat the flag):
        /// one message even when its id repeats, or is not UTF-8.
        #[arg(long)]
        handle: Vec<String>,
    },
    /// Delete poison messages for good, by handle (as `list` shows them).
    Discard {
        /// The queue and broker.
        #[command(flatten)]
        queue: QueueArgs,
        /// The table store keeping the poison table (as `run --store`).
        #[arg(long, env = "TABLEKIT_STORE")]
        store: String,
        /// The messages' handles (repeat the flag).
        #[arg(long, required = true)]
        handle: Vec<String>,
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
