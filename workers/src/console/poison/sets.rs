//! The sets a confirmed action is bound to. Acting on "all" (every message the filter
//! passes) first lists what it would touch — the dry run the operator confirms — and keeps
//! that exact set of handles here under a random token; so does a discard of one message
//! or of the selected ones. The confirmation names the token, not a count: it acts on
//! those messages and no others (those poisoned since are left alone, those gone since are
//! reported), and a form without a kept token never acts. A set can be exported (its
//! messages whole, as JSON lines) before it is confirmed.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::queue::{PoisonAction, PoisonFilter};

use super::super::secret::{random_hex, same_secret};

/// How many sets are kept at once (the oldest go first).
const KEPT: usize = 32;
/// How long a dry run may wait for its confirmation.
pub(in crate::console) const VALID_FOR: Duration = Duration::from_secs(15 * 60);

/// What a bulk action would touch.
#[derive(Clone, Debug)]
pub(in crate::console) struct Bound {
    pub(in crate::console) queue: String,
    pub(in crate::console) action: PoisonAction,
    pub(in crate::console) filter: PoisonFilter,
    /// The handles, in the order listed.
    pub(in crate::console) handles: Vec<String>,
    /// Each handle's message id (as shown), for the log.
    pub(in crate::console) ids: Vec<String>,
    /// What the operator asked: `replay`, `discard` or `moveto`.
    pub(in crate::console) verb: String,
    /// Of what: `one`, `selected` or `all`.
    pub(in crate::console) scope: String,
    /// The reason groups of the set ([`PoisonMessage::reason_group`](crate::queue::PoisonMessage::reason_group)),
    /// each with how many of its messages, most first: every message of the set counted.
    pub(in crate::console) reasons: Vec<(String, u64)>,
    /// The page to go back to, where the operator was.
    pub(in crate::console) back: super::place::Place,
    /// The handles named that were no longer in the poison queue when the set was made.
    pub(in crate::console) gone: Vec<String>,
}

struct Kept {
    token: String,
    at: Instant,
    bound: Bound,
}

/// The sets waiting for their confirmation.
#[derive(Default)]
pub(in crate::console) struct Sets {
    kept: Mutex<VecDeque<Kept>>,
}

impl Sets {
    /// Keeps `bound`; returns the token its confirmation carries.
    pub(in crate::console) fn keep(&self, bound: Bound) -> String {
        let token = random_hex(16);
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|k| k.at.elapsed() < VALID_FOR);
        kept.push_back(Kept {
            token: token.clone(),
            at: Instant::now(),
            bound,
        });
        while kept.len() > KEPT {
            kept.pop_front();
        }
        token
    }

    /// Takes the set of `token` for `queue` (once: a second confirmation finds nothing).
    pub(in crate::console) fn take(&self, token: &str, queue: &str) -> Option<Bound> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let at = Self::position(&kept, token, queue)?;
        kept.remove(at).map(|k| k.bound)
    }

    /// The set of `token` for `queue`, left in place (its confirmation page, its export).
    pub(in crate::console) fn peek(&self, token: &str, queue: &str) -> Option<Bound> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let at = Self::position(&kept, token, queue)?;
        kept.get(at).map(|k| k.bound.clone())
    }

    fn position(kept: &VecDeque<Kept>, token: &str, queue: &str) -> Option<usize> {
        kept.iter().position(|k| {
            same_secret(&k.token, token) && k.bound.queue == queue && k.at.elapsed() < VALID_FOR
        })
    }
}

/// The reason groups of a set's messages, counted as the set is read.
#[derive(Default)]
pub(super) struct GroupCounts(std::collections::HashMap<String, u64>);

impl GroupCounts {
    pub(super) fn add(&mut self, message: &crate::queue::PoisonMessage) {
        *self.0.entry(message.reason_group()).or_default() += 1;
    }

    /// Most first, then by group.
    pub(super) fn most_first(self) -> Vec<(String, u64)> {
        let mut groups: Vec<(String, u64)> = self.0.into_iter().collect();
        groups.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(queue: &str) -> Bound {
        Bound {
            queue: queue.into(),
            action: PoisonAction::Discard,
            filter: PoisonFilter::new(),
            handles: vec!["1".into(), "2".into()],
            ids: vec!["a".into(), "b".into()],
            verb: "discard".into(),
            scope: "all".into(),
            reasons: Vec::new(),
            back: super::super::place::Place::default(),
            gone: Vec::new(),
        }
    }

    #[test]
    fn a_set_is_taken_once_by_its_token_and_queue() {
        let sets = Sets::default();
        let token = sets.keep(bound("q"));
        assert!(sets.take(&token, "other").is_none(), "another queue");
        assert!(
            sets.take("0".repeat(32).as_str(), "q").is_none(),
            "a forged token"
        );
        assert_eq!(sets.peek(&token, "q").map(|b| b.handles.len()), Some(2));
        assert_eq!(sets.take(&token, "q").map(|b| b.handles.len()), Some(2));
        assert!(sets.peek(&token, "q").is_none(), "taken");
        assert!(sets.take(&token, "q").is_none(), "a second confirmation");
    }

    #[test]
    fn only_the_newest_sets_are_kept() {
        let sets = Sets::default();
        let first = sets.keep(bound("q"));
        for _ in 0..KEPT {
            sets.keep(bound("q"));
        }
        assert!(sets.take(&first, "q").is_none());
    }
}
