//! An in-memory queue with at-least-once delivery and seeded faults, behind the workers'
//! [`Queue`] trait so the product's sink and delivery handling run unchanged: a send may
//! be duplicated or delayed, deliveries come in any order, a lease may lapse while its
//! handler still runs (the message is delivered again; the first settlement is refused),
//! an entity's follow-up message may be held back until a newer one of the same entity
//! was applied (so an older message is applied after a newer one), and the runtime
//! poisons a message after its delivery budget.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tablekit_core::random;
use tablekit_workers::queue::{
    ConsumeOptions, Consumer, Delivery, PoisonAction, PoisonMessage, Queue, QueueOptions,
    QueueStats, Received,
};
use tablekit_workers::{Error, Result};
use tokio::time::Instant;

/// How likely each queue fault is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueFaults {
    /// A sent message is stored twice.
    pub duplicate: f64,
    /// A sent message becomes visible only after a delay of up to `max_delay`.
    pub delay: f64,
    /// The longest delay.
    pub max_delay: Duration,
    /// A delivery's lease is a few milliseconds instead of the consumer's.
    pub short_lease: f64,
    /// A sent message of an entity's follow-up work is held back until a message of the
    /// same entity sent after it was settled (released at the latest when the faults
    /// stop): an older message applied after a newer one.
    pub hold_back: f64,
    /// A delivery of an entity's follow-up work stalls at its first write until a
    /// message of the same entity sent after it was settled (see [`crate::stall`]): an
    /// older message's writes, from reads before the newer write, after the newer work.
    pub stall: f64,
}

impl QueueFaults {
    /// No faults.
    pub const NONE: QueueFaults = QueueFaults {
        duplicate: 0.0,
        delay: 0.0,
        max_delay: Duration::ZERO,
        short_lease: 0.0,
        hold_back: 0.0,
        stall: 0.0,
    };
}

/// The entity a message's work is about, for [`QueueFaults::hold_back`]: the source of
/// the first operation of a write's follow-up work (`index` messages), else none.
fn subject(body: &[u8]) -> Option<String> {
    let envelope = tablekit_patterns::consistency::Envelope::from_bytes(body).ok()?;
    if envelope.kind != "index" {
        return None;
    }
    let source = envelope
        .payload
        .get("operations")?
        .as_array()?
        .iter()
        .find_map(|op| op.get("source"))?;
    Some(source.to_string())
}

struct Message {
    id: String,
    body: Vec<u8>,
    visible_at: Instant,
    deliveries: u32,
    /// The lease token of the delivery that holds it.
    lease: Option<u64>,
    /// Held back until a newer message of this entity (this subject) was settled.
    held_for: Option<String>,
}

#[derive(Default)]
struct Lane {
    messages: BTreeMap<u64, Message>,
    poison: Vec<PoisonMessage>,
    /// The latest message settled of each entity (subject): its key.
    settled: BTreeMap<String, u64>,
}

#[derive(Default)]
struct State {
    lanes: BTreeMap<String, Lane>,
    next: u64,
    faults: Option<QueueFaults>,
    stopped: bool,
    /// Queue faults injected, by kind: duplicates, delays, short leases, hold-backs,
    /// stalls.
    injected: [u64; 5],
    log: Vec<String>,
}

/// The simulated queue; clones share it.
#[derive(Clone, Default)]
pub struct SimQueue {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for SimQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SimQueue")
    }
}

fn chance(p: f64) -> bool {
    p > 0.0 && random::between(0.0, 1.0) < p
}

impl SimQueue {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Turns faults on or off; turned off, every message held back is released.
    pub fn set_faults(&self, faults: Option<QueueFaults>) {
        let mut state = self.state();
        state.faults = faults;
        if faults.is_none() {
            let now = Instant::now();
            for lane in state.lanes.values_mut() {
                for m in lane.messages.values_mut() {
                    if m.held_for.take().is_some() {
                        m.visible_at = now;
                    }
                }
            }
        }
    }

    /// Ends every consumer's `next` with `None`.
    pub fn stop(&self) {
        self.state().stopped = true;
    }

