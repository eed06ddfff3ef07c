//! Groups of consumers: the members of one named group divide a feed's shares by leases
//! and each checkpoints the shares it holds; groups read one log independently.
//!
//! A group's rows share one partition of [`FEED_TABLE`] (`group~<table>~<group>`):
//! - `share~<share:05>`: `Owner` (the member holding it, empty when released), `Until`
//!   (when its lease ends) and `Checkpoint` (the last sequence number the group handled
//!   in the share; 0: none). Taking, renewing, releasing and checkpointing are each a
//!   write under the ETag the member read or wrote last, so two members never both hold
//!   a share, and a member that lost a share cannot move its checkpoint.
//! - `member~<id>`: `Until`, the member's heartbeat: the live members decide each
//!   member's fair part (the shares over the live members, rounded up).
//!
//! A member reads a held share only while more than a quarter of its lease is left by
//! its own monotonic clock, measured from before the write that took or renewed it (the
//! relay's fence); past that the next balance renews it or another member takes it over
//! from its checkpoint. Duplicates therefore come only after a crash or a lost lease, and
//! only of changes after the last checkpoint.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use tablekit_core::{Batch, ETag, Entity, ErrorKind, IfMatch, Query, TableStore, Value, filter};
use tokio::time::Instant;

use super::log::{self, FEED_TABLE};
use super::snapshot::{self, Cursor};
use super::{FeedChange, Position};
use crate::error::{Error, Result};

/// How long a member's lease on a share lasts unless said.
pub const DEFAULT_GROUP_LEASE: Duration = Duration::from_secs(30);

const OWNER: &str = "Owner";
const UNTIL: &str = "Until";
const CHECKPOINT: &str = "Checkpoint";
const INCARNATION: &str = "Incarnation";
const BORN: &str = "Born";

/// The PartitionKey of a group's rows.
pub fn group_partition(table: &str, group: &str) -> String {
    format!("group~{table}~{group}")
}

fn share_row(share: u32) -> String {
    format!("share~{share:05}")
}

fn member_row(id: &str) -> String {
    format!("member~{id}")
}

/// Checks a group's or a member's name: letters, digits, `-`, `_` and `.`, 1 to 63.
fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > 63
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(Error::Config(format!(
            "invalid {what} name `{}`: use 1 to 63 letters, digits, `-`, `_` or `.`",
            name.escape_debug()
        )));
    }
    Ok(())
}

/// A share this member holds.
#[derive(Clone, Debug)]
struct Held {
    etag: Option<ETag>,
    /// The last sequence number checkpointed.
    checkpoint: u64,
    /// The next sequence number to read (past what was handed out, not yet checkpointed).
    next: u64,
    /// When this member stops reading it (a quarter of the lease before it ends).
    fence: Instant,
    /// Where the group's snapshot of the table goes on, while one runs (see
    /// `super::snapshot`): checkpointed with the share.
    snapshot: Option<Cursor>,
    /// The snapshot step handed out and not yet checkpointed.
    pending: Option<Pending>,
}

/// A snapshot step handed out: its high watermark, its rows, and where the snapshot goes
/// on once all of them are handled (`None`: done).
#[derive(Clone, Debug)]
struct Pending {
    through: u64,
    rows: usize,
    after: Option<Cursor>,
}

#[derive(Debug, Default)]
struct State {
    held: BTreeMap<u32, Held>,
    balanced: Option<Instant>,
    /// Per share, the highest sequence number this member's reads handed out (kept
    /// across a share lost and taken again: what was handed may still be checkpointed).
    handed: BTreeMap<u32, u64>,
    /// Set once a newer instance of this member id took over: this one reads nothing
    /// more.
    fenced: Option<DateTime<Utc>>,
}

