//! The simulated clock every process of the world reads.

use chrono::{DateTime, Utc};
use tablekit_core::clock::Clock;

/// The simulated clock: the paused Tokio clock from a fixed start, a microsecond further
/// at every reading (a real clock never stands still), plus the jumps of the run.
/// Once the run has drained it stops (see [`SimClock::freeze`]).
#[derive(Debug)]
pub(super) struct SimClock {
    pub(super) base: DateTime<Utc>,
    pub(super) start: tokio::time::Instant,
    pub(super) ticks: std::sync::atomic::AtomicI64,
    pub(super) frozen: std::sync::Mutex<Option<DateTime<Utc>>>,
}

impl SimClock {
    /// Stops the clock for the checks: over SQLite the paused Tokio clock moves on while
    /// a blocking call is in flight, and an entity expiring (or a background pass
    /// starting) in the middle of the checks is not something the run did.
    pub(super) fn freeze(&self) {
        let now = self.now();
        if let Ok(mut frozen) = self.frozen.lock() {
            *frozen = Some(now);
        }
    }
}

impl Clock for SimClock {
    fn now(&self) -> DateTime<Utc> {
        if let Some(at) = self.frozen.lock().ok().and_then(|f| *f) {
            return at;
        }
        let ticks = self.ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let elapsed = chrono::Duration::from_std(self.start.elapsed()).unwrap_or_default();
        self.base + elapsed + chrono::Duration::microseconds(ticks)
    }
}