    /// Faults injected so far: duplicates, delays, short leases, hold-backs, stalls.
    pub fn injected(&self) -> [u64; 5] {
        self.state().injected
    }

    /// Whether a message of `subject` sent after the message at `key` was settled in
    /// `queue` — or the faults stopped.
    pub(crate) fn settled_after(&self, queue: &str, subject: &str, key: u64) -> bool {
        let state = self.state();
        state.faults.is_none()
            || state
                .lanes
                .get(queue)
                .and_then(|lane| lane.settled.get(subject))
                .is_some_and(|&settled| settled > key)
    }

    /// Whether `delivery` stalls at its first write (a seeded fault), and until what.
    pub fn stall(&self, delivery: &SimDelivery) -> Option<crate::stall::Stall> {
        let subject = subject(&delivery.received.body)?;
        let mut state = self.state();
        let faults = state.faults?;
        if !chance(faults.stall) {
            return None;
        }
        state.injected[4] += 1;
        state.log.push(format!(
            "stall {}/{} at its first write",
            delivery.name, delivery.received.id
        ));
        Some(crate::stall::Stall {
            queue: self.clone(),
            lane: delivery.name.clone(),
            subject,
            key: delivery.key,
            until: Instant::now() + crate::stall::LONGEST_STALL,
        })
    }

    /// Takes the faults injected since the last call, one line each.
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut self.state().log)
    }

    /// Messages waiting or leased in `queue`.
    pub fn pending(&self, queue: &str) -> usize {
        self.state()
            .lanes
            .get(queue)
            .map_or(0, |l| l.messages.len())
    }

    /// Messages waiting or leased in every queue.
    pub fn pending_total(&self) -> usize {
        self.state().lanes.values().map(|l| l.messages.len()).sum()
    }

    /// The poisoned messages of every queue: (queue, id, reason).
    pub fn poisoned(&self) -> Vec<(String, String, String)> {
        let state = self.state();
        state
            .lanes
            .iter()
            .flat_map(|(name, lane)| {
                lane.poison
                    .iter()
                    .map(|p| (name.clone(), p.id.clone(), p.reason.clone()))
            })
            .collect()
    }

    fn settle(
        &self,
        queue: &str,
        key: u64,
        lease: u64,
        then: impl FnOnce(&mut Lane, u64),
    ) -> Result<()> {
        let mut state = self.state();
        let lane = state.lanes.entry(queue.to_owned()).or_default();
        match lane.messages.get(&key) {
            Some(m) if m.lease == Some(lease) && m.visible_at > Instant::now() => {
                then(lane, key);
                Ok(())
            }
            _ => Err(Error::Refused {
                message: "the delivery's lease lapsed; the message comes back".into(),
                source: None,
            }),
        }
    }
}

impl Queue for SimQueue {
    type Consumer = SimConsumer;
    type Delivery = SimDelivery;

    async fn declare(&self, queue: &str, _options: &QueueOptions) -> Result<()> {
        self.state().lanes.entry(queue.to_owned()).or_default();
        Ok(())
    }

    async fn send(&self, queue: &str, id: &str, body: &[u8]) -> Result<()> {
        let mut state = self.state();
        let faults = state.faults.unwrap_or(QueueFaults::NONE);
        // One message of an entity held back at a time, so a newer one can release it.
        let held_for = subject(body).filter(|subject| {
            chance(faults.hold_back)
                && !state.lanes.get(queue).is_some_and(|lane| {
                    lane.messages
                        .values()
                        .any(|m| m.held_for.as_ref() == Some(subject))
                })
        });
        if held_for.is_some() {
            state.injected[3] += 1;
            state.log.push(format!("hold back {queue}/{id}"));
        }
        let copies = if chance(faults.duplicate) {
            state.injected[0] += 1;
            state.log.push(format!("duplicate {queue}/{id}"));
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = if chance(faults.delay) {
                state.injected[1] += 1;
                state.log.push(format!("delay {queue}/{id}"));
                random::up_to(faults.max_delay)
            } else {
                Duration::ZERO
            };
            let key = state.next;
            state.next += 1;
            state
                .lanes
                .entry(queue.to_owned())
                .or_default()
                .messages
                .insert(
                    key,
                    Message {
                        id: id.to_owned(),
                        body: body.to_vec(),
                        visible_at: Instant::now() + delay,
                        deliveries: 0,
                        lease: None,
                        held_for: held_for.clone(),
                    },
                );
        }
        Ok(())
    }

