//! The change feed: a log of every committed change of a type that declares `#[feed]`,
//! kept for its retention and read again by named groups of consumers from the
//! beginning, a time or a checkpoint.
//!
//! # How a change travels
//! 1. **With the write.** The write's own entity group transaction inserts the change
//!    (kind, keys, version, the entity as written or as last stored, the write's time)
//!    beside the entity, in its partition (`log`): a refused write records nothing, a
//!    write whose answer was lost records exactly one change (the engine recognises the
//!    landed attempt by its version), and no write gains a round trip — the partition's
//!    pending marker is leased as for follow-up work (one marker write per partition per
//!    30 s, not per write).
//! 2. **Sequenced.** The relay, which already visits every partition with a pending
//!    marker, moves the partition's waiting changes in version order into the log of the
//!    partition's *share* (a hash of table and PartitionKey), numbering them from 1 with
//!    no gap (`sequence`). Changes of one entity are in one share, in version order.
//! 3. **Read by groups.** The members of a [`Group`] lease the shares, read each from
//!    its checkpoint and checkpoint what they handled under the share's ETag.
//!
//! # Guarantees
//! - Every committed change is in the log once, and in version order per entity; a
//!   refused write's change never is.
//! - A group reads each share in sequence order with no gap; a member sees a change twice
//!   only after a crash or a lost lease between handling it and checkpointing it, and
//!   then only changes after the last checkpoint.
//! - A position the log no longer keeps is [`Error::PositionExpired`](crate::Error::PositionExpired) naming the oldest
//!   one it keeps, never a silent skip.
//! - [`Position::At`] delivers every change committed at or after the time, provided the
//!   writers' and the relay's clocks differ by less than [`CLOCK_SKEW`] (it starts that
//!   much earlier, so it may deliver a few changes from before).

pub mod group;
pub mod lag;
pub mod log;
pub mod parked;
pub(crate) mod snapshot;
pub mod tail;
pub mod trim;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tablekit_core::{Query, TableStore, filter};

use crate::changes::ChangeEvent;
use crate::error::Result;

pub use group::{Checkpointed, Consumed, DEFAULT_GROUP_LEASE, Group, Quiet};
pub use lag::{Declared, FeedLag, GroupLag, ShareLag, declared, lag, trim_declared};
pub use log::{FEED_TABLE, Head, head, share_of};
pub use parked::{Parked, park, parked};
pub use tail::Tail;
pub use trim::{Trimmed, trim};

/// How far apart the writers' and the relay's clocks may be for [`Position::At`] to
/// deliver every change committed at or after its time.
pub const CLOCK_SKEW: Duration = Duration::from_secs(5);
/// How many changes one read of a share returns at most unless said.
pub const DEFAULT_READ: usize = 1_000;
/// A feed's shares unless the declaration says.
pub const DEFAULT_SHARES: u32 = 16;
/// How long a feed keeps changes unless the declaration says.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 86_400);

/// Where a group starts reading a share it has never read.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Position {
    /// The first change ever recorded. Once retention trimmed it, a [`Group`] new to a
    /// share reads a snapshot of the table first; a [`Tail`] is told
    /// [`Error::PositionExpired`](crate::Error::PositionExpired).
    Beginning,
    /// Every change committed at or after this time (within [`CLOCK_SKEW`]).
    At(DateTime<Utc>),
    /// After a checkpoint saved earlier ([`Group::checkpoint`] returns what moved).
    Checkpoint(Checkpoint),
    /// Only changes sequenced from now on.
    Now,
}

/// A saved position: per share, the last sequence number handled.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    /// Per share, the last sequence number handled (a share not named starts at the
    /// beginning; naming a share beyond the reader's count is an error).
    pub shares: BTreeMap<u32, u64>,
}

/// One change as a group reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedChange {
    /// The share it was sequenced in.
    pub share: u32,
    /// Its sequence number in the share (from 1, no gap).
    pub seq: u64,
    /// When it was sequenced.
    pub at: DateTime<Utc>,
    /// The change: kind, keys, version, what the write did, the entity.
    pub event: ChangeEvent,
}

impl FeedChange {
    /// When its write was planned (its version is the writer's clock, in microseconds,
    /// above the entity's previous version).
    pub fn committed(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(self.event.version).unwrap_or(self.at)
    }
}

