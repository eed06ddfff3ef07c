//! The director's workload beside the writers: archive requests, malformed messages, an
//! operator at the console, and jumps of the clock.

use std::time::Duration;

use tablekit_core::random;
use tablekit_workers::queue::desk::{Desk, ExportedMessage, Role};
use tablekit_workers::queue::poison_table::TakeSteps;
use tablekit_workers::queue::{PoisonAction, PoisonQuery, Queue};

use super::World;
use super::archive::request_archive;
use super::written::pick;

/// Runs the director's part of the workload until every writer is done.
pub(super) async fn run(world: &World) {
    // The workload: archive requests, malformed messages and clock jumps now and then.
    let mut archives = 0;
    while world.writers_left.get() > 0 {
        tokio::time::sleep(Duration::from_millis(200 + random::u64() % 800)).await;
        match random::u64() % 100 {
            0..=7 if archives < 4 => {
                archives += usize::from(request_archive(world).await);
            }
            8 | 22 | 23 => {
                let id = format!("malformed-{}", random::u64() % 1_000_000);
                let queue = if random::u64().is_multiple_of(2) {
                    "index"
                } else {
                    "archive"
                };
                // Two at once, as a faulty producer sends them: the operator later acts on
                // part of what is poisoned.
                for id in [id.clone(), format!("{id}-2")] {
                    world.log(format!("director: malformed message {id} to {queue}"));
                    world.model.borrow_mut().malformed.push(id.clone());
                    let _ = world.queue.send(queue, &id, MALFORMED_BODY).await;
                }
            }
            // An operator at the console: a dry run lists a queue's malformed poison
            // messages, and its confirmation replays exactly that set (they come back with
            // a fresh count) while the queue goes on meanwhile. (Only the malformed ones: a
            // message poisoned by a fault of tablekit stays for the check to report.)
            12 | 14..=17 => {
                let queue = pick(&["index", "archive"]);
                operator_replays_a_set(world, queue).await;
            }
            13 | 18..=21 => operator_discards_with_an_export(world).await,
            9..=11 => {
                let minutes = 1 + random::u64() % 40;
                world.log(format!("director: the clock jumps {minutes} min"));
                tokio::time::advance(Duration::from_secs(60 * minutes)).await;
            }
            _ => {}
        }
    }
    // Once the writes are done, an operator clears a malformed message the console's way
    // (as a viewer first, then exporting before the discard), if one is poisoned.
    operator_discards_with_an_export(world).await;
}

/// The console's sweep of `queue`'s poison lane into the poison table before it shows the
/// queue; `false` when it failed (logged).
async fn sweep(world: &World, queue: &str) -> bool {
    match world.poison.sweep(queue).await {
        Ok(0) => true,
        Ok(swept) => {
            world.log(format!(
                "operator: swept {swept} poison messages of {queue} into the poison table"
            ));
            true
        }
        Err(e) => {
            world.log(format!(
                "operator: sweeping the poison of {queue} failed: {e}"
            ));
            false
        }
    }
}

/// The body every malformed message is sent with.
const MALFORMED_BODY: &[u8] = b"{not an envelope";

/// The console's discard of one malformed poison message, as its roles allow: a viewer's
/// discard is refused and changes nothing; the operator exports the set first (the
/// console's Export), then discards it — and every message the discard took must be in
/// the export, its body byte for byte.
async fn operator_discards_with_an_export(world: &World) {
    let malformed = world.model.borrow().malformed.clone();
    let mut found = None;
    for queue in ["index", "archive"] {
        // The console sweeps what the queue's poison lane holds into the poison table
        // before it shows the queue.
        if !sweep(world, queue).await {
            return;
        }
        let Ok(listed) = world.poison.poison_list(queue, usize::MAX).await else {
            return;
        };
        if let Some(message) = listed.into_iter().find(|m| malformed.contains(&m.id)) {
            found = Some((queue, message));
            break;
        }
    }
    let Some((queue, message)) = found else {
        return;
    };
    let (id, handles) = (&message.id, std::slice::from_ref(&message.handle));
    let viewer = Desk::new(world.poison.clone(), Role::Viewer);
    match viewer.take(queue, handles, &PoisonAction::Discard).await {
        Err(tablekit_workers::Error::QueuePermissionDenied { .. }) => {}
        other => world.model.borrow_mut().console.push(format!(
            "{queue}: a viewer's discard of {id} was not refused: {other:?}"
        )),
    }
    let Ok(still) = world.poison.poison_list(queue, usize::MAX).await else {
        return;
    };
    if !still.iter().any(|m| &m.id == id) {
        world.model.borrow_mut().console.push(format!(
            "{queue}: {id} left the poison queue on a viewer's discard"
        ));
        return;
    }
    let operator = Desk::new(world.poison.clone(), Role::Operator);
    let mut export = Vec::new();
    if let Err(e) = operator.export(queue, handles, &mut export).await {
        world.log(format!("operator: the export failed: {e}"));
        return;
    }
    let exported: Vec<ExportedMessage> = export
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect();
    // A discard that fails may have landed (a store write that reached the store and
    // then failed): the operator confirms it again until it answers, and what it took is
    // then whatever left the table.
    let mut taken = None;
    for _ in 0..20 {
        match operator.take(queue, handles, &PoisonAction::Discard).await {
            Ok(now) => {
                taken = Some(now);
                break;
            }
            Err(e) => world.log(format!(
                "operator: the discard of {id} failed ({e}); confirmed again"
            )),
        }
    }
    let Some(taken) = taken else {
        world
            .model
            .borrow_mut()
            .console
            .push(format!("{queue}: the discard of {id} failed 20 times"));
        return;
    };
    let mut gone = !taken.is_empty();
    for _ in 0..20 {
        if let Ok(left) = world.poison.poison_body(queue, &message.handle).await {
            gone = left.is_none();
            break;
        }
    }
    world.log(format!(
        "operator: exported {} and discarded {id} of {queue} ({})",
        exported.len(),
        taken.len()
    ));
    for handle in &taken {
        let kept = exported.iter().find(|m| &m.handle == handle);
        match kept.map(ExportedMessage::body_bytes) {
            Some(Ok(body)) if body == MALFORMED_BODY => {}
            other => world.model.borrow_mut().console.push(format!(
                "{queue}: the discard took {handle}, which its export holds as {other:?}"
            )),
        }
    }
    if gone {
        world.model.borrow_mut().discarded.push(id.clone());
    }
}

