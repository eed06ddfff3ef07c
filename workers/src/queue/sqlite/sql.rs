//! The SQL of the SQLite queue, one named statement each.

/// The operation's kind and version read from a body that is an envelope, as the columns
/// `json_kind` and `json_version`. The body is read as text for the JSON functions, which
/// treat a BLOB as JSONB: a body that is not JSON text (or not an envelope) has no
/// operation, and never fails the query.
macro_rules! json_envelope_columns {
    () => {
        "
        CASE WHEN json_valid(CAST(body AS TEXT))
            AND json_type(CAST(body AS TEXT), '$.kind') = 'text'
            AND json_type(CAST(body AS TEXT), '$.version') = 'integer'
        THEN json_extract(CAST(body AS TEXT), '$.kind') END AS json_kind,
        CASE WHEN json_valid(CAST(body AS TEXT))
            AND json_type(CAST(body AS TEXT), '$.kind') = 'text'
            AND json_type(CAST(body AS TEXT), '$.version') = 'integer'
        THEN json_extract(CAST(body AS TEXT), '$.version') END AS json_version"
    };
}

/// The operation's kind and version as the columns `kind` and `version`: stored with the
/// message (`''`: not an operation), else read from its body.
macro_rules! envelope_columns {
    () => {
        "
        CASE WHEN op_kind IS NOT NULL THEN NULLIF(op_kind, '')
        WHEN json_valid(CAST(body AS TEXT))
            AND json_type(CAST(body AS TEXT), '$.kind') = 'text'
            AND json_type(CAST(body AS TEXT), '$.version') = 'integer'
        THEN json_extract(CAST(body AS TEXT), '$.kind') END AS kind,
        CASE WHEN op_kind IS NOT NULL THEN CASE WHEN op_kind = '' THEN NULL ELSE op_version END
        WHEN json_valid(CAST(body AS TEXT))
            AND json_type(CAST(body AS TEXT), '$.kind') = 'text'
            AND json_type(CAST(body AS TEXT), '$.version') = 'integer'
        THEN json_extract(CAST(body AS TEXT), '$.version') END AS version"
    };
}

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tablekit_queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    id TEXT NOT NULL,
    body BLOB NOT NULL,
    sent_at INTEGER NOT NULL,
    visible_at INTEGER NOT NULL,
    dequeue_count INTEGER NOT NULL DEFAULT 0,
    pop_receipt TEXT,
    reason TEXT,
    op_kind TEXT,
    op_version INTEGER
);
CREATE INDEX IF NOT EXISTS tablekit_queue_ready ON tablekit_queue (queue, visible_at, seq);
CREATE INDEX IF NOT EXISTS tablekit_queue_order ON tablekit_queue (queue, seq);
CREATE TABLE IF NOT EXISTS tablekit_queue_paused (queue TEXT PRIMARY KEY);
";

/// Whether the registry of declared queues exists yet.
pub(super) const REGISTRY_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tablekit_queue_declared')";

/// The registry of declared queues: each queue a worker (or `tablekit-worker declare`)
/// declared, with when it first did (Unix microseconds).
pub(super) const REGISTRY_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS tablekit_queue_declared (queue TEXT PRIMARY KEY, declared_at INTEGER NOT NULL)";

/// Registers, as declared at `?1`, every queue that holds messages but poison queues: the
/// names are found by skipping along the index, one seek per name.
pub(super) const REGISTRY_BACKFILL: &str = "
WITH RECURSIVE names(queue) AS (
    SELECT MIN(queue) FROM tablekit_queue
    UNION ALL
    SELECT (SELECT MIN(queue) FROM tablekit_queue WHERE queue > names.queue)
    FROM names WHERE names.queue IS NOT NULL
)
INSERT OR IGNORE INTO tablekit_queue_declared (queue, declared_at)
SELECT queue, ?1 FROM names WHERE queue IS NOT NULL AND queue NOT GLOB '*-poison'";

