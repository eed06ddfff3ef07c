//! How the console answers the tokens it is shown (the sign-in form's, a `Bearer`
//! header's): guessing is slowed, per client address and in all, and an operator who has
//! not guessed wrong is never held up.
//!
//! - **A right token at once.** A client address that sent no wrong token in the last
//!   [`SUSPECT_FOR`] has its token compared at once (in constant time, by the caller's
//!   comparison): a right token is answered without waiting, however many wrong guesses
//!   from other addresses wait.
//! - **A wrong token waits its turn.** A wrong token makes its address *suspect*, and is
//!   answered at the next free slot: slots are [`CLIENT_INTERVAL`] apart for one address
//!   and [`GLOBAL_INTERVAL`] apart for all addresses together.
//! - **A suspect waits before it is compared.** Every token from a suspect address takes
//!   its slot first and is compared only when the slot comes, so that even a right token
//!   from a suspect waits. At most [`MAX_CLIENT_WAITING`] tokens of one address and
//!   [`MAX_WAITING`] in all wait; past either bound a suspect's token is answered `429`
//!   at once *without* being compared — an answer that says nothing about the token.
//! - **One quick answer per fresh address.** A wrong token from an address that is not
//!   suspect, shown while [`MAX_WAITING`] tokens wait, is answered `429` at once after
//!   being compared (the address had to be compared to let a right token through); that
//!   address is suspect from then on.
//!
//! The resulting bounds, with the default pace:
//! - per address (an IPv4 address, or an IPv6 `/64`, the block one host usually holds):
//!   at most one answer a second that depends on a compared token, plus one quick `429`
//!   each time the address turns suspect again — at most once per [`SUSPECT_FOR`] of
//!   quiet (no wrong token) before it;
//! - in all: at most four such answers a second, plus the quick answers of addresses
//!   not suspect (one each); at most [`MAX_WAITING`] requests wait, none longer than
//!   [`MAX_WAITING`] × [`GLOBAL_INTERVAL`] (16 s) plus [`CLIENT_INTERVAL`];
//! - memory: at most [`MAX_TRACKED`] addresses are remembered (about a hundred bytes
//!   each). When that many are remembered, those no longer suspect are forgotten, then,
//!   if still needed, the eighth of them that turned suspect longest ago (never one with
//!   a token waiting): a flood from more than [`MAX_TRACKED`] addresses within
//!   [`SUSPECT_FOR`] can win one quick answer per address more than the bounds above.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How far apart two answers to one suspect address come.
pub(super) const CLIENT_INTERVAL: Duration = Duration::from_secs(1);

/// How far apart two answers to suspect addresses come, all addresses together.
pub(super) const GLOBAL_INTERVAL: Duration = Duration::from_millis(250);

/// How many tokens of one suspect address may wait for their slot.
pub(super) const MAX_CLIENT_WAITING: usize = 4;

/// How many tokens may wait for their slot, all addresses together.
pub(super) const MAX_WAITING: usize = 64;

/// How long an address stays suspect after its last wrong token.
pub(super) const SUSPECT_FOR: Duration = Duration::from_secs(60);

/// How many client addresses the throttle remembers at most.
pub(super) const MAX_TRACKED: usize = 16_384;

/// What the console says to a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict<R> {
    /// The token is right, and grants `R`.
    Right(R),
    /// The token is wrong (answered at its slot).
    Wrong,
    /// Too many tokens wait: answered at once, the token not compared (or, for an
    /// address not suspect before, compared and wrong).
    Busy,
}

