//! Summaries of the requests the console refuses, written to the log at a bounded rate.
//!
//! Each kind of refusal ([`Refusal`]) is counted on its own. The first one after a quiet
//! [`SUMMARY_INTERVAL`] is logged at once; those that follow are logged together, one
//! `WARN` line per kind at most every [`SUMMARY_INTERVAL`] while they continue: how many,
//! from how many client addresses (the first [`NAMED_ADDRESSES`] named, then how many
//! more), since when. A flood of bad requests never writes one line per request.

use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use tokio::time::Instant;

/// The shortest time between two summaries of one kind.
pub(super) const SUMMARY_INTERVAL: Duration = Duration::from_secs(10);

/// How many client addresses a summary names.
pub(super) const NAMED_ADDRESSES: usize = 3;

/// How many different client addresses a summary counts (past that it says "at least").
pub(super) const COUNTED_ADDRESSES: usize = 1024;

/// A kind of request the console refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A wrong token (sign-in form or `Bearer` header).
    WrongToken,
    /// A token answered `429`: too many wait.
    TooMany,
    /// A form whose CSRF token is missing or stale.
    Csrf,
    /// A `Host` header that is not loopback (on a console without a token), or more than
    /// one `Host` header.
    Host,
    /// A POST whose `Origin` is another site.
    Origin,
}

impl Refusal {
    /// Every kind, in the order their tallies are kept.
    #[cfg(test)]
    const ALL: [Refusal; 5] = [
        Refusal::WrongToken,
        Refusal::TooMany,
        Refusal::Csrf,
        Refusal::Host,
        Refusal::Origin,
    ];

    /// The kind's place among [`Refusal::ALL`].
    fn index(self) -> usize {
        match self {
            Refusal::WrongToken => 0,
            Refusal::TooMany => 1,
            Refusal::Csrf => 2,
            Refusal::Host => 3,
            Refusal::Origin => 4,
        }
    }

    /// The kind's name in the log.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Refusal::WrongToken => "wrong token",
            Refusal::TooMany => "too many tokens waiting (429)",
            Refusal::Csrf => "missing or stale CSRF token",
            Refusal::Host => "refused Host header",
            Refusal::Origin => "form from another origin",
        }
    }
}

/// One kind's refusals since its last summary.
#[derive(Default)]
struct Tally {
    count: u64,
    /// When the first of them came.
    since: Option<DateTime<Utc>>,
    /// Their different client addresses, in the order first seen (at most
    /// [`COUNTED_ADDRESSES`]).
    addresses: Vec<IpAddr>,
    /// Whether more addresses came than are counted.
    uncounted: bool,
    /// When this kind was last summarised.
    last_summary: Option<Instant>,
    /// Whether a summary of what waits is due to be written later.
    flush_due: bool,
}

/// A summary of one kind's refusals, as logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Summary {
    /// The kind.
    pub(super) refusal: Refusal,
    /// How many.
    pub(super) count: u64,
    /// Since when.
    pub(super) since: DateTime<Utc>,
    /// The first client addresses.
    pub(super) named: Vec<IpAddr>,
    /// How many different client addresses (at least, when `uncounted`).
    pub(super) addresses: usize,
    /// Whether there were more addresses than counted.
    pub(super) uncounted: bool,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = |n: usize| if n == 1 { "" } else { "es" };
        write!(
            f,
            "the console refused {} request{} ({}) from {}{} address{} (",
            self.count,
            if self.count == 1 { "" } else { "s" },
            self.refusal.name(),
            if self.uncounted { "at least " } else { "" },
            self.addresses,
            s(self.addresses),
        )?;
        for (i, address) in self.named.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{address}")?;
        }
        let more = self.addresses.saturating_sub(self.named.len());
        if more > 0 {
            write!(f, " and {more} more")?;
        }
        write!(
            f,
            ") since {}",
            self.since.to_rfc3339_opts(SecondsFormat::Secs, true)
        )
    }
}

/// What a refusal being counted calls for.
#[derive(Debug, PartialEq, Eq)]
enum Counted {
    /// Write this summary now.
    Log(Summary),
    /// Write a summary of what waits at this time.
    FlushAt(Instant),
    /// Nothing: a summary is already due later.
    Kept,
}

/// What a due summary calls for.
#[derive(Debug, PartialEq, Eq)]
enum Flush {
    /// Write this summary now.
    Log(Summary),
    /// Look again at this time.
    At(Instant),
    /// Nothing waits.
    Nothing,
}