/// Registers queue `?1` as declared at `?2`, unless it is already.
pub(super) const DECLARE: &str =
    "INSERT OR IGNORE INTO tablekit_queue_declared (queue, declared_at) VALUES (?1, ?2)";

/// Whether queue `?1` is declared.
pub(super) const IS_DECLARED: &str =
    "SELECT EXISTS (SELECT 1 FROM tablekit_queue_declared WHERE queue = ?1)";

/// The declared queues by name, poison queues left out.
pub(super) const DECLARED: &str =
    "SELECT queue FROM tablekit_queue_declared WHERE queue NOT GLOB '*-poison' ORDER BY queue";

/// Whether the queue table has the columns of the operation's kind and version (files
/// made before them have not).
pub(super) const HAS_OPERATION_COLUMNS: &str =
    "SELECT EXISTS (SELECT 1 FROM pragma_table_info('tablekit_queue') WHERE name = 'op_kind')";

/// Adds the columns of the operation's kind and version.
pub(super) const ADD_OPERATION_COLUMNS: &str = "
ALTER TABLE tablekit_queue ADD COLUMN op_kind TEXT;
ALTER TABLE tablekit_queue ADD COLUMN op_version INTEGER;";

/// Fills the operation's kind (`''`: the body is not an operation) and version of the
/// rows written without them (by a tablekit older than the columns, or by hand).
pub(super) const FILL_OPERATION_COLUMNS: &str = concat!(
    "UPDATE tablekit_queue SET op_kind = COALESCE(json_kind, ''), op_version = json_version FROM (SELECT seq AS row_seq, ",
    json_envelope_columns!(),
    " FROM tablekit_queue WHERE op_kind IS NULL) WHERE seq = row_seq"
);

/// The index the counts of a poison queue's kinds and reasons read alone: the queue, the
/// operation's kind and the reason (a reason is stored after its body: reading it from the
/// row would read every large body on the way).
pub(super) const FACETS_INDEX: &str =
    "CREATE INDEX IF NOT EXISTS tablekit_queue_facets ON tablekit_queue (queue, op_kind, reason)";

/// Stores a message with its operation's kind (`''` when it is not one) and version.
pub(super) const SEND: &str = "INSERT INTO tablekit_queue (queue, id, body, sent_at, visible_at, op_kind, op_version) VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)";

pub(super) const RECEIVE: &str = "
UPDATE tablekit_queue
SET visible_at = ?3 + ?4, dequeue_count = dequeue_count + 1, pop_receipt = ?5
WHERE seq IN (
    SELECT seq FROM tablekit_queue
    WHERE queue = ?1 AND visible_at <= ?3
        AND NOT EXISTS (SELECT 1 FROM tablekit_queue_paused WHERE queue = ?1)
    ORDER BY visible_at, seq LIMIT ?2
)
RETURNING seq, id, body, sent_at, dequeue_count";

pub(super) const ACK: &str = "DELETE FROM tablekit_queue WHERE seq = ?1 AND pop_receipt = ?2";

/// A delivery's retry whose lease lapsed sends its message again: at `?5`, counting the
/// deliveries so far (`?8`), with the original sending time (`?4`).
pub(super) const SEND_AGAIN: &str = "INSERT INTO tablekit_queue (queue, id, body, sent_at, visible_at, op_kind, op_version, dequeue_count) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

pub(super) const RETRY: &str = "UPDATE tablekit_queue SET visible_at = ?3, pop_receipt = NULL WHERE seq = ?1 AND pop_receipt = ?2";

pub(super) const POISON: &str = "UPDATE tablekit_queue SET queue = ?3, reason = ?4, visible_at = ?5, pop_receipt = NULL WHERE seq = ?1 AND pop_receipt = ?2";

pub(super) const RELEASE: &str = "UPDATE tablekit_queue SET visible_at = ?3, dequeue_count = dequeue_count - 1, pop_receipt = NULL WHERE seq = ?1 AND pop_receipt = ?2";

