//! The deterministic simulation: a fixed set of seeds, the regression seeds of breaks it
//! found, and the replay of one seed (`TABLEKIT_SIM_SEED=<n>`).

use tablekit_sim::{Options, Report, simulate};

fn assert_clean(report: &Report) {
    assert!(report.violations.is_empty(), "{}", report.summary(60));
}

/// Replays `TABLEKIT_SIM_SEED` (default 1) and prints its whole trace.
#[test]
fn replay() {
    let seed = std::env::var("TABLEKIT_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let report = simulate(Options::new(seed));
    if std::env::var("TABLEKIT_SIM_SEED").is_ok() {
        for line in &report.trace {
            eprintln!("{line}");
        }
    }
    assert_clean(&report);
}