    async fn consume(&self, queue: &str, options: ConsumeOptions) -> Result<SimConsumer> {
        Ok(SimConsumer {
            queue: self.clone(),
            name: queue.to_owned(),
            lease: options.lease,
        })
    }

    async fn poison_list(&self, queue: &str, limit: usize) -> Result<Vec<PoisonMessage>> {
        let state = self.state();
        Ok(state
            .lanes
            .get(queue)
            .map(|l| l.poison.iter().take(limit).cloned().collect())
            .unwrap_or_default())
    }

    async fn poison_replay(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        let poisoned: Vec<PoisonMessage> = {
            let mut state = self.state();
            let lane = state.lanes.entry(queue.to_owned()).or_default();
            let (back, keep) = lane
                .poison
                .drain(..)
                .partition(|p| id.is_none_or(|id| p.id == id));
            lane.poison = keep;
            back
        };
        for p in &poisoned {
            self.send(queue, &p.id, &p.body).await?;
        }
        Ok(poisoned.len())
    }

    async fn poison_take(
        &self,
        queue: &str,
        handles: &[String],
        action: &PoisonAction,
    ) -> Result<Vec<String>> {
        let taken: Vec<PoisonMessage> = {
            let mut state = self.state();
            let lane = state.lanes.entry(queue.to_owned()).or_default();
            let (taken, keep) = lane
                .poison
                .drain(..)
                .partition(|p| handles.contains(&p.handle));
            lane.poison = keep;
            taken
        };
        let target = match action {
            PoisonAction::Replay => Some(queue),
            PoisonAction::ReplayTo(target) => Some(target.as_str()),
            _ => None,
        };
        if let Some(target) = target {
            for p in &taken {
                self.send(target, &p.id, &p.body).await?;
            }
        }
        Ok(taken.into_iter().map(|p| p.handle).collect())
    }

    async fn poison_discard(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        let mut state = self.state();
        let lane = state.lanes.entry(queue.to_owned()).or_default();
        let before = lane.poison.len();
        lane.poison.retain(|p| id.is_some_and(|id| p.id != id));
        Ok(before - lane.poison.len())
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        let state = self.state();
        let now = Instant::now();
        Ok(state
            .lanes
            .get(queue)
            .map_or_else(QueueStats::default, |l| {
                let leased = l
                    .messages
                    .values()
                    .filter(|m| m.lease.is_some() && m.visible_at > now)
                    .count() as u64;
                QueueStats {
                    waiting: l.messages.len() as u64 - leased,
                    leased,
                    poisoned: l.poison.len() as u64,
                    ..QueueStats::default()
                }
            }))
    }
}

/// A consumer of one simulated queue.
pub struct SimConsumer {
    queue: SimQueue,
    name: String,
    lease: Duration,
}

/// How often an idle consumer looks again.
const IDLE: Duration = Duration::from_millis(100);

impl Consumer for SimConsumer {
    type Delivery = SimDelivery;

