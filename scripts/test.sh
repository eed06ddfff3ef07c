#!/usr/bin/env bash
# The tablekit test command: every test of the workspace with every feature enabled
# (unit, integration, conformance, property, multi-process and doc tests).
#
# Tests that need a service (RabbitMQ, Azurite) find it through AMQP_URL / the Azurite
# settings, else the local service, else they report a clear skip; under CI=true a
# missing service fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace --all-features "$@"
