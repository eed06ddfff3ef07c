//! Time as tablekit sees it: the moment an entity's time to live starts, and whether an
//! entity has expired. Tables read the wall clock by default; a [`ManualClock`] lets tests
//! (and simulations) move time by hand, across every table and sweeper that shares it.
//!
//! Every time stamp tablekit takes itself (write versions, outbox entries, pending
//! markers, reservation leases, the memory store's Timestamps) comes from [`now`]: the
//! wall clock, unless a deterministic simulation put its own clock in force on the thread
//! with [`simulate`].

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
}

/// A clock shared by tables and background passes.
pub type SharedClock = Arc<dyn Clock>;

/// The system's wall clock (or the clock a simulation put in force on the thread, see
/// [`simulate`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        now()
    }
}

thread_local! {
    static SIMULATED: RefCell<Option<SharedClock>> = const { RefCell::new(None) };
}

/// The current time: the wall clock, or the clock [`simulate`] put in force on this thread.
pub fn now() -> DateTime<Utc> {
    SIMULATED.with(|c| match c.borrow().as_ref() {
        Some(clock) => clock.now(),
        None => Utc::now(),
    })
}

/// Puts `clock` in force for [`now`] (and [`SystemClock`]) on this thread until the guard
/// drops: a deterministic simulation runs every task on one thread under its own clock.
#[must_use = "the clock holds while the guard lives"]
pub fn simulate(clock: SharedClock) -> Simulated {
    let previous = SIMULATED.with(|c| c.replace(Some(clock)));
    Simulated { previous }
}

/// The guard of [`simulate`].
#[derive(Debug)]
pub struct Simulated {
    previous: Option<SharedClock>,
}

impl Drop for Simulated {
    fn drop(&mut self) {
        let previous = self.previous.take();
        SIMULATED.with(|c| *c.borrow_mut() = previous);
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