    async fn next(&mut self) -> Result<Option<SimDelivery>> {
        loop {
            {
                let mut state = self.queue.state();
                if state.stopped {
                    return Ok(None);
                }
                let faults = state.faults.unwrap_or(QueueFaults::NONE);
                let now = Instant::now();
                let visible: Vec<u64> = state
                    .lanes
                    .get(&self.name)
                    .map(|l| {
                        l.messages
                            .iter()
                            .filter(|(_, m)| m.visible_at <= now && m.held_for.is_none())
                            .map(|(k, _)| *k)
                            .collect()
                    })
                    .unwrap_or_default();
                if !visible.is_empty() {
                    let key = visible[(random::u64() % visible.len() as u64) as usize];
                    let lease = if chance(faults.short_lease) {
                        state.injected[2] += 1;
                        Duration::from_millis(1 + random::u64() % 20)
                    } else {
                        self.lease
                    };
                    let token = state.next;
                    state.next += 1;
                    let name = self.name.clone();
                    let lane = state.lanes.entry(name).or_default();
                    let Some(m) = lane.messages.get_mut(&key) else {
                        continue;
                    };
                    m.deliveries += 1;
                    m.lease = Some(token);
                    m.visible_at = now + lease;
                    let received = Received {
                        id: m.id.clone(),
                        body: m.body.clone(),
                        delivery_count: m.deliveries,
                        sent_at: None,
                    };
                    if lease < self.lease {
                        let line = format!("short lease {}/{}", self.name, m.id);
                        state.log.push(line);
                    }
                    return Ok(Some(SimDelivery {
                        queue: self.queue.clone(),
                        name: self.name.clone(),
                        key,
                        token,
                        received,
                        lease_ends: now + lease,
                    }));
                }
            }
            tokio::time::sleep(IDLE).await;
        }
    }

    async fn close(self) {}
}

/// One delivery of a simulated queue.
pub struct SimDelivery {
    queue: SimQueue,
    name: String,
    key: u64,
    token: u64,
    received: Received,
    /// When its lease (perhaps a short one: a fault) ends.
    lease_ends: Instant,
}

impl Delivery for SimDelivery {
    fn received(&self) -> &Received {
        &self.received
    }

    fn lease_ends(&self) -> Option<Instant> {
        Some(self.lease_ends)
    }

    async fn ack(self) -> Result<()> {
        self.queue
            .settle(&self.name, self.key, self.token, |lane, key| {
                let Some(settled) = lane.messages.remove(&key) else {
                    return;
                };
                // A message of the same entity sent before this one, held back, comes
                // now: after the newer work was applied.
                let Some(subject) = subject(&settled.body) else {
                    return;
                };
                let latest = lane.settled.entry(subject.clone()).or_default();
                *latest = (*latest).max(key);
                let now = Instant::now();
                for (_, m) in lane.messages.range_mut(..key) {
                    if m.held_for.as_ref() == Some(&subject) {
                        m.held_for = None;
                        m.visible_at = now;
                    }
                }
            })
    }

    /// As the SQLite queue and Azure Queue Storage do: a retry whose lease lapsed sends
    /// the message again (another delivery may have settled it before this one's
    /// half-done writes).
    async fn retry(self, delay: Duration) -> Result<()> {
        let settled = self
            .queue
            .settle(&self.name, self.key, self.token, |lane, key| {
                if let Some(m) = lane.messages.get_mut(&key) {
                    m.lease = None;
                    m.visible_at = Instant::now() + delay;
                }
            });
        if settled.is_ok() {
            return Ok(());
        }
        let mut state = self.queue.state();
        state.log.push(format!(
            "retry after the lease lapsed sends {}/{} again",
            self.name, self.received.id
        ));
        let key = state.next;
        state.next += 1;
        state
            .lanes
            .entry(self.name.clone())
            .or_default()
            .messages
            .insert(
                key,
                Message {
                    id: self.received.id.clone(),
                    body: self.received.body.clone(),
                    visible_at: Instant::now() + delay,
                    deliveries: self.received.delivery_count,
                    lease: None,
                    held_for: None,
                },
            );
        Ok(())
    }

    async fn poison(self, reason: &str) -> Result<()> {
        let count = self.received.delivery_count;
        self.queue
            .settle(&self.name, self.key, self.token, |lane, key| {
                if let Some(m) = lane.messages.remove(&key) {
                    let mut poisoned = PoisonMessage::new(
                        m.id,
                        m.body,
                        reason,
                        count,
                        Some(tablekit_core::clock::now()),
                    );
                    // The message's key names this one poisoning, whatever its id repeats.
                    poisoned.handle = format!("k{key}");
                    lane.poison.push(poisoned);
                }
            })
    }
}

impl std::fmt::Debug for SimDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimDelivery({}/{})", self.name, self.received.id)
    }
}
