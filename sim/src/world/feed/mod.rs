//! The change feed in the simulated world. Members declare `#[feed]` (four shares, so
//! the members of a group contend for them); the relays sequence their changes.
//!
//! - **Groups**: `alpha` (three members) and `beta` (two) read from the beginning through
//!   [`Group::consume_once`]; each change handled is noted, then checkpointed. Members
//!   crash at store calls (their leases lapse), leave and join again, under the store's
//!   faults; a failed round checkpoints what it handled on the next one.
//! - **The slow reader**: one member of `slow<n>` reads one change a share every ten to
//!   thirty seconds, so retention overtakes it: it must hear `PositionExpired`, then
//!   goes on as `slow<n+1>` from the oldest position kept.
//! - **The trimmer**: trims with the shortest retention that keeps every change the
//!   groups have not checkpointed (at least ten seconds).
//! - **The store's record** ([`Observed`], kept below the faults by the backing store):
//!   every log row appended and every checkpoint stored, trims or not.
//!
//! After the drain (the groups caught up with every share's head) [`check`] holds the
//! log, the deliveries and the final state against the model.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tablekit_core::{Entity, ErrorKind, TableStore, Value, WriteOp, random};
use tablekit_patterns::changes::{ChangeEvent, ChangeKind};
use tablekit_patterns::feed::group::group_partition;
use tablekit_patterns::feed::log::{log_partition, seq_row_key};
use tablekit_patterns::feed::{self, Checkpoint, FEED_TABLE, FeedChange, Group, Position};

use super::{Store, World};

mod checks;
pub(super) use checks::check;

/// The table whose feed the world reads (the members').
pub(super) const TABLE: &str = "Members";
/// The members' `#[feed(shares = …)]`.
pub(super) const SHARES: u32 = 4;
/// The groups that read everything, and their members.
const GROUPS: [(&str, usize); 2] = [("alpha", 3), ("beta", 2)];
/// A group member's lease on a share.
const LEASE: Duration = Duration::from_secs(3);
/// The trimmer keeps at least this much.
const MIN_RETENTION: Duration = Duration::from_secs(10);

/// What the store applied to the feed's table: every log row appended and every
/// checkpoint stored, in order (recorded below the faults: what landed, answered or not).
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// Per share, the rows appended by number.
    log: BTreeMap<u32, BTreeMap<u64, LogRow>>,
    /// What does not belong in the log.
    wrong: Vec<String>,
    /// Per (group, share), the checkpoints stored, in order.
    checkpoints: BTreeMap<(String, u32), Vec<u64>>,
}

/// Per entity, its rows in the log: (share, number, row).
type ByEntity<'a> = BTreeMap<(String, String), Vec<(u32, u64, &'a LogRow)>>;

#[derive(Clone, Debug, PartialEq)]
struct LogRow {
    key: (String, String),
    version: i64,
    change: ChangeKind,
    rev: Option<i64>,
}

impl Observed {
    /// Notes a write the store applied to the feed's table.
    pub(crate) fn applied(&mut self, op: &WriteOp) {
        let entity = match op {
            WriteOp::Insert(e) | WriteOp::InsertOrReplace(e) | WriteOp::Replace(e, _) => e,
            _ => return,
        };
        if let Some(group) = entity
            .partition_key
            .strip_prefix(&format!("group~{TABLE}~"))
        {
            if let Some(share) = entity
                .row_key
                .strip_prefix("share~")
                .and_then(|s| s.parse().ok())
            {
                let checkpoint = entity
                    .get("Checkpoint")
                    .and_then(Value::as_i64)
                    .unwrap_or(-1);
                self.checkpoints
                    .entry((group.to_owned(), share))
                    .or_default()
                    .push(u64::try_from(checkpoint).unwrap_or(u64::MAX));
            }
            return;
        }
        let Some(share) = entity
            .partition_key
            .strip_prefix(&format!("{TABLE}~"))
            .and_then(|s| s.parse::<u32>().ok())
        else {
            return;
        };
        let Ok(seq) = entity.row_key.parse::<u64>() else {
            return;
        };
        let row = match change_of(entity) {
            Ok(event) => LogRow {
                key: (event.partition_key.clone(), event.row_key.clone()),
                version: event.version,
                change: event.change,
                rev: event.entity.get("rev").and_then(Value::as_i64),
            },
            Err(e) => {
                self.wrong
                    .push(format!("the log row {share}/{seq} does not read: {e}"));
                return;
            }
        };
        if !matches!(op, WriteOp::Insert(_)) {
            self.wrong.push(format!(
                "the log row {share}/{seq} was written over: {op:?}"
            ));
        }
        if let Some(before) = self.log.entry(share).or_default().insert(seq, row.clone())
            && before != row
        {
            self.wrong.push(format!(
                "share {share} numbered two changes {seq}: {before:?} and {row:?}"
            ));
        }
    }

