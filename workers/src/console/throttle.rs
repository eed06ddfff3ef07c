//! How the console answers the tokens it is shown (the sign-in form's, a `Bearer`
//! header's): a right token at once, whatever its address; what is slowed is the cost of
//! wrong ones.
//!
//! - **Compared first, a right token at once.** Every token is compared before anything
//!   else (in constant time, by the caller's comparison): a right one is answered without
//!   waiting and without looking at its address, however many wrong ones wait — from
//!   other addresses, from its own, or from a proxy every client shares. Guessing is not
//!   what the pace defends against: the console refuses to start with a token of fewer
//!   than 128 bits ([`super::access`]), so guessing is hopeless without any throttle.
//! - **A wrong token waits its turn.** A wrong token is answered at its address's next
//!   free slot: slots are [`CLIENT_INTERVAL`] apart for one address and
//!   [`GLOBAL_INTERVAL`] apart for all addresses together, so the work and the log
//!   summaries wrong tokens cost stay bounded.
//! - **Bounded waiting.** At most [`MAX_CLIENT_WAITING`] wrong tokens of one address and
//!   [`MAX_WAITING`] in all wait; past either bound a wrong token is answered `429` at
//!   once.
//!
//! The resulting bounds, with the default pace:
//! - per address (an IPv4 address, or an IPv6 `/64`, the block one host usually holds):
//!   at most one wrong answer a second, the rest `429`;
//! - in all: at most four wrong answers a second; at most [`MAX_WAITING`] requests wait,
//!   none longer than [`MAX_WAITING`] × [`GLOBAL_INTERVAL`] (16 s) plus
//!   [`CLIENT_INTERVAL`];
//! - memory: at most [`MAX_TRACKED`] addresses are remembered (about a hundred bytes
//!   each): those whose slots are past and with nothing waiting are forgotten first,
//!   then, if still needed, the eighth whose slots come soonest (never one with a token
//!   waiting).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How far apart two wrong answers to one address come.
pub(super) const CLIENT_INTERVAL: Duration = Duration::from_secs(1);

/// How far apart two wrong answers come, all addresses together.
pub(super) const GLOBAL_INTERVAL: Duration = Duration::from_millis(250);

/// How many wrong tokens of one address may wait for their slot.
pub(super) const MAX_CLIENT_WAITING: usize = 4;

/// How many wrong tokens may wait for their slot, all addresses together.
pub(super) const MAX_WAITING: usize = 64;

/// How many client addresses the throttle remembers at most.
pub(super) const MAX_TRACKED: usize = 16_384;

/// What the console says to a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict<R> {
    /// The token is right, and grants `R` (answered at once).
    Right(R),
    /// The token is wrong (answered at its slot).
    Wrong,
    /// The token is wrong and too many wrong ones wait: answered `429` at once.
    Busy,
}

/// The pace of a [`Throttle`]: the intervals, bounds and memory described in the
/// module's documentation.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pace {
    /// How far apart two wrong answers to one address come.
    pub(super) client_interval: Duration,
    /// How far apart two wrong answers come, in all.
    pub(super) global_interval: Duration,
    /// How many wrong tokens of one address may wait.
    pub(super) max_client_waiting: usize,
    /// How many wrong tokens may wait in all.
    pub(super) max_waiting: usize,
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

/// The console's pace for the wrong tokens it is shown.
pub(super) struct Throttle {
    pace: Pace,
    state: Mutex<State>,
}

/// The slots and the remembered addresses.
struct State {
    /// The earliest time the next slot may come, all addresses together.
    next: Instant,
    /// The wrong tokens waiting for their slot, all addresses together.
    waiting: usize,
    /// The addresses that sent a wrong token.
    clients: HashMap<ClientKey, Client>,
}

/// What the throttle remembers of one address.
#[derive(Clone, Copy, Debug)]
struct Client {
    /// The earliest time its next slot may come.
    next: Instant,
    /// Its wrong tokens waiting for their slot.
    waiting: usize,
}

