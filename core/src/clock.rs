//! Time as tablekit sees it: the moment an entity's time to live starts, and whether an
//! entity has expired. Tables read the wall clock by default; a [`ManualClock`] lets tests
//! (and simulations) move time by hand, across every table and sweeper that shares it.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
}

/// A clock shared by tables and background passes.
pub type SharedClock = Arc<dyn Clock>;

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The wall clock, shared.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

/// A clock that stands still until it is set or advanced; clones share the time.
///
/// ```
/// use tablekit_core::clock::{Clock, ManualClock};
///
/// let clock = ManualClock::new(chrono::DateTime::UNIX_EPOCH);
/// clock.advance(chrono::Duration::days(31));
/// assert_eq!(clock.now().to_rfc3339(), "1970-02-01T00:00:00+00:00");
/// ```
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    /// A clock showing `at`.
    pub fn new(at: DateTime<Utc>) -> Self {
        ManualClock(Arc::new(Mutex::new(at)))
    }

    /// Sets the time.
    pub fn set(&self, at: DateTime<Utc>) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = at;
    }

    /// Moves the time forward (or back, with a negative duration).
    pub fn advance(&self, by: chrono::Duration) {
        let mut now = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *now += by;
    }

    /// This clock, shared.
    pub fn shared(&self) -> SharedClock {
        Arc::new(self.clone())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
