//! The invariants of the design, checked over the drained store against the model: what
//! each actor's own module checks, and what concerns them all (nothing left behind or
//! poisoned by accident, each key's final state, unique values, no orphaned blob).

use chrono::{DateTime, Utc};
use tablekit_core::{ErrorKind, Query, TableStore};
use tablekit_patterns::consistency::Engine;
use tablekit_patterns::index::IndexedTable;
use tablekit_patterns::index::unique::Reservation;
use tablekit_workers::queue::PoisonQuery;

use super::written::Written;
use super::{
    ARCHIVE, Event, IDS, Store, TEAMS, World, archive, audit, badges, documents, feed, members,
    migration, relays, tallies,
};
use crate::model::{Key, Model};

/// The invariants, over the drained store (no faults).
pub(super) async fn check(world: &World) -> Vec<String> {
    let mut found = Vec::new();
    let store = world.chaos.clone();
    let engine = Engine::new(store.clone());
    let members = members(world, &store, &engine);
    let badges = badges(world, &store, &engine);
    let now = world.now();

    // Nothing left in outboxes, markers or queues; nothing poisoned by accident.
    match tablekit_patterns::consistency::backlog(&store).await {
        Ok(b) if b.entries > 0 || b.markers > 0 || b.feed_changes > 0 => {
            found.push(format!(
                "left behind: {} outbox entries, {} feed changes unsequenced, {} pending markers",
                b.entries, b.feed_changes, b.markers
            ));
        }
        Ok(_) => {}
        Err(e) => found.push(format!("the backlog does not read: {e}")),
    }
    let malformed = world.model.borrow().malformed.clone();
    // Poisoned: what the queue's poison lanes hold, and what the operator's sweeps moved
    // into the poison table.
    let mut all_poisoned = world.queue.poisoned();
    for queue in ["index", "archive"] {
        match world
            .poison
            .table()
            .expect("the simulation keeps a poison table")
            .page(queue, &PoisonQuery::new(100_000, 0))
            .await
        {
            Ok(page) => all_poisoned.extend(
                page.messages
                    .into_iter()
                    .map(|m| (queue.to_owned(), m.id, m.reason)),
            ),
            Err(e) => found.push(format!("{queue}: the poison table does not read: {e}")),
        }
    }
    for (queue, id, reason) in &all_poisoned {
        if !malformed.contains(id) {
            found.push(format!("{queue}: {id} was poisoned: {reason}"));
        }
    }
    let poisoned: Vec<String> = all_poisoned.into_iter().map(|p| p.1).collect();
    let discarded = world.model.borrow().discarded.clone();
    for id in &malformed {
        if !poisoned.contains(id) && !discarded.contains(id) {
            found.push(format!("the malformed message {id} was not poisoned"));
        }
    }

    found.extend(world.model.borrow().console.iter().cloned());
    found.extend(audit::check(world, &members, &badges).await);
    found.extend(tallies::check(&store).await);

    // Each key's final state against the model; expired values are not readable; the last
    // change event matches.
    let events = world.events.lock().map(|e| e.clone()).unwrap_or_default();
    let model = world.model.borrow().clone();
    for team in TEAMS {
        for id in 0..IDS {
            found.extend(check_key(world, &model, &members, &events, team, id, now).await);
            found.extend(check_key(world, &model, &badges, &events, team, id, now).await);
        }
    }

    found.extend(documents::check(world, &store).await);

    found.extend(archive::check(world, &store, &model).await);

    // Unique values: every reservation names a member holding the value, and every
    // member's value is reserved for it.
    match store.query_all("MembersUnique", Query::new()).await {
        Ok(rows) => {
            let mut held = Vec::new();
            for row in rows {
                let Ok(reservation) = Reservation::read("MembersUnique", &row) else {
                    found.push(format!("a reservation does not read: {row:?}"));
                    continue;
                };
                let holder = &reservation.holder;
                let value = reservation.value().to_owned();
                match members.get(&holder.partition_key, &holder.row_key).await {
                    Ok(Some(m)) if m.value.email == value => held.push(value),
                    other => found.push(format!(
                        "the reservation of {value} names {holder}, which holds {:?} (made at version {} under intent {:?})",
                        other.map(|m| m.map(|m| m.value.email)),
                        reservation.version,
                        reservation.intent,
                    )),
                }
            }
            for team in TEAMS {
                for id in 0..IDS {
                    if let Ok(Some(m)) = members.get(team, &format!("m_{id:02}")).await
                        && !held.contains(&m.value.email)
                    {
                        found.push(format!(
                            "{team}/m_{id:02} holds {} without a reservation",
                            m.value.email
                        ));
                    }
                }
            }
        }
        Err(e) if e.kind() == ErrorKind::TableNotFound => {}
        Err(e) => found.push(format!("the reservations do not read: {e}")),
    }

    // No orphaned blob: every blob of an entity's field is referenced by an entity.
    match world.blobs.list("").await {
        Ok(blobs) => {
            let mut referenced = Vec::new();
            for table in ["Members", "Badges", ARCHIVE, "Documents"] {
                if let Ok(rows) = store.query_all(table, Query::new()).await {
                    for row in rows {
                        referenced.extend(
                            tablekit_patterns::large::addresses(&row)
                                .into_iter()
                                .map(|a| a.1),
                        );
                    }
                }
            }
            for blob in blobs {
                if blob.name.starts_with("indexes/") {
                    continue;
                }
                if !referenced.contains(&blob.name) {
                    found.push(format!("the blob {} is referenced by no entity", blob.name));
                }
            }
        }
        Err(e) => found.push(format!("the blobs do not list: {e}")),
    }

    found.extend(counts(&members).await);

    found.extend(relays::check(world));
    let model = world.model.borrow().clone();
    found.extend(feed::check(world, &model).await);

    found.extend(migration::converges(&members).await);
    found
}