/// A poison queue's rows whole (seq, id, body, size, reason, dequeue count, visibility
/// time, sending time), in order, up to `?2`.
pub(super) const POISON_LIST: &str = "SELECT seq, id, body, length(CAST(body AS BLOB)), reason, dequeue_count, visible_at, sent_at FROM tablekit_queue WHERE queue = ?1 ORDER BY seq LIMIT ?2";

/// One poison row whole, as [`POISON_LIST`] reads it.
pub(super) const POISON_ONE: &str = "SELECT seq, id, body, length(CAST(body AS BLOB)), reason, dequeue_count, visible_at, sent_at FROM tablekit_queue WHERE queue = ?1 AND seq = ?2";

/// The rows of a poison queue (`?1`) after (`>`) or before (`<`) a seq (`?2`) that a
/// [`PoisonFilter`](super::PoisonFilter) passes (`?3` kind, `?4` id, `?5` reason, `?6`
/// body, `?7` reason group, `?8` the group of reasons that are not UTF-8; NULL for a part
/// not given), with [`envelope_columns`]. The groups are computed by the connection's
/// `tablekit_reason_group` function.
macro_rules! filtered_poison {
    ($after:literal) => {
        concat!(
            "
SELECT seq, id, body, reason, dequeue_count, visible_at, sent_at, kind, version
FROM (
    SELECT seq, id, body, reason, dequeue_count, visible_at, sent_at, ",
            envelope_columns!(),
            "
    FROM tablekit_queue
    WHERE queue = ?1 AND seq ",
            $after,
            " ?2
)
WHERE (?3 IS NULL OR lower(kind) = lower(?3))
    AND (?4 IS NULL OR instr(CAST(lower(id) AS BLOB), CAST(lower(?4) AS BLOB)) > 0)
    AND (?5 IS NULL OR instr(CAST(lower(COALESCE(reason, '')) AS BLOB), CAST(lower(?5) AS BLOB)) > 0)
    AND (?6 IS NULL OR instr(CAST(lower(CAST(body AS TEXT)) AS BLOB), CAST(lower(?6) AS BLOB)) > 0)
    AND (?7 IS NULL OR tablekit_reason_group(reason) = ?7)
    AND (?8 IS NULL OR tablekit_reason_group(reason) = ?8)
"
        )
    };
}

/// The columns of a page's rows: each body cut to its first `?10` bytes with its whole
/// length beside it.
macro_rules! page_columns {
    () => {
        "SELECT seq, id, substr(CAST(body AS BLOB), 1, ?10), length(CAST(body AS BLOB)), reason, dequeue_count, visible_at, sent_at, kind, version FROM ("
    };
}

/// A page of a poison queue, oldest first: [`filtered_poison`]'s rows after `?2`, up to
/// `?9`, read along the index on (queue, seq).
pub(super) const POISON_PAGE: &str = concat!(
    page_columns!(),
    filtered_poison!(">"),
    ") ORDER BY seq LIMIT ?9"
);

/// A page of a poison queue, newest first: [`filtered_poison`]'s rows before `?2`, up to
/// `?9`, read backwards along the index on (queue, seq).
pub(super) const POISON_PAGE_NEWEST: &str = concat!(
    page_columns!(),
    filtered_poison!("<"),
    ") ORDER BY seq DESC LIMIT ?9"
);

/// The reasons of [`filtered_poison`]'s rows with how many give each.
pub(super) const POISON_REASONS: &str = concat!(
    "SELECT COALESCE(reason, ''), COUNT(*) FROM (",
    filtered_poison!(">"),
    ") GROUP BY COALESCE(reason, '')"
);

/// The operation kinds of [`filtered_poison`]'s rows with how many have each (NULL: not
/// an operation), most first.
pub(super) const POISON_KINDS: &str = concat!(
    "SELECT kind, COUNT(*) AS n FROM (",
    filtered_poison!(">"),
    ") GROUP BY kind ORDER BY n DESC, kind"
);