/// A wrong token's place in line: given back when it is answered or its client goes
/// away.
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
    /// `Some` for a right token) runs first, always; a right token is answered at once,
    /// a wrong one at its slot, or `429` past the bounds.
    pub(super) async fn check<R>(
        &self,
        client: IpAddr,
        compare: impl Fn() -> Option<R>,
    ) -> Verdict<R> {
        if let Some(granted) = compare() {
            return Verdict::Right(granted);
        }
        let key = ClientKey::from(client);
        let slot = {
            let mut state = self.lock();
            self.reserve(&mut state, key, Instant::now())
        };
        match slot {
            None => Verdict::Busy,
            Some(slot) => {
                let _waiting = Waiting {
                    throttle: self,
                    key,
                };
                tokio::time::sleep_until(slot).await;
                Verdict::Wrong
            }
        }
    }

    /// The slot of a wrong token from `key` at `now` (counted as waiting), or `None`
    /// past the bounds.
    fn reserve(&self, state: &mut State, key: ClientKey, now: Instant) -> Option<Instant> {
        if state.waiting >= self.pace.max_waiting {
            return None;
        }
        self.make_room(state, key, now);
        let global_next = state.next;
        let client = state.clients.entry(key).or_insert(Client {
            next: now,
            waiting: 0,
        });
        if client.waiting >= self.pace.max_client_waiting {
            return None;
        }
        let slot = now.max(global_next).max(client.next);
        client.next = slot + self.pace.client_interval;
        client.waiting += 1;
        state.next = slot + self.pace.global_interval;
        state.waiting += 1;
        Some(slot)
    }

    /// Room for `key` among the remembered addresses: when [`Pace::max_tracked`] are
    /// remembered, those whose slots are past with nothing waiting are forgotten, then
    /// if need be the eighth whose next slots come soonest (never one with a token
    /// waiting).
    fn make_room(&self, state: &mut State, key: ClientKey, now: Instant) {
        let clients = &mut state.clients;
        if clients.len() < self.pace.max_tracked || clients.contains_key(&key) {
            return;
        }
        clients.retain(|_, c| c.next > now || c.waiting > 0);
        if clients.len() < self.pace.max_tracked {
            return;
        }
        let mut soonest: Vec<Instant> = clients
            .values()
            .filter(|c| c.waiting == 0)
            .map(|c| c.next)
            .collect();
        if soonest.is_empty() {
            return;
        }
        let nth = (self.pace.max_tracked / 8).clamp(1, soonest.len()) - 1;
        let (_, threshold, _) = soonest.select_nth_unstable(nth);
        let threshold = *threshold;
        clients.retain(|_, c| c.waiting > 0 || c.next > threshold);
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
            max_tracked: 16,
        }
    }

    fn ip(last: u8) -> ClientKey {
        ClientKey::from(IpAddr::from([192, 0, 2, last]))
    }

    fn throttle_at(pace: Pace, start: Instant) -> Throttle {
        let throttle = Throttle::new(pace);
        throttle.lock().next = start;
        throttle
    }

    #[test]
    fn wrong_tokens_take_slots_per_address_and_in_all_then_are_refused_at_once() {
        let start = Instant::now();
        let throttle = throttle_at(pace(), start);
        let mut state = throttle.lock();
        assert_eq!(throttle.reserve(&mut state, ip(2), start), Some(start));
        assert_eq!(
            throttle.reserve(&mut state, ip(2), start),
            Some(start + Duration::from_secs(1)),
            "one a second per address"
        );
        assert_eq!(
            throttle.reserve(&mut state, ip(2), start),
            None,
            "two of this address already wait"
        );
        // Another address is slotted by the global pace only.
        assert_eq!(
            throttle.reserve(&mut state, ip(3), start),
            Some(start + Duration::from_millis(1250))
        );
        assert_eq!(
            throttle.reserve(&mut state, ip(3), start),
            Some(start + Duration::from_millis(2250))
        );
        assert_eq!(state.waiting, 4);
        // The line is full: any other wrong token is answered at once.
        assert_eq!(throttle.reserve(&mut state, ip(4), start), None);
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
        let throttle = throttle_at(
            Pace {
                max_waiting: 1_000,
                ..pace()
            },
            start,
        );
        let mut state = throttle.lock();
        // The first address keeps a token waiting; then many addresses guess wrong once
        // (their tokens answered at once, as if the line moved on).
        assert!(throttle.reserve(&mut state, ip(0), start).is_some());
        for last in 1..=200u8 {
            let now = start + Duration::from_millis(u64::from(last));
            let _ = throttle.reserve(&mut state, ip(last), now);
            if let Some(client) = state.clients.get_mut(&ip(last)) {
                client.waiting = 0;
            }
            assert!(
                state.clients.len() <= 16,
                "{} remembered",
                state.clients.len()
            );
        }
        assert!(state.clients.contains_key(&ip(0)), "a waiting address kept");
        assert!(state.clients.contains_key(&ip(200)), "the newest kept");
        // Once their slots are past, they are forgotten as room is needed.
        let later = start + Duration::from_secs(600);
        for client in state.clients.values_mut() {
            client.waiting = 0;
        }
        state.waiting = 0;
        for n in 1..=2 {
            let _ = throttle.reserve(&mut state, ClientKey::V6(n), later);
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

    fn right() -> Option<()> {
        Some(())
    }

    fn wrong() -> Option<()> {
        None
    }

    #[tokio::test]
    async fn a_right_token_is_answered_at_once_from_an_address_whose_wrong_tokens_wait() {
        let throttle = std::sync::Arc::new(Throttle::new(pace()));
        let shared = IpAddr::from([127, 0, 0, 1]);
        // The address's line and the whole line are full of wrong tokens.
        let mut flood = tokio::task::JoinSet::new();
        for last in [1, 1, 2, 2] {
            let throttle = throttle.clone();
            flood
                .spawn(async move { throttle.check(IpAddr::from([127, 0, 0, last]), wrong).await });
        }
        tokio::task::yield_now().await;
        while throttle.lock().waiting < 4 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(throttle.check(shared, wrong).await, Verdict::Busy);
        // The right token from the same address: at once, however long the line.
        for _ in 0..100 {
            let verdict = tokio::time::timeout(Duration::ZERO, throttle.check(shared, right))
                .await
                .expect("answered without waiting");
            assert_eq!(verdict, Verdict::Right(()));
        }
        flood.abort_all();
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
