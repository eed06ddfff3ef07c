//! Every random choice tablekit makes — retry jitter, operation ids, blob name nonces —
//! comes from here, so that a deterministic simulation can seed them all: with
//! [`seed`] in force on a thread, the choices made on that thread follow the seed;
//! otherwise they come from the operating system's generator.
//!
//! ```
//! use tablekit_core::random;
//!
//! let first = { let _seeded = random::seed(7); (random::u64(), random::uuid()) };
//! let again = { let _seeded = random::seed(7); (random::u64(), random::uuid()) };
//! assert_eq!(first, again);
//! ```

use std::cell::RefCell;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

thread_local! {
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// Seeds this thread's choices until the guard drops (the previous seeding comes back).
#[must_use = "the seed holds while the guard lives"]
pub fn seed(seed: u64) -> Seeded {
    let previous = SEEDED.with(|s| s.replace(Some(StdRng::seed_from_u64(seed))));
    Seeded { previous }
}

/// The guard of [`seed`].
#[derive(Debug)]
pub struct Seeded {
    previous: Option<StdRng>,
}

impl Drop for Seeded {
    fn drop(&mut self) {
        let previous = self.previous.take();
        SEEDED.with(|s| *s.borrow_mut() = previous);
    }
}

/// Whether this thread's choices follow a seed.
pub fn is_seeded() -> bool {
    SEEDED.with(|s| s.borrow().is_some())
}

fn with<T>(f: impl FnOnce(&mut dyn RngCore) -> T) -> T {
    SEEDED.with(|s| match s.borrow_mut().as_mut() {
        Some(rng) => f(rng),
        None => f(&mut rand::rng()),
    })
}

/// A random `u64`.
pub fn u64() -> u64 {
    with(|r| r.next_u64())
}

/// A number drawn uniformly from `low..high` (`low` when the range is empty).
pub fn between(low: f64, high: f64) -> f64 {
    if high.partial_cmp(&low) != Some(std::cmp::Ordering::Greater) {
        return low;
    }
    with(|r| r.random_range(low..high))
}

/// A duration drawn uniformly from zero to `max` inclusive.
pub fn up_to(max: Duration) -> Duration {
    with(|r| r.random_range(Duration::ZERO..=max))
}

/// A random (version 4) UUID.
pub fn uuid() -> uuid::Uuid {
    let mut bytes = [0u8; 16];
    with(|r| r.fill_bytes(&mut bytes));
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_repeats_its_choices_and_the_guard_restores_the_previous_one() {
        let outer = seed(1);
        let a = u64();
        {
            let _inner = seed(2);
            let _ = u64();
        }
        let b = u64();
        drop(outer);
        let _again = seed(1);
        assert_eq!((a, b), (u64(), u64()));
        assert_eq!(uuid().get_version_num(), 4);
    }

    #[test]
    fn unseeded_choices_differ() {
        assert!(!is_seeded());
        assert_ne!(uuid(), uuid());
        assert!(up_to(Duration::from_millis(5)) <= Duration::from_millis(5));
        assert_eq!(between(2.0, 2.0), 2.0);
    }
}
