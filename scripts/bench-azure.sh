#!/usr/bin/env bash
# Runs the Azure client benchmark: tablekit's client against the Python SDK
# (azure-data-tables) on the same Azurite. Installs the SDK into .bench-venv/ and starts
# Azurite through scripts/services.sh when needed.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/services.sh
if [[ ! -x .bench-venv/bin/python ]]; then
    python3 -m venv .bench-venv
    .bench-venv/bin/pip install --quiet "azure-data-tables==12.7.0"
fi
PYTHON="$PWD/.bench-venv/bin/python" cargo bench -p tablekit-core --features azure --bench azure_vs_python
