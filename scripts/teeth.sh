#!/usr/bin/env bash
# Shows the simulation has teeth: each patch in sim/teeth/ removes one safety step (the
# outbox entry in the commit, the pending marker, a version check, a fix the simulation
# led to); with it applied, the simulation must fail. For each patch this prints the
# first failing seed (searching up to --seeds, default 500), then reverts the patch.
# A patch whose break the simulation reaches only rarely names, in a `Pinned-by:
# <package> <test file> <test>` line above its diff, the deterministic test that pins it
# step by step: that test must fail too.
#
#   scripts/teeth.sh [--seeds N] [patch …]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=500
if [[ "${1:-}" == "--seeds" ]]; then seeds=$2; shift 2; fi
patches=("$@")
if [[ ${#patches[@]} -eq 0 ]]; then patches=(sim/teeth/*.patch); fi
if ! git diff --quiet -- core patterns workers; then
    echo "teeth.sh applies patches to core, patterns and workers: commit or stash their changes first" >&2
    exit 2
fi
printf '%-32s %s\n' "safety step removed" "first failing seed (of $seeds)"
for patch in "${patches[@]}"; do
    name=$(basename "$patch" .patch)
    git apply "$patch"
    trap 'git apply -R "$patch" 2>/dev/null || true' EXIT
    cargo build --quiet --release -p tablekit-sim --bin tablekit-simulate
    out=$("${CARGO_TARGET_DIR:-target}"/release/tablekit-simulate --seeds "$seeds" --fail-fast 2>&1 || true)
    pinned=""
    if read -r package file test < <(sed -n 's/^Pinned-by: //p' "$patch"); [[ -n "${test:-}" ]]; then
        if cargo test --quiet -p "$package" --test "$file" -- --exact "$test" >/dev/null 2>&1; then
            pinned="; pinned test $test PASSES"
        else
            pinned="; pinned test $test fails"
        fi
    fi
    git apply -R "$patch"
    trap - EXIT
    first=$(grep -a -o 'failing seeds: \[[0-9]*' <<<"$out" | grep -o '[0-9]*$' || true)
    what=$(grep -a -m1 'VIOLATION' <<<"$out" | sed 's/^ *VIOLATION //' | cut -c1-110 || true)
    printf '%-32s %s\n' "$name" "${first:-none in $seeds}${pinned}  ${what}"
done
# The last build was of a patched tree: build the code as it is, so that the binary left
# in target/ is never a patched one run by mistake.
cargo build --quiet --release -p tablekit-sim --bin tablekit-simulate
