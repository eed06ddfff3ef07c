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
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tablekit_core::{Entity, ErrorKind, Query, TableStore, Value, WriteOp, filter, random};
use tablekit_patterns::changes::{ChangeEvent, ChangeKind};
use tablekit_patterns::consistency::Engine;
use tablekit_patterns::feed::group::group_partition;
use tablekit_patterns::feed::log::{log_partition, seq_row_key};
use tablekit_patterns::feed::{self, Checkpoint, FEED_TABLE, FeedChange, Group, Position};

use super::{Store, World};
use crate::model::{Answer, Effect, Model};

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

/// The feed's invariants over the drained store: the log, every group's deliveries, the
/// slow reader's expiries, and the state folded from the feed.
pub(super) async fn check(world: &World, model: &Model) -> Vec<String> {
    let mut found = Vec::new();
    let store = world.chaos.inner();
    // Every change was sequenced and removed from its partition: none waits after the
    // drain (a partition whose marker went while a change stayed would hold it forever).
    let query = Query::with_filter(feed::log::waiting_range());
    match store.query_all(TABLE, query).await {
        Ok(left) if !left.is_empty() => found.push(format!(
            "{} feed change(s) left waiting after the drain: {:?}",
            left.len(),
            left.iter()
                .map(|r| (r.partition_key.as_str(), r.row_key.as_str()))
                .collect::<Vec<_>>()
        )),
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::TableNotFound => {}
        Err(e) => found.push(format!("the waiting feed changes do not read: {e}")),
    }
    // What the store holds: each share's head and the numbers its log keeps; the members.
    let mut oldest = BTreeMap::new();
    let mut heads = Vec::new();
    for share in 0..SHARES {
        let head = match feed::head(store, TABLE, share).await {
            Ok(head) => head,
            Err(e) => {
                found.push(format!("the head of share {share} does not read: {e}"));
                continue;
            }
        };
        oldest.insert(share, head.oldest);
        let query = Query::with_filter(
            filter::partition_key().eq(log_partition(TABLE, share)) & filter::row_key().lt("~"),
        );
        let kept: Vec<u64> = match store.query_all(FEED_TABLE, query).await {
            Ok(rows) => rows.iter().filter_map(|r| r.row_key.parse().ok()).collect(),
            Err(e) if e.kind() == ErrorKind::TableNotFound => Vec::new(),
            Err(e) => {
                found.push(format!("the log of share {share} does not read: {e}"));
                continue;
            }
        };
        heads.push((share, head, kept));
    }
    let state = match live(world).await {
        Ok(state) => state,
        Err(e) => return vec![format!("the members do not read: {e}")],
    };
    // A newcomer from the beginning, after the drain: once retention trimmed the log it
    // reads a snapshot of the table with the log; what it folds equals the table.
    found.extend(newcomer(store, &state).await);
    let observed = world.observed.lock().unwrap_or_else(|e| e.into_inner());
    let record = world.feed.borrow();
    found.extend(observed.wrong.iter().cloned());

    // The log: per share, numbers 1 to Next - 1 with no gap (from Oldest in the store).
    for (share, head, kept) in &heads {
        let appended: Vec<u64> = observed
            .log
            .get(share)
            .map(|rows| rows.keys().copied().collect())
            .unwrap_or_default();
        if appended != (1..head.next).collect::<Vec<_>>() {
            found.push(format!(
                "share {share}: the head says next {}, the rows appended are {appended:?}",
                head.next
            ));
        }
        if *kept != (head.oldest..head.next).collect::<Vec<_>>() {
            found.push(format!(
                "share {share}: the head keeps {}..{}, the log holds {kept:?}",
                head.oldest, head.next
            ));
        }
    }
    // Each change once (a copy appended again after the first was trimmed aside: the
    // relay numbers a marked change again once its row is past the oldest kept), and per
    // entity in version order.
    let mut by_entity: ByEntity<'_> = BTreeMap::new();
    for (share, rows) in &observed.log {
        for (seq, row) in rows {
            by_entity
                .entry(row.key.clone())
                .or_default()
                .push((*share, *seq, row));
        }
    }
    let mut appended_again = 0;
    for (key, rows) in &by_entity {
        let mut last: Option<(u64, i64)> = None;
        for (n, (share, seq, row)) in rows.iter().enumerate() {
            let first = rows[..n].iter().find(|(_, _, r)| r.version == row.version);
            if let Some((before_share, before, _)) = first {
                if *before >= oldest.get(before_share).copied().unwrap_or(0) {
                    found.push(format!(
                        "{key:?}: version {} is in the log twice, at {before_share}/{before} and {share}/{seq}",
                        row.version
                    ));
                }
                appended_again += 1;
                continue;
            }
            if let Some((before, version)) = last
                && row.version <= version
            {
                found.push(format!(
                    "{key:?}: version {} at {share}/{seq} after version {version} at {before}",
                    row.version
                ));
            }
            last = Some((*seq, row.version));
        }
    }

    // Against the model: no refused write in the log; every acknowledged write in it.
    let mut revs: BTreeMap<(String, String), BTreeSet<i64>> = BTreeMap::new();
    let mut deletes: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (key, rows) in &by_entity {
        for (share, seq, row) in rows {
            match (row.change, row.rev) {
                (ChangeKind::Delete, _) => *deletes.entry(key.clone()).or_default() += 1,
                (_, Some(rev)) => {
                    revs.entry(key.clone()).or_default().insert(rev);
                    let write = model.writes.iter().find(|w| {
                        w.key.0 == "Member"
                            && (w.key.1.as_str(), w.key.2.as_str()) == (&key.0, &key.1)
                            && matches!(w.effect, Effect::Put { rev: r, .. } if r == rev)
                    });
                    match write.map(|w| &w.answer) {
                        None => found.push(format!(
                            "{key:?}: the log's change {share}/{seq} holds rev {rev}, which no write wrote"
                        )),
                        Some(Answer::Refused(why)) => found.push(format!(
                            "{key:?}: the log holds rev {rev} of a refused write ({why})"
                        )),
                        _ => {}
                    }
                }
                (_, None) => found.push(format!("{key:?}: the change {share}/{seq} has no rev")),
            }
        }
    }
    let mut acknowledged_deletes: BTreeMap<(String, String), usize> = BTreeMap::new();
    for w in model.writes.iter().filter(|w| w.key.0 == "Member") {
        let key = (w.key.1.clone(), w.key.2.clone());
        match (&w.effect, &w.answer) {
            (Effect::Put { rev, .. }, Answer::Ok)
                if !revs.get(&key).is_some_and(|r| r.contains(rev)) =>
            {
                found.push(format!(
                    "{key:?}: `{}` was acknowledged and its change is not in the log",
                    w.what
                ));
            }
            (Effect::Remove, Answer::Ok) => *acknowledged_deletes.entry(key).or_default() += 1,
            _ => {}
        }
    }
    for (key, count) in acknowledged_deletes {
        let logged = deletes.get(&key).copied().unwrap_or(0);
        if logged < count {
            found.push(format!(
                "{key:?}: {count} deletes acknowledged, {logged} in the log"
            ));
        }
    }

    // Every group: every change delivered, per share in order with no gap, again only
    // after a disturbance and only past the checkpoint of the time; per entity in version
    // order; the state folded from what it got equal to the table's.
    found.extend(record.overtaken.iter().cloned());
    for (group, _) in GROUPS {
        let deliveries = record
            .deliveries
            .get(group)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let disturbed = record.disturbed.get(group).is_some_and(|d| !d.is_empty());
        found.extend(check_group(
            group,
            deliveries,
            &observed,
            disturbed,
            &BTreeMap::new(),
            true,
        ));
        found.extend(check_versions(group, deliveries, &by_entity));
        found.extend(fold(group, deliveries, &state));
    }
    // The slow reader: each generation contiguous from its start; each expiry told where
    // it was, never past what it delivered.
    for (generation, start) in record.slow_starts.iter().enumerate() {
        let name = format!("slow{generation}");
        let deliveries = record
            .deliveries
            .get(&name)
            .map(Vec::as_slice)
            .unwrap_or_default();
        found.extend(check_group(
            &name, deliveries, &observed, true, start, false,
        ));
    }
    for (generation, share, position, oldest) in &record.expired {
        let name = format!("slow{generation}");
        let start = record.slow_starts[*generation]
            .get(share)
            .copied()
            .unwrap_or(0);
        let delivered = record
            .deliveries
            .get(&name)
            .into_iter()
            .flatten()
            .filter(|d| d.share == *share)
            .map(|d| d.seq)
            .max()
            .unwrap_or(start);
        if *position > delivered + 1 || position >= oldest {
            found.push(format!(
                "{name}: told position {position} of share {share} expired (oldest {oldest}) having delivered up to {delivered}"
            ));
        }
    }
    let expiries = record.expired.len();
    drop(record);
    world.log(format!(
        "feed: {} changes logged ({appended_again} again after their first copy was trimmed), \
         {expiries} expiries of the slow reader",
        observed.log.values().map(BTreeMap::len).sum::<usize>()
    ));
    found
}

