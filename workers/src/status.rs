//! What `tablekit-worker status` and the console show of a deployment: each queue's
//! depth, leased and poison messages, the relay's backlog, and the last audit of every
//! audited table.

use tablekit_core::TableStore;

use crate::error::{Error, Result};
use crate::queue::Queue;

/// What `status` shows.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Status {
    /// Each queue.
    pub queues: Vec<QueueStatus>,
    /// What the relay has left to publish.
    pub relay: tablekit_patterns::consistency::Backlog,
    /// Each relay's heartbeat: its shares of the pending partitions and its drain rate.
    #[serde(default)]
    pub relays: Vec<tablekit_patterns::consistency::RelayStatus>,
    /// The last audit of each audited table.
    pub audits: Vec<AuditStatus>,
}

/// One queue's state.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QueueStatus {
    /// The queue.
    pub queue: String,
    /// Messages waiting (retry delays included).
    pub waiting: Option<u64>,
    /// Messages leased to a consumer.
    pub leased: Option<u64>,
    /// Messages in its poison queue.
    pub poisoned: Option<u64>,
    /// Whether the queue exists (`false`: no worker has declared it yet).
    #[serde(default = "declared")]
    pub declared: bool,
    /// Why the counts could not be read.
    pub error: Option<String>,
}

fn declared() -> bool {
    true
}

/// A table's last audit.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AuditStatus {
    /// The table.
    pub table: String,
    /// When it finished.
    pub at: chrono::DateTime<chrono::Utc>,
    /// Whether it found no drift.
    pub clean: bool,
    /// Entities scanned.
    pub scanned: u64,
    /// Missing copies or memberships.
    pub missing: u64,
    /// Stale copies.
    pub stale: u64,
    /// Orphaned copies or memberships.
    pub orphaned: u64,
    /// Records that do not read.
    pub unreadable: u64,
    /// Drift repaired.
    pub repaired: u64,
}

/// The queues shown when none are named: `index`, `archive` and the change queues the
/// registered types declare.
pub fn default_queues(schemas: &[tablekit_patterns::index::SchemaRecord]) -> Vec<String> {
    [crate::index::DEFAULT_INDEX_QUEUE, "archive"]
        .into_iter()
        .map(str::to_owned)
        .chain(schemas.iter().filter_map(|s| s.changes.clone()))
        .collect()
}

/// Reads the status of a deployment.
///
/// # Errors
/// The store's errors (the queues' errors are reported per queue).
pub async fn status<S: TableStore, Q: Queue>(
    store: &S,
    broker: &Q,
    queues: &[String],
) -> Result<Status> {
    let mut names: Vec<String> = queues.to_vec();
    if names.is_empty() {
        let schemas = tablekit_patterns::index::SchemaRecord::list(store, None).await?;
        names = default_queues(&schemas);
    }
    // Each queue once, in the order first named.
    let mut seen = std::collections::HashSet::new();
    names.retain(|name| seen.insert(name.clone()));
    let mut statuses = Vec::new();
    for queue in names {
        statuses.push(match broker.stats(&queue).await {
            Ok(stats) => QueueStatus {
                queue,
                waiting: Some(stats.waiting),
                leased: Some(stats.leased),
                poisoned: Some(stats.poisoned),
                declared: true,
                error: None,
            },
            Err(Error::NotDeclared { .. }) => QueueStatus {
                queue,
                waiting: None,
                leased: None,
                poisoned: None,
                declared: false,
                error: None,
            },
            Err(e) => QueueStatus {
                queue,
                waiting: None,
                leased: None,
                poisoned: None,
                declared: true,
                error: Some(e.to_string()),
            },
        });
    }
    let relay = tablekit_patterns::consistency::backlog(store).await?;
    let relays = tablekit_patterns::consistency::relays(store).await?;
    let audits = tablekit_patterns::index::AuditResult::list(store)
        .await?
        .into_iter()
        .map(|(table, result)| AuditStatus {
            table,
            at: result.at,
            clean: result.report.is_clean(),
            scanned: result.report.scanned,
            missing: result.report.missing,
            stale: result.report.stale,
            orphaned: result.report.orphaned,
            unreadable: result.report.unreadable,
            repaired: result.report.repaired,
        })
        .collect();
    Ok(Status {
        queues: statuses,
        relay,
        relays,
        audits,
    })
}

/// How old the relay's oldest entry may grow before the status warns: a running relay
/// publishes an entry within seconds of its write.
pub const RELAY_BEHIND_AFTER: chrono::Duration = chrono::Duration::seconds(60);

/// What the relay's backlog means, in words: the delayed work and when it comes due, and
/// a warning when entries wait longer than a running relay would let them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RelayNotes {
    /// Plain facts (delayed work and its due time).
    pub notes: Vec<String>,
    /// What needs an operator.
    pub warning: Option<String>,
}

