//! `tablekit-worker`: runs tablekit's queue workers. See `tablekit-worker --help`.

fn main() -> std::process::ExitCode {
    tablekit_workers::cli::main()
}
