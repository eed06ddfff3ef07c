#!/usr/bin/env bash
# `tablekit` without default features is the storage core and the patterns: its
# dependency tree (normal and build dependencies) holds none of the heavy crates a
# feature adds. Fails naming each one found and what brings it in.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each crate, and the features of tablekit that may bring it in.
forbidden=(
    "rusqlite sqlite"
    "libsqlite3-sys sqlite"
    "lapin rabbitmq"
    "axum console"
    "maud console"
    "clap cli"
    "reqwest azure console"
    "metrics-exporter-prometheus prometheus"
)

args=(-p tablekit --no-default-features -e normal,build)
tree=$(cargo tree "${args[@]}" --prefix none)

found=0
for entry in "${forbidden[@]}"; do
    read -r crate features <<<"$entry"
    # `name vX.Y.Z …`: the first version found (cargo tree -i needs one when several are).
    version=$(awk -v name="$crate" '$1 == name { sub(/^v/, "", $2); print $2; exit }' <<<"$tree")
    if [[ -n "$version" ]]; then
        echo "error: tablekit --no-default-features depends on \`$crate\` $version, which" \
            "only a feature may bring in (${features// /, }); it comes through:" >&2
        cargo tree "${args[@]}" --invert "$crate@$version" >&2
        found=1
    fi
done
if ((found)); then
    exit 1
fi
names=$(for entry in "${forbidden[@]}"; do printf '%s ' "${entry%% *}"; done)
echo "tablekit --no-default-features: $(sed "s/ (\*)//" <<<"$tree" | sort -u | wc -l) crates, none of: ${names% }"
