//! The one retry policy of tablekit: a bound on attempts and a jittered exponential
//! backoff, followed by every loop that tries again — the optimistic loops of the
//! patterns (a lost race) and the Azure Storage client (a transient failure).
//!
//! ```
//! use tablekit_core::retry::RetryPolicy;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let mut retry = RetryPolicy::default().attempts(3).start();
//! let mut tries = 0;
//! let gave_up = loop {
//!     if let Err(exhausted) = retry.next(|| "a write that keeps losing".to_owned()).await {
//!         break exhausted;
//!     }
//!     tries += 1; // … the attempt, which `continue`s when it lost a race.
//! };
//! assert_eq!((tries, gave_up.attempts), (3, 3));
//! # });
//! ```

use std::time::Duration;

/// How a loop retries: a bound on attempts and a jittered exponential backoff.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts before giving up (1 = no retry).
    pub max_attempts: usize,
    /// The backoff before the second attempt; it doubles per attempt up to `cap`. Each
    /// wait is drawn uniformly between zero and the backoff (full jitter).
    pub base: Duration,
    /// The largest backoff.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    /// 64 attempts, backoff from 2 ms doubling to 100 ms: the optimistic loops, where a
    /// lost race is retried at once.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 64,
            base: Duration::from_millis(2),
            cap: Duration::from_millis(100),
        }
    }
}

impl RetryPolicy {
    /// 4 attempts, backoff from 100 ms doubling to 2 s: requests to Azure Storage, where a
    /// transient failure (a busy or unreachable service) needs time to pass.
    pub const fn azure() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(2),
        }
    }

    /// The policy with another bound on attempts (at least 1).
    #[must_use]
    pub fn attempts(mut self, max_attempts: usize) -> Self {
        self.max_attempts = max_attempts.max(1);
        self
    }

    /// The policy with another largest backoff.
    #[must_use]
    pub fn capped_at(mut self, cap: Duration) -> Self {
        self.cap = cap;
        self
    }

    /// The wait before attempt `attempt` (from 1): none before the first, then drawn
    /// uniformly up to the doubled backoff (full jitter).
    pub fn backoff(&self, attempt: usize) -> Duration {
        if attempt <= 1 {
            return Duration::ZERO;
        }
        let doubled = self.base.saturating_mul(1u32 << (attempt - 2).min(16));
        crate::random::up_to(doubled.min(self.cap))
    }

    /// A fresh count of attempts under this policy.
    pub fn start(&self) -> Retry {
        Retry {
            policy: *self,
            attempt: 0,
        }
    }
}

/// The attempts of one loop: `loop { retry.next(what).await?; … }`, where the body
/// returns when it is done and `continue`s when it should try again.
#[derive(Debug)]
pub struct Retry {
    policy: RetryPolicy,
    attempt: usize,
}

/// A loop spent its attempts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what}: gave up after {attempts} attempts")]
pub struct Exhausted {
    /// What kept failing.
    pub what: String,
    /// The attempts made.
    pub attempts: usize,
}

impl Retry {
    /// The attempt under way (from 1; 0 before the first).
    pub fn attempt(&self) -> usize {
        self.attempt
    }

    /// Whether another attempt is left.
    pub fn has_next(&self) -> bool {
        self.attempt < self.policy.max_attempts
    }

    /// Starts the next attempt: at once for the first, after a jittered backoff for the
    /// others.
    ///
    /// # Errors
    /// [`Exhausted`] naming `what` once the attempts are spent.
    pub async fn next(&mut self, what: impl FnOnce() -> String) -> Result<(), Exhausted> {
        if !self.has_next() {
            return Err(Exhausted {
                what: what(),
                attempts: self.attempt,
            });
        }
        self.attempt += 1;
        let wait = self.policy.backoff(self.attempt);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_base_up_to_the_cap() {
        let policy = RetryPolicy {
            max_attempts: 10,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(35),
        };
        assert_eq!(policy.backoff(1), Duration::ZERO);
        for _ in 0..50 {
            assert!(policy.backoff(2) <= Duration::from_millis(10));
            assert!(policy.backoff(3) <= Duration::from_millis(20));
            assert!(policy.backoff(9) <= Duration::from_millis(35));
        }
    }

    #[tokio::test]
    async fn a_loop_gives_up_after_its_attempts_naming_what_failed() {
        let mut retry = RetryPolicy {
            base: Duration::from_micros(1),
            ..RetryPolicy::default()
        }
        .attempts(2)
        .start();
        assert!(retry.next(|| "x".to_owned()).await.is_ok());
        assert!(retry.next(|| "x".to_owned()).await.is_ok());
        assert_eq!(
            retry.next(|| "the write".to_owned()).await,
            Err(Exhausted {
                what: "the write".to_owned(),
                attempts: 2
            })
        );
    }
}