/// Counts kept without a scan: after draining, every count equals the number of live
/// members with its key.
async fn counts(members: &IndexedTable<crate::entities::Member, Store>) -> Vec<String> {
    use crate::entities::{City, Member};
    let mut found = Vec::new();
    let live = match members.table().query(Query::new()).await {
        Ok(live) => live,
        Err(e) => return vec![format!("the members do not read: {e}")],
    };
    for city in [City::Oslo, City::Lima, City::Pune, City::Rome] {
        let expected = live.iter().filter(|m| m.value.city == city).count();
        match members.count(Member::PER_CITY).key(city).get().await {
            Ok(count) if usize::try_from(count.value).ok() == Some(expected) => {}
            Ok(count) => found.push(format!(
                "the count per_city of {city:?} is {}, and {expected} live members have it",
                count.value
            )),
            Err(e) => found.push(format!("the count per_city of {city:?} does not read: {e}")),
        }
    }
    found
}

#[allow(clippy::too_many_arguments)]
async fn check_key<E: Written>(
    world: &World,
    model: &Model,
    table: &IndexedTable<E, Store>,
    events: &[Event],
    team: &str,
    id: u32,
    now: DateTime<Utc>,
) -> Vec<String> {
    let mut found = Vec::new();
    let key: Key = (E::NAME, team.to_owned(), E::key_of(id));
    let stored = match table.get(team, &E::key_of(id)).await {
        Ok(stored) => stored,
        Err(e) => {
            found.push(format!("{key:?} does not read: {e}"));
            return found;
        }
    };
    let raw = world
        .chaos
        .get(E::schema().table, team, &E::key_of(id), None)
        .await
        .ok()
        .flatten();
    if stored.is_none()
        && let Some(raw) = &raw
        && !tablekit_core::typed::is_expired(raw, now)
    {
        found.push(format!("{key:?} is stored but does not read"));
    }
    if raw
        .as_ref()
        .is_some_and(|r| tablekit_core::typed::is_expired(r, now))
    {
        found.push(format!(
            "{key:?} expired and the sweeper left it (it expires {:?}, now {now})",
            raw.as_ref().and_then(tablekit_core::typed::expires_at)
        ));
    }
    let rev = stored.as_ref().map(|s| s.value.rev());
    if let Some(problem) = model.check(&key, rev, now) {
        found.push(problem);
    }
    let last = events
        .iter()
        .filter(|(k, ..)| *k == key)
        .max_by_key(|(_, version, _)| *version);
    match (last, rev) {
        (Some((_, _, event)), rev) if *event != rev => found.push(format!(
            "{key:?}: the last change event says {event:?}, the state is {rev:?}"
        )),
        (None, Some(rev)) => {
            found.push(format!("{key:?} holds rev {rev} but no change event came"))
        }
        _ => {}
    }
    found
}
