#!/usr/bin/env bash
# The tablekit test command: every test of the workspace with every feature enabled
# (unit, integration, conformance, property, multi-process and doc tests), ending with
# one line that totals every test binary's result.
#
# Tests that need a service (RabbitMQ, Azurite) find it through AMQP_URL / the Azurite
# settings, else the local service, else they report a clear skip; under CI=true a
# missing service fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/services.sh

log=$(mktemp)
cleanup() {
    rm -f "$log"
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

cargo test --workspace --all-features "$@" 2>&1 | tee "$log"

awk '/^test result:/ {
        for (i = 1; i <= NF; i++) {
            if ($(i+1) ~ /^passed/) passed += $i
            if ($(i+1) ~ /^failed/) failed += $i
            if ($(i+1) ~ /^ignored/) ignored += $i
        }
     }
     END { printf "%d passed, %d failed, %d skipped\n", passed, failed, ignored }' "$log"