/// One member of a named group of consumers of a table's feed (see the module docs).
///
/// The pull form: [`poll`](Self::poll) returns the changes after each held share's read
/// position, [`checkpoint`](Self::checkpoint) records what was handled;
/// [`consume_once`](Self::consume_once) runs a handler over one read.
#[derive(Debug)]
pub struct Group<S> {
    store: S,
    table: String,
    group: String,
    member: String,
    shares: u32,
    lease: Duration,
    from: Position,
    read: usize,
    /// This process's instance of the member id: a member started again with the same
    /// id takes its shares over at once, and the older instance is fenced out.
    incarnation: String,
    /// When this instance was made (a newer instance of the id fences an older one).
    born: DateTime<Utc>,
    state: Mutex<State>,
}

/// What a [`Group::consume_once`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumed {
    /// The changes the handler handled.
    pub handled: usize,
    /// What checkpointing them did.
    pub checkpointed: Checkpointed,
}

/// What a [`Group::checkpoint`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checkpointed {
    /// The shares whose checkpoint moved, and where to.
    pub moved: BTreeMap<u32, u64>,
    /// The shares lost meanwhile (their lease taken by another member): their changes
    /// after the last checkpoint will be delivered again, to whoever holds them.
    pub lost: Vec<u32>,
}

/// Why a member receives nothing (see [`Group::quiet`]): each reason that holds now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Quiet {
    /// Changes of the feed waiting in their partitions for a relay to sequence them.
    pub waiting: u64,
    /// Relays whose heartbeat runs.
    pub relays: usize,
    /// Shares another member holds, with the holder and when its lease ends.
    pub leased_elsewhere: Vec<(u32, String, DateTime<Utc>)>,
    /// Shares this member holds.
    pub held: usize,
    /// Set when a newer instance of this member id took over.
    pub replaced: bool,
}

impl Quiet {
    /// The reasons in words, most pressing first; empty when the member simply has read
    /// everything there is.
    pub fn reasons(&self) -> Vec<String> {
        let mut reasons = Vec::new();
        if self.replaced {
            reasons.push(
                "a newer instance of this member id took its shares over: this one reads nothing more"
                    .to_owned(),
            );
        }
        if self.waiting > 0 && self.relays == 0 {
            reasons.push(format!(
                "{} changes wait in their partitions with no relay running to sequence them (tablekit-worker run starts one)",
                self.waiting
            ));
        } else if self.waiting > 0 {
            reasons.push(format!(
                "{} changes wait in their partitions for the {} running relays to sequence them",
                self.waiting, self.relays
            ));
        }
        for (share, holder, until) in &self.leased_elsewhere {
            reasons.push(format!(
                "share {share} is leased by member `{holder}` until {}",
                until.format("%Y-%m-%d %H:%M:%S%.3f UTC")
            ));
        }
        reasons
    }
}

impl Checkpointed {
    /// Adds what a later checkpoint did.
    pub fn merge(&mut self, later: Checkpointed) {
        self.moved.extend(later.moved);
        self.lost.extend(later.lost);
        self.lost.sort_unstable();
        self.lost.dedup();
    }
}

impl<S: TableStore> Group<S> {
    /// A member (a random id) of `group` reading the feed of `table`, divided into
    /// `shares` (the type's `#[feed(shares = …)]`), from `Position::Beginning` for shares
    /// the group has never read.
    ///
    /// # Errors
    /// [`Error::Config`] for a group name that is not letters, digits, `-`, `_` or `.`.
    pub fn new(store: S, table: &str, group: &str, shares: u32) -> Result<Self> {
        check_name("group", group)?;
        Ok(Group {
            store,
            table: table.to_owned(),
            group: group.to_owned(),
            member: tablekit_core::random::uuid().simple().to_string(),
            shares: shares.max(1),
            lease: DEFAULT_GROUP_LEASE,
            from: Position::Beginning,
            read: super::DEFAULT_READ,
            incarnation: tablekit_core::random::uuid().simple().to_string(),
            born: tablekit_core::clock::now(),
            state: Mutex::new(State::default()),
        })
    }

    /// Names this member (default: a random id).
    ///
    /// # Errors
    /// [`Error::Config`] for a name that is not letters, digits, `-`, `_` or `.`.
    pub fn member(mut self, id: &str) -> Result<Self> {
        check_name("member", id)?;
        self.member = id.to_owned();
        Ok(self)
    }

