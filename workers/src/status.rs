//! What `tablekit-worker status` and the console show of a deployment: each queue's
//! depth, leased and poison messages, the relay's backlog, and the last audit of every
//! audited table; and the warnings drawn from them: a relay that does not run, and a
//! queue whose messages no consumer takes ([`unconsumed`]).

use chrono::{DateTime, Utc};
use tablekit_core::TableStore;

use crate::display::neutral;
use crate::error::{Error, Result};
use crate::queue::{Queue, QueueStats};

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
    /// Each declared change feed, with its groups' lag.
    #[serde(default)]
    pub feeds: Vec<FeedStatus>,
    /// The queues shown that no tablekit worker is known to consume (not `index`,
    /// `archive` or a registered type's change queue): found in the broker's own registry
    /// of declared queues, or named. One that holds messages is warned about at once (a
    /// sink given a mistyped queue name, or an application's queue with no worker yet).
    #[serde(default)]
    pub unknown: Vec<String>,
}

/// A change feed (`#[feed]`) and the groups reading it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FeedStatus {
    /// The primaries' table.
    pub table: String,
    /// Its shares.
    pub shares: u32,
    /// How long it keeps changes, in seconds.
    pub retention_secs: u64,
    /// The changes its logs keep now.
    pub kept: u64,
    /// Each group, with its members, shares, checkpoints and lag.
    pub groups: Vec<tablekit_patterns::feed::GroupLag>,
}

/// Each declared feed with its groups' lag.
///
/// # Errors
/// The store's errors.
pub async fn feeds<S: TableStore>(store: &S) -> Result<Vec<FeedStatus>> {
    let mut feeds = Vec::new();
    for feed in tablekit_patterns::feed::declared(store).await? {
        let lag = tablekit_patterns::feed::lag(store, &feed.table, feed.shares).await?;
        feeds.push(FeedStatus {
            kept: lag.kept,
            shares: feed.shares,
            retention_secs: feed.retention.as_secs(),
            table: feed.table,
            groups: lag.groups,
        });
    }
    Ok(feeds)
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
    /// The consumers attached now, when the broker counts them (RabbitMQ).
    #[serde(default)]
    pub consumers: Option<u64>,
    /// Since when the message waiting longest among those a consumer could take has
    /// waited, when the broker can tell (SQLite, Azure; see [`QueueStats`]).
    #[serde(default)]
    pub waiting_since: Option<DateTime<Utc>>,
    /// Whether its consumers are paused (`None`: unknown).
    #[serde(default)]
    pub paused: Option<bool>,
}

