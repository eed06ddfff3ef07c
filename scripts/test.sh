#!/usr/bin/env bash
# The tablekit test command: every test of the workspace with every feature enabled
# (unit, integration, conformance, property, multi-process and doc tests), ending with
# the skipped tests and why, then one line that totals every test binary's result:
# `N passed, N failed, N skipped`. Arguments go to `cargo test`.
#
# Tests that need a service (RabbitMQ, Azurite) find it through AMQP_URL / the Azurite
# settings, else the local service, else they record a skip in the file TABLEKIT_SKIP_LOG
# names: such a test is counted as skipped, not passed. Under CI=true a missing service
# fails the test instead. The exit status is non-zero when a test failed or cargo did.
set -euo pipefail
cd "$(dirname "$0")/.."

log=$(mktemp)
skips=$(mktemp)
cleanup() {
    rm -f "$log" "$skips"
    # Azurite, if scripts/services.sh started it for this run.
    for pid in .azurite/table.pid .azurite/blob.pid .azurite/queue.pid; do
        if [[ -f "$pid" ]]; then
            kill "$(cat "$pid")" 2>/dev/null || true
            rm -f "$pid"
        fi
    done
    # RabbitMQ containers that tests started through testcontainers (Docker hosts only).
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
        docker ps -aq --filter label=tablekit-test | xargs -r docker rm -f >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT

status=0
# Under CI=true a service that cannot be brought up fails the run, after the tests show
# which of them needed it.
./scripts/services.sh || status=$?

# Every binary runs even after one fails, so the totals cover them all; with pipefail the
# status is cargo's, not tee's.
TABLEKIT_SKIP_LOG="$skips" cargo test --workspace --all-features --no-fail-fast "$@" 2>&1 |
    tee "$log" || { [[ "$status" != 0 ]] || status=$?; }

# The skip log holds `<binary>\t<test>\t<reason>` per skip (a test may record several);
# libtest's output says which binary ran (`Running … (<path>)`) and how each test ended.
# A skipped test that libtest reports `ok` moves from passed to skipped; one that failed
# afterwards stays failed.
if ! summary=$(awk -F'\t' '
    FILENAME == ARGV[1] {
        key = $1 SUBSEP $2
        if (!(key in reason)) { order[++n] = key; reason[key] = $3 }
        next
    }
    /^ *Running .*\(.*\)$/ {
        binary = $0
        sub(/.*\(/, "", binary); sub(/\)$/, "", binary); sub(/.*\//, "", binary)
        next
    }
    /^ *Doc-tests / { binary = ""; next }
    /^test .* \.\.\. / {
        line = $0
        sub(/^test /, "", line)
        name = line; sub(/ \.\.\. .*/, "", name)
        result = line; sub(/.* \.\.\. /, "", result)
        ended[binary SUBSEP name] = result
        if (result ~ /^ignored/) ignored_list[++m] = binary ": " name
        next
    }
    /^test result:/ {
        line = $0
        if (match(line, /[0-9]+ passed/)) passed += substr(line, RSTART, RLENGTH) + 0
        if (match(line, /[0-9]+ failed/)) failed += substr(line, RSTART, RLENGTH) + 0
        if (match(line, /[0-9]+ ignored/)) ignored += substr(line, RSTART, RLENGTH) + 0
    }
    END {
        # The skipped tests grouped by why, in the order the reasons came.
        skipped = ignored
        for (i = 1; i <= n; i++) {
            key = order[i]
            if (ended[key] ~ /^FAILED/) continue
            split(key, part, SUBSEP)
            test = part[1]; sub(/-[0-9a-f]+$/, "", test)
            why = reason[key]
            if (!(why in tests)) reasons[++r] = why
            tests[why] = tests[why] "    " test ": " part[2] "\n"
            skipped++
            passed--
        }
        for (i = 1; i <= m; i++) {
            item = ignored_list[i]; sub(/-[0-9a-f]+:/, ":", item)
            why = "#[ignore]"
            if (!(why in tests)) reasons[++r] = why
            tests[why] = tests[why] "    " item "\n"
        }
        if (r > 0) {
            print "skipped tests, by reason:"
            for (i = 1; i <= r; i++) printf "  %s\n%s", reasons[i], tests[reasons[i]]
        }
        printf "%d passed, %d failed, %d skipped\n", passed, failed, skipped
        exit (failed > 0)
    }' "$skips" "$log")
then
    # A failed test fails the run even if cargo's status was lost.
    [[ "$status" != 0 ]] || status=1
fi
echo "$summary"
exit "$status"
