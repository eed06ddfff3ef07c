//! The `main` of a worker process: the `tablekit-worker` binary's, and that of an
//! application's own worker binary, which adds its operations to the built-in ones.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use super::{Cli, Connections, EXIT_FAILURE, LogFormat, exit_code, run_with};
use crate::operation::Registry;

/// The `main` of the `tablekit-worker` binary: the built-in operations only.
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     tablekit_workers::cli::main()
/// }
/// ```
pub fn main() -> ExitCode {
    main_with(|registry, _| registry)
}

/// The `main` of a worker binary that handles its own operations as well as the built-in
/// ones: the flags and `TABLEKIT_*` variables of `tablekit-worker` (read from the process
/// arguments), its logging (`RUST_LOG`, default `info`, on stderr), its commands and exit
/// codes. `operations` receives the registry of the built-in operations and the
/// [`Connections`] of `--store` and `--blobs`, and returns it with the application's
/// handlers registered; it is called once, by `run`, after connecting. Without `--queue`,
/// `run` serves the queue of every operation registered ([`Registry::queues`], each
/// operation's [`Operation::QUEUE`](crate::Operation::QUEUE)).
///
/// On failure the error and its chain of causes are printed on stderr and the exit code
/// is [`exit_code`]'s.
///
/// ```no_run
/// use std::process::ExitCode;
///
/// use serde::{Deserialize, Serialize};
/// use tablekit_core::{Entity, TableStore};
/// use tablekit_workers::{Operation, OperationError};
///
/// /// Records that a department was audited (idempotent: insert-or-replace).
/// #[derive(Serialize, Deserialize)]
/// struct MarkAudited {
///     department: String,
/// }
///
/// impl Operation for MarkAudited {
///     const KIND: &'static str = "mark-audited";
///     const VERSION: u32 = 1;
///     const QUEUE: &'static str = "audits";
/// }
///
/// fn main() -> ExitCode {
///     // `my-worker run --broker sqlite:queue.db --store sqlite:app.db` serves `archive`,
///     // `index` and `audits`; `--queue audits` serves `audits` only.
///     tablekit_workers::cli::main_with(|registry, connections| {
///         let store = connections.store.clone();
///         registry.register(move |operation: MarkAudited| {
///             let store = store.clone();
///             async move {
///                 let marker = Entity::new(operation.department, "audited").with("Audited", true);
///                 store.insert_or_replace("Audits", marker).await?;
///                 Ok::<_, OperationError>(())
///             }
///         })
///     })
/// }
/// ```
pub fn main_with<F>(operations: F) -> ExitCode
where
    F: FnOnce(Registry, &Connections) -> Registry,
{
    main_from(std::env::args_os(), operations)
}

/// [`main_with`] over the arguments `args` rather than the process's; the first is the
/// program's name, as in [`std::env::args_os`]. For a binary that is a worker only when
/// asked, e.g. `my-app worker run …` calling
/// `main_from(std::env::args_os().skip(1), …)`. Invalid arguments, `--help` and
/// `--version` exit the process as clap does.
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     let mut args = std::env::args_os().skip(1).peekable();
///     if args.peek().is_some_and(|command| command == "worker") {
///         return tablekit_workers::cli::main_from(args, |registry, _| registry);
///     }
///     // ... the application's other work ...
///     std::process::ExitCode::SUCCESS
/// }
/// ```
pub fn main_from<I, T, F>(args: I, operations: F) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
    F: FnOnce(Registry, &Connections) -> Registry,
{
    let cli = Cli::parse_from(args);
    init_logging(cli.log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    let mut stdout = std::io::stdout();
    match runtime.block_on(run_with(cli, &mut stdout, operations)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::from(exit_code(&error))
        }
    }
}

/// The filter of log lines when `RUST_LOG` is not set: tablekit's `info` lines; the AMQP
/// client's own lines only from `warn` up to `error`, and never those it writes for a
/// channel the broker closes on purpose (a queue asked about before it is declared is
/// an answer, which tablekit reports itself, not an error).
pub const DEFAULT_LOG_FILTER: &str = "info,lapin=off";

/// Installs the process's log subscriber on stderr (unless the application installed its
/// own): `format`'s lines, `RUST_LOG`'s levels (default [`DEFAULT_LOG_FILTER`]); ANSI
/// colour only when stderr is a terminal and `NO_COLOR` is unset.
pub fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // `try_init`: an application that installed its own subscriber keeps it.
    let _ = match format {
        LogFormat::Text => builder.with_ansi(colour).try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
}