impl QueueStatus {
    /// The state of `queue` as its broker's `stats` and `paused` answered.
    pub fn of(queue: String, stats: Result<QueueStats>, paused: Option<bool>) -> Self {
        let unknown = QueueStatus {
            queue,
            waiting: None,
            leased: None,
            poisoned: None,
            declared: true,
            error: None,
            consumers: None,
            waiting_since: None,
            paused,
        };
        match stats {
            Ok(stats) => QueueStatus {
                waiting: Some(stats.waiting),
                leased: Some(stats.leased),
                poisoned: Some(stats.poisoned),
                consumers: stats.consumers,
                waiting_since: stats.waiting_since,
                ..unknown
            },
            Err(Error::NotDeclared { .. }) => QueueStatus {
                declared: false,
                paused: None,
                ..unknown
            },
            Err(e) => QueueStatus {
                error: Some(e.to_string()),
                ..unknown
            },
        }
    }
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
    // The index queue as the patterns name it (`index::DEFAULT_INDEX_QUEUE` is the same
    // name): the index worker is built on the runtime, which reads this module.
    [
        tablekit_patterns::consistency::operation::DEFAULT_QUEUE,
        "archive",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(
        schemas
            .iter()
            .filter_map(|s| s.changes().map(str::to_owned)),
    )
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
    let schemas = tablekit_patterns::index::SchemaRecord::list(store, None).await?;
    let known = default_queues(&schemas);
    let mut names: Vec<String> = queues.to_vec();
    if names.is_empty() {
        // Every queue tablekit's workers consume, then every other queue the broker's
        // registry holds (a queue a sink declared under a mistyped name included).
        names = known.clone();
        match broker.declared_queues().await {
            Ok(Some(declared)) => names.extend(declared),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the broker's declared queues could not be listed")
            }
        }
    }
    // Each queue once, in the order first named.
    let mut seen = std::collections::HashSet::new();
    names.retain(|name| seen.insert(name.clone()));
    let mut statuses = Vec::new();
    for queue in names {
        let (stats, paused) = futures::join!(broker.stats(&queue), broker.paused(&queue));
        statuses.push(QueueStatus::of(queue, stats, paused.ok()));
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
    let feeds = feeds(store).await?;
    let unknown = statuses
        .iter()
        .filter(|q| !known.contains(&q.queue))
        .map(|q| q.queue.clone())
        .collect();
    Ok(Status {
        queues: statuses,
        relay,
        relays,
        audits,
        feeds,
        unknown,
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
    if b.feed_changes > 0 && live == 0 {
        let tables: Vec<String> = b
            .feed_tables
            .iter()
            .map(|(table, n)| format!("{n} of {table}"))
            .collect();
        notes.warning = Some(format!(
            "No relay is running: {} feed changes ({}) wait in their partitions to be sequenced, and no group receives them until a relay runs. A worker of the index queue runs one (tablekit-worker run --queue index), as does any worker started with --relay.",
            b.feed_changes,
            tables.join(", ")
        ));
        return notes;
    }
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

/// How long a queue may hold messages that no consumer takes before `status`, the
/// console and the workers warn (`--unconsumed-after`, in seconds): longer than a
/// worker's restart, shorter than anyone waits for a copy.
pub const UNCONSUMED_AFTER: std::time::Duration = std::time::Duration::from_secs(5 * 60);

/// A queue holding messages that no consumer takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unconsumed {
    /// The queue.
    pub queue: String,
    /// The messages waiting in it.
    pub waiting: u64,
    /// What tells that nothing consumes it.
    pub evidence: NoConsumer,
}

/// What tells that nothing consumes a queue, as its broker can tell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoConsumer {
    /// No consumer has taken a message since then: the oldest deliverable message has
    /// waited since (SQLite exactly, Azure approximately).
    NothingTakenSince(DateTime<Utc>),
    /// The broker has counted no consumer attached since then (RabbitMQ, looked at again
    /// and again by the console or a worker).
    NoneAttachedSince(DateTime<Utc>),
    /// The broker counts no consumer attached now, and one look cannot say since when
    /// (RabbitMQ, in `status`).
    NoneAttachedNow,
}

impl Unconsumed {
    /// The warning in words: the queue, its messages, since when, and what to run. The
    /// queue's name has its control and invisible characters written as visible escapes
    /// (a page escapes it again).
    pub fn warning(&self) -> String {
        let queue = neutral(&self.queue);
        let at = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
        let what = match self.evidence {
            NoConsumer::NothingTakenSince(since) => format!(
                "holds {} messages that no consumer has taken since {}",
                self.waiting,
                at(since)
            ),
            NoConsumer::NoneAttachedSince(since) => format!(
                "holds {} messages and has had no consumer attached since {}",
                self.waiting,
                at(since)
            ),
            NoConsumer::NoneAttachedNow => format!(
                "holds {} messages and has no consumer attached (the broker counts none now; it does not say since when)",
                self.waiting
            ),
        };
        format!(
            "Queue `{queue}` {what}: nothing applies its work. Start a worker for it: tablekit-worker run --queue {queue}"
        )
    }
}

/// Whether `queue` holds messages that no consumer has taken for at least `after`, as of
/// `now`. `no_consumer_since` is when the caller first saw a broker that counts consumers
/// (RabbitMQ) report none, for a caller that looks again and again (the console, a
/// worker); `None` for a single look (`status`), which then warns as soon as the broker
/// counts none. A paused queue (its consumers stopped on purpose), one not declared and
/// one whose counts failed are not judged; nor is a queue whose broker tells neither
/// its consumers nor its messages' wait.
pub fn unconsumed(
    queue: &QueueStatus,
    now: DateTime<Utc>,
    after: std::time::Duration,
    no_consumer_since: Option<DateTime<Utc>>,
) -> Option<Unconsumed> {
    let waiting = queue.waiting.filter(|w| *w > 0)?;
    if !queue.declared || queue.error.is_some() || queue.paused == Some(true) {
        return None;
    }
    let after = chrono::Duration::from_std(after).unwrap_or(chrono::Duration::MAX);
    let long_enough = |since: DateTime<Utc>| now.signed_duration_since(since) >= after;
    let evidence = match (queue.consumers, queue.waiting_since) {
        (Some(attached), _) if attached > 0 => return None,
        (_, Some(since)) => long_enough(since).then_some(NoConsumer::NothingTakenSince(since))?,
        (Some(_), None) => match no_consumer_since {
            Some(since) => long_enough(since).then_some(NoConsumer::NoneAttachedSince(since))?,
            None => NoConsumer::NoneAttachedNow,
        },
        (None, None) => return None,
    };
    Some(Unconsumed {
        queue: queue.queue.clone(),
        waiting,
        evidence,
    })
}

/// The memory of a caller that looks at queues again and again (the console, a worker):
/// since when a broker that counts consumers (RabbitMQ) has counted none of each queue
/// holding messages, as this caller first saw it.
#[derive(Clone, Debug, Default)]
pub struct ConsumerWatch {
    none_attached: std::collections::HashMap<String, DateTime<Utc>>,
}

impl ConsumerWatch {
    /// [`unconsumed`] for `queue` as of `now`, judged with what this watch saw before.
    pub fn unconsumed(
        &mut self,
        queue: &QueueStatus,
        now: DateTime<Utc>,
        after: std::time::Duration,
    ) -> Option<Unconsumed> {
        if queue.consumers == Some(0) && queue.waiting.unwrap_or(0) > 0 {
            self.none_attached.entry(queue.queue.clone()).or_insert(now);
        } else {
            self.none_attached.remove(&queue.queue);
        }
        let since = self.none_attached.get(&queue.queue).copied();
        unconsumed(queue, now, after, since)
    }

    /// Forgets the queues not among `queues` (no longer shown).
    pub fn keep_only(&mut self, queues: &[QueueStatus]) {
        self.none_attached
            .retain(|name, _| queues.iter().any(|q| q.queue == *name));
    }
}

/// `status` as text: one screen. A queue whose messages no consumer has taken for
/// `unconsumed_after` (see [`unconsumed`]) gets a warning under the queues.
pub fn status_text(status: &Status, unconsumed_after: std::time::Duration) -> String {
    use std::fmt::Write as _;
    let mut text = String::from("queues\n");
    let now = chrono::Utc::now();
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
            neutral(&q.queue),
            count(q.waiting),
            count(q.leased),
            count(q.poisoned)
        );
        if let Some(since) = q.waiting_since {
            let _ = write!(text, "  oldest {}", crate::display::span(since, now));
        }
        if let Some(consumers) = q.consumers {
            let _ = write!(text, "  consumers {consumers:>3}");
        }
        if q.paused == Some(true) {
            text.push_str("  paused");
        }
        if let Some(error) = &q.error {
            let _ = write!(text, "  ({error})");
        }
        text.push('\n');
    }
    for q in &status.queues {
        // A queue no tablekit worker consumes is warned about at once.
        let after = if status.unknown.contains(&q.queue) {
            std::time::Duration::ZERO
        } else {
            unconsumed_after
        };
        if let Some(idle) = unconsumed(q, now, after, None) {
            let _ = writeln!(text, "  warning: {}", idle.warning());
        }
    }
    let _ = writeln!(
        text,
        "relay backlog: {} entries and {} feed changes in {} partitions{}",
        status.relay.entries,
        status.relay.feed_changes,
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
    for feed in &status.feeds {
        let _ = writeln!(
            text,
            "feed {}: {} changes kept in {} shares, for {} h",
            feed.table,
            feed.kept,
            feed.shares,
            feed.retention_secs as f64 / 3600.0
        );
        if feed.groups.is_empty() {
            let _ = writeln!(text, "  no group reads it yet");
        }
        for group in &feed.groups {
            let age = group
                .oldest_unread()
                .map(|at| (chrono::Utc::now() - at).num_milliseconds().max(0) as f64 / 1000.0);
            let expired = group.shares.iter().filter(|s| s.expired).count();
            let _ = writeln!(
                text,
                "  group {:<22} {} members  {} shares read  behind {:>8}  oldest unread {}{}",
                group.group,
                group.members.len(),
                group.shares.len(),
                group.behind(),
                age.map_or_else(|| "-".to_owned(), |s| format!("{s:.1} s ago")),
                if expired == 0 {
                    String::new()
                } else {
                    format!("  WARNING: {expired} shares past retention (PositionExpired)")
                }
            );
        }
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
            unknown: Vec::new(),
            feeds: Vec::new(),
        }
    }

