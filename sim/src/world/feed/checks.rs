//! The feed's invariants over the drained store: the log as the store recorded it, every
//! group's deliveries against it and the model, the slow reader's expiries, and the
//! state folded from each group and from a newcomer that reads a snapshot.

use std::collections::{BTreeMap, BTreeSet};

use tablekit_core::{ErrorKind, Query, TableStore, filter};
use tablekit_patterns::changes::ChangeKind;
use tablekit_patterns::consistency::Engine;
use tablekit_patterns::feed::log::log_partition;
use tablekit_patterns::feed::{self, FEED_TABLE, Group};

use super::{ByEntity, Delivery, GROUPS, Observed, SHARES, TABLE};
use crate::model::{Answer, Effect, Model};
use crate::world::World;

/// The feed's invariants over the drained store: the log, every group's deliveries, the
/// slow reader's expiries, and the state folded from the feed.
pub(in crate::world) async fn check(world: &World, model: &Model) -> Vec<String> {
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
    let members = super::super::members(world, &store, &Engine::new(store.clone()));
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
