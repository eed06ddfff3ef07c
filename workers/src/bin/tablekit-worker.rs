//! `tablekit-worker`: runs tablekit's queue workers. See `tablekit-worker --help`.

use std::process::ExitCode;

use clap::Parser;
use tablekit_workers::cli::{self, Cli};

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(cli::EXIT_FAILURE);
        }
    };
    let mut stdout = std::io::stdout();
    match runtime.block_on(cli::run(cli, &mut stdout)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::from(cli::exit_code(&error))
        }
    }
}
