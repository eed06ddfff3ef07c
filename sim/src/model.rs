//! The reference model: what each write was asked to do and what it was answered, in the
//! order the single-threaded simulation saw them start and end; and the check of a key's
//! final state against that history. Small on purpose — the whole model is this file.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

/// A primary: its type, PartitionKey and RowKey.
pub type Key = (&'static str, String, String);

/// What a write does to its key.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Stores the value written with this `rev` (a put or a partial update); `expires`
    /// is when the value stops being readable, when the writer knows it.
    Put {
        rev: i64,
        expires: Option<DateTime<Utc>>,
        /// A ttl: the value expires this long after the write, at a moment between its
        /// start and end.
        ttl: Option<chrono::Duration>,
        /// The write leaves the expiry as it was (a partial update): it may be past.
        unknown_expiry: bool,
    },
    /// Removes the entity (a delete, the archive, the sweeper).
    Remove,
}

/// How a write was answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Not yet (in flight, or its process crashed).
    Pending,
    /// Applied.
    Ok,
    /// Refused with a definite error: nothing of it may be in the state.
    Refused(String),
    /// An error that leaves the outcome unknown: applied or not.
    Unknown(String),
}

/// One write of the history.
#[derive(Clone, Debug)]
pub struct Write {
    pub key: Key,
    pub what: String,
    pub effect: Effect,
    pub start: u64,
    pub start_time: DateTime<Utc>,
    pub end: Option<u64>,
    pub end_time: Option<DateTime<Utc>>,
    pub answer: Answer,
}

/// The history of every write, and the change events delivered.
#[derive(Clone, Default, Debug)]
pub struct Model {
    pub writes: Vec<Write>,
    seq: u64,
    /// Per key, the change events delivered: (version, rev or `None` for a delete).
    pub events: BTreeMap<Key, Vec<(i64, Option<i64>)>>,
    /// Keys given to the archive (no writer touches them after).
    pub archived: Vec<Key>,
    /// Ids of the malformed messages sent on purpose.
    pub malformed: Vec<String>,
    /// Malformed messages an operator discarded from a poison queue (a duplicate
    /// delivery of one may be poisoned again afterwards).
    pub discarded: Vec<String>,
    /// What the operator's console steps found wrong.
    pub console: Vec<String>,
}

impl Model {
    fn tick(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Records the start of a write; its index.
    pub fn start(&mut self, key: Key, what: String, effect: Effect, now: DateTime<Utc>) -> usize {
        let start = self.tick();
        self.writes.push(Write {
            key,
            what,
            effect,
            start,
            start_time: now,
            end: None,
            end_time: None,
            answer: Answer::Pending,
        });
        self.writes.len() - 1
    }

    /// Records the answer of a write.
    pub fn end(&mut self, at: usize, answer: Answer, now: DateTime<Utc>) {
        let end = self.tick();
        let write = &mut self.writes[at];
        write.end = Some(end);
        write.end_time = Some(now);
        write.answer = answer;
    }

    /// A system delete of `key` (archive) whose moment is unknown from `now` on.
    pub fn system_remove(&mut self, key: Key, what: &str, now: DateTime<Utc>) {
        let at = self.start(key, what.to_owned(), Effect::Remove, now);
        self.writes[at].answer = Answer::Unknown("done by a worker".into());
    }

    /// Whether a write of `key` is in flight.
    pub fn in_flight(&self, key: &Key) -> bool {
        self.writes
            .iter()
            .any(|w| w.key == *key && w.answer == Answer::Pending)
    }

    /// Checks the final state of `key`: `found` is the `rev` stored (`None`: absent);
    /// `now` the time of the check. Returns what is wrong.
    pub fn check(&self, key: &Key, found: Option<i64>, now: DateTime<Utc>) -> Option<String> {
        let writes: Vec<&Write> = self.writes.iter().filter(|w| w.key == *key).collect();
        let after = |w: &Write, v: &Write| w.end.is_some_and(|end| v.start > end);
        let expired = |w: &Write| match &w.effect {
            Effect::Put { expires, ttl, .. } => {
                expires.is_some_and(|at| at <= now)
                    || ttl.is_some_and(|ttl| w.end_time.is_some_and(|end| end + ttl <= now))
            }
            Effect::Remove => false,
        };
        let may_be_expired = |w: &Write| match &w.effect {
            Effect::Put {
                expires,
                ttl,
                unknown_expiry,
                ..
            } => {
                *unknown_expiry
                    || expires.is_some_and(|at| at <= now)
                    || ttl.is_some_and(|ttl| w.start_time + ttl <= now)
            }
            Effect::Remove => false,
        };
        match found {
            Some(rev) => {
                let Some(w) = writes
                    .iter()
                    .find(|w| matches!(w.effect, Effect::Put { rev: r, .. } if r == rev))
                else {
                    return Some(format!("{key:?} holds rev {rev}, which no write wrote"));
                };
                if let Answer::Refused(why) = &w.answer {
                    return Some(format!(
                        "{key:?} holds rev {rev} of `{}`, which was refused ({why})",
                        w.what
                    ));
                }
                if expired(w) {
                    return Some(format!(
                        "{key:?} holds rev {rev} of `{}`, which expired",
                        w.what
                    ));
                }
                if let Some(v) = writes
                    .iter()
                    .find(|v| v.answer == Answer::Ok && after(w, v))
                {
                    return Some(format!(
                        "{key:?} holds rev {rev} of `{}`, but `{}` was acknowledged after it",
                        w.what, v.what
                    ));
                }
                None
            }
            None => {
                // Every acknowledged put must be undone by something that may come after
                // it: a remove not refused, a later put that may have expired, or its own
                // expiry.
                for w in writes.iter().filter(|w| w.answer == Answer::Ok) {
                    if !matches!(w.effect, Effect::Put { .. }) || may_be_expired(w) {
                        continue;
                    }
                    let undone = writes.iter().any(|v| {
                        !matches!(v.answer, Answer::Refused(_))
                            && !std::ptr::eq(*v, *w)
                            && v.end.is_none_or(|end| end > w.start)
                            && (v.effect == Effect::Remove || may_be_expired(v))
                    });
                    if !undone {
                        return Some(format!(
                            "{key:?} is absent, but `{}` was acknowledged and nothing removed it",
                            w.what
                        ));
                    }
                }
                None
            }
        }
    }
}