/// One group's deliveries per share: in order from `start` with no gap; a change again
/// only after a disturbance and past the group's checkpoint when the round started; with
/// `complete`, every change of the log delivered. Its stored checkpoints never go back.
fn check_group(
    group: &str,
    deliveries: &[Delivery],
    observed: &Observed,
    disturbed: bool,
    start: &BTreeMap<u32, u64>,
    complete: bool,
) -> Vec<String> {
    let mut found = Vec::new();
    for share in 0..SHARES {
        let from = start.get(&share).copied().unwrap_or(0);
        let mut high = from;
        for d in deliveries.iter().filter(|d| d.share == share) {
            if d.seq == high + 1 {
                high += 1;
            } else if d.seq > high {
                found.push(format!(
                    "{group}: {} got {share}/{} after {share}/{high}: {} skipped",
                    d.member,
                    d.seq,
                    d.seq - high - 1
                ));
                high = d.seq;
            } else if d.seq <= from {
                found.push(format!(
                    "{group}: {} got {share}/{}, before where it started ({from})",
                    d.member, d.seq
                ));
            } else if !disturbed {
                found.push(format!(
                    "{group}: {} got {share}/{} again, with no crash or lost lease",
                    d.member, d.seq
                ));
            } else if d.seq <= d.checkpoint {
                found.push(format!(
                    "{group}: {} got {share}/{} again, though the group had checkpointed {}",
                    d.member, d.seq, d.checkpoint
                ));
            }
        }
        let appended = observed.log.get(&share).map_or(0, BTreeMap::len) as u64;
        if complete && high < appended {
            found.push(format!(
                "{group}: got share {share} up to {high} of {appended}"
            ));
        }
        if let Some(stored) = observed.checkpoints.get(&(group.to_owned(), share))
            && let Some(at) = stored.windows(2).position(|w| w[1] < w[0])
        {
            found.push(format!(
                "{group}: the checkpoint of share {share} went back from {} to {}",
                stored[at],
                stored[at + 1]
            ));
        }
    }
    found
}