/// Every kind's tally.
struct Tallies {
    interval: Duration,
    kinds: [Tally; 5],
}

impl Tallies {
    /// Empty tallies, summarised at most every `interval`.
    fn new(interval: Duration) -> Self {
        Tallies {
            interval,
            kinds: Default::default(),
        }
    }

    /// Counts one refusal of `client` at `now` (`at` on the wall clock).
    fn count(
        &mut self,
        refusal: Refusal,
        client: IpAddr,
        now: Instant,
        at: DateTime<Utc>,
    ) -> Counted {
        let interval = self.interval;
        let tally = &mut self.kinds[refusal.index()];
        tally.count += 1;
        tally.since.get_or_insert(at);
        if !tally.addresses.contains(&client) {
            if tally.addresses.len() < COUNTED_ADDRESSES {
                tally.addresses.push(client);
            } else {
                tally.uncounted = true;
            }
        }
        match tally.last_summary {
            Some(last) if now < last + interval => {
                if tally.flush_due {
                    Counted::Kept
                } else {
                    tally.flush_due = true;
                    Counted::FlushAt(last + interval)
                }
            }
            _ => Counted::Log(Self::take(refusal, tally, now, at)),
        }
    }

    /// The summary of `refusal` due at `now`, if its time has come.
    fn flush(&mut self, refusal: Refusal, now: Instant) -> Flush {
        let interval = self.interval;
        let tally = &mut self.kinds[refusal.index()];
        if tally.count == 0 {
            tally.flush_due = false;
            return Flush::Nothing;
        }
        match tally.last_summary {
            Some(last) if now < last + interval => Flush::At(last + interval),
            _ => {
                tally.flush_due = false;
                let at = tally.since.unwrap_or_else(Utc::now);
                Flush::Log(Self::take(refusal, tally, now, at))
            }
        }
    }

    /// The summary of `tally`, which starts again from nothing.
    fn take(refusal: Refusal, tally: &mut Tally, now: Instant, at: DateTime<Utc>) -> Summary {
        let addresses = std::mem::take(&mut tally.addresses);
        let summary = Summary {
            refusal,
            count: std::mem::take(&mut tally.count),
            since: tally.since.take().unwrap_or(at),
            named: addresses.iter().take(NAMED_ADDRESSES).copied().collect(),
            addresses: addresses.len(),
            uncounted: std::mem::take(&mut tally.uncounted),
        };
        tally.last_summary = Some(now);
        summary
    }
}

/// The console's log of refused requests.
pub(super) struct SecurityLog {
    tallies: Arc<Mutex<Tallies>>,
}

impl Default for SecurityLog {
    fn default() -> Self {
        SecurityLog::new(SUMMARY_INTERVAL)
    }
}

impl SecurityLog {
    /// A log that summarises each kind at most every `interval`.
    pub(super) fn new(interval: Duration) -> Self {
        SecurityLog {
            tallies: Arc::new(Mutex::new(Tallies::new(interval))),
        }
    }

    /// Counts a refused request of `client`: logged now, or in the next summary.
    pub(super) fn refused(&self, refusal: Refusal, client: IpAddr) {
        let counted = lock(&self.tallies).count(refusal, client, Instant::now(), Utc::now());
        match counted {
            Counted::Log(summary) => write(&summary),
            Counted::FlushAt(due) => {
                // Without a runtime (never in the console), the summary waits for the
                // next refusal of its kind.
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    let tallies = Arc::downgrade(&self.tallies);
                    runtime.spawn(flush_later(tallies, refusal, due));
                }
            }
            Counted::Kept => {}
        }
    }
}

/// The tallies, even if a holder panicked.
fn lock(tallies: &Mutex<Tallies>) -> std::sync::MutexGuard<'_, Tallies> {
    tallies.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes the summary of `refusal` when it is due (while the console lives).
async fn flush_later(tallies: Weak<Mutex<Tallies>>, refusal: Refusal, mut due: Instant) {
    loop {
        tokio::time::sleep_until(due).await;
        let Some(tallies) = tallies.upgrade() else {
            return;
        };
        let flush = lock(&tallies).flush(refusal, Instant::now());
        match flush {
            Flush::Log(summary) => return write(&summary),
            Flush::At(later) => due = later,
            Flush::Nothing => return,
        }
    }
}

