#!/usr/bin/env bash
# Runs seeds of the deterministic simulation of the whole system (writers, relay, index
# and archive workers, sweeper, change consumers, audits over a store, queue and clock
# with faults), with a progress bar, then prints seeds per minute, faults per seed and
# the closing line `N seeds, N faults, N violations`. A failing seed prints its trace;
# `TABLEKIT_SIM_SEED=<n> cargo test -p tablekit-sim --test simulation replay --
# --nocapture` replays it exactly.
#
#   scripts/simulate.sh --seeds N [--from S] [--store memory|sqlite] [--fail-fast]
#
# `--store sqlite` runs the same workloads, faults and invariants over a real SQLite file
# per seed: its threads make the scheduling not deterministic (a soak, not a replay).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release -p tablekit-sim --bin tablekit-simulate
exec "${CARGO_TARGET_DIR:-target}"/release/tablekit-simulate "$@"