/// The pace of a [`Throttle`]: the intervals, bounds and memory described in the
/// module's documentation.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pace {
    /// How far apart two answers to one suspect address come.
    pub(super) client_interval: Duration,
    /// How far apart two answers to suspect addresses come, in all.
    pub(super) global_interval: Duration,
    /// How many tokens of one address may wait.
    pub(super) max_client_waiting: usize,
    /// How many tokens may wait in all.
    pub(super) max_waiting: usize,
    /// How long an address stays suspect after a wrong token.
    pub(super) suspect_for: Duration,
    /// How many addresses are remembered at most.
    pub(super) max_tracked: usize,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            client_interval: CLIENT_INTERVAL,
            global_interval: GLOBAL_INTERVAL,
            max_client_waiting: MAX_CLIENT_WAITING,
            max_waiting: MAX_WAITING,
            suspect_for: SUSPECT_FOR,
            max_tracked: MAX_TRACKED,
        }
    }
}

/// A client address as the throttle counts it: an IPv4 address, or an IPv6 address's
/// `/64` (an IPv4-mapped IPv6 address counts as its IPv4 address).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum ClientKey {
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// The first 64 bits of an IPv6 address.
    V6(u64),
}

impl From<IpAddr> for ClientKey {
    fn from(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => ClientKey::V4(v4),
            IpAddr::V6(v6) => ClientKey::V6((u128::from(v6) >> 64) as u64),
        }
    }
}

/// The console's pace for the tokens it is shown.
pub(super) struct Throttle {
    pace: Pace,
    state: Mutex<State>,
}

/// The slots and the remembered addresses.
struct State {
    /// The earliest time the next slot may come, all addresses together.
    next: Instant,
    /// The tokens waiting for their slot, all addresses together.
    waiting: usize,
    /// The addresses that sent a wrong token (suspect until their time is up).
    clients: HashMap<ClientKey, Client>,
}

/// What the throttle remembers of one address.
#[derive(Clone, Copy, Debug)]
struct Client {
    /// Until when the address is suspect.
    suspect_until: Instant,
    /// The earliest time its next slot may come.
    next: Instant,
    /// Its tokens waiting for their slot.
    waiting: usize,
}

/// A token's turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Turn<R> {
    /// Compared at once and right.
    Right(R),
    /// Answered `429` at once.
    Busy,
    /// Compared at once, wrong, and answered at this slot.
    WrongAt(Instant),
    /// From a suspect: compared at this slot.
    CompareAt(Instant),
}

/// A token's place in line: given back when it is answered or its client goes away.
struct Waiting<'a> {
    throttle: &'a Throttle,
    key: ClientKey,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = self.throttle.lock();
        state.waiting = state.waiting.saturating_sub(1);
        if let Some(client) = state.clients.get_mut(&self.key) {
            client.waiting = client.waiting.saturating_sub(1);
        }
    }
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle::new(Pace::default())
    }
}

impl Throttle {
    /// A throttle at `pace`.
    pub(super) fn new(pace: Pace) -> Self {
        Throttle {
            pace,
            state: Mutex::new(State {
                next: Instant::now(),
                waiting: 0,
                clients: HashMap::new(),
            }),
        }
    }

