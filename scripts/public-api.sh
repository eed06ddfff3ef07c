#!/usr/bin/env bash
# The public API of each published library crate (tablekit-core, tablekit-derive,
# tablekit-patterns, tablekit-workers, tablekit) is kept in `api/<crate>.txt`, so that a
# change to it is a deliberate diff.
#
#   scripts/public-api.sh            compare with api/; on a difference print it and fail
#   scripts/public-api.sh --bless    write api/ from this tree
#   scripts/public-api.sh --reuse-doc [--bless]
#                                    read the documentation a `cargo doc --workspace
#                                    --no-deps --all-features` just wrote to the workspace's
#                                    target folder instead of building it (what CI does,
#                                    right after that build; elsewhere it may be stale)
#
# Works on stable: `cargo doc --no-deps --all-features --lib` of the five crates, once, into
# its own target folder (target/public-api-doc, or $PUBLIC_API_TARGET_DIR) so that it
# does not disturb the main build's; then scripts/public_api.py reads the HTML: the items
# in each crate's all.html, and on each item page the `code-header` of every method,
# associated item, variant, field and implementation (not the auto trait and blanket
# implementations, nor the methods of trait implementations). One sorted line per item or
# member, `<path>: <declaration>`.
#
# The lines are rustdoc's rendering: a new toolchain may change a few of them; bless then.
set -euo pipefail
cd "$(dirname "$0")/.."

reuse=0
args=()
for arg in "$@"; do
    case "$arg" in
        --reuse-doc) reuse=1 ;;
        --bless) args+=(--bless) ;;
        *) echo "usage: $0 [--bless] [--reuse-doc]" >&2; exit 2 ;;
    esac
done

if [[ $reuse == 1 ]]; then
    target=$(cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
else
    target=${PUBLIC_API_TARGET_DIR:-target/public-api-doc}
    cargo doc --no-deps --all-features --lib --target-dir "$target" \
        -p tablekit-core -p tablekit-derive -p tablekit-patterns -p tablekit-workers -p tablekit
fi

exec python3 scripts/public_api.py "$target/doc" api "${args[@]}"
