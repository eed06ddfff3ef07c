//! The director's workload beside the writers: archive requests, malformed messages, an
//! operator at the console, and jumps of the clock.

use std::time::Duration;

use tablekit_core::random;
use tablekit_workers::queue::Queue;

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
            8 => {
                let id = format!("malformed-{}", random::u64() % 1_000_000);
                let queue = if random::u64().is_multiple_of(2) {
                    "index"
                } else {
                    "archive"
                };
                world.log(format!("director: malformed message {id} to {queue}"));
                world.model.borrow_mut().malformed.push(id.clone());
                let _ = world.queue.send(queue, &id, b"{not an envelope").await;
            }
            // An operator at the console: replays a queue's poison messages (they come
            // back with a fresh count), or discards one of the malformed ones.
            // (Only the malformed ones: a message poisoned by a fault of tablekit stays
            // for the check to report.)
            12 => {
                let queue = pick(&["index", "archive"]);
                let malformed = world.model.borrow().malformed.clone();
                let only_malformed = world
                    .queue
                    .poisoned()
                    .iter()
                    .all(|(_, id, _)| malformed.contains(id));
                if only_malformed {
                    match world.queue.poison_replay(queue, None).await {
                        Ok(n) => {
                            world.log(format!("operator: replayed {n} poison messages of {queue}"))
                        }
                        Err(e) => world.log(format!("operator: replay failed: {e}")),
                    }
                }
            }
            13 => {
                let malformed = world.model.borrow().malformed.clone();
                let poisoned = world.queue.poisoned();
                if let Some((queue, id, _)) =
                    poisoned.iter().find(|(_, id, _)| malformed.contains(id))
                    && let Ok(n) = world.queue.poison_discard(queue, Some(id)).await
                {
                    world.log(format!("operator: discarded {id} of {queue} ({n})"));
                    if n > 0 {
                        world.model.borrow_mut().discarded.push(id.clone());
                    }
                }
            }
            9..=11 => {
                let minutes = 1 + random::u64() % 40;
                world.log(format!("director: the clock jumps {minutes} min"));
                tokio::time::advance(Duration::from_secs(60 * minutes)).await;
            }
            _ => {}
        }
    }
}