/// [`POISON_KINDS`] of a filter that names no id, reason or body text (`?2` its reason
/// group, `?3` the group of reasons that are not UTF-8): counted along
/// [`FACETS_INDEX`] alone, the rows whose kind is not stored read whole.
pub(super) const POISON_KINDS_INDEXED: &str = concat!(
    "SELECT kind, SUM(n) AS n FROM (
    SELECT NULLIF(op_kind, '') AS kind, COUNT(*) AS n FROM tablekit_queue INDEXED BY tablekit_queue_facets
    WHERE queue = ?1 AND op_kind IS NOT NULL
        AND (?2 IS NULL OR tablekit_reason_group(reason) = ?2)
        AND (?3 IS NULL OR tablekit_reason_group(reason) = ?3)
    GROUP BY op_kind
    UNION ALL
    SELECT json_kind AS kind, COUNT(*) AS n FROM (SELECT reason, ",
    json_envelope_columns!(),
    " FROM tablekit_queue WHERE queue = ?1 AND op_kind IS NULL)
    WHERE (?2 IS NULL OR tablekit_reason_group(reason) = ?2)
        AND (?3 IS NULL OR tablekit_reason_group(reason) = ?3)
    GROUP BY json_kind
) GROUP BY kind ORDER BY n DESC, kind"
);

/// The reason groups of the messages of a filter that names no id, reason or body text
/// (`?2` kind, `?3` reason group, `?4` the group of reasons that are not UTF-8), with how
/// many fall in each and the least reason of each: counted along [`FACETS_INDEX`] alone,
/// the rows whose kind is not stored read whole.
pub(super) const POISON_REASON_GROUPS_INDEXED: &str = concat!(
    "SELECT reason_group, SUM(n), MIN(example) FROM (
    SELECT tablekit_reason_group(reason) AS reason_group, COUNT(*) AS n, MIN(COALESCE(reason, '')) AS example
    FROM tablekit_queue INDEXED BY tablekit_queue_facets
    WHERE queue = ?1 AND op_kind IS NOT NULL
        AND (?2 IS NULL OR lower(op_kind) = lower(?2))
        AND (?3 IS NULL OR tablekit_reason_group(reason) = ?3)
        AND (?4 IS NULL OR tablekit_reason_group(reason) = ?4)
    GROUP BY reason_group
    UNION ALL
    SELECT tablekit_reason_group(reason) AS reason_group, COUNT(*) AS n, MIN(COALESCE(reason, '')) AS example
    FROM (SELECT reason, ",
    json_envelope_columns!(),
    " FROM tablekit_queue WHERE queue = ?1 AND op_kind IS NULL)
    WHERE (?2 IS NULL OR lower(json_kind) = lower(?2))
        AND (?3 IS NULL OR tablekit_reason_group(reason) = ?3)
        AND (?4 IS NULL OR tablekit_reason_group(reason) = ?4)
    GROUP BY reason_group
) GROUP BY reason_group"
);

/// The reason groups of [`filtered_poison`]'s rows with how many fall in each and the
/// least reason of each.
pub(super) const POISON_REASON_GROUPS: &str = concat!(
    "SELECT tablekit_reason_group(reason) AS reason_group, COUNT(*), MIN(COALESCE(reason, '')) FROM (",
    filtered_poison!(">"),
    ") GROUP BY reason_group"
);

/// The messages of queue `?1`, oldest first, up to `?2`: seq, id, sending time, delivery
/// count, visibility time, whether a lease was taken, and [`envelope_columns`].
pub(super) const PEEK_OLDEST: &str = concat!(
    "SELECT seq, id, sent_at, dequeue_count, visible_at, pop_receipt IS NOT NULL, ",
    envelope_columns!(),
    " FROM tablekit_queue WHERE queue = ?1 ORDER BY seq LIMIT ?2"
);

/// [`PEEK_OLDEST`] newest first.
pub(super) const PEEK_NEWEST: &str = concat!(
    "SELECT seq, id, sent_at, dequeue_count, visible_at, pop_receipt IS NOT NULL, ",
    envelope_columns!(),
    " FROM tablekit_queue WHERE queue = ?1 ORDER BY seq DESC LIMIT ?2"
);

