//! The deterministic simulation of the whole system (see the `tablekit-sim` crate docs):
//! a fixed set of seeds, the regression seeds of the breaks it found, the replay of one
//! seed (`TABLEKIT_SIM_SEED=<n>`), and the check that a seed replays exactly.

use tablekit_sim::{Options, Report, simulate};

/// The seeds CI runs, held within CI's three minutes for them: each seed is about 140
/// writes with about a hundred faults, and since the change feed's groups joined the
/// world about a second in a debug build (240 seeds took 4.7 minutes on one core). They
/// run on every core (`run_all`). Ten thousand more run by hand, in release
/// (`tablekit-simulate`).
const FIXED_SEEDS: std::ops::Range<u64> = 1..151;

fn assert_clean(report: &Report) {
    assert!(report.violations.is_empty(), "{}", report.summary(80));
}

fn run(seed: u64) -> Report {
    simulate(Options::new(seed))
}

#[test]
fn the_fixed_seeds_hold_every_invariant() {
    let reports = run_all(FIXED_SEEDS);
    let mut failing = Vec::new();
    let (mut faults, mut writes) = (0, 0);
    for (seed, report) in FIXED_SEEDS.zip(&reports) {
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

/// The reports of `seeds`, in their order, run on as many threads as the machine has
/// cores: each seed is a world of its own (`a_seed_replays_exactly` runs one beside
/// another), so they divide among threads freely.
fn run_all(seeds: std::ops::Range<u64>) -> Vec<Report> {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let next = std::sync::atomic::AtomicU64::new(seeds.start);
    let mut reports: Vec<(u64, Report)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let seed = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if seed >= seeds.end {
                            return done;
                        }
                        done.push((seed, run(seed)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a thread of seeds"))
            .collect()
    });
    reports.sort_by_key(|(seed, _)| *seed);
    reports.into_iter().map(|(_, report)| report).collect()
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

/// A seed replays exactly, also with another run of it going on beside it in the same
/// process (as the test harness runs simulations side by side): nothing of one run may
/// reach another, as a lock of the process once did.
#[test]
fn a_seed_replays_exactly() {
    let (first, second) = std::thread::scope(|scope| {
        let beside = scope.spawn(|| run(7));
        let first = run(7);
        (first, beside.join().expect("the run beside"))
    });
    let third = run(7);
    assert!(
        first.trace.len() > 100,
        "a real run: {} lines",
        first.trace.len()
    );
    for other in [&second, &third] {
        if let Some(at) = first
            .trace
            .iter()
            .zip(&other.trace)
            .position(|(a, b)| a != b)
        {
            panic!(
                "the runs part at line {at}:\n  {}\n  {}",
                first.trace[at], other.trace[at]
            );
        }
        assert_eq!(first.trace.len(), other.trace.len());
        assert_eq!(first.faults, other.faults);
    }
    assert_ne!(run(8).trace, first.trace, "another seed, another run");
}

/// The seeds that found each break of the composition, named by what broke (each is
/// also pinned by a test at the step that broke, in `patterns/tests/composition.rs` and
/// `patterns/tests/lost_answer.rs`: a seed's run drifts as the code changes).
const REGRESSION_SEEDS: &[(&str, &[u64])] = &[
    // A delete's late link removal took the link of a re-insert still in flight.
    // A write stalled past the relay's grace put its link after its undoing ran (the
    // claimed entry still there, the undoing was not recorded again).
    ("no link outlives the write that put it", &[14754]),
    // A failed write's undoing took the link another write of the badge, in flight,
    // had put.
    ("a denormalised field keeps its link", &[245, 404, 2919]),
    // A release refused for a failed write's newer version; a stalled write's undoing
    // run before its late reservation.
    (
        "no reservation outlives its holder's value",
        &[556, 860, 3030, 3255, 2974, 2512],
    ),
    // A write stalled past the relay's grace reserved after its undoing ran, then died.
    (
        "a stalled write reserves nothing after its undoing ran",
        &[8876],
    ),
    // A write stalled past its lease: its value was taken over as dead, then it committed.
    ("a committed value keeps its reservation", &[8259]),
    // A copy written by a delivery that failed before seeing its primary move on; a
    // copy taken back because a read of its primary failed.
    (
        "each copy follows its primary's last write",
        &[3597, 8117, 7302],
    ),
    // An insert found its membership still listed by the deleted entity of its key.
    (
        "an insert's id-list membership survives a concurrent delete",
        &[5634],
    ),
    // A batch whose first write was a delete, failed before reaching the store, was read
    // back as landed: a concurrent delete of the same entity had stamped its tombstone
    // with the same version (a delete's version was the deleted one's plus one).
    (
        "a failed attempt is not taken for another write's tombstone",
        &[1844, 2772],
    ),
    // The archive copied a version's blobs, found it changed and archived the next.
    (
        "the archive leaves no blob of a superseded version",
        &[1898, 6623],
    ),
    // (Found with the large type in the world.) A `LargeTable` insert whose answer was
    // lost, retried by its caller, answered `AlreadyExists` for its own write.
    (
        "a large write whose answer was lost is not refused",
        &[8, 9, 13],
    ),
    // A redelivery of a source's work took the denormalised field off its dependent
    // while an earlier delivery, paused, then wrote the dependent's copy with the value.
    ("a dependent's copies follow its last value", &[3198, 4532]),
    // Without the tombstone: an insert planned while its key was free committed after a
    // delete of that key and was outranked by it.
    ("a delete does not outrank a later insert", &[594]),
    // Without the ETag on its rewrite: a migration wrote back the value it had read over
    // a write that landed in between (found by the `migrate-etag` teeth patch).
    ("a migration leaves a concurrent write alone", &[583]),
    // (Found once the workers handled deliveries at once.) The archive read a version
    // whose blob a newer write then dropped, and poisoned the move as a missing blob.
    (
        "the archive moves the newer version when a blob went",
        &[2211],
    ),
    // (Found once a relay could stall past its lease.) A relay stalled after reading a
    // partition's last page, then removed its marker though a delete had written its
    // tombstone's burial meanwhile; and the drain's last round waited for a stalled pass
    // while an entity expired, then ended without sweeping it.
    (
        "a stalled relay leaves the marker of an entry written meanwhile",
        &[8043, 8260],
    ),
    // A member's replace read its links before a badge put its link; the badge read the
    // member before the replace committed and kept the old email (found by the SQLite
    // soak as 901922).
    (
        "a dependent linked while its source commits gets the new value",
        &[11168],
    ),
    // The archive worker died after copying a blob and before the archived copy's write;
    // the source expired before the redelivery, which found nothing to move and left the
    // blob (now its upload is recorded first and settled by the next delivery); a
    // delivery settling another's record lost the answer of the record's deletion and
    // left the blobs (now the record is claimed first, deleted last).
    (
        "a move that died after copying its blobs leaves none behind",
        &[17907, 16522],
    ),
    // A poll whose read of one share failed moved the others' read positions past
    // changes it never handed out: the next checkpoint skipped them (the feed's groups).
    ("a group of the feed skips nothing", &[10]),
    // An insert whose answer was lost landed, was superseded, and its retry was refused:
    // the model took it for refused, and the feed's log holds its change.
    (
        "a write refused when retried after an unknown outcome",
        &[1787],
    ),
    // A delivery of an entity's older count work, its lease lapsed, read the primary
    // before the newer write and committed its member row after the newer work found
    // nothing to do; its read again failed, and the other delivery had settled the
    // message: the member row stayed (the newer work now touches the shard's counter, so
    // the older commit fails on its ETag). And (seed 858, with the stall fault) a member
    // row read before the counter row it was committed with (now the counter first).
    (
        "a count follows an older message applied after a newer one",
        &[621438, 858],
    ),
];

#[test]
fn the_regression_seeds_hold_every_invariant() {
    let mut failing = Vec::new();
    for (what, seeds) in REGRESSION_SEEDS {
        for &seed in *seeds {
            let report = run(seed);
            if !report.violations.is_empty() {
                eprintln!("{what}:\n{}", report.summary(40));
                failing.push((*what, seed));
            }
        }
    }
    assert!(failing.is_empty(), "failing: {failing:?}");
}
