//! The sets a bulk action is bound to. Acting on "all" (every message the filter passes)
//! first lists what it would touch — the dry run the operator confirms — and keeps that
//! exact set of handles here under a random token. The confirmation names the token, not
//! a count: it acts on those messages and no others (those poisoned since are left alone,
//! those gone since are reported), and a form without a kept token never acts.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::queue::{PoisonAction, PoisonFilter};

use super::super::access::{random_hex, same_secret};

/// How many sets are kept at once (the oldest go first).
const KEPT: usize = 32;
/// How long a dry run may wait for its confirmation.
pub(super) const VALID_FOR: Duration = Duration::from_secs(15 * 60);

/// What a bulk action would touch.
#[derive(Clone, Debug)]
pub(super) struct Bound {
    pub(super) queue: String,
    pub(super) action: PoisonAction,
    pub(super) filter: PoisonFilter,
    /// The handles, in the order listed.
    pub(super) handles: Vec<String>,
    /// Each handle's message id (as shown), for the log.
    pub(super) ids: Vec<String>,
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
    pub(super) fn keep(&self, bound: Bound) -> String {
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
    pub(super) fn take(&self, token: &str, queue: &str) -> Option<Bound> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let at = kept.iter().position(|k| {
            same_secret(&k.token, token) && k.bound.queue == queue && k.at.elapsed() < VALID_FOR
        })?;
        kept.remove(at).map(|k| k.bound)
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
        assert_eq!(sets.take(&token, "q").map(|b| b.handles.len()), Some(2));
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