    /// The state, even if a holder panicked (every change keeps it consistent).
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The verdict on a token from `client`: `compare` (a constant-time comparison,
    /// `Some` for a right token) runs at once for an address not suspect, at the
    /// address's slot for a suspect one, and not at all past the bounds.
    pub(super) async fn check<R>(
        &self,
        client: IpAddr,
        compare: impl Fn() -> Option<R>,
    ) -> Verdict<R> {
        let key = ClientKey::from(client);
        let turn = {
            let mut state = self.lock();
            self.reserve(&mut state, key, Instant::now(), &compare)
        };
        match turn {
            Turn::Right(granted) => Verdict::Right(granted),
            Turn::Busy => Verdict::Busy,
            Turn::WrongAt(slot) => {
                let _waiting = Waiting {
                    throttle: self,
                    key,
                };
                tokio::time::sleep_until(slot).await;
                Verdict::Wrong
            }
            Turn::CompareAt(slot) => {
                let _waiting = Waiting {
                    throttle: self,
                    key,
                };
                tokio::time::sleep_until(slot).await;
                match compare() {
                    Some(granted) => Verdict::Right(granted),
                    None => {
                        let mut state = self.lock();
                        let until = Instant::now() + self.pace.suspect_for;
                        if let Some(client) = state.clients.get_mut(&key) {
                            client.suspect_until = client.suspect_until.max(until);
                        }
                        Verdict::Wrong
                    }
                }
            }
        }
    }

    /// The turn of a token from `key` at `now`; a slot it takes is counted as waiting.
    fn reserve<R>(
        &self,
        state: &mut State,
        key: ClientKey,
        now: Instant,
        compare: &impl Fn() -> Option<R>,
    ) -> Turn<R> {
        let suspect = state
            .clients
            .get(&key)
            .is_some_and(|c| c.suspect_until > now || c.waiting > 0);
        if suspect {
            let full = state.waiting >= self.pace.max_waiting;
            let Some(client) = state.clients.get_mut(&key) else {
                return Turn::Busy;
            };
            if full || client.waiting >= self.pace.max_client_waiting {
                return Turn::Busy;
            }
            return Turn::CompareAt(self.take_slot(state, key, now));
        }
        if let Some(granted) = compare() {
            return Turn::Right(granted);
        }
        self.make_room(state, key, now);
        let until = now + self.pace.suspect_for;
        let client = state.clients.entry(key).or_insert(Client {
            suspect_until: until,
            next: now,
            waiting: 0,
        });
        client.suspect_until = until;
        if state.waiting >= self.pace.max_waiting {
            return Turn::Busy;
        }
        Turn::WrongAt(self.take_slot(state, key, now))
    }

    /// The next slot of `key` (remembered), counted as waiting.
    fn take_slot(&self, state: &mut State, key: ClientKey, now: Instant) -> Instant {
        let global_next = state.next;
        let Some(client) = state.clients.get_mut(&key) else {
            return now;
        };
        let slot = now.max(global_next).max(client.next);
        client.next = slot + self.pace.client_interval;
        client.waiting += 1;
        state.next = slot + self.pace.global_interval;
        state.waiting += 1;
        slot
    }

    /// Room for `key` among the remembered addresses: when [`Pace::max_tracked`] are
    /// remembered, those no longer suspect are forgotten, then if need be the eighth
    /// that turned suspect longest ago (never one with a token waiting).
    fn make_room(&self, state: &mut State, key: ClientKey, now: Instant) {
        let clients = &mut state.clients;
        if clients.len() < self.pace.max_tracked || clients.contains_key(&key) {
            return;
        }
        clients.retain(|_, c| c.suspect_until > now || c.waiting > 0);
        if clients.len() < self.pace.max_tracked {
            return;
        }
        let mut oldest: Vec<Instant> = clients
            .values()
            .filter(|c| c.waiting == 0)
            .map(|c| c.suspect_until)
            .collect();
        if oldest.is_empty() {
            return;
        }
        let nth = (self.pace.max_tracked / 8).clamp(1, oldest.len()) - 1;
        let (_, threshold, _) = oldest.select_nth_unstable(nth);
        let threshold = *threshold;
        clients.retain(|_, c| c.waiting > 0 || c.suspect_until > threshold);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn pace() -> Pace {
        Pace {
            client_interval: Duration::from_secs(1),
            global_interval: Duration::from_millis(250),
            max_client_waiting: 2,
            max_waiting: 4,
            suspect_for: Duration::from_secs(60),
            max_tracked: 16,
        }
    }

    fn ip(last: u8) -> ClientKey {
        ClientKey::from(IpAddr::from([192, 0, 2, last]))
    }

    fn right() -> Option<()> {
        Some(())
    }

    fn wrong() -> Option<()> {
        None
    }

    fn never() -> Option<()> {
        panic!("compared a suspect's token out of its turn")
    }

    fn throttle_at(pace: Pace, start: Instant) -> Throttle {
        let throttle = Throttle::new(pace);
        throttle.lock().next = start;
        throttle
    }

    #[test]
    fn a_right_token_is_answered_at_once_however_many_wrong_ones_wait() {
        let start = Instant::now();
        let throttle = throttle_at(pace(), start);
        let mut state = throttle.lock();
        // Two flooders fill the line (two each, four in all).
        for last in [2, 3] {
            for _ in 0..2 {
                let turn = throttle.reserve(&mut state, ip(last), start, &wrong);
                assert!(
                    matches!(turn, Turn::WrongAt(_) | Turn::CompareAt(_)),
                    "{turn:?}"
                );
            }
        }
        assert_eq!(state.waiting, 4);
        // The operator, who never guessed wrong, is compared and let in at once.
        for _ in 0..10 {
            assert_eq!(
                throttle.reserve(&mut state, ip(1), start, &right),
                Turn::Right(())
            );
        }
        // The flooders past their bounds are refused without being compared.
        assert_eq!(
            throttle.reserve(&mut state, ip(2), start, &never),
            Turn::Busy
        );
    }

    #[test]
    fn a_suspect_waits_its_own_line_one_a_second_before_being_compared() {
        let start = Instant::now();
        let throttle = throttle_at(pace(), start);
        let mut state = throttle.lock();
        assert_eq!(
            throttle.reserve(&mut state, ip(2), start, &wrong),
            Turn::WrongAt(start),
            "the first wrong token is answered at once"
        );
        // Now suspect: even a right token waits for its slot, one a second.
        assert_eq!(
            throttle.reserve(&mut state, ip(2), start, &never),
            Turn::CompareAt(start + Duration::from_secs(1))
        );
        assert_eq!(
            throttle.reserve(&mut state, ip(2), start, &never),
            Turn::Busy,
            "two of this address already wait"
        );
        // Another address is slotted by the global pace only.
        assert_eq!(
            throttle.reserve(&mut state, ip(3), start, &wrong),
            Turn::WrongAt(start + Duration::from_millis(1250))
        );
        assert_eq!(
            throttle.reserve(&mut state, ip(3), start, &never),
            Turn::CompareAt(start + Duration::from_millis(2250))
        );
        assert_eq!(state.waiting, 4);
        // The line is full: a fresh address's wrong token is answered at once (its one
        // quick answer), and it is suspect from then on.
        assert_eq!(
            throttle.reserve(&mut state, ip(4), start, &wrong),
            Turn::Busy
        );
        assert_eq!(
            throttle.reserve(&mut state, ip(4), start, &never),
            Turn::Busy
        );
        // A fresh address's right token still goes through.
        assert_eq!(
            throttle.reserve(&mut state, ip(5), start, &right),
            Turn::Right(())
        );
    }

    #[test]
    fn suspicion_ends_after_a_quiet_minute() {
        let start = Instant::now();
        let throttle = throttle_at(pace(), start);
        let mut state = throttle.lock();
        assert!(matches!(
            throttle.reserve(&mut state, ip(2), start, &wrong),
            Turn::WrongAt(_)
        ));
        state.waiting = 0;
        state.clients.get_mut(&ip(2)).unwrap().waiting = 0;
        let still = start + Duration::from_secs(59);
        assert!(matches!(
            throttle.reserve(&mut state, ip(2), still, &never),
            Turn::CompareAt(_)
        ));
        state.waiting = 0;
        state.clients.get_mut(&ip(2)).unwrap().waiting = 0;
        let later = start + Duration::from_secs(61);
        assert_eq!(
            throttle.reserve(&mut state, ip(2), later, &right),
            Turn::Right(())
        );
    }

    #[test]
    fn ipv6_addresses_count_by_their_64_bit_prefix() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(ClientKey::from(a), ClientKey::from(b));
        assert_ne!(ClientKey::from(a), ClientKey::from(c));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(ClientKey::from(mapped), ip(7));
    }

    #[test]
    fn the_remembered_addresses_stay_bounded_and_waiting_ones_are_kept() {
        let start = Instant::now();
        let throttle = throttle_at(pace(), start);
        let mut state = throttle.lock();
        // The first address keeps a token waiting; then many addresses guess wrong once.
        assert!(matches!(
            throttle.reserve(&mut state, ip(0), start, &wrong),
            Turn::WrongAt(_)
        ));
        for last in 1..=200u8 {
            let now = start + Duration::from_millis(u64::from(last));
            let _ = throttle.reserve(&mut state, ip(last), now, &wrong);
            assert!(
                state.clients.len() <= 16,
                "{} remembered",
                state.clients.len()
            );
        }
        assert!(state.clients.contains_key(&ip(0)), "a waiting address kept");
        assert!(state.clients.contains_key(&ip(200)), "the newest kept");
        // Once their suspicion is over, they are forgotten as room is needed.
        let later = start + Duration::from_secs(120);
        for client in state.clients.values_mut() {
            client.waiting = 0;
        }
        state.waiting = 0;
        for n in 1..=2 {
            let _ = throttle.reserve(&mut state, ClientKey::V6(n), later, &wrong);
        }
        assert_eq!(
            state.clients.len(),
            2,
            "only the two new ones are remembered"
        );
    }

    /// [`pace`] forty times quicker, for tests on the real clock.
    fn quick() -> Pace {
        Pace {
            client_interval: Duration::from_millis(40),
            global_interval: Duration::from_millis(10),
            ..pace()
        }
    }

    #[tokio::test]
    async fn wrong_tokens_are_answered_at_their_slots_and_give_their_place_back() {
        let throttle = Throttle::new(quick());
        let client = IpAddr::from([192, 0, 2, 9]);
        let started = Instant::now();
        assert_eq!(throttle.check(client, wrong).await, Verdict::Wrong);
        assert!(started.elapsed() < Duration::from_millis(40));
        assert_eq!(throttle.check(client, wrong).await, Verdict::Wrong);
        assert!(started.elapsed() >= Duration::from_millis(40));
        // A suspect's right token waits its slot too.
        assert_eq!(throttle.check(client, right).await, Verdict::Right(()));
        assert!(started.elapsed() >= Duration::from_millis(80));
        // Another address's right token does not wait: it is compared at once.
        let other = IpAddr::from([192, 0, 2, 10]);
        let asked = Instant::now();
        assert_eq!(throttle.check(other, right).await, Verdict::Right(()));
        assert!(asked.elapsed() < Duration::from_millis(10));
        let state = throttle.lock();
        assert_eq!(state.waiting, 0);
        assert_eq!(state.clients[&ClientKey::from(client)].waiting, 0);
    }

    #[tokio::test]
    async fn a_flood_from_many_addresses_is_paced_globally() {
        let throttle = std::sync::Arc::new(Throttle::new(Pace {
            max_client_waiting: 4,
            max_waiting: 64,
            ..quick()
        }));
        let started = Instant::now();
        let mut flood = tokio::task::JoinSet::new();
        for last in 0..16u8 {
            for _ in 0..4 {
                let throttle = throttle.clone();
                flood.spawn(async move {
                    let verdict = throttle.check(IpAddr::from([192, 0, 2, last]), wrong).await;
                    (verdict, Instant::now())
                });
            }
        }
        let mut answers: Vec<(Verdict<()>, Instant)> = flood.join_all().await;
        assert!(
            answers.iter().all(|(v, _)| *v == Verdict::Wrong),
            "sixty-four fit in line"
        );
        // Sixteen addresses, four tokens each: the n-th answer no sooner than n slots
        // (of 10 ms, all addresses together) after the first.
        answers.sort_by_key(|(_, at)| *at);
        for (n, (_, at)) in answers.iter().enumerate() {
            let n = u32::try_from(n).unwrap();
            assert!(
                at.duration_since(started) >= Duration::from_millis(10) * n,
                "answer {n} after {:?}",
                at.duration_since(started)
            );
        }
    }
}
