//! One pace for every wrong token the console is shown, whichever way it came (the sign-in
//! form, a `Bearer` header, a cookie) and however many clients send them at once.
//!
//! Each wrong guess reserves the next free slot, [`GUESS_INTERVAL`] after the one before,
//! and is answered only when its slot comes: together, all clients learn of at most one
//! wrong token a second. At most [`MAX_WAITING_GUESSES`] wait for their slot; past that,
//! a request carrying a token is answered `429` at once *without* its token being compared
//! — an answer that says nothing about the token cannot be used to guess faster. (While a
//! flood lasts, an operator's own requests get that `429` too; the flood cannot learn the
//! token, and the console answers again once it drains.) A right token, checked while
//! fewer guesses wait, is answered at once.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How far apart two wrong guesses are answered, across all clients.
pub(super) const GUESS_INTERVAL: Duration = Duration::from_secs(1);

/// How many wrong guesses may wait for their slot before requests with a token get `429`.
pub(super) const MAX_WAITING_GUESSES: usize = 16;

/// What the console says to a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The token is right.
    Right,
    /// The token is wrong (answered at its slot).
    Wrong,
    /// Too many wrong guesses wait: the token was not compared.
    Busy,
}

/// The console's one pace for wrong guesses.
pub(super) struct Throttle {
    interval: Duration,
    max_waiting: usize,
    slots: Mutex<Slots>,
}

struct Slots {
    /// The earliest time the next wrong guess may be answered.
    next: Instant,
    /// The wrong guesses waiting for their slot.
    waiting: usize,
}

/// A token's turn: right, refused uncompared, or wrong and answered at its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Turn {
    Right,
    Busy,
    WrongAt(Instant),
}

/// A wrong guess's place in line: given back when the guess is answered or its client
/// goes away.
struct Waiting<'a>(&'a Throttle);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut slots = self.0.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.waiting -= 1;
    }
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle::new(GUESS_INTERVAL, MAX_WAITING_GUESSES)
    }
}

impl Throttle {
    /// One wrong guess answered each `interval`, at most `max_waiting` waiting.
    pub(super) fn new(interval: Duration, max_waiting: usize) -> Self {
        Throttle {
            interval,
            max_waiting,
            slots: Mutex::new(Slots {
                next: Instant::now(),
                waiting: 0,
            }),
        }
    }

    /// Compares a token with `is_right` (unless too many wrong guesses wait) and answers a
    /// wrong one at its slot.
    pub(super) async fn check(&self, is_right: impl FnOnce() -> bool) -> Verdict {
        let (slot, waiting) = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            match self.reserve(&mut slots, Instant::now(), is_right) {
                Turn::Right => return Verdict::Right,
                Turn::Busy => return Verdict::Busy,
                Turn::WrongAt(slot) => (slot, Waiting(self)),
            }
        };
        tokio::time::sleep_until(slot).await;
        drop(waiting);
        Verdict::Wrong
    }

    /// The verdict on a token at `now`; for a wrong one, its slot reserved and its place
    /// in line taken.
    fn reserve(&self, slots: &mut Slots, now: Instant, is_right: impl FnOnce() -> bool) -> Turn {
        if slots.waiting >= self.max_waiting {
            return Turn::Busy;
        }
        if is_right() {
            return Turn::Right;
        }
        let slot = slots.next.max(now);
        slots.next = slot + self.interval;
        slots.waiting += 1;
        Turn::WrongAt(slot)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn wrong_guesses_take_one_slot_each_after_the_last_reserved() {
        let throttle = Throttle::new(Duration::from_secs(1), 3);
        let start = Instant::now();
        let mut slots = throttle.slots.lock().unwrap();
        slots.next = start;
        let answered_at: Vec<Turn> = (0..3)
            .map(|_| throttle.reserve(&mut slots, start, || false))
            .collect();
        assert_eq!(
            answered_at,
            [0, 1, 2]
                .map(|s| Turn::WrongAt(start + Duration::from_secs(s)))
                .to_vec(),
            "one a second, from now"
        );
        // A guess after a quiet while is answered at once.
        let later = start + Duration::from_secs(10);
        assert_eq!(
            throttle.reserve(&mut slots, later, || false),
            Turn::Busy,
            "three wait"
        );
        slots.waiting = 0;
        assert_eq!(
            throttle.reserve(&mut slots, later, || false),
            Turn::WrongAt(later)
        );
    }

    #[test]
    fn past_the_cap_tokens_are_not_even_compared_and_a_right_one_is_never_delayed() {
        let throttle = Throttle::new(Duration::from_secs(1), 2);
        let now = Instant::now();
        let mut slots = throttle.slots.lock().unwrap();
        assert_eq!(throttle.reserve(&mut slots, now, || true), Turn::Right);
        assert!(matches!(
            throttle.reserve(&mut slots, now, || false),
            Turn::WrongAt(_)
        ));
        assert_eq!(throttle.reserve(&mut slots, now, || true), Turn::Right);
        assert!(matches!(
            throttle.reserve(&mut slots, now, || false),
            Turn::WrongAt(_)
        ));
        assert_eq!(
            throttle.reserve(&mut slots, now, || panic!("compared past the cap")),
            Turn::Busy
        );
    }

    #[tokio::test]
    async fn an_answered_guess_gives_its_place_back() {
        let throttle = Throttle::new(Duration::from_millis(1), 1);
        assert_eq!(throttle.check(|| false).await, Verdict::Wrong);
        assert_eq!(throttle.check(|| false).await, Verdict::Wrong);
        assert_eq!(throttle.check(|| true).await, Verdict::Right);
        assert_eq!(throttle.slots.lock().unwrap().waiting, 0);
    }
}