    /// Where the group starts reading a share it has never read (default
    /// [`Position::Beginning`]); a share with a checkpoint goes on from it.
    pub fn from(mut self, position: Position) -> Self {
        self.from = position;
        self
    }

    /// How long a lease on a share lasts (default 30 s).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(10));
        self
    }

    /// How many changes one read of a share returns at most (default 1,000).
    pub fn read_size(mut self, changes: usize) -> Self {
        self.read = changes.clamp(1, 1_000);
        self
    }

    /// The member's id.
    pub fn id(&self) -> &str {
        &self.member
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.group
    }

    /// The store it reads.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The primaries' table whose feed it reads.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The shares this member holds now.
    pub fn held(&self) -> Vec<u32> {
        self.lock().held.keys().copied().collect()
    }

    /// [`Error::MemberReplaced`] once a newer instance of this member id took over.
    fn check_fenced(&self) -> Result<()> {
        match self.lock().fenced {
            Some(since) => Err(Error::MemberReplaced {
                table: self.table.clone(),
                group: self.group.clone(),
                member: self.member.clone(),
                since,
            }),
            None => Ok(()),
        }
    }

    /// Why this member receives nothing, when a [`poll`](Self::poll) answers empty: the
    /// feed's changes waiting in their partitions unsequenced (with whether a relay
    /// runs), the shares leased by other members and until when, or this member replaced
    /// by a newer instance of its id. A position past retention is not among them: `poll`
    /// answers it as [`Error::PositionExpired`]. Its cost: the pending markers of the
    /// table and one range read of each marked partition, the relays' rows and the
    /// group's rows.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn quiet(&self) -> Result<Quiet> {
        let replaced = self.lock().fenced.is_some();
        let held = self.lock().held.len();
        let backlog = crate::consistency::backlog_of(&self.store, &self.table).await?;
        let relays = crate::consistency::relays(&self.store)
            .await?
            .iter()
            .filter(|r| r.live)
            .count();
        let now = tablekit_core::clock::now();
        let mut leased_elsewhere = Vec::new();
        for row in self.rows().await? {
            if let Some(share) = row.row_key.strip_prefix("share~")
                && let Ok(share) = share.parse::<u32>()
                && share < self.shares
            {
                let owner = owner_of(&row);
                if !owner.is_empty() && owner != self.member && until_of(&row) > now {
                    leased_elsewhere.push((share, owner.to_owned(), until_of(&row)));
                }
            }
        }
        Ok(Quiet {
            waiting: backlog.feed_changes,
            relays,
            leased_elsewhere,
            held,
            replaced,
        })
    }

    /// Whether the leases of the shares held should be renewed now — a quarter of a
    /// lease has passed since they were taken, renewed or checkpointed: a consumer
    /// handling a long read [`checkpoint`](Self::checkpoint)s what it has handled so far
    /// then, which renews them, so that a handler slower than the lease never loses its
    /// shares mid-read ([`consume_once`](Self::consume_once) and the push form do).
    pub fn renewal_due(&self) -> bool {
        let now = Instant::now();
        self.lock()
            .held
            .values()
            .any(|h| h.fence.saturating_duration_since(now) <= self.lease / 2)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The group's rows (a missing table reads as none).
    async fn rows(&self) -> Result<Vec<Entity>> {
        let query = Query::with_filter(
            filter::partition_key().eq(group_partition(&self.table, &self.group)),
        );
        match self
            .store
            .query_stream(FEED_TABLE, query)
            .try_collect()
            .await
        {
            Ok(rows) => Ok(rows),
            Err(e) if e.kind() == ErrorKind::TableNotFound => {
                self.store.create_table_if_not_exists(FEED_TABLE).await?;
                Ok(Vec::new())
            }
            Err(e) => Err(e),
        }
    }

    /// Renews this member's heartbeat, keeps its fair part of the shares, releases the
    /// rest and takes free ones. Runs from [`poll`](Self::poll) every third of a lease.
    ///
    /// # Errors
    /// The store's errors; [`Error::PositionExpired`] when the group's start position is
    /// older than what a share still keeps; [`Error::Config`] for a start checkpoint
    /// naming a share beyond the group's count.
    pub async fn balance(&self) -> Result<()> {
        self.check_fenced()?;
        let started = Instant::now();
        let rows = self.rows().await?;
        let now = tablekit_core::clock::now();
        let until = now + chrono::Duration::from_std(self.lease).unwrap_or_default();
        let partition = group_partition(&self.table, &self.group);
        // A newer instance of this member id (a process started again with it) owns the
        // id now: this one gives up everything it holds and reads nothing more.
        if let Some(row) = rows.iter().find(|r| r.row_key == member_row(&self.member))
            && let Some(other) = row.get(INCARNATION).and_then(Value::as_str)
            && other != self.incarnation
        {
            let born = row
                .get(BORN)
                .and_then(Value::as_datetime)
                .unwrap_or(DateTime::<Utc>::MIN_UTC);
            if (born, other) > (self.born, self.incarnation.as_str()) {
                let mut state = self.lock();
                state.held.clear();
                state.fenced = Some(born);
                drop(state);
                return self.check_fenced();
            }
        }
        // The heartbeat first: the others count this member from now on.
        let heartbeat = Entity::new(&partition, member_row(&self.member))
            .with(UNTIL, until)
            .with(INCARNATION, self.incarnation.as_str())
            .with(BORN, self.born);
        self.store
            .execute(
                FEED_TABLE,
                tablekit_core::WriteOp::InsertOrReplace(heartbeat),
            )
            .await?;
        let mut live = vec![self.member.clone()];
        let mut shares: HashMap<u32, &Entity> = HashMap::new();
        for row in &rows {
            if let Some(id) = row.row_key.strip_prefix("member~") {
                if id != self.member && until_of(row) > now {
                    live.push(id.to_owned());
                }
            } else if let Some(share) = row.row_key.strip_prefix("share~")
                && let Ok(share) = share.parse::<u32>()
                && share < self.shares
            {
                shares.insert(share, row);
            }
        }
        // Each share weighs its backlog plus one (an idle share still needs a reader):
        // members aim at an equal part of the weight, so a share far behind is not left
        // with one member while others idle. One head read per share, all at once.
        let heads = futures::future::try_join_all(
            (0..self.shares).map(|share| log::head(&self.store, &self.table, share)),
        )
        .await?;
        let load: Vec<u64> = (0..self.shares)
            .map(|share| {
                let last = heads[share as usize].next - 1;
                let read = shares.get(&share).map_or(0, |row| checkpoint_of(row));
                last.saturating_sub(read) + 1
            })
            .collect();
        let fair = load.iter().sum::<u64>().div_ceil(live.len() as u64);
        let me = self.member.as_str();
        let mine = |s: u32| {
            shares
                .get(&s)
                .is_some_and(|r| owner_of(r) == me && until_of(r) > now)
        };
        let free = |s: u32| {
            shares
                .get(&s)
                .is_none_or(|r| owner_of(r).is_empty() || until_of(r) <= now || owner_of(r) == me)
        };
        // Rendezvous order: each share's home is the live member that weighs it most, so
        // members that see the same group take disjoint shares first.
        let weight = |member: &str, share: u32| {
            crate::consistency::relay::share_of(member, &share.to_string(), u32::MAX)
        };
        let home = |share: u32| {
            live.iter()
                .max_by_key(|m| weight(m, share))
                .map(String::as_str)
                .unwrap_or(me)
        };
        // Shares taken while the part is under `fair`, counting from `part`.
        let up_to_fair = |shares: &mut Vec<u32>, part: &mut u64| {
            let within = shares
                .iter()
                .take_while(|s| {
                    let under = *part < fair;
                    *part += load[**s as usize];
                    under
                })
                .count();
            shares.split_off(within)
        };
        let mut keep: Vec<u32> = (0..self.shares).filter(|s| mine(*s)).collect();
        // Keep home shares first, up to the fair part of the weight.
        keep.sort_by_key(|s| (home(*s) != me, *s));
        let mut part = 0;
        let release = up_to_fair(&mut keep, &mut part);
        part = keep.iter().map(|s| load[*s as usize]).sum();
        // Then free shares, home ones first, until the part is reached.
        let mut take: Vec<u32> = (0..self.shares).filter(|s| !mine(*s) && free(*s)).collect();
        take.sort_by_key(|s| (home(*s) != me, weight(me, *s)));
        up_to_fair(&mut take, &mut part);

        type Write = (u32, tablekit_core::WriteOp, Option<(u64, Option<Cursor>)>);
        let mut writes: Vec<Write> = Vec::new();
        for share in &release {
            let row = shares[share];
            let cursor = Cursor::of(row);
            let entity = self.share_entity(*share, "", now, checkpoint_of(row), cursor.as_ref());
            writes.push((
                *share,
                tablekit_core::WriteOp::Replace(entity, if_match(row)),
                None,
            ));
        }
        // Each share kept or taken, from its checkpoint (a share never read from the
        // group's start position), under the ETag read.
        for share in keep.iter().chain(&take) {
            let (start, op) = match shares.get(share) {
                Some(row) if row.get(CHECKPOINT).is_some() => {
                    let (checkpoint, cursor) = (checkpoint_of(row), Cursor::of(row));
                    let entity = self.share_entity(*share, me, until, checkpoint, cursor.as_ref());
                    (
                        (checkpoint, cursor),
                        tablekit_core::WriteOp::Replace(entity, if_match(row)),
                    )
                }
                found => {
                    let (checkpoint, cursor) = self.start(*share, &heads[*share as usize]).await?;
                    let entity = self.share_entity(*share, me, until, checkpoint, cursor.as_ref());
                    let op = match found {
                        Some(row) => tablekit_core::WriteOp::Replace(entity, if_match(row)),
                        None => tablekit_core::WriteOp::Insert(entity),
                    };
                    ((checkpoint, cursor), op)
                }
            };
            writes.push((*share, op, Some(start)));
        }
        let fence = started + self.lease.mul_f64(0.75);
        let mut held = BTreeMap::new();
        for chunk in writes.chunks(100) {
            let mut batch = Batch::new();
            for (_, op, _) in chunk {
                batch.push(op.clone());
            }
            let etags = match self.store.submit_batch(FEED_TABLE, batch).await {
                Ok(etags) => etags,
                // Another member wrote one of them: nothing of this chunk is held; the
                // next balance reads again.
                Err(e) if crate::consistency::lost_race(&e) => continue,
                Err(e) => return Err(e),
            };
            for ((share, _, start), etag) in chunk.iter().zip(etags) {
                if let Some((checkpoint, cursor)) = start {
                    held.insert(*share, (etag, *checkpoint, cursor.clone()));
                }
            }
        }
        let mut state = self.lock();
        let before = std::mem::take(&mut state.held);
        for (share, (etag, checkpoint, snapshot)) in held {
            // A share kept keeps its read position (past what was handed out).
            // (Its snapshot cursor too: it runs ahead of the row's over chunks that held
            // nothing to hand out.)
            let kept = before.get(&share).filter(|h| h.checkpoint == checkpoint);
            state.held.insert(
                share,
                Held {
                    etag,
                    checkpoint,
                    next: kept.map_or(checkpoint + 1, |h| h.next),
                    fence,
                    pending: kept.and_then(|h| h.pending.clone()),
                    snapshot: kept.map_or(snapshot, |h| h.snapshot.clone()),
                },
            );
        }
        state.balanced = Some(started);
        Ok(())
    }

    fn share_entity(
        &self,
        share: u32,
        owner: &str,
        until: DateTime<Utc>,
        checkpoint: u64,
        snapshot: Option<&Cursor>,
    ) -> Entity {
        let mut row = Entity::new(group_partition(&self.table, &self.group), share_row(share))
            .with(OWNER, owner)
            .with(UNTIL, until)
            .with(CHECKPOINT, Value::Int64(checkpoint as i64));
        if let Some(cursor) = snapshot {
            cursor.write(&mut row);
        }
        row
    }

    /// Where the group starts in a share it has never read: the last sequence number
    /// counted as handled, and a snapshot to read first when the group starts from the
    /// beginning and retention trimmed it (the log from its end, the table before it).
    async fn start(&self, share: u32, head: &log::Head) -> Result<(u64, Option<Cursor>)> {
        if self.from == Position::Beginning && head.oldest > 1 {
            return Ok((head.next - 1, Some(Cursor::default())));
        }
        let last = super::start(
            &self.store,
            &self.table,
            (share, self.shares),
            &self.from,
            head,
        )
        .await?;
        Ok((last, None))
    }

    /// The changes after each held share's read position, up to the read size per share,
    /// in sequence order per share (so per entity in version order). Balances first when
    /// a third of the lease has passed since the last balance.
    ///
    /// # Errors
    /// The store's errors; [`Error::PositionExpired`] when a held share's log was
    /// trimmed past the group's checkpoint (nothing is skipped); a log row that does not
    /// read is [`Error::Malformed`]; what [`balance`](Self::balance) returns. When the
    /// read of one share fails, nothing is handed out and no read position moves.
    pub async fn poll(&self) -> Result<Vec<FeedChange>> {
        self.check_fenced()?;
        let due = self
            .lock()
            .balanced
            .is_none_or(|at| at.elapsed() >= self.lease / 3);
        if due {
            self.balance().await?;
        }
        let reads: Vec<(u32, u64, Option<Cursor>)> = {
            let state = self.lock();
            let now = Instant::now();
            state
                .held
                .iter()
                .filter(|(_, h)| now < h.fence)
                .map(|(s, h)| (*s, h.next, h.snapshot.clone()))
                .collect()
        };
        let pages = reads.into_iter().map(|(share, next, snapshot)| async move {
            let Some(cursor) = snapshot else {
                let changes = self.read_share(share, next).await?;
                return Ok::<_, Error>((share, changes, None));
            };
            // Chunks holding nothing of this share are passed over (up to a bound per
            // poll), so an empty answer means the snapshot and the log are read.
            let record = snapshot::feed_type(&self.store, &self.table).await?;
            let mut cursor = cursor;
            let mut step;
            let mut steps = 0;
            loop {
                step =
                    snapshot::step(&self.store, &record, share, self.shares, &cursor, next).await?;
                steps += 1;
                match &step.after {
                    Some(after) if step.changes.is_empty() && steps < 64 => cursor = after.clone(),
                    _ => break,
                }
            }
            let pending = Pending {
                through: step.through,
                rows: step.rows,
                after: step.after,
            };
            Ok((share, step.changes, Some(pending)))
        });
        // Every read first: a failed one hands out nothing, so no read position moves past
        // changes that were never returned.
        let pages = futures::future::join_all(pages)
            .await
            .into_iter()
            .collect::<Result<Vec<_>>>()?;
        let mut out = Vec::new();
        let mut state = self.lock();
        for (share, changes, pending) in pages {
            if let Some(last) = changes.last() {
                let handed = state.handed.entry(share).or_default();
                *handed = (*handed).max(last.seq);
            }
            if let Some(held) = state.held.get_mut(&share) {
                if let Some(last) = changes.last() {
                    held.next = held.next.max(last.seq + 1);
                }
                if let Some(pending) = pending {
                    held.next = held.next.max(pending.through + 1);
                    if changes.is_empty() {
                        // Nothing to hand out: the snapshot moves on in memory (its
                        // cursor is written with the next checkpoint).
                        held.snapshot = pending.after;
                        held.pending = None;
                    } else {
                        held.pending = Some(pending);
                    }
                }
            }
            out.extend(changes);
        }
        Ok(out)
    }

    /// The changes of `share` from `next` on (up to the read size).
    async fn read_share(&self, share: u32, next: u64) -> Result<Vec<FeedChange>> {
        super::read(&self.store, &self.table, share, next, self.read).await
    }

    /// Records `handled` (changes [`poll`](Self::poll) returned, handled in order) as
    /// the group's checkpoint of their shares: per share, the highest sequence number,
    /// under the share's ETag. A share lost meanwhile is dropped from the held ones.
    ///
    /// # Errors
    /// [`Error::NotHanded`] (nothing recorded) for a change of a held share this member's
    /// reads never returned; the store's errors other than a lost lease.
    pub async fn checkpoint(&self, handled: &[FeedChange]) -> Result<Checkpointed> {
        let mut through: BTreeMap<u32, u64> = BTreeMap::new();
        let mut snapshot_rows: BTreeMap<u32, usize> = BTreeMap::new();
        for change in handled {
            let last = through.entry(change.share).or_default();
            *last = (*last).max(change.seq);
            if change.event.change == crate::changes::ChangeKind::Snapshot {
                *snapshot_rows.entry(change.share).or_default() += 1;
            }
        }
        // Only what was handed.
        {
            let state = self.lock();
            for (share, seq) in &through {
                let handed = state.handed.get(share).copied().unwrap_or(0);
                if *seq > handed {
                    return Err(Error::NotHanded {
                        table: self.table.clone(),
                        share: *share,
                        seq: *seq,
                        handed,
                    });
                }
            }
        }
        let mut done = Checkpointed::default();
        let now = tablekit_core::clock::now();
        let until = now + chrono::Duration::from_std(self.lease).unwrap_or_default();
        let started = Instant::now();
        type Write = (u32, u64, Option<ETag>, Option<Cursor>);
        let writes: Vec<Write> = {
            let state = self.lock();
            through
                .iter()
                .filter_map(|(share, seq)| {
                    let held = state.held.get(share)?;
                    // A snapshot's cursor moves once every row of its step was handled.
                    let cursor = match (&held.snapshot, &held.pending) {
                        (Some(_), Some(p))
                            if *seq >= p.through
                                && snapshot_rows.get(share).copied().unwrap_or(0) == p.rows =>
                        {
                            p.after.clone()
                        }
                        (snapshot, _) => snapshot.clone(),
                    };
                    (*seq > held.checkpoint || cursor != held.snapshot).then(|| {
                        (
                            *share,
                            (*seq).max(held.checkpoint),
                            held.etag.clone(),
                            cursor,
                        )
                    })
                })
                .collect()
        };
        for share in through.keys() {
            if !self.lock().held.contains_key(share) {
                done.lost.push(*share);
            }
        }
        let puts = writes.into_iter().map(|(share, seq, etag, cursor)| {
            let entity = self.share_entity(share, &self.member, until, seq, cursor.as_ref());
            let op =
                tablekit_core::WriteOp::Replace(entity, etag.map_or(IfMatch::Any, IfMatch::ETag));
            async move { (share, seq, cursor, self.store.execute(FEED_TABLE, op).await) }
        });
        for (share, seq, cursor, answer) in futures::future::join_all(puts).await {
            let mut state = self.lock();
            match answer {
                Ok(etag) => {
                    if let Some(held) = state.held.get_mut(&share) {
                        held.etag = etag;
                        held.checkpoint = seq;
                        held.fence = started + self.lease.mul_f64(0.75);
                        if held.snapshot != cursor {
                            held.pending = None;
                        }
                        held.snapshot = cursor;
                    }
                    done.moved.insert(share, seq);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed | ErrorKind::NotFound
                    ) =>
                {
                    state.held.remove(&share);
                    done.lost.push(share);
                }
                Err(e) => return Err(e),
            }
        }
        done.lost.sort_unstable();
        done.lost.dedup();
        Ok(done)
    }

    /// One round of the push form: polls, hands each change to `handle` in order, then
    /// checkpoints what it handled — after handling, never before, so a crash between
    /// the two delivers again what came after the checkpoint rather than losing it.
    ///
    /// # Errors
    /// The errors of [`poll`](Self::poll) and [`checkpoint`](Self::checkpoint); a
    /// handler's error stops the round: what was handled before it is checkpointed, the
    /// changes from the one it failed on are read again by the next round, and the
    /// handler's error is returned.
    pub async fn consume_once<F, Fut>(&self, mut handle: F) -> Result<Consumed>
    where
        F: FnMut(FeedChange) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        let changes = self.poll().await?;
        let mut handled = 0;
        let mut failed = None;
        let mut pending: Vec<FeedChange> = Vec::new();
        let mut checkpointed = Checkpointed::default();
        let mut at = 0;
        while at < changes.len() {
            let change = &changes[at];
            // A share lost meanwhile is its new holder's: the rest of it is not handled.
            if checkpointed.lost.contains(&change.share) {
                at += 1;
                continue;
            }
            if let Err(e) = handle(change.clone()).await {
                failed = Some(e);
                break;
            }
            handled += 1;
            pending.push(change.clone());
            at += 1;
            // Checkpointing as it goes renews the leases: a read that takes longer than
            // a lease to handle keeps its shares.
            if self.renewal_due() {
                match self.checkpoint(&pending).await {
                    Ok(done) => {
                        pending.clear();
                        checkpointed.merge(done);
                    }
                    // As a failed handler: the rest is read again, what was handled is
                    // checkpointed below if it can be.
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
        }
        let rest: Vec<FeedChange> = changes[at..]
            .iter()
            .filter(|c| !checkpointed.lost.contains(&c.share))
            .cloned()
            .collect();
        if !rest.is_empty() {
            self.rewind(&rest);
        }
        let done = self.checkpoint(&pending).await?;
        checkpointed.merge(done);
        match failed {
            Some(e) => Err(e),
            None => Ok(Consumed {
                handled,
                checkpointed,
            }),
        }
    }

    /// Moves the read position of each share back to the first of `unhandled` in it.
    fn rewind(&self, unhandled: &[FeedChange]) {
        let mut state = self.lock();
        for change in unhandled {
            if let Some(held) = state.held.get_mut(&change.share) {
                held.next = held.next.min(change.seq);
                // A snapshot step not wholly handled is read again.
                if held.pending.is_some() {
                    held.next = held.next.min(held.checkpoint + 1);
                    held.pending = None;
                }
            }
        }
    }

    /// Gives back every share this member holds (each keeps its checkpoint) and removes
    /// its heartbeat, so the others take over at once.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn leave(&self) -> Result<()> {
        if self.lock().fenced.is_some() {
            // The id's heartbeat and shares are the newer instance's.
            return Ok(());
        }
        let held: Vec<(u32, Held)> = std::mem::take(&mut self.lock().held).into_iter().collect();
        let now = tablekit_core::clock::now();
        for (share, held) in held {
            let entity = self.share_entity(share, "", now, held.checkpoint, held.snapshot.as_ref());
            let op = tablekit_core::WriteOp::Replace(
                entity,
                held.etag.map_or(IfMatch::Any, IfMatch::ETag),
            );
            match self.store.execute(FEED_TABLE, op).await {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed | ErrorKind::NotFound
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        let partition = group_partition(&self.table, &self.group);
        match self
            .store
            .delete(
                FEED_TABLE,
                &partition,
                &member_row(&self.member),
                IfMatch::Any,
            )
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::TableNotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn owner_of(row: &Entity) -> &str {
    row.get(OWNER).and_then(Value::as_str).unwrap_or("")
}

fn until_of(row: &Entity) -> DateTime<Utc> {
    row.get(UNTIL)
        .and_then(Value::as_datetime)
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

fn checkpoint_of(row: &Entity) -> u64 {
    row.get(CHECKPOINT)
        .and_then(Value::as_i64)
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

fn if_match(row: &Entity) -> IfMatch {
    row.etag.clone().map_or(IfMatch::Any, IfMatch::ETag)
}
