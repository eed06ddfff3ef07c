//! Runs many seeds of the deterministic simulation with a progress bar, and prints seeds
//! per minute, faults per seed and the violations found (`scripts/simulate.sh`).

use std::time::Instant;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use tablekit_sim::{Options, StoreKind, simulate};

/// Runs seeds of tablekit's deterministic simulation.
#[derive(Parser, Debug)]
struct Args {
    /// How many seeds to run.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    from: u64,
    /// `memory` (replays exactly) or `sqlite` (a real SQLite file per seed: a soak, not a
    /// replay).
    #[arg(long, default_value = "memory")]
    store: String,
    /// Stop at the first seed with a violation.
    #[arg(long)]
    fail_fast: bool,
    /// Print the whole trace of a failing seed (else its last 40 lines).
    #[arg(long)]
    trace: bool,
}

#[allow(clippy::print_stdout)]
fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("no temporary directory: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    if args.store != "memory" && args.store != "sqlite" {
        eprintln!("--store is `memory` or `sqlite`, not `{}`", args.store);
        return std::process::ExitCode::FAILURE;
    }
    let bar = ProgressBar::new(args.seeds);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {per_sec} eta {eta} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let started = Instant::now();
    let (mut faults, mut min_faults, mut violations, mut ran) = (0u64, u64::MAX, 0usize, 0u64);
    let (mut relay_publishes, mut republished) = (0u64, 0u64);
    let mut failing = Vec::new();
    for seed in args.from..args.from + args.seeds {
        let mut options = Options::new(seed);
        if args.store == "sqlite" {
            options.store = StoreKind::Sqlite(dir.path().join(format!("sim-{seed}.db")));
        }
        let report = simulate(options);
        ran += 1;
        faults += report.faults;
        min_faults = min_faults.min(report.faults);
        relay_publishes += report.relay_publishes;
        republished += report.republished;
        if !report.violations.is_empty() {
            violations += report.violations.len();
            failing.push(seed);
            let lines = if args.trace { usize::MAX } else { 40 };
            bar.suspend(|| println!("{}", report.summary(lines)));
        }
        bar.set_message(format!("{violations} violations"));
        bar.inc(1);
        if args.fail_fast && !failing.is_empty() {
            break;
        }
        if args.store == "sqlite" {
            let _ = std::fs::remove_file(dir.path().join(format!("sim-{seed}.db")));
        }
    }
    bar.finish_and_clear();
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    println!(
        "{:.0} seeds per minute ({:.0} per hour); faults per seed: mean {:.1}, minimum {}",
        ran as f64 / minutes,
        ran as f64 * 60.0 / minutes,
        faults as f64 / ran.max(1) as f64,
        if ran == 0 { 0 } else { min_faults }
    );
    println!(
        "relay publishes: {relay_publishes}, of them {republished} of an entry a relay had published before ({:.2}%: crashes, stalls past the fence, failed removals)",
        100.0 * republished as f64 / relay_publishes.max(1) as f64
    );
    if !failing.is_empty() {
        println!("failing seeds: {failing:?}");
    }
    println!("{ran} seeds, {faults} faults, {violations} violations");
    if violations == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
