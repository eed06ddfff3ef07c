//! The records of what the console's operators did, for an auditor.
//!
//! Every action writes:
//! - **a summary** — when, the client's address, the role, the queue, the action, what it
//!   did (from the backend's answer), how many messages it named and took, and the first
//!   ids — kept in the store (table [`JOBS_TABLE`], partition
//!   `action`, newest first) for the console's page of recent actions (`/actions`), and
//!   logged;
//! - **one JSON-lines record per message it touched** (handle, id, taken or already gone),
//!   every one of them however many: appended to the action log file when the console has
//!   one ([`ConsoleOptions::action_log`](super::ConsoleOptions::action_log)), else written
//!   to the log under the target `tablekit::console::actions`. Each carries the summary's
//!   id, which the summary's log line names with the file.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tablekit_core::filter;
use tablekit_core::{AnyStore, Entity, ErrorKind, Query, TableStore, Value};

use super::jobs::JOBS_TABLE;
use super::view::Outcome;
use crate::display::neutral;
use crate::error::{Error, Result};

/// The partition of the actions' summaries.
const ACTION_PARTITION: &str = "action";
const RECORD_PROPERTY: &str = "Record";
/// How many ids a summary names (every one is in the per-message records).
pub const NAMED_IDS: usize = 20;
/// The log target of the per-message records when there is no action log file.
pub const ACTIONS_TARGET: &str = "tablekit::console::actions";

/// What one action did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActionRecord {
    /// Its id (newest first in key order); each per-message record names it.
    pub id: String,
    /// When it was done.
    pub at: DateTime<Utc>,
    /// The client's address.
    pub client: String,
    /// The role of the one who did it (`operator`, or on a console without tokens the
    /// loopback user, also `operator`).
    pub role: String,
    /// The queue it acted on, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// What was done: `discard-one`, `replay-selected`, `moveto-all`, `pause`, `audit`, …
    pub action: String,
    /// The queue a replay sent to, when not the message's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// How many messages it named.
    pub asked: u64,
    /// How many of them the backend took.
    pub taken: u64,
    /// What the banner said.
    pub result: String,
    /// Whether it failed (or did nothing).
    pub failed: bool,
    /// The first ids it named (20); the per-message records hold them all.
    #[serde(default)]
    pub ids: Vec<String>,
    /// Where its per-message records are: the action log file, or the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
}

impl ActionRecord {
    /// A record of an action by `client`, before the messages it touched are counted.
    pub(super) fn new(
        client: SocketAddr,
        queue: Option<&str>,
        action: &str,
        to: Option<String>,
        outcome: &Outcome,
    ) -> Self {
        ActionRecord {
            id: new_id(),
            at: Utc::now(),
            // A client a proxy forwarded without its port shows as its address alone.
            client: if client.port() == 0 {
                client.ip().to_string()
            } else {
                client.to_string()
            },
            role: super::view::role().name().to_owned(),
            queue: queue.map(str::to_owned),
            action: action.to_owned(),
            to,
            asked: 0,
            taken: 0,
            result: outcome.text.clone(),
            failed: outcome.failed,
            ids: Vec::new(),
            details: None,
        }
    }
}

/// One message an action touched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Touched {
    pub(super) handle: String,
    /// Its id, when the action listed it.
    pub(super) id: Option<String>,
    /// Whether the backend took it (`false`: already gone, or never there).
    pub(super) taken: bool,
}

/// A per-message line of the action log.
#[derive(Serialize)]
struct MessageLine<'a> {
    record: &'a str,
    at: DateTime<Utc>,
    client: &'a str,
    role: &'a str,
    queue: Option<&'a str>,
    action: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    to: Option<&'a str>,
    handle: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    result: &'static str,
}

/// A new record id: later ids sort first.
fn new_id() -> String {
    let micros = u64::try_from(Utc::now().timestamp_micros()).unwrap_or_default();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "{:016}-{}",
        9_999_999_999_999_999u64.saturating_sub(micros),
        &suffix[..8]
    )
}

/// Where the console keeps its records.
#[derive(Clone)]
pub(super) struct Records {
    store: AnyStore,
    file: Option<PathBuf>,
}

impl Records {
    pub(super) fn new(store: AnyStore, file: Option<PathBuf>) -> Self {
        Records { store, file }
    }

