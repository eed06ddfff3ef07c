#!/usr/bin/env bash
# Runs the Azure benchmarks on the same Azurite: tablekit's table client against the Python
# SDK (azure-data-tables), and the archive worker on Azure queues against RabbitMQ and the
# Python SDK's queue loop (azure-storage-queue). Installs the SDK into .bench-venv/ and starts
# Azurite through scripts/services.sh when needed.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/services.sh
if [[ ! -x .bench-venv/bin/python ]]; then
    python3 -m venv .bench-venv
fi
.bench-venv/bin/pip install --quiet "azure-data-tables==12.7.0" "azure-storage-queue==12.18.1"
PYTHON="$PWD/.bench-venv/bin/python" cargo bench -p tablekit-core --features azure --bench azure_vs_python
PYTHON="$PWD/.bench-venv/bin/python" cargo bench -p tablekit-workers --features azure --bench azure_queues