    fn checkpoint(&self, group: &str, share: u32) -> u64 {
        self.checkpoints
            .get(&(group.to_owned(), share))
            .and_then(|c| c.last().copied())
            .unwrap_or(0)
    }
}

fn change_of(row: &Entity) -> tablekit_patterns::Result<ChangeEvent> {
    let envelope = tablekit_patterns::consistency::outbox::read_entry(row)?;
    serde_json::from_value(envelope.payload)
        .map_err(|e| tablekit_core::Error::malformed("a feed log row", e))
}

/// What the groups delivered.
#[derive(Debug, Default)]
pub(super) struct Record {
    /// Per group, every change handled, in the order they were.
    deliveries: BTreeMap<String, Vec<Delivery>>,
    /// Per group, what may make it deliver a change again: a member crashed, lost a
    /// share, or failed to checkpoint what it handled.
    disturbed: BTreeMap<String, Vec<String>>,
    /// The slow reader's generations: where each started.
    slow_starts: Vec<BTreeMap<u32, u64>>,
    /// The slow reader's expired positions: (generation, share, position, oldest).
    expired: Vec<(usize, u32, u64, u64)>,
    /// What a group that must never be overtaken was told.
    overtaken: Vec<String>,
}

#[derive(Clone, Debug)]
struct Delivery {
    member: String,
    share: u32,
    seq: u64,
    key: (String, String),
    version: i64,
    change: ChangeKind,
    rev: Option<i64>,
    /// The group's stored checkpoint of the share when the round started.
    checkpoint: u64,
}

impl Record {
    fn disturb(&mut self, group: &str, why: String) {
        self.disturbed
            .entry(group.to_owned())
            .or_default()
            .push(why);
    }
}

/// The feed's processes: the groups' members, the slow reader, the trimmer.
pub(super) fn spawn(world: &Rc<World>, spawner: &crate::exec::Spawner) {
    for (group, members) in GROUPS {
        for n in 0..members {
            spawner.spawn_process(
                format!("{group}{n}"),
                super::process(world, move |w, s, life| member(w, s, life, group, n)),
            );
        }
    }
    spawner.spawn_process("slow-reader", super::process(world, slow_reader));
    spawner.spawn_process("trimmer", super::process(world, |w, s, _| trimmer(w, s)));
}

fn group_of(store: &Store, group: &str, id: &str) -> Option<Group<Store>> {
    Group::new(store.clone(), TABLE, group, SHARES)
        .ok()?
        .member(id)
        .ok()
}

/// A member of a group: rounds of [`Group::consume_once`]; now and then it leaves and
/// joins again (under its id or a new one).
async fn member(world: Rc<World>, store: Store, life: u32, group: &'static str, n: usize) {
    if life > 0 {
        world
            .feed
            .borrow_mut()
            .disturb(group, format!("{group}{n} crashed"));
    }
    let mut joins = 0;
    while !world.stopping.get() {
        let id = if random::u64().is_multiple_of(2) {
            format!("{group}{n}")
        } else {
            format!("{group}{n}-{life}-{joins}")
        };
        joins += 1;
        let Some(members) = group_of(&store, group, &id) else {
            return;
        };
        let members = members.lease(LEASE).read_size(5);
        world.log(format!("feed: {id} joins {group}"));
        let mut unsaved = Vec::new();
        loop {
            tokio::time::sleep(Duration::from_millis(200 + random::u64() % 800)).await;
            let busy = world.pass("a feed round").await;
            if unsaved.is_empty() && random::u64() % 100 < 3 {
                if let Err(e) = members.leave().await {
                    world
                        .feed
                        .borrow_mut()
                        .disturb(group, format!("{id} did not leave: {e}"));
                }
                world.log(format!("feed: {id} leaves {group}"));
                drop(busy);
                tokio::time::sleep(Duration::from_millis(1_000 + random::u64() % 5_000)).await;
                break;
            }
            if let Err(e) = round(&world, &store, &members, group, &mut unsaved).await {
                if matches!(e, tablekit_core::Error::PositionExpired { .. }) {
                    world
                        .feed
                        .borrow_mut()
                        .overtaken
                        .push(format!("{group}: {e}"));
                }
                world.log(format!("feed: {id}: {e}"));
            }
            drop(busy);
        }
    }
}

