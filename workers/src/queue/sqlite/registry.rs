//! The SQLite queue's registry of declared queues, its peek at waiting messages and the
//! operator's actions on them, and the SQL functions its connection brings.
//!
//! Rows are created on send, so a queue name alone says nothing of whether a worker serves
//! it: the registry (`tablekit_queue_declared`) keeps each queue a worker declared at its
//! start (or `tablekit-worker declare` did). The file's first open by a tablekit with the
//! registry back-fills it from the queues that hold messages, poison queues left out, so a
//! queue file older than the registry keeps its queues.

use chrono::{DateTime, Utc};
use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, TransactionBehavior, params};

use super::super::{
    PeekQuery, UNDECODABLE_REASON_GROUP, WaitingAction, WaitingMessage, reason_group,
};
use super::sql::{
    ADD_OPERATION_COLUMNS, DECLARE, DECLARED, DELETE_WAITING, FACETS_INDEX, FILL_OPERATION_COLUMNS,
    HAS_OPERATION_COLUMNS, IS_DECLARED, PEEK_NEWEST, PEEK_OLDEST, PURGE_WAITING, REGISTRY_BACKFILL,
    REGISTRY_EXISTS, REGISTRY_SCHEMA, RETRY_NOW,
};
use super::{SqliteQueue, lossy, now};
use crate::error::{Error, Result};

/// Registers the connection's SQL functions: `tablekit_reason_group(reason)`, the
/// [`reason_group`] of a reason (NULL read as the empty reason; bytes that are not UTF-8
/// give [`UNDECODABLE_REASON_GROUP`]).
pub(super) fn register_functions(connection: &Connection) -> rusqlite::Result<()> {
    connection.create_scalar_function(
        "tablekit_reason_group",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |context| {
            Ok(match context.get_raw(0) {
                ValueRef::Text(b) | ValueRef::Blob(b) => match std::str::from_utf8(b) {
                    Ok(reason) => reason_group(reason),
                    Err(_) => UNDECODABLE_REASON_GROUP.to_owned(),
                },
                ValueRef::Null => String::new(),
                other => reason_group(&lossy(other)),
            })
        },
    )
}

/// Creates the registry if the file has none, back-filled in the same transaction (so two
/// processes opening a file at once agree on it).
pub(super) fn ensure_registry(connection: &mut Connection) -> rusqlite::Result<()> {
    let exists = |c: &Connection| c.query_row(REGISTRY_EXISTS, [], |row| row.get::<_, bool>(0));
    if exists(connection)? {
        return Ok(());
    }
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    if !exists(&transaction)? {
        transaction.execute(REGISTRY_SCHEMA, [])?;
        transaction.execute(REGISTRY_BACKFILL, params![now()])?;
    }
    transaction.commit()
}

/// Gives a file made before them the columns of each message's operation kind and version
/// (once: several processes opening it at once take turns), fills them for the rows
/// written without them, and creates the index the counts of kinds and reasons read.
/// Filling reads each such body once; rows written by tablekit carry them already.
pub(super) fn ensure_operation_columns(connection: &mut Connection) -> rusqlite::Result<()> {
    let has = |c: &Connection| c.query_row(HAS_OPERATION_COLUMNS, [], |row| row.get::<_, bool>(0));
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    if !has(&transaction)? {
        transaction.execute_batch(ADD_OPERATION_COLUMNS)?;
    }
    transaction.execute(FILL_OPERATION_COLUMNS, [])?;
    transaction.execute(FACETS_INDEX, [])?;
    transaction.commit()
}

impl SqliteQueue {
    /// Registers `queue` as declared.
    pub(super) async fn register(&self, queue: &str) -> Result<()> {
        let queue = queue.to_owned();
        self.with(move |c| {
            c.prepare_cached(DECLARE)?
                .execute(params![queue, now()])
                .map(|_| ())
        })
        .await
    }

    /// Whether `queue` is in the registry.
    pub(super) async fn registered(&self, queue: &str) -> Result<bool> {
        let queue = queue.to_owned();
        self.with(move |c| {
            c.prepare_cached(IS_DECLARED)?
                .query_row(params![queue], |row| row.get(0))
        })
        .await
    }

    /// The registered queues, poison queues left out, by name.
    pub(super) async fn registered_queues(&self) -> Result<Vec<String>> {
        self.with(|c| {
            let mut statement = c.prepare_cached(DECLARED)?;
            let rows = statement.query_map([], |row| Ok(lossy(row.get_ref(0)?)))?;
            rows.collect()
        })
        .await
    }