    /// Records an action and every message it touched; a record that cannot be written
    /// is logged as an error with the whole summary (the action itself is done).
    pub(super) async fn record(&self, mut record: ActionRecord, touched: &[Touched]) {
        record.asked = touched.len() as u64;
        record.taken = touched.iter().filter(|t| t.taken).count() as u64;
        record.ids = touched
            .iter()
            .filter_map(|t| t.id.clone())
            .filter(|id| !id.is_empty())
            .take(NAMED_IDS)
            .collect();
        if !touched.is_empty() {
            record.details = Some(match self.write_lines(&record, touched).await {
                Ok(Some(path)) => format!("{} (record {})", path.display(), record.id),
                Ok(None) => format!("the log, target {ACTIONS_TARGET} (record {})", record.id),
                Err(e) => {
                    tracing::error!(record = %record.id, error = %e, "the action's per-message records were not written to the action log; writing them to the log");
                    self.log_lines(&record, touched);
                    format!("the log, target {ACTIONS_TARGET} (record {})", record.id)
                }
            });
        }
        tracing::info!(
            record = %record.id,
            client = %record.client,
            role = %record.role,
            queue = %record.queue.as_deref().map(neutral).unwrap_or_default(),
            action = %record.action,
            asked = record.asked,
            taken = record.taken,
            ids = %record.ids.iter().map(|i| neutral(i).into_owned()).collect::<Vec<_>>().join(","),
            details = %record.details.as_deref().unwrap_or("none"),
            result = %neutral(&record.result),
            "console action"
        );
        if let Err(e) = self.keep(&record).await {
            tracing::error!(record = %record.id, error = %e, "the action's summary was not kept in the store");
        }
    }

    async fn keep(&self, record: &ActionRecord) -> Result<()> {
        let text =
            serde_json::to_string(record).map_err(|e| Error::encode("an action record", e))?;
        let entity = Entity::new(ACTION_PARTITION, record.id.clone()).with(RECORD_PROPERTY, text);
        self.store.create_table_if_not_exists(JOBS_TABLE).await?;
        self.store.insert_or_replace(JOBS_TABLE, entity).await?;
        Ok(())
    }

    fn lines<'a>(
        record: &'a ActionRecord,
        touched: &'a [Touched],
    ) -> impl Iterator<Item = MessageLine<'a>> + 'a {
        touched.iter().map(move |t| MessageLine {
            record: &record.id,
            at: record.at,
            client: &record.client,
            role: &record.role,
            queue: record.queue.as_deref(),
            action: &record.action,
            to: record.to.as_deref(),
            handle: &t.handle,
            id: t.id.as_deref(),
            result: if t.taken { "taken" } else { "gone" },
        })
    }

    /// Appends one line per message to the action log file; `None` when there is none.
    async fn write_lines(
        &self,
        record: &ActionRecord,
        touched: &[Touched],
    ) -> std::io::Result<Option<PathBuf>> {
        let Some(path) = self.file.clone() else {
            self.log_lines(record, touched);
            return Ok(None);
        };
        let mut buffer = Vec::with_capacity(touched.len() * 160);
        for line in Self::lines(record, touched) {
            serde_json::to_writer(&mut buffer, &line).map_err(std::io::Error::other)?;
            buffer.push(b'\n');
        }
        let target = path.clone();
        tokio::task::spawn_blocking(move || {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&target)?;
            file.write_all(&buffer)?;
            file.sync_data()
        })
        .await
        .map_err(std::io::Error::other)??;
        Ok(Some(path))
    }

    fn log_lines(&self, record: &ActionRecord, touched: &[Touched]) {
        for line in Self::lines(record, touched) {
            if let Ok(json) = serde_json::to_string(&line) {
                tracing::info!(target: ACTIONS_TARGET, record = %json, "console action, one message");
            }
        }
    }

    /// The newest actions, `limit` of them after the record id `after`.
    pub(super) async fn recent(
        &self,
        limit: usize,
        after: Option<&str>,
    ) -> Result<(Vec<ActionRecord>, Option<String>)> {
        let mut condition = filter::partition_key().eq(ACTION_PARTITION);
        if let Some(after) = after {
            condition = condition.and(filter::row_key().gt(after));
        }
        let query = Query::with_filter(condition).top(limit);
        let page = match self.store.query(JOBS_TABLE, &query).await {
            Ok(page) => page,
            Err(e) if e.kind() == ErrorKind::TableNotFound => return Ok((Vec::new(), None)),
            Err(e) => return Err(e),
        };
        let records: Vec<ActionRecord> = page
            .entities
            .iter()
            .filter_map(|e| match e.properties.get(RECORD_PROPERTY) {
                Some(Value::String(text)) => serde_json::from_str(text).ok(),
                _ => None,
            })
            .collect();
        let next = (page.entities.len() == limit)
            .then(|| page.entities.last().map(|e| e.row_key.clone()))
            .flatten();
        Ok((records, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_records_sort_first() {
        let first = new_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = new_id();
        assert!(second < first, "{second} {first}");
    }
}