    #[test]
    fn feed_changes_that_no_relay_sequences_warn_at_once() {
        let now = Utc::now();
        let waiting = Backlog {
            partitions: 1,
            feed_changes: 3,
            feed_tables: [("Orders".to_owned(), 3)].into_iter().collect(),
            ..Backlog::default()
        };
        let warning = relay_notes(&status(waiting.clone(), false), now)
            .warning
            .expect("a warning");
        assert!(
            warning.starts_with("No relay is running: 3 feed changes (3 of Orders)"),
            "{warning}"
        );
        assert!(warning.contains("no group receives them"), "{warning}");
        // A running relay sequences them within seconds: no warning.
        assert_eq!(relay_notes(&status(waiting, true), now).warning, None);
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

    fn queue(waiting: u64, consumers: Option<u64>, since: Option<DateTime<Utc>>) -> QueueStatus {
        QueueStatus {
            consumers,
            waiting_since: since,
            paused: Some(false),
            ..QueueStatus::of(
                "archive".into(),
                Ok(QueueStats {
                    waiting,
                    ..QueueStats::default()
                }),
                None,
            )
        }
    }

    #[test]
    fn a_queue_warns_once_its_messages_waited_the_threshold_with_no_consumer() {
        let now = Utc::now();
        let after = UNCONSUMED_AFTER;
        let minutes = |m| Some(now - Duration::minutes(m));
        // SQLite and Azure: the oldest deliverable message's wait decides.
        let idle = unconsumed(&queue(12, None, minutes(6)), now, after, None).expect("a warning");
        assert_eq!(
            idle.evidence,
            NoConsumer::NothingTakenSince(now - Duration::minutes(6))
        );
        assert_eq!(idle.waiting, 12);
        assert_eq!(
            unconsumed(&queue(12, None, minutes(4)), now, after, None),
            None
        );
        // Nothing deliverable waits (retry delays only), or nothing at all: no warning.
        assert_eq!(unconsumed(&queue(12, None, None), now, after, None), None);
        assert_eq!(unconsumed(&queue(0, Some(0), None), now, after, None), None);
        // RabbitMQ: a consumer attached settles it; none attached warns at once on a
        // single look, after the threshold for a caller that remembers since when.
        assert_eq!(
            unconsumed(&queue(12, Some(1), None), now, after, None),
            None
        );
        assert_eq!(
            unconsumed(&queue(12, Some(0), None), now, after, None).map(|u| u.evidence),
            Some(NoConsumer::NoneAttachedNow)
        );
        assert_eq!(
            unconsumed(&queue(12, Some(0), None), now, after, minutes(1)),
            None
        );
        assert_eq!(
            unconsumed(&queue(12, Some(0), None), now, after, minutes(5)).map(|u| u.evidence),
            Some(NoConsumer::NoneAttachedSince(now - Duration::minutes(5)))
        );
        // A paused queue, one not declared, one whose counts failed: not judged.
        let paused = QueueStatus {
            paused: Some(true),
            ..queue(12, None, minutes(60))
        };
        assert_eq!(unconsumed(&paused, now, after, None), None);
        let undeclared = QueueStatus::of(
            "archive".into(),
            Err(Error::NotDeclared {
                queue: "archive".into(),
            }),
            None,
        );
        assert_eq!(unconsumed(&undeclared, now, after, None), None);
        // The threshold is the caller's.
        assert!(
            unconsumed(
                &queue(1, None, minutes(2)),
                now,
                std::time::Duration::from_secs(60),
                None
            )
            .is_some()
        );
    }

    #[test]
    fn the_warning_names_the_queue_its_messages_since_when_and_what_to_run() {
        let since = DateTime::parse_from_rfc3339("2026-11-23T10:00:00Z")
            .expect("a time")
            .with_timezone(&Utc);
        let idle = Unconsumed {
            queue: "archive".into(),
            waiting: 12,
            evidence: NoConsumer::NothingTakenSince(since),
        };
        assert_eq!(
            idle.warning(),
            "Queue `archive` holds 12 messages that no consumer has taken since 2026-11-23 10:00:00 UTC: nothing applies its work. Start a worker for it: tablekit-worker run --queue archive"
        );
        let forged = Unconsumed {
            queue: "a\nwarning: all is well".into(),
            waiting: 1,
            evidence: NoConsumer::NoneAttachedNow,
        };
        assert!(!forged.warning().contains('\n'), "{}", forged.warning());
    }

    #[test]
    fn status_text_warns_under_the_queues_of_a_queue_no_consumer_takes() {
        let now = Utc::now();
        let mut status = status(Backlog::default(), true);
        status.queues = vec![
            queue(12, None, Some(now - Duration::minutes(7))),
            QueueStatus {
                queue: "index".into(),
                ..queue(3, None, Some(now - Duration::seconds(1)))
            },
        ];
        let text = status_text(&status, UNCONSUMED_AFTER);
        // Each queue's line says how long its oldest message waited.
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(" waiting ")).collect();
        assert!(lines[0].contains("  oldest 7 min"), "{text}");
        assert!(lines[1].contains("  oldest 1 s"), "{text}");
        let warnings: Vec<&str> = text.lines().filter(|l| l.contains("warning:")).collect();
        assert_eq!(warnings.len(), 1, "{text}");
        assert!(
            warnings[0].starts_with(
                "  warning: Queue `archive` holds 12 messages that no consumer has taken since "
            ),
            "{text}"
        );
        assert!(
            warnings[0].ends_with("tablekit-worker run --queue archive"),
            "{text}"
        );
        // A shorter threshold warns of the other queue too.
        let text = status_text(&status, std::time::Duration::ZERO);
        assert_eq!(text.matches("warning: Queue").count(), 2, "{text}");
    }
}