    /// The messages of `queue` in the order the query asks, read along the index.
    pub(super) async fn peek_rows(
        &self,
        queue: &str,
        query: &PeekQuery,
    ) -> Result<Vec<WaitingMessage>> {
        let queue = queue.to_owned();
        let limit = i64::try_from(query.bounded_limit()).unwrap_or(0);
        let sql = if query.newest_first {
            PEEK_NEWEST
        } else {
            PEEK_OLDEST
        };
        self.with(move |c| {
            let at = now();
            let mut statement = c.prepare_cached(sql)?;
            let rows = statement.query_map(params![queue, limit], |row| {
                let visible_at: i64 = row.get(4)?;
                let leased = row.get::<_, bool>(5)? && visible_at > at;
                let kind = match (row.get_ref(6)?, row.get_ref(7)?) {
                    (kind @ (ValueRef::Text(_) | ValueRef::Blob(_)), ValueRef::Integer(v)) => {
                        u32::try_from(v).ok().map(|v| (lossy(kind), v))
                    }
                    _ => None,
                };
                Ok(WaitingMessage {
                    id: lossy(row.get_ref(1)?),
                    handle: Some(row.get::<_, i64>(0)?.to_string()),
                    kind,
                    sent_at: DateTime::<Utc>::from_timestamp_micros(row.get(2)?),
                    attempts: u32::try_from(row.get::<_, i64>(3)?).unwrap_or(u32::MAX),
                    next_attempt: (visible_at > at)
                        .then(|| DateTime::from_timestamp_micros(visible_at))
                        .flatten(),
                    leased,
                })
            })?;
            rows.collect()
        })
        .await
    }
}

impl SqliteQueue {
    /// [`Queue::act_on_waiting`](super::super::Queue::act_on_waiting): a purge deletes
    /// [`PURGE_CHUNK`](super::PURGE_CHUNK) rows a transaction, so a large queue's writers
    /// wait for one chunk at a time, never for the whole purge.
    pub(super) async fn act_on_rows(&self, queue: &str, action: &WaitingAction) -> Result<u64> {
        let queue = queue.to_owned();
        match action {
            WaitingAction::Purge { through } => {
                let through = match through {
                    Some(handle) => handle.parse::<i64>().map_err(|_| {
                        Error::Config(format!(
                            "`{handle}` is not a message of the SQLite queue (a row number)"
                        ))
                    })?,
                    None => i64::MAX,
                };
                let chunk = i64::try_from(super::PURGE_CHUNK).unwrap_or(i64::MAX);
                let mut removed = 0;
                loop {
                    let queue = queue.clone();
                    let deleted = self
                        .with(move |c| {
                            c.prepare_cached(PURGE_WAITING)?.execute(params![
                                queue,
                                through,
                                now(),
                                chunk
                            ])
                        })
                        .await?;
                    removed += deleted as u64;
                    if deleted < super::PURGE_CHUNK {
                        return Ok(removed);
                    }
                }
            }
            WaitingAction::RetryNow { handle } | WaitingAction::Delete { handle } => {
                // A handle that is no row number names no message: nothing to do.
                let Ok(seq) = handle.parse::<i64>() else {
                    return Ok(0);
                };
                let sql = if matches!(action, WaitingAction::RetryNow { .. }) {
                    RETRY_NOW
                } else {
                    DELETE_WAITING
                };
                self.with(move |c| c.prepare_cached(sql)?.execute(params![queue, seq, now()]))
                    .await
                    .map(|n| n as u64)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sql::{
        DECLARED, POISON_LIST, POISON_PAGE, POISON_PAGE_NEWEST, POISON_REASON_GROUPS, RECEIVE,
        SCHEMA,
    };
    use super::*;

    fn plan(connection: &Connection, sql: &str) -> Vec<String> {
        let mut statement = connection
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("prepares");
        let values = vec![1i64; statement.parameter_count()];
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), |row| {
                row.get::<_, String>(3)
            })
            .expect("explains");
        rows.collect::<rusqlite::Result<_>>().expect("reads")
    }

    #[test]
    fn pages_peeks_and_the_registry_read_along_an_index() {
        let mut connection = Connection::open_in_memory().expect("opens");
        connection.execute_batch(SCHEMA).expect("schema");
        ensure_registry(&mut connection).expect("registry");
        register_functions(&connection).expect("functions");
        // Pages and peeks read their rows in order along the index: no sort, no scan.
        for sql in [
            POISON_PAGE,
            POISON_PAGE_NEWEST,
            POISON_LIST,
            PEEK_OLDEST,
            PEEK_NEWEST,
        ] {
            let plan = plan(&connection, sql);
            assert!(
                plan.len() == 1
                    && plan[0].starts_with(
                        "SEARCH tablekit_queue USING INDEX tablekit_queue_order (queue=?"
                    ),
                "{sql}: {plan:?}"
            );
        }
        // The receive keeps its own index.
        let receive = plan(&connection, RECEIVE);
        assert!(
            receive
                .iter()
                .any(|line| line.contains("COVERING INDEX tablekit_queue_ready")),
            "{receive:?}"
        );
        // The back-fill seeks one queue name after another.
        let backfill = plan(&connection, REGISTRY_BACKFILL);
        assert!(
            backfill
                .iter()
                .all(|line| !line.starts_with("SCAN tablekit_queue")),
            "{backfill:?}"
        );
        // Grouping sorts the groups only, of rows read along the index.
        let groups = plan(&connection, POISON_REASON_GROUPS);
        assert!(
            groups[0].starts_with("SEARCH tablekit_queue USING INDEX tablekit_queue_order"),
            "{groups:?}"
        );
        let declared = plan(&connection, DECLARED);
        assert!(
            declared.iter().all(|line| !line.contains("TEMP B-TREE")),
            "{declared:?}"
        );
    }
}