/// Per entity, the versions a group got follow the log's, with no gap (again only what
/// it had got before).
fn check_versions(group: &str, deliveries: &[Delivery], by_entity: &ByEntity<'_>) -> Vec<String> {
    let mut found = Vec::new();
    let mut got: BTreeMap<&(String, String), usize> = BTreeMap::new();
    for d in deliveries {
        let mut versions: Vec<i64> = Vec::new();
        for (_, _, row) in by_entity.get(&d.key).into_iter().flatten() {
            if !versions.contains(&row.version) {
                versions.push(row.version);
            }
        }
        let Some(at) = versions.iter().position(|v| *v == d.version) else {
            found.push(format!(
                "{group}: got version {} of {:?}, which is not in the log",
                d.version, d.key
            ));
            continue;
        };
        let next = got.entry(&d.key).or_default();
        if at > *next {
            found.push(format!(
                "{group}: got version {} of {:?} after {} of its versions (of {versions:?})",
                d.version, d.key, *next
            ));
        }
        *next = (*next).max(at + 1);
    }
    found
}

/// The live members' revs, by key.
async fn live(world: &World) -> tablekit_patterns::Result<BTreeMap<(String, String), i64>> {
    let store = world.chaos.clone();
    let members = super::members(world, &store, &Engine::new(store.clone()));
    let live = members.table().query(Query::new()).await?;
    Ok(live
        .iter()
        .map(|m| {
            let key = (m.value.team.clone(), format!("m_{:02}", m.value.id));
            (key, m.value.rev)
        })
        .collect())
}

/// A group new to the feed, from the beginning, read to its end on the drained store: the
/// state it folds (snapshot rows and changes) equals the table's.
async fn newcomer<S: TableStore + Clone>(
    store: &S,
    state: &BTreeMap<(String, String), i64>,
) -> Vec<String> {
    let Some(group) = Group::new(store.clone(), TABLE, "newcomer", SHARES).ok() else {
        return vec!["the newcomer group cannot be made".to_owned()];
    };
    let mut deliveries = Vec::new();
    for _ in 0..10_000 {
        let changes = match group.poll().await {
            Ok(changes) => changes,
            Err(e) => return vec![format!("newcomer: {e}")],
        };
        if changes.is_empty() {
            return fold("newcomer", &deliveries, state);
        }
        deliveries.extend(changes.iter().map(|c| Delivery::of("newcomer", c, 0)));
        if let Err(e) = group.checkpoint(&changes).await {
            return vec![format!("newcomer: {e}")];
        }
    }
    vec!["newcomer: the feed did not end".to_owned()]
}

/// The state folded from what a group got (per entity its last change: a delete is
/// absent, else the entity's rev) equals the table's.
fn fold(
    group: &str,
    deliveries: &[Delivery],
    state: &BTreeMap<(String, String), i64>,
) -> Vec<String> {
    let mut found = Vec::new();
    let mut last: BTreeMap<(String, String), &Delivery> = BTreeMap::new();
    for d in deliveries {
        let entry = last.entry(d.key.clone()).or_insert(d);
        if d.version > entry.version {
            *entry = d;
        }
    }
    let keys: BTreeSet<_> = state.keys().chain(last.keys()).cloned().collect();
    for key in keys {
        let folded = last
            .get(&key)
            .and_then(|d| (d.change != ChangeKind::Delete).then_some(d.rev).flatten());
        let held = state.get(&key).copied();
        if folded != held {
            found.push(format!(
                "{group}: {key:?} folded from the feed is rev {folded:?}, the table holds {held:?}"
            ));
        }
    }
    found
}
