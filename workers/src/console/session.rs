//! The sessions of signed-in browsers: the cookie holds a random session id, never the
//! token, and the console keeps what each id grants.
//!
//! A session id is [`SESSION_ID_BYTES`] random bytes in hex. Its first half selects the
//! session in a map (a lookup whose timing can only tell whether a random selector
//! exists); its second half is compared with the kept one in constant time. At most
//! [`MAX_SESSIONS`] are kept (signing in past that forgets the oldest), each for
//! [`SESSION_LIFETIME`] from signing in; signing out forgets one at once.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use std::time::Instant;

use super::secret::{random_hex, same_secret};
use crate::queue::desk::Role;

/// How many sessions are kept at most.
pub(super) const MAX_SESSIONS: usize = 4096;

/// How long a session lasts after signing in.
pub(super) const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// The random bytes of a session id (written as twice as many hex digits).
pub(super) const SESSION_ID_BYTES: usize = 32;

/// The hex digits of a session id's selector (its first half).
const SELECTOR_LEN: usize = SESSION_ID_BYTES;

/// The console's sessions.
pub(super) struct Sessions {
    max: usize,
    lifetime: Duration,
    kept: Mutex<Kept>,
}

/// The sessions, by selector, and their order of signing in.
#[derive(Default)]
struct Kept {
    by_selector: HashMap<String, Session>,
    /// Selectors in the order their sessions began (some may be gone already).
    order: VecDeque<String>,
}

/// One session.
struct Session {
    /// The id's second half.
    verifier: String,
    role: Role,
    expires: Instant,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::new(MAX_SESSIONS, SESSION_LIFETIME)
    }
}

impl Sessions {
    /// At most `max` sessions, each lasting `lifetime`.
    pub(super) fn new(max: usize, lifetime: Duration) -> Self {
        Sessions {
            max: max.max(1),
            lifetime,
            kept: Mutex::new(Kept::default()),
        }
    }

    /// The sessions, even if a holder panicked.
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new session granting `role`: its id, for the cookie.
    pub(super) fn open(&self, role: Role) -> String {
        self.open_at(role, Instant::now())
    }

    /// [`Sessions::open`] at `now`.
    fn open_at(&self, role: Role, now: Instant) -> String {
        let id = random_hex(SESSION_ID_BYTES);
        let (selector, verifier) = id.split_at(SELECTOR_LEN);
        let mut kept = self.lock();
        kept.forget_expired(now);
        while kept.by_selector.len() >= self.max {
            match kept.order.pop_front() {
                Some(oldest) => {
                    kept.by_selector.remove(&oldest);
                }
                None => break,
            }
        }
        kept.by_selector.insert(
            selector.to_owned(),
            Session {
                verifier: verifier.to_owned(),
                role,
                expires: now + self.lifetime,
            },
        );
        kept.order.push_back(selector.to_owned());
        // Signing out leaves selectors in the order: drop them once they outnumber the
        // sessions.
        if kept.order.len() > 2 * self.max {
            let Kept { by_selector, order } = &mut *kept;
            order.retain(|s| by_selector.contains_key(s));
        }
        id
    }

    /// What the session `id` grants, if it is one the console keeps and not expired.
    pub(super) fn role(&self, id: &str) -> Option<Role> {
        self.role_at(id, Instant::now())
    }

    /// [`Sessions::role`] at `now`.
    fn role_at(&self, id: &str, now: Instant) -> Option<Role> {
        let (selector, verifier) = split(id)?;
        let kept = self.lock();
        let session = kept.by_selector.get(selector)?;
        (session.expires > now && same_secret(&session.verifier, verifier)).then_some(session.role)
    }

    /// Forgets the session `id`; whether there was one.
    pub(super) fn close(&self, id: &str) -> bool {
        let Some((selector, verifier)) = split(id) else {
            return false;
        };
        let mut kept = self.lock();
        let known = kept
            .by_selector
            .get(selector)
            .is_some_and(|s| same_secret(&s.verifier, verifier));
        if known {
            kept.by_selector.remove(selector);
        }
        known
    }

    /// How many sessions are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().by_selector.len()
    }
}

impl Kept {
    /// Forgets the sessions expired at `now` (they began first, so they lead the order).
    fn forget_expired(&mut self, now: Instant) {
        while let Some(oldest) = self.order.front() {
            match self.by_selector.get(oldest) {
                Some(session) if session.expires > now => break,
                Some(_) => {
                    self.by_selector.remove(oldest);
                }
                None => {}
            }
            self.order.pop_front();
        }
    }
}

/// A session id's selector and verifier, when it has the shape of one.
fn split(id: &str) -> Option<(&str, &str)> {
    (id.len() == 2 * SESSION_ID_BYTES && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| id.split_at(SELECTOR_LEN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_grants_its_role_until_closed() {
        let sessions = Sessions::default();
        let operator = sessions.open(Role::Operator);
        let viewer = sessions.open(Role::Viewer);
        assert_eq!(operator.len(), 64);
        assert_eq!(sessions.role(&operator), Some(Role::Operator));
        assert_eq!(sessions.role(&viewer), Some(Role::Viewer));
        // Same selector, another verifier: nothing.
        let forged = format!("{}{}", &operator[..32], "0".repeat(32));
        assert_eq!(sessions.role(&forged), None);
        assert!(!sessions.close(&forged), "a forged id closes nothing");
        assert_eq!(sessions.role("not-a-session"), None);
        assert!(sessions.close(&operator));
        assert_eq!(sessions.role(&operator), None);
        assert_eq!(sessions.role(&viewer), Some(Role::Viewer));
    }

    #[test]
    fn sessions_expire_and_the_oldest_go_first_past_the_bound() {
        let sessions = Sessions::new(3, Duration::from_secs(60));
        let start = Instant::now();
        let first = sessions.open_at(Role::Operator, start);
        let later = start + Duration::from_secs(30);
        let ids: Vec<String> = (0..3)
            .map(|_| sessions.open_at(Role::Viewer, later))
            .collect();
        assert_eq!(sessions.len(), 3);
        assert_eq!(
            sessions.role_at(&first, later),
            None,
            "the oldest made room"
        );
        assert!(ids.iter().all(|id| sessions.role_at(id, later).is_some()));
        let expired = later + Duration::from_secs(61);
        assert!(
            ids.iter().all(|id| sessions.role_at(id, expired).is_none()),
            "expired"
        );
        let _ = sessions.open_at(Role::Operator, expired);
        assert_eq!(sessions.len(), 1, "the expired are forgotten");
    }

    #[test]
    fn signing_in_and_out_keeps_the_order_bounded() {
        let sessions = Sessions::new(4, SESSION_LIFETIME);
        for _ in 0..100 {
            let id = sessions.open(Role::Operator);
            assert!(sessions.close(&id));
        }
        assert!(sessions.lock().order.len() <= 8);
    }
}
