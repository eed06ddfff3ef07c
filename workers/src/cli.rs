//! The `tablekit-worker` command line: options (every flag also an environment variable)
//! and what each command does. The binary is [`main`]; an application's own worker binary,
//! which adds its operations, is [`main_with`].

use std::net::SocketAddr;
use std::time::Duration;

use std::sync::Arc;

use tablekit_core::blob::BlobStore;
use tablekit_core::{AnyStore, TableStore};
use tablekit_patterns::index::{AuditOptions, AuditReport, OutboxSink, Relay, Sweeper};

use crate::archive::ArchiveOperation;
use crate::display::neutral;
use crate::error::{Error, Result};
use crate::operation::{Envelope, Registry};
use crate::queue::poison_table::{Retention, WithPoisonTable};
use crate::queue::{AnyQueue, PoisonAction, Queue};
use crate::runtime::{Worker, WorkerConfig, WorkerReport, install_prometheus, shutdown_signal};

mod args;
mod connections;
mod process;
mod serve;
pub use crate::status::{AuditStatus, QueueStatus, Status, status, status_text};
pub use args::{
    AdoptArgs, AuditArgs, BackfillArgs, Cli, Command, ConsoleArgs, DeclareArgs, EnqueueCommand,
    ExportPeriodArgs, FeedCommand, FeedTailArgs, ImportArgs, LogFormat, MigrateArgs, PeriodArg,
    PoisonCommand, QueueArgs, RunArgs, StatusArgs, features,
};
pub use connections::{Connections, ConnectionsOptions};
pub use process::{DEFAULT_LOG_FILTER, init_logging, main, main_from, main_with};

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
        Error::Drift(_) => EXIT_DRIFT,
        Error::Encode { .. } => EXIT_FAILURE,
        e if e.kind() == tablekit_core::ErrorKind::InvalidInput => EXIT_USAGE,
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
    registry_with_events(store, blobs, None)
}

/// The operations a worker process handles, as [`registry_with_blobs`]; an archive's
/// change event goes to `events` (the process's queue sink) rather than to the relay.
pub fn registry_with_events(
    store: AnyStore,
    blobs: Option<BlobStore>,
    events: Option<Arc<dyn OutboxSink>>,
) -> Registry {
    // One archiver for the process: its engine knows the partitions whose pending marker
    // it holds and removes published outbox entries in batches, across deliveries.
    let archiver = Arc::new(crate::archive::Archiver::for_worker(
        store.clone(),
        blobs.clone(),
        events,
    ));
    let registry = Registry::new().register(move |operation: ArchiveOperation| {
        let archiver = archiver.clone();
        async move {
            let outcome = archiver.archive(&operation).await?;
            tracing::debug!(?outcome, row_key = %operation.row_key, "archive");
            Ok(())
        }
    });
    crate::index::register(registry, store, blobs)
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
    let built_in = registry_with_events(
        connections.store.clone(),
        connections.blobs.clone(),
        connections.events.clone(),
    );
    operations(built_in, connections)
}

/// Opens the store `connection` names. A worker never creates a store: a SQLite file
/// that does not exist is an error naming it (a mistyped path is not a new, empty store),
/// and `?mode=rwc` is refused.
async fn open_store(connection: &str) -> Result<AnyStore> {
    if connection.starts_with("sqlite:") && connection.ends_with("?mode=rwc") {
        return Err(Error::Config(format!(
            "`--store {connection}`: a worker never creates a store; the application creates it (`AnyStore::create`, `SqliteStore::create`)"
        )));
    }
    AnyStore::connect(connection).await
}

