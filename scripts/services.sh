#!/usr/bin/env bash
# Makes sure the services the tests use are up:
# - RabbitMQ (unless AMQP_URL names one): started when installed but not running; when
#   missing, installed from the distribution's packages if this runs as root with apt-get,
#   else the one command to run is printed;
# - Azurite's table, blob and queue services on 127.0.0.1:10002, :10000 and :10001 (unless
#   TABLEKIT_AZURE_CONNECTION names a service): installed from the npm registry into
#   .azurite/ (a pinned version) and started in memory; their PIDs go to .azurite/*.pid so
#   scripts/test.sh can stop them;
# - headless Chromium and chromedriver for the console's browser test: installed from the
#   distribution's packages (chromium, chromium-driver) when missing, if this runs as root
#   with apt-get, else the one command to run is printed.
# Under CI=true a service that cannot be brought up is an error; elsewhere the tests that
# need it report a skip.
set -euo pipefail

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# Installs the distribution's RabbitMQ where this script can: as root, with apt-get.
install_rabbitmq() {
    if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
        return 1
    fi
    echo "services: installing RabbitMQ (apt-get install rabbitmq-server)" >&2
    # The package lists may be missing or stale (a fresh container): update once on failure.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q rabbitmq-server >&2 ||
        { DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q rabbitmq-server >&2; }
}

# The one command that provides a broker where this script cannot install one.
rabbitmq_hint() {
    if command -v apt-get >/dev/null; then
        echo "sudo apt-get install -y rabbitmq-server"
    else
        echo "docker run -d -p 5672:5672 rabbitmq:3.13"
    fi
}

ensure_rabbitmq() {
    if [[ -n "${AMQP_URL:-}" ]]; then
        return 0
    fi
    if port_open 127.0.0.1 5672; then
        return 0
    fi
    # The broker's commands live in sbin, which a user's PATH may lack.
    PATH="$PATH:/usr/sbin:/sbin"
    if ! command -v rabbitmq-server >/dev/null && ! install_rabbitmq; then
        echo "services: RabbitMQ is not installed and AMQP_URL is not set; run: $(rabbitmq_hint)" >&2
        [[ "${CI:-}" == "true" ]] && return 1
        return 0
    fi
    if port_open 127.0.0.1 5672; then
        # The package's own service started it.
        return 0
    fi
    echo "services: starting RabbitMQ" >&2
    rabbitmq-server -detached >/dev/null 2>&1 || true
    # The broker refuses connections for a few seconds while booting, and await_startup
    # can fail right after -detached: retry it.
    for _ in $(seq 1 60); do
        if rabbitmqctl await_startup >/dev/null 2>&1 && port_open 127.0.0.1 5672; then
            echo "services: RabbitMQ is up" >&2
            return 0
        fi
        sleep 1
    done
    echo "services: RabbitMQ did not start within 60 s" >&2
    [[ "${CI:-}" == "true" ]] && return 1
    return 0
}

AZURITE_VERSION=3.35.0

ensure_azurite() {
    local dir
    dir="$(cd "$(dirname "$0")/.." && pwd)/.azurite"
    if [[ ! -x "$dir/node_modules/.bin/azurite-table" ]]; then
        if ! command -v npm >/dev/null; then
            echo "services: npm is not installed, so Azurite cannot be" >&2
            [[ "${CI:-}" == "true" ]] && return 1
            return 0
        fi
        echo "services: installing azurite@$AZURITE_VERSION" >&2
        mkdir -p "$dir"
        npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION" >&2
    fi
    # Installed even when a service already answers: the queue kill test starts an Azurite
    # of its own from .azurite/ (to restart it mid-run).
    if [[ -n "${TABLEKIT_AZURE_CONNECTION:-}" ]] || (port_open 127.0.0.1 10002 && port_open 127.0.0.1 10000 && port_open 127.0.0.1 10001); then
        return 0
    fi
    # The binaries themselves, not `npx … &`: their PIDs are the processes to stop.
    if ! port_open 127.0.0.1 10002; then
        "$dir/node_modules/.bin/azurite-table" --inMemoryPersistence --silent --skipApiVersionCheck \
            --loose --disableTelemetry --tableHost 127.0.0.1 --tablePort 10002 >/dev/null 2>&1 &
        echo $! >"$dir/table.pid"
    fi
    if ! port_open 127.0.0.1 10000; then
        "$dir/node_modules/.bin/azurite-blob" --inMemoryPersistence --silent --skipApiVersionCheck \
            --loose --disableTelemetry --blobHost 127.0.0.1 --blobPort 10000 >/dev/null 2>&1 &
        echo $! >"$dir/blob.pid"
    fi
    if ! port_open 127.0.0.1 10001; then
        "$dir/node_modules/.bin/azurite-queue" --inMemoryPersistence --silent --skipApiVersionCheck \
            --loose --disableTelemetry --queueHost 127.0.0.1 --queuePort 10001 >/dev/null 2>&1 &
        echo $! >"$dir/queue.pid"
    fi
    for _ in $(seq 1 60); do
        if port_open 127.0.0.1 10002 && port_open 127.0.0.1 10000 && port_open 127.0.0.1 10001; then
            echo "services: Azurite (tables, blobs, queues) is up" >&2
            return 0
        fi
        sleep 0.5
    done
    echo "services: Azurite did not start within 30 s" >&2
    [[ "${CI:-}" == "true" ]] && return 1
    return 0
}

ensure_chromium() {
    if command -v chromedriver >/dev/null && command -v chromium >/dev/null; then
        return 0
    fi
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
        echo "services: installing Chromium (apt-get install chromium chromium-driver)" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >&2 ||
            { DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 &&
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >&2; } ||
            true
    fi
    if command -v chromedriver >/dev/null && command -v chromium >/dev/null; then
        return 0
    fi
    echo "services: Chromium is not installed; run: sudo apt-get install -y chromium chromium-driver" >&2
    [[ "${CI:-}" == "true" ]] && return 1
    return 0
}

# Each service is tried even when another failed (the run then reports every missing one).
status=0
ensure_rabbitmq || status=1
ensure_azurite || status=1
ensure_chromium || status=1
exit "$status"
