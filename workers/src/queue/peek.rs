//! The messages waiting in a queue, read without taking them
//! ([`Queue::peek`](super::Queue::peek)): what an operator looks at to see what a queue
//! holds and whether its messages are being retried.

use chrono::{DateTime, Utc};

/// The most messages one [`PeekQuery`] reads.
pub const MAX_PEEK: usize = 100;

/// Which waiting messages to read: how many, from which end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeekQuery {
    /// The most messages read (at most [`MAX_PEEK`]).
    pub limit: usize,
    /// The newest first rather than the oldest first.
    pub newest_first: bool,
}

impl PeekQuery {
    /// The oldest `limit` messages (at most [`MAX_PEEK`]).
    pub fn new(limit: usize) -> Self {
        PeekQuery {
            limit: limit.min(MAX_PEEK),
            newest_first: false,
        }
    }

    /// Newest first (`true`) or oldest first (`false`, the default).
    #[must_use]
    pub fn newest_first(mut self, newest_first: bool) -> Self {
        self.newest_first = newest_first;
        self
    }

    /// The limit a backend reads: at most [`MAX_PEEK`] whatever the field holds.
    pub fn bounded_limit(&self) -> usize {
        self.limit.min(MAX_PEEK)
    }
}

impl Default for PeekQuery {
    fn default() -> Self {
        PeekQuery::new(20)
    }
}

/// What an operator does to the messages waiting in a queue
/// ([`Queue::act_on_waiting`](super::Queue::act_on_waiting)): what Sidekiq's Retries and
/// Scheduled tabs do to its jobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitingAction {
    /// Removes the messages waiting, delayed retries included, never one a consumer holds
    /// now. On a backend that numbers its messages (the SQLite queue) only those up to
    /// and including the handle `through`, the newest the operator saw: a message sent
    /// after the operator looked is kept. `None`: every one waiting now.
    Purge {
        /// The handle of the newest message the operator saw.
        through: Option<String>,
    },
    /// Makes a delayed retry deliverable now.
    RetryNow {
        /// The message's handle ([`WaitingMessage::handle`]).
        handle: String,
    },
    /// Deletes one waiting message (a delayed retry or one ready), unless a consumer holds
    /// it now.
    Delete {
        /// The message's handle ([`WaitingMessage::handle`]).
        handle: String,
    },
}

impl WaitingAction {
    /// The action's name in forms, records and the API: `purge`, `retry-now`, `delete`.
    pub fn name(&self) -> &'static str {
        match self {
            WaitingAction::Purge { .. } => "purge",
            WaitingAction::RetryNow { .. } => "retry-now",
            WaitingAction::Delete { .. } => "delete",
        }
    }
}

/// A message waiting in a queue, as a peek shows it (its body is not read out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingMessage {
    /// The message id (bytes that are not UTF-8 shown as U+FFFD).
    pub id: String,
    /// What names this message on its backend, when it has a name of its own beside the
    /// id: the SQLite queue's row number, Azure's message id.
    pub handle: Option<String>,
    /// The operation's kind and version, when the body is an operation's envelope (as
    /// [`operation_of`](super::operation_of) reads it).
    pub kind: Option<(String, u32)>,
    /// When the message was first sent, if the queue knows.
    pub sent_at: Option<DateTime<Utc>>,
    /// How many times it was delivered so far (0: never).
    pub attempts: u32,
    /// When it becomes deliverable, if not now: a delayed retry's time, or when a lease
    /// runs out ([`leased`](Self::leased)). `None` when a consumer could take it now.
    pub next_attempt: Option<DateTime<Utc>>,
    /// Whether a consumer holds it now (leased, not yet settled).
    pub leased: bool,
}
