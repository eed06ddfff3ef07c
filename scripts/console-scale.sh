#!/usr/bin/env bash
# Measures the console over a large poison queue, by hand (figures for notes, never in CI):
# seeds a SQLite queue with MESSAGES poison messages (default 100,000) — 60 with 3 MB
# bodies, one whose id and reason are not UTF-8, 2,011 reasons `conflict on ord-N` —
# starts `tablekit-worker console` over it, fetches its pages (first, newest first, last,
# reasons, a reason group, a message, the API) once and the poison page four times at
# once, and prints each answer's status, size and time, and the console's peak memory
# (VmHWM).
#
#   scripts/console-scale.sh [path/to/tablekit-worker]
#
# The binary defaults to target/release/tablekit-worker
# (`cargo build --release -p tablekit-workers --bin tablekit-worker --features cli,sqlite`).
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-target/release/tablekit-worker}
dir=$(mktemp -d)
port=${CONSOLE_SCALE_PORT:-9477}
cleanup() {
    [[ -n "${pid:-}" ]] && kill "$pid" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

python3 - "$dir/queue.db" "${MESSAGES:-100000}" <<'PY'
import json, sqlite3, sys, time, uuid
db = sqlite3.connect(sys.argv[1])
messages = int(sys.argv[2])
db.executescript("""
CREATE TABLE IF NOT EXISTS tablekit_queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL, id TEXT NOT NULL,
    body BLOB NOT NULL, sent_at INTEGER NOT NULL, visible_at INTEGER NOT NULL,
    dequeue_count INTEGER NOT NULL DEFAULT 0, pop_receipt TEXT, reason TEXT);
CREATE INDEX IF NOT EXISTS tablekit_queue_ready ON tablekit_queue (queue, visible_at, seq);
""")
kinds = ["archive-employee", "index-copy", "index-remove"]
reasons = ["timeout after 30 s", "NotFound: Current/D1", "handler panicked",
           "schema version 3 unknown", "PreconditionFailed"]
now = int(time.time() * 1_000_000)
rows = []
for i in range(messages):
    payload = {"n": i, "photo": "x" * (3 * 1024 * 1024)} if i < 60 else {"n": i, "tag": f"needle-{i}-end"}
    body = json.dumps({"id": str(uuid.uuid4()), "kind": kinds[i % 3], "version": 1,
                       "created_at": "2026-11-26T10:00:00Z", "payload": payload}).encode()
    ident, reason = f"msg-{i:06}".encode(), reasons[i % 5].encode()
    if i >= 200 and i % 40 == 3 and (i - 200) // 40 < 2011:
        reason = f"conflict on ord-{(i - 200) // 40}".encode()
    if i == 5000:
        ident, reason = b"bad-\xff\xfe-id", b"bad-bytes \xc3\x28"
    rows.append(("scale-poison", ident, body, now, now, 5, reason))
db.executemany("INSERT INTO tablekit_queue (queue, id, body, sent_at, visible_at, dequeue_count, reason) "
               "VALUES (?, CAST(? AS TEXT), ?, ?, ?, ?, CAST(? AS TEXT))", rows)
db.commit()
PY

# The queue, declared as its workers would (the first open also fills in the operation
# kinds of the rows written above, as after an upgrade).
started=$(date +%s.%N)
"$binary" declare --queue scale --broker "sqlite:$dir/queue.db" >/dev/null
echo "declare (kinds filled in):  $(echo "$(date +%s.%N) - $started" | bc) s"
"$binary" console --bind "127.0.0.1:$port" --broker "sqlite:$dir/queue.db" \
    --store "sqlite:$dir/store.db" --queue scale >"$dir/console.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.1
done
fetch() {
    curl -s -o /dev/null -w "%{http_code} %{size_download} bytes %{time_total} s\n" \
        "http://127.0.0.1:$port$1"
}
echo "binary: $binary"
echo "messages: ${MESSAGES:-100000}"
echo "overview:                  $(fetch /)"
echo "first page:                $(fetch /poison/scale)"
echo "limit=100:                 $(fetch '/poison/scale?limit=100')"
echo "newest first:              $(fetch '/poison/scale?limit=100&order=newest')"
echo "last page:                 $(fetch '/poison/scale?limit=100&back=1')"
echo "every reason group:        $(fetch /poison/scale/reasons)"
echo "one reason group:          $(fetch '/poison/scale?group=conflict%20on%20ord-%23')"
echo "by kind:                   $(fetch '/poison/scale?kind=index-copy')"
echo "a 3 MB message's page:     $(fetch /poison/scale/message/1)"
echo "API, a page of 100:        $(fetch '/api/poison/scale?limit=100')"
echo "peak memory after one:     $(grep VmHWM /proc/$pid/status | awk '{print $2, $3}')"
# The four fetches wait for each other in a subshell (a bare `wait` would wait for the
# console too).
(for _ in 1 2 3 4; do fetch /poison/scale & done; wait) | sed 's/^/four at once:              /'
echo "peak memory after five:    $(grep VmHWM /proc/$pid/status | awk '{print $2, $3}')"