fn blob_store(connection: Option<&str>) -> Result<Option<BlobStore>> {
    connection.map(BlobStore::connect).transpose()
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
            let store = open_store(&args.store).await?;
            // The history and heartbeat the console shows, in the same store.
            let activity = (!args.no_activity).then(|| {
                crate::activity::Activity::options()
                    .forget_after(Duration::from_secs(args.forget_after))
                    .build(store.clone())
            });
            // Poison messages kept in the store's poison table, within the cap — unless
            // the store lives in this process's memory, where nobody else could read them.
            let queue = WithPoisonTable::for_store(AnyQueue::connect(&args.broker).await?, &store)
                .retain_others(Retention {
                    max_messages: args.poison_keep,
                    max_age: Duration::from_secs(args.poison_keep_days.saturating_mul(86_400)),
                });
            let config = WorkerConfig {
                concurrency: args.concurrency,
                max_deliveries: args.max_deliveries,
                shutdown_timeout: Duration::from_secs(args.shutdown_timeout),
                lease: Duration::from_secs(args.lease),
                base_backoff: Duration::from_millis(args.backoff_ms.max(1)),
                stats_interval: Duration::from_secs(args.stats_interval.max(1)),
                unconsumed_after: (args.unconsumed_after > 0)
                    .then(|| Duration::from_secs(args.unconsumed_after)),
                ..WorkerConfig::new(String::new())
            };
            let blobs = blob_store(args.blobs.as_deref())?;
            // The archive's change events go to their queues from this process.
            let events: Arc<dyn OutboxSink> = Arc::new(crate::index::QueueSink::changes(
                AnyQueue::connect(&args.broker).await?,
            ));
            let connections = Connections::options()
                .events(events)
                .build(store.clone(), blobs.clone());
            let registry = registry_with_operations(&connections, operations);
            let queues = serve::served_queues(&args.queues, &registry)?;
            tracing::info!(queues = %queues.join(", "), kinds = ?registry.kinds(), "serving");
            // The relay publishes to the index queue when the worker serves it (and runs then
            // unasked), else, with `--relay`, to the first queue served.
            let relay_queue = match queues
                .iter()
                .find(|q| *q == crate::index::DEFAULT_INDEX_QUEUE)
            {
                Some(index) => Some(index),
                None if args.relay => queues.first(),
                None => None,
            };
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let relay_task = match relay_queue {
                Some(relay_queue) => {
                    let sink = crate::index::QueueSink::open(
                        AnyQueue::connect(&args.broker).await?,
                        relay_queue,
                    )
                    .await?;
                    let sink: Arc<dyn OutboxSink> = Arc::new(sink);
                    let relay_id = args
                        .relay_id
                        .clone()
                        .unwrap_or_else(|| format!("{}-{}", host_name(), std::process::id()));
                    let relay = Relay::options()
                        .id(relay_id)
                        .concurrency(usize::from(args.relay_concurrency))
                        .grace(Duration::from_millis(args.relay_grace_ms))
                        .late(Duration::from_millis(args.relay_late_ms))
                        .build(store.clone(), sink.clone());
                    let interval = Duration::from_secs(args.relay_interval.max(1));
                    let sweeper = (args.expiry_interval > 0).then(|| {
                        let mut options = Sweeper::options().sink(sink);
                        if let Some(blobs) = &blobs {
                            options = options.blobs(blobs.clone());
                        }
                        options.build(store.clone())
                    });
                    let expiry_interval = Duration::from_secs(args.expiry_interval.max(1));
                    let feed_store = store.clone();
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
                        let mut feeds_stopped = stopped.clone();
                        let feeds = crate::feed::upkeep(feed_store, expiry_interval, async move {
                            let _ = feeds_stopped.wait_for(|s| *s).await;
                        });
                        let relay = relay.run(interval, async move {
                            let _ = stopped.wait_for(|s| *s).await;
                        });
                        tokio::join!(relay, sweep, feeds);
                    }))
                }
                None => None,
            };
            let console_task = match args.console {
                Some(bind) => {
                    let mut options = crate::console::ConsoleOptions::new(bind, args.console_token);
                    options.viewer_token = args.console_viewer_token;
                    options.behind_tls = args.console_behind_tls;
                    options.trusted_proxies = args.console_trusted_proxies.clone();
                    options.action_log = args.console_action_log;
                    options.blobs = blobs;
                    if args.unconsumed_after > 0 {
                        options.unconsumed_after = Duration::from_secs(args.unconsumed_after);
                    }
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
                        AnyQueue::connect(&args.broker).await?,
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
            let report = serve::serve(queue, registry, &config, &queues, activity, shutdown).await;
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
            command:
                PoisonCommand::List {
                    queue,
                    store,
                    limit,
                },
        } => {
            let broker = poison_table(&queue, &store).await?;
            let messages = broker.poison_list(&queue.queue, limit).await?;
            // One line a message, whatever its sender wrote: the id, reason and body are
            // shown with their control and bidirectional characters escaped.
            for m in &messages {
                write(
                    out,
                    format!(
                        "handle {}\t{}\t{} deliveries\t{}\t{}",
                        neutral(&m.handle),
                        neutral(&m.id),
                        m.delivery_count,
                        neutral(&m.reason),
                        neutral(&String::from_utf8_lossy(&m.body))
                    ),
                )?;
            }
            write(out, format!("{} poison messages", messages.len()))
        }
        Command::Poison {
            command:
                PoisonCommand::Replay {
                    queue,
                    store,
                    id,
                    handle,
                },
        } => {
            let broker = poison_table(&queue, &store).await?;
            let moved = if handle.is_empty() {
                broker.poison_replay(&queue.queue, id.as_deref()).await?
            } else {
                broker
                    .poison_take(&queue.queue, &handle, &PoisonAction::Replay)
                    .await?
                    .len()
            };
            write(out, format!("replayed {moved} messages"))
        }
        Command::Poison {
            command:
                PoisonCommand::Discard {
                    queue,
                    store,
                    handle,
                },
        } => {
            let broker = poison_table(&queue, &store).await?;
            let gone = broker
                .poison_take(&queue.queue, &handle, &PoisonAction::Discard)
                .await?
                .len();
            write(out, format!("discarded {gone} messages"))
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
            let store = open_store(&args.store).await?;
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
            let store = open_store(&args.store).await?;
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
            let store = open_store(&args.store).await?;
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
            let store = open_store(&args.store).await?;
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
            let store = open_store(&args.store).await?;
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
            let store = open_store(&args.store).await?;
            let broker = AnyQueue::connect(&args.broker).await?;
            let mut options = crate::console::ConsoleOptions::new(args.bind, args.token);
            options.viewer_token = args.viewer_token;
            options.behind_tls = args.behind_tls;
            options.trusted_proxies = args.trusted_proxies.clone();
            options.action_log = args.action_log;
            options.queues = args.queues;
            options.refresh = args.refresh;
            options.unconsumed_after = Duration::from_secs(args.unconsumed_after);
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
            let store = open_store(&args.store).await?;
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
            let store = open_store(&args.store).await?;
            let broker = WithPoisonTable::for_store(AnyQueue::connect(&args.broker).await?, &store);
            let status = status(&store, &broker, &args.queues).await?;
            let text = if args.json {
                serde_json::to_string_pretty(&status)
                    .map_err(|e| Error::Config(format!("status as JSON: {e}")))?
            } else {
                status_text(&status, Duration::from_secs(args.unconsumed_after))
            };
            write(out, text)
        }
        Command::Feed {
            command: FeedCommand::Tail(args),
        } => {
            let store = open_store(&args.store).await?;
            let options = crate::feed::TailOptions {
                table: args.table,
                from: args.from,
                once: args.once,
                limit: args.limit,
                json: args.json,
                interval_ms: args.interval_ms,
            };
            crate::feed::tail(&store, &options, out, shutdown_signal()).await
        }
        Command::Feed {
            command:
                FeedCommand::Parked {
                    store,
                    table,
                    group,
                },
        } => {
            let store = open_store(&store).await?;
            let parked = tablekit_patterns::feed::parked(&store, &table, &group).await?;
            for p in &parked {
                write(
                    out,
                    format!(
                        "share {} seq {}\t{}\t{}\t{}",
                        p.share,
                        p.seq,
                        p.parked_at.to_rfc3339(),
                        neutral(&p.reason),
                        neutral(&p.change)
                    ),
                )?;
            }
            write(out, format!("{} parked changes", parked.len()))
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
        Command::Declare(args) => {
            let broker = AnyQueue::connect(&args.broker).await?;
            let store = match &args.store {
                Some(store) => Some(open_store(store).await?),
                None => None,
            };
            for queue in &args.queues {
                if crate::queue::is_poison_queue(queue) {
                    return Err(Error::Config(format!(
                        "`{}` is a poison queue: declare its queue, which brings it",
                        neutral(queue)
                    )));
                }
                // What a worker of the queue declares with its default configuration.
                broker
                    .declare(queue, &WorkerConfig::new(queue.as_str()).queue_options())
                    .await?;
                if let Some(store) = &store {
                    crate::activity::record_declared(store, queue).await?;
                }
                write(out, format!("declared {}", neutral(queue)))?;
            }
            Ok(())
        }
    }
}

/// The queue of `args` with its poison table in `store`, the broker's own poison queue
/// swept in first: what the `poison` commands read and act on.
async fn poison_table(args: &QueueArgs, store: &str) -> Result<WithPoisonTable<AnyQueue>> {
    let broker = WithPoisonTable::for_store(
        AnyQueue::connect(&args.broker).await?,
        &open_store(store).await?,
    );
    broker.sweep(&args.queue).await?;
    Ok(broker)
}

/// This machine's name (for the relay's default id): `HOSTNAME`, else
/// `/etc/hostname`, else `host`.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "host".to_owned())
}