/// One round: checkpoints what a failed round handled, then consumes; what it handled
/// and could not checkpoint is left in `unsaved`.
async fn round(
    world: &World,
    store: &Store,
    members: &Group<Store>,
    group: &str,
    unsaved: &mut Vec<FeedChange>,
) -> tablekit_patterns::Result<()> {
    let id = members.id().to_owned();
    if !unsaved.is_empty() {
        match members.checkpoint(unsaved).await {
            Ok(done) => {
                if !done.lost.is_empty() {
                    world
                        .feed
                        .borrow_mut()
                        .disturb(group, format!("{id} lost {:?}", done.lost));
                }
                unsaved.clear();
            }
            Err(e) => {
                world
                    .feed
                    .borrow_mut()
                    .disturb(group, format!("{id} did not checkpoint: {e}"));
                return Err(e);
            }
        }
    }
    let checkpoints: BTreeMap<u32, u64> = {
        let observed = world.observed.lock().unwrap_or_else(|e| e.into_inner());
        (0..SHARES)
            .map(|s| (s, observed.checkpoint(group, s)))
            .collect()
    };
    let handled = RefCell::new(Vec::new());
    let result = members
        .consume_once(|change| {
            let (handled, checkpoints, id) = (&handled, &checkpoints, &id);
            async move {
                // The handler looks the entity up (a store call: a crash may come here).
                store
                    .get(
                        TABLE,
                        &change.event.partition_key,
                        &change.event.row_key,
                        None,
                    )
                    .await?;
                world.feed.borrow_mut().delivered(
                    group,
                    id,
                    &change,
                    checkpoints.get(&change.share).copied().unwrap_or(0),
                );
                handled.borrow_mut().push(change);
                Ok(())
            }
        })
        .await;
    let seqs: Vec<String> = handled
        .borrow()
        .iter()
        .map(|c| format!("{}/{}", c.share, c.seq))
        .collect();
    if !seqs.is_empty() {
        world.log(format!("feed: {id} handled {}", seqs.join(" ")));
    }
    match result {
        Ok(done) => {
            if !done.checkpointed.moved.is_empty() {
                world.log(format!(
                    "feed: {id} checkpointed {:?}",
                    done.checkpointed.moved
                ));
            }
            if !done.checkpointed.lost.is_empty() {
                world
                    .feed
                    .borrow_mut()
                    .disturb(group, format!("{id} lost {:?}", done.checkpointed.lost));
            }
            Ok(())
        }
        Err(e) => {
            let handled = handled.into_inner();
            if !handled.is_empty() {
                world
                    .feed
                    .borrow_mut()
                    .disturb(group, format!("{id} handled and failed: {e}"));
            }
            *unsaved = handled;
            Err(e)
        }
    }
}

impl Delivery {
    fn of(member: &str, change: &FeedChange, checkpoint: u64) -> Self {
        let event = &change.event;
        Delivery {
            member: member.to_owned(),
            share: change.share,
            seq: change.seq,
            key: (event.partition_key.clone(), event.row_key.clone()),
            version: event.version,
            change: event.change,
            rev: event.entity.get("rev").and_then(Value::as_i64),
            checkpoint,
        }
    }
}

impl Record {
    fn delivered(&mut self, group: &str, member: &str, change: &FeedChange, checkpoint: u64) {
        self.deliveries
            .entry(group.to_owned())
            .or_default()
            .push(Delivery::of(member, change, checkpoint));
    }
}