/// The first sequence number of `share` sequenced at or after `since` (`None`: none is).
/// Reads the log rows from the oldest with a filter on their time (the store reads the
/// share's kept rows, not the table).
pub(crate) async fn first_since<S: TableStore>(
    store: &S,
    table: &str,
    share: u32,
    since: DateTime<Utc>,
    head: &Head,
) -> Result<Option<u64>> {
    if head.is_empty() {
        return Ok(None);
    }
    let query = Query::with_filter(
        log::rows_from(table, share, head.oldest) & filter::property_named(log::AT).ge(since),
    )
    .top(1);
    let mut rows = std::pin::pin!(store.query_stream(log::FEED_TABLE, query));
    match crate::consistency::pending::next_or_end(&mut rows).await? {
        Some(row) => Ok(log::seq_of(&row)),
        None => Ok(None),
    }
}

/// Where a reader starting at `position` begins in `share` (whose head is `head`): the
/// last sequence number counted as read.
///
/// # Errors
/// The store's errors; [`Error::PositionExpired`](crate::Error::PositionExpired) when the
/// position is older than what the share keeps; [`Error::Config`](crate::Error::Config)
/// for a checkpoint naming a share beyond the reader's `shares` (one saved from a feed
/// divided otherwise: its numbers do not apply).
pub(crate) async fn start<S: TableStore>(
    store: &S,
    table: &str,
    (share, shares): (u32, u32),
    position: &Position,
    head: &Head,
) -> Result<u64> {
    if let Position::Checkpoint(checkpoint) = position
        && let Some(beyond) = checkpoint.shares.keys().find(|s| **s >= shares)
    {
        return Err(crate::Error::Config(format!(
            "the checkpoint names share {beyond} of the change feed of `{table}`, which is read in {shares} shares: a checkpoint saved from a feed divided otherwise does not apply"
        )));
    }
    let expired = |position: u64| crate::Error::PositionExpired {
        table: table.to_owned(),
        share,
        position,
        oldest: head.oldest,
    };
    match position {
        Position::Beginning if head.oldest > 1 => Err(expired(1)),
        Position::Beginning => Ok(0),
        Position::Now => Ok(head.next - 1),
        Position::Checkpoint(checkpoint) => {
            let last = checkpoint.shares.get(&share).copied().unwrap_or(0);
            if last + 1 < head.oldest {
                return Err(expired(last + 1));
            }
            Ok(last.min(head.next - 1))
        }
        Position::At(at) => {
            let since = *at - chrono::Duration::from_std(CLOCK_SKEW).unwrap_or_default();
            match first_since(store, table, share, since, head).await? {
                // Everything kept is after `since`: trimmed changes may have been too.
                Some(seq) if seq == head.oldest && head.oldest > 1 => Err(expired(head.oldest - 1)),
                Some(seq) => Ok(seq - 1),
                None => Ok(head.next - 1),
            }
        }
    }
}

/// Up to `max` changes of `share` from `next` on, in order with no gap.
///
/// # Errors
/// The store's errors; [`Error::PositionExpired`](crate::Error::PositionExpired) when the
/// rows from `next` were trimmed (nothing is skipped); a row that does not read is
/// [`Error::Malformed`](crate::Error::Malformed).
pub(crate) async fn read<S: TableStore>(
    store: &S,
    table: &str,
    share: u32,
    next: u64,
    max: usize,
) -> Result<Vec<FeedChange>> {
    let expired = |position: u64, oldest: u64| crate::Error::PositionExpired {
        table: table.to_owned(),
        share,
        position,
        oldest,
    };
    let query = Query::with_filter(log::rows_from(table, share, next)).top(max);
    let page = match store.query(FEED_TABLE, &query).await {
        Ok(page) => page,
        Err(e) if e.kind() == tablekit_core::ErrorKind::TableNotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut changes = Vec::with_capacity(page.entities.len());
    for (expect, row) in (next..).zip(page.entities.iter().take(max)) {
        let (seq, at, event) = log::read_row(row)?;
        if seq != expect {
            // The rows before `seq` are gone: trimmed by retention past the position.
            let head = log::head(store, table, share).await?;
            return Err(expired(expect, head.oldest));
        }
        changes.push(FeedChange {
            share,
            seq,
            at,
            event,
        });
    }
    if changes.is_empty() {
        // Nothing to read: was the position trimmed away (an idle reader past
        // retention)? One head read only when the share looks empty.
        let head = log::head(store, table, share).await?;
        if next < head.oldest {
            return Err(expired(next, head.oldest));
        }
    }
    Ok(changes)
}
