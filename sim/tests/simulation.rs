//! The deterministic simulation of the whole system (see the `tablekit-sim` crate docs):
//! a fixed set of seeds, the regression seeds of the breaks it found, the replay of one
//! seed (`TABLEKIT_SIM_SEED=<n>`), and the check that a seed replays exactly.

use tablekit_sim::{Options, Report, simulate};

/// The seeds CI runs (each about 140 writes with about a hundred faults; a few tenths of
/// a second each in a debug build).
const FIXED_SEEDS: std::ops::Range<u64> = 1..241;

fn assert_clean(report: &Report) {
    assert!(report.violations.is_empty(), "{}", report.summary(80));
}

fn run(seed: u64) -> Report {
    simulate(Options::new(seed))
}

#[test]
fn the_fixed_seeds_hold_every_invariant() {
    let mut failing = Vec::new();
    let (mut faults, mut writes) = (0, 0);
    for seed in FIXED_SEEDS {
        let report = run(seed);
        faults += report.faults;
        writes += report.writes;
        if !report.violations.is_empty() {
            eprintln!("{}", report.summary(40));
            failing.push(seed);
        }
    }
    eprintln!(
        "{} seeds, {writes} writes, {faults} faults, failing: {failing:?}",
        FIXED_SEEDS.end - FIXED_SEEDS.start
    );
    assert!(failing.is_empty(), "failing seeds: {failing:?}");
    assert!(
        faults / (FIXED_SEEDS.end - FIXED_SEEDS.start) >= 20,
        "too few faults per seed"
    );
}

/// Replays `TABLEKIT_SIM_SEED` (default 1) and prints its whole trace.
#[test]
fn replay() {
    let seed = std::env::var("TABLEKIT_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let report = run(seed);
    if std::env::var("TABLEKIT_SIM_SEED").is_ok() {
        for line in &report.trace {
            eprintln!("{line}");
        }
    }
    assert_clean(&report);
}

#[test]
fn a_seed_replays_exactly() {
    let first = run(7);
    let second = run(7);
    assert!(
        first.trace.len() > 100,
        "a real run: {} lines",
        first.trace.len()
    );
    assert_eq!(first.faults, second.faults);
    if let Some(at) = first
        .trace
        .iter()
        .zip(&second.trace)
        .position(|(a, b)| a != b)
    {
        panic!(
            "the runs part at line {at}:\n  {}\n  {}",
            first.trace[at], second.trace[at]
        );
    }
    assert_eq!(first.trace.len(), second.trace.len());
    assert_ne!(run(8).trace, first.trace, "another seed, another run");
}

/// A badge's link beside its holder goes missing (the audit reports its `holder_email`
/// link missing) after a delete, a re-insert and a failed insert of the badge race the
/// delete's link removal. Found by these seeds, not yet fixed: see the note.
#[test]
#[ignore = "open finding of the simulation: a denormalised field's link goes missing"]
fn open_a_badge_keeps_its_link_to_its_holder() {
    for seed in [245, 404] {
        assert_clean(&run(seed));
    }
}