/// The console's "replay all" over (the older half of) the malformed messages of `queue`:
/// the dry run's set,
/// then — after the operator read it, the workers running meanwhile — the confirmation,
/// which must take from that set only: every other poison message stays.
async fn operator_replays_a_set(world: &World, queue: &str) {
    let malformed = world.model.borrow().malformed.clone();
    if !sweep(world, queue).await {
        return;
    }
    let listed = match world
        .poison
        .poison_page(queue, &PoisonQuery::new(1000, 0))
        .await
    {
        Ok(page) => page.messages,
        Err(e) => {
            world.log(format!("operator: the dry run failed: {e}"));
            return;
        }
    };
    // The operator narrowed the filter to the older half of them.
    let mut set: Vec<_> = listed
        .into_iter()
        .filter(|m| malformed.contains(&m.id))
        .collect();
    set.truncate(set.len().div_ceil(2));
    if set.is_empty() {
        return;
    }
    // Reading the dry run: the workers go on meanwhile.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let handles: Vec<String> = set.iter().map(|m| m.handle.clone()).collect();
    // Every poison message the dry run did not list, by handle: a later poisoning of a
    // listed id among them.
    let others = |poisoned: Vec<tablekit_workers::queue::PoisonMessage>| -> Vec<String> {
        let mut others: Vec<String> = poisoned
            .into_iter()
            .map(|m| m.handle)
            .filter(|h| !handles.contains(h))
            .collect();
        others.sort();
        others
    };
    let before = match world.poison.poison_list(queue, usize::MAX).await {
        Ok(listed) => others(listed),
        Err(_) => return,
    };
    // Now and then the console stops midway through the redrive (a crash): after marking
    // the set, or after sending it too. The confirmation sent again completes it.
    let stopped = match random::u64() % 4 {
        0 => Some((TakeSteps::MarkOnly, "marking")),
        1 => Some((TakeSteps::MarkAndSend, "sending")),
        _ => None,
    };
    if let Some((steps, after)) = stopped {
        let partly = world
            .poison
            .table()
            .expect("the simulation keeps a poison table")
            .take_steps(
                world.poison.inner(),
                queue,
                &handles,
                &PoisonAction::Replay,
                steps,
            )
            .await;
        world.log(format!(
            "operator: the redrive of {} messages of {queue} stopped after {after} ({})",
            handles.len(),
            partly.map_or_else(|e| format!("failed: {e}"), |_| "a crash".to_owned())
        ));
    }
    match world
        .poison
        .poison_take(queue, &handles, &PoisonAction::Replay)
        .await
    {
        Ok(taken) => {
            world.log(format!(
                "operator: replayed {} of the {} poison messages of {queue} the dry run listed",
                taken.len(),
                set.len()
            ));
            let after = match world.poison.poison_list(queue, usize::MAX).await {
                Ok(listed) => others(listed),
                Err(_) => return,
            };
            // Those poisoned meanwhile may be added; none of those there before may go.
            if before.iter().any(|h| !after.contains(h)) {
                world.model.borrow_mut().console.push(format!(
                    "{queue}: the confirmation of a dry run took messages it did not list ({before:?} before, {after:?} after)"
                ));
            }
        }
        Err(e) => world.log(format!("operator: replay failed: {e}")),
    }
}
