#!/usr/bin/env bash
# Makes sure the services the tests use are up: RabbitMQ (unless AMQP_URL names one).
# Starts the local broker when it is installed but not running, and waits for it. Under
# CI=true a broker that cannot be reached is an error; elsewhere the tests that need it
# report a skip.
set -euo pipefail

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

ensure_rabbitmq() {
    if [[ -n "${AMQP_URL:-}" ]]; then
        return 0
    fi
    if port_open 127.0.0.1 5672; then
        return 0
    fi
    if ! command -v rabbitmq-server >/dev/null; then
        echo "services: RabbitMQ is not installed and AMQP_URL is not set" >&2
        [[ "${CI:-}" == "true" ]] && return 1
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

ensure_rabbitmq