/// Explains `status`'s relay backlog as of `now`.
pub fn relay_notes(status: &Status, now: chrono::DateTime<chrono::Utc>) -> RelayNotes {
    let b = &status.relay;
    let mut notes = RelayNotes::default();
    let at = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
    if b.delayed > 0 {
        notes.notes.push(format!(
            "{} tombstone burials are delayed work: each waits out its grace period after a delete, then the relay publishes it{}.",
            b.delayed,
            b.delayed_next
                .map(|due| format!(" (the first is due at {})", at(due)))
                .unwrap_or_default()
        ));
    }
    if b.came_due > 0 {
        notes.notes.push(format!(
            "{} of the entries waiting are tombstone burials whose grace period has passed (due since {}).",
            b.came_due,
            b.came_due_since.map_or_else(|| "-".to_owned(), at)
        ));
    }
    let live = status.relays.iter().filter(|r| r.live).count();
    if b.delayed > 0 && live == 0 {
        notes.notes.push(
            "No relay is running to publish them when they come due: a worker of the index queue runs one (tablekit-worker run --queue index), as does any worker started with --relay.".to_owned(),
        );
    }
    // The oldest entry's wait counts from its due time when it was delayed work.
    let waiting_since = match (b.oldest, b.came_due_since) {
        (Some(oldest), Some(due)) if b.came_due == b.entries => Some(oldest.max(due)),
        (oldest, _) => oldest,
    };
    if b.entries > 0
        && let Some(since) = waiting_since
        && now - since > RELAY_BEHIND_AFTER
    {
        notes.warning = Some(if live == 0 {
            format!(
                "No relay is running: {} entries have waited since {}. A worker of the index queue runs one (tablekit-worker run --queue index), as does any worker started with --relay.",
                b.entries,
                at(since)
            )
        } else {
            format!(
                "The relay is behind: {} entries have waited since {} with {live} relays running.",
                b.entries,
                at(since)
            )
        });
    }
    notes
}

/// `status` as text: one screen.
pub fn status_text(status: &Status) -> String {
    use std::fmt::Write as _;
    let mut text = String::from("queues\n");
    let count = |n: Option<u64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    for q in &status.queues {
        if !q.declared {
            let _ = writeln!(
                text,
                "  {:<28} not declared yet (a worker declares it when it starts)",
                q.queue
            );
            continue;
        }
        let _ = write!(
            text,
            "  {:<28} waiting {:>8}  leased {:>6}  poison {:>6}",
            q.queue,
            count(q.waiting),
            count(q.leased),
            count(q.poisoned)
        );
        if let Some(error) = &q.error {
            let _ = write!(text, "  ({error})");
        }
        text.push('\n');
    }
    let _ = writeln!(
        text,
        "relay backlog: {} entries in {} partitions{}",
        status.relay.entries,
        status.relay.partitions,
        status
            .relay
            .oldest
            .map(|at| format!(", oldest written {}", at.to_rfc3339()))
            .unwrap_or_default()
    );
    let notes = relay_notes(status, chrono::Utc::now());
    for note in &notes.notes {
        let _ = writeln!(text, "  {note}");
    }
    if let Some(warning) = &notes.warning {
        let _ = writeln!(text, "  warning: {warning}");
    }
    let live = status.relays.iter().filter(|r| r.live).count();
    let _ = writeln!(text, "relays: {live} running");
    for r in &status.relays {
        let _ = writeln!(
            text,
            "  {:<28} {}  shares {:>4}  published {:>10}  {:.0} entries/s at its last busy pass",
            r.id,
            if r.live { "running" } else { "stopped" },
            r.shares,
            r.published,
            r.rate
        );
    }
    text.push_str("last audits\n");
    if status.audits.is_empty() {
        text.push_str("  none yet (tablekit-worker audit --table …)\n");
    }
    for a in &status.audits {
        let _ = writeln!(
            text,
            "  {:<28} {}  {}  scanned {}, missing {}, stale {}, orphaned {}, unreadable {}, repaired {}",
            a.table,
            if a.clean { "clean" } else { "DRIFT" },
            a.at.to_rfc3339(),
            a.scanned,
            a.missing,
            a.stale,
            a.orphaned,
            a.unreadable,
            a.repaired
        );
    }
    text.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, Utc};
    use tablekit_patterns::consistency::{Backlog, RelayStatus};

    fn status(backlog: Backlog, live: bool) -> Status {
        Status {
            queues: Vec::new(),
            relay: backlog,
            relays: vec![RelayStatus {
                id: "r".into(),
                until: Utc::now(),
                live,
                shares: 1,
                published: 0,
                rate: 0.0,
            }],
            audits: Vec::new(),
        }
    }

    #[test]
    fn delayed_work_is_labelled_with_its_due_time_and_old_entries_warn() {
        let now = Utc::now();
        // Burials not yet due: facts, no warning.
        let waiting = Backlog {
            delayed: 100,
            delayed_next: Some(now + Duration::minutes(3)),
            ..Backlog::default()
        };
        let notes = relay_notes(&status(waiting.clone(), false), now);
        assert!(notes.notes[0].starts_with("100 tombstone burials are delayed work"));
        assert!(notes.notes[0].contains("the first is due at"));
        assert!(notes.notes[1].starts_with("No relay is running to publish them"));
        assert_eq!(notes.warning, None);
        assert_eq!(relay_notes(&status(waiting, true), now).notes.len(), 1);
        // Burials due 19 minutes ago and no relay running: a warning that says so.
        let due = Backlog {
            entries: 100,
            partitions: 1,
            oldest: Some(now - Duration::minutes(24)),
            came_due: 100,
            came_due_since: Some(now - Duration::minutes(19)),
            ..Backlog::default()
        };
        let notes = relay_notes(&status(due.clone(), false), now);
        assert!(notes.notes[0].contains("grace period has passed"));
        let warning = notes.warning.expect("a warning");
        assert!(warning.starts_with("No relay is running"), "{warning}");
        let behind = relay_notes(&status(due.clone(), true), now)
            .warning
            .expect("a warning");
        assert!(behind.starts_with("The relay is behind"), "{behind}");
        // Entries written a moment ago: no warning.
        let fresh = Backlog {
            entries: 3,
            oldest: Some(now - Duration::seconds(2)),
            ..Backlog::default()
        };
        assert_eq!(relay_notes(&status(fresh, false), now).warning, None);
    }
}