/// Removes up to [`PURGE_CHUNK`](super::PURGE_CHUNK) rows of queue `?1` up to seq `?2`
/// that no consumer holds at `?3` (never leased, or their lease ran out), oldest first.
pub(super) const PURGE_WAITING: &str = "DELETE FROM tablekit_queue WHERE seq IN (SELECT seq FROM tablekit_queue WHERE queue = ?1 AND seq <= ?2 AND (pop_receipt IS NULL OR visible_at <= ?3) ORDER BY seq LIMIT ?4)";

/// Makes row `?2` of queue `?1` deliverable at `?3` if it waits out a retry delay then.
pub(super) const RETRY_NOW: &str = "UPDATE tablekit_queue SET visible_at = ?3 WHERE queue = ?1 AND seq = ?2 AND pop_receipt IS NULL AND visible_at > ?3";

/// Deletes row `?2` of queue `?1` unless a consumer holds it at `?3`.
pub(super) const DELETE_WAITING: &str = "DELETE FROM tablekit_queue WHERE queue = ?1 AND seq = ?2 AND (pop_receipt IS NULL OR visible_at <= ?3)";

/// Takes the poison rows (`?1`) whose seqs the JSON array `?2` lists back to a queue
/// (`?3`) with a fresh delivery count.
pub(super) const TAKE_REPLAY: &str = "UPDATE tablekit_queue SET queue = ?3, reason = NULL, dequeue_count = 0, visible_at = ?4, pop_receipt = NULL WHERE queue = ?1 AND seq IN (SELECT value FROM json_each(?2)) RETURNING seq";

/// Deletes the poison rows (`?1`) whose seqs the JSON array `?2` lists.
pub(super) const TAKE_DISCARD: &str = "DELETE FROM tablekit_queue WHERE queue = ?1 AND seq IN (SELECT value FROM json_each(?2)) RETURNING seq";

pub(super) const PAUSE: &str = "INSERT OR IGNORE INTO tablekit_queue_paused (queue) VALUES (?1)";
pub(super) const RESUME: &str = "DELETE FROM tablekit_queue_paused WHERE queue = ?1";
pub(super) const PAUSED: &str =
    "SELECT EXISTS (SELECT 1 FROM tablekit_queue_paused WHERE queue = ?1)";

pub(super) const REPLAY_ALL: &str = "UPDATE tablekit_queue SET queue = ?2, reason = NULL, dequeue_count = 0, visible_at = ?3 WHERE queue = ?1";

pub(super) const DISCARD_ALL: &str = "DELETE FROM tablekit_queue WHERE queue = ?1";

pub(super) const DISCARD_ONE: &str = "DELETE FROM tablekit_queue WHERE queue = ?1 AND id = ?2";

pub(super) const REPLAY_ONE: &str = "UPDATE tablekit_queue SET queue = ?2, reason = NULL, dequeue_count = 0, visible_at = ?3 WHERE queue = ?1 AND id = ?4";

pub(super) const COUNT_WAITING: &str =
    "SELECT COUNT(*) FROM tablekit_queue WHERE queue = ?1 AND pop_receipt IS NULL";
pub(super) const COUNT_LEASED: &str = "SELECT COUNT(*) FROM tablekit_queue WHERE queue = ?1 AND pop_receipt IS NOT NULL AND visible_at > ?2";
pub(super) const COUNT_EXPIRED: &str = "SELECT COUNT(*) FROM tablekit_queue WHERE queue = ?1 AND pop_receipt IS NOT NULL AND visible_at <= ?2";
pub(super) const COUNT_ALL: &str = "SELECT COUNT(*) FROM tablekit_queue WHERE queue = ?1";
/// When the message of `?1` that became deliverable first, of those deliverable at `?2`,
/// did (NULL when none is).
pub(super) const OLDEST_DELIVERABLE: &str =
    "SELECT MIN(visible_at) FROM tablekit_queue WHERE queue = ?1 AND visible_at <= ?2";