/// The slow reader: a group of one that reads one change a share every few minutes;
/// when told a position expired it goes on as a new group from the oldest kept.
async fn slow_reader(world: Rc<World>, store: Store, life: u32) {
    if world.feed.borrow().slow_starts.is_empty() {
        world.feed.borrow_mut().slow_starts.push(BTreeMap::new());
    }
    let mut current: Option<(usize, Group<Store>)> = None;
    let mut unsaved = Vec::new();
    while !world.stopping.get() {
        tokio::time::sleep(Duration::from_secs(10 + random::u64() % 20)).await;
        let busy = world.pass("a slow feed round").await;
        let generation = world.feed.borrow().slow_starts.len() - 1;
        if current.as_ref().is_none_or(|(g, _)| *g != generation) {
            let start = world.feed.borrow().slow_starts[generation].clone();
            let name = format!("slow{generation}");
            let Some(reader) = group_of(&store, &name, &format!("s{life}")) else {
                return;
            };
            // From number 0 of every share at first (not `Beginning`, which reads a
            // snapshot once the log is trimmed): a trimmed start must be told.
            let reader = reader
                .lease(LEASE)
                .read_size(1)
                .from(Position::Checkpoint(Checkpoint { shares: start }));
            current = Some((generation, reader));
            unsaved.clear();
        }
        let Some((_, reader)) = &current else {
            return;
        };
        let name = reader.name().to_owned();
        match round(&world, &store, reader, &name, &mut unsaved).await {
            Err(tablekit_core::Error::PositionExpired {
                share,
                position,
                oldest,
                ..
            }) => {
                world.log(format!(
                    "feed: {name} was overtaken in share {share} at {position} (oldest {oldest})"
                ));
                let mut start = BTreeMap::new();
                {
                    let observed = world.observed.lock().unwrap_or_else(|e| e.into_inner());
                    for s in 0..SHARES {
                        start.insert(s, observed.checkpoint(&name, s));
                    }
                }
                start.insert(share, oldest - 1);
                let mut record = world.feed.borrow_mut();
                record.expired.push((generation, share, position, oldest));
                record.slow_starts.push(start);
            }
            Err(e) => world.log(format!("feed: {name}: {e}")),
            Ok(()) => {}
        }
        drop(busy);
    }
}

/// Trims the members' feed now and then, keeping what the groups have not checkpointed.
async fn trimmer(world: Rc<World>, store: Store) {
    while !world.stopping.get() {
        tokio::time::sleep(Duration::from_secs(3 + random::u64() % 7)).await;
        let busy = world.pass("a trim").await;
        match retention(&store).await {
            Ok(retention) => match feed::trim(&store, TABLE, SHARES, retention).await {
                Ok(trimmed) if trimmed.deleted > 0 => world.log(format!(
                    "feed: trimmed {} changes (kept {} s)",
                    trimmed.deleted,
                    retention.as_secs()
                )),
                Ok(_) => {}
                Err(e) => world.log(format!("feed: the trim failed: {e}")),
            },
            Err(e) => world.log(format!("feed: no retention: {e}")),
        }
        drop(busy);
    }
}

/// The shortest retention (at least [`MIN_RETENTION`]) that keeps every change after
/// the groups' checkpoints: from the time the first of them was sequenced.
async fn retention(store: &Store) -> tablekit_patterns::Result<Duration> {
    let mut cutoff: Option<DateTime<Utc>> = None;
    for share in 0..SHARES {
        let mut least = u64::MAX;
        for (group, _) in GROUPS {
            let row = get(
                store,
                &group_partition(TABLE, group),
                &format!("share~{share:05}"),
            )
            .await?;
            let checkpoint = row
                .as_ref()
                .and_then(|r| r.get("Checkpoint"))
                .and_then(Value::as_i64)
                .and_then(|c| u64::try_from(c).ok())
                .unwrap_or(0);
            least = least.min(checkpoint);
        }
        let first = get(store, &log_partition(TABLE, share), &seq_row_key(least + 1)).await?;
        if let Some(at) = first
            .as_ref()
            .and_then(|r| r.get("At"))
            .and_then(Value::as_datetime)
        {
            cutoff = Some(cutoff.map_or(at, |c| c.min(at)));
        }
    }
    let now = tablekit_core::clock::now();
    let keep = cutoff
        .and_then(|c| (now - c).to_std().ok())
        .unwrap_or_default();
    Ok(keep.max(MIN_RETENTION) + Duration::from_millis(1))
}

async fn get<S: TableStore>(
    store: &S,
    partition_key: &str,
    row_key: &str,
) -> tablekit_patterns::Result<Option<Entity>> {
    match store.get(FEED_TABLE, partition_key, row_key, None).await {
        Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(None),
        other => other,
    }
}

/// Whether every group checkpointed every change of every share (read without faults).
pub(super) async fn caught_up(world: &World) -> bool {
    let store = world.chaos.inner();
    for share in 0..SHARES {
        let Ok(head) = feed::head(store, TABLE, share).await else {
            return false;
        };
        for (group, _) in GROUPS {
            let Ok(row) = get(
                store,
                &group_partition(TABLE, group),
                &format!("share~{share:05}"),
            )
            .await
            else {
                return false;
            };
            let checkpoint = row
                .as_ref()
                .and_then(|r| r.get("Checkpoint"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if u64::try_from(checkpoint).ok() != Some(head.next - 1) {
                return false;
            }
        }
    }
    true
}