/// One summary line.
fn write(summary: &Summary) {
    tracing::warn!(
        refusal = summary.refusal.name(),
        count = summary.count,
        addresses = summary.addresses,
        "{summary}"
    );
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, last])
    }

    #[test]
    fn the_first_refusal_is_logged_at_once_and_the_rest_once_per_interval() {
        let mut tallies = Tallies::new(Duration::from_secs(10));
        let start = Instant::now();
        let at = Utc::now();
        let Counted::Log(first) = tallies.count(Refusal::WrongToken, ip(1), start, at) else {
            panic!("the first is logged at once");
        };
        assert_eq!((first.count, first.named.clone()), (1, vec![ip(1)]));
        // A flood from twenty addresses: one summary due, nothing written per request.
        let mut due = Vec::new();
        for i in 0..500u32 {
            let now = start + Duration::from_millis(u64::from(i) * 10);
            let last = u8::try_from(2 + i % 20).unwrap();
            match tallies.count(Refusal::WrongToken, ip(last), now, at) {
                Counted::FlushAt(when) => due.push(when),
                Counted::Kept => {}
                Counted::Log(summary) => panic!("logged within the interval: {summary}"),
            }
        }
        assert_eq!(due, vec![start + Duration::from_secs(10)]);
        assert!(matches!(
            tallies.flush(Refusal::WrongToken, start + Duration::from_secs(5)),
            Flush::At(_)
        ));
        let Flush::Log(summary) = tallies.flush(Refusal::WrongToken, due[0]) else {
            panic!("due");
        };
        assert_eq!(summary.count, 500);
        assert_eq!(summary.addresses, 20);
        assert_eq!(summary.named, vec![ip(2), ip(3), ip(4)]);
        let line = summary.to_string();
        assert!(
            line.starts_with(
                "the console refused 500 requests (wrong token) from 20 addresses (192.0.2.2, 192.0.2.3, 192.0.2.4 and 17 more) since "
            ),
            "{line}"
        );
        assert_eq!(
            tallies.flush(Refusal::WrongToken, due[0]),
            Flush::Nothing,
            "nothing more waits"
        );
    }

    #[test]
    fn each_kind_is_summarised_on_its_own() {
        let mut tallies = Tallies::new(Duration::from_secs(10));
        let now = Instant::now();
        let at = Utc::now();
        for refusal in Refusal::ALL {
            assert!(matches!(
                tallies.count(refusal, ip(1), now, at),
                Counted::Log(_)
            ));
        }
        assert!(matches!(
            tallies.count(Refusal::Csrf, ip(1), now, at),
            Counted::FlushAt(_)
        ));
        assert!(matches!(
            tallies.count(Refusal::Origin, ip(1), now, at),
            Counted::FlushAt(_)
        ));
        // After a quiet interval, the next one is logged at once again, with the waiting.
        let later = now + Duration::from_secs(11);
        let Counted::Log(summary) = tallies.count(Refusal::Csrf, ip(2), later, at) else {
            panic!("due at once");
        };
        assert_eq!((summary.count, summary.addresses), (2, 2));
    }

    #[test]
    fn the_addresses_counted_are_bounded() {
        let mut tallies = Tallies::new(Duration::from_secs(10));
        let now = Instant::now();
        let at = Utc::now();
        let _ = tallies.count(Refusal::Host, ip(0), now, at);
        for n in 0..(COUNTED_ADDRESSES as u32 + 50) {
            let client = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + n));
            let _ = tallies.count(Refusal::Host, client, now, at);
        }
        let Flush::Log(summary) = tallies.flush(Refusal::Host, now + Duration::from_secs(10))
        else {
            panic!("due");
        };
        assert_eq!(summary.addresses, COUNTED_ADDRESSES);
        assert!(summary.uncounted);
        assert!(summary.to_string().contains("from at least 1024 addresses"));
    }

    #[tokio::test]
    async fn a_summary_is_written_when_due_without_another_refusal() {
        let log = SecurityLog::new(Duration::from_millis(50));
        for last in 0..5 {
            log.refused(Refusal::Origin, ip(last));
        }
        assert_eq!(lock(&log.tallies).kinds[Refusal::Origin.index()].count, 4);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let tallies = lock(&log.tallies);
        let origin = &tallies.kinds[Refusal::Origin.index()];
        assert_eq!(origin.count, 0, "the four were summarised");
        assert!(!origin.flush_due);
    }
}
