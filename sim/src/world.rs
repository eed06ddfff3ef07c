//! The simulated world: its processes, the run (faults, then a drain), and the checks.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tablekit_core::IfMatch;
use tablekit_core::blob::BlobStore;
use tablekit_core::clock::{Clock, SharedClock};
use tablekit_core::fault::{ChaosStore, FaultRates};
use tablekit_core::typed::TypedWrite;
use tablekit_core::{AnyStore, ErrorKind, MemoryStore, Query, TableStore, random};
use tablekit_patterns::consistency::{Engine, OutboxSink, Relay};
use tablekit_patterns::index::unique::Reservation;
use tablekit_patterns::index::{AuditOptions, IndexedTable, Sweeper};
use tablekit_workers::archive::{ArchiveOperation, Archiver};
use tablekit_workers::changes::Changes;
use tablekit_workers::index::QueueSink;
use tablekit_workers::queue::{ConsumeOptions, Consumer, Delivery, Queue};
use tablekit_workers::{Envelope, Registry, WorkerConfig, handle_delivery};

mod backing;
mod documents;
mod fence;
mod migration;

use crate::entities::{Badge, LegacyMember, Member};
use crate::exec::{self, Factory, Observer, Spawner};
use crate::model::{Answer, Effect, Key, Model};
use crate::queue::{QueueFaults, SimQueue};

/// A change event consumed: the entity's key, the event's version, and the `rev` written
/// (`None` for a delete).
type Event = (Key, i64, Option<i64>);

/// Where the simulated world keeps its tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// The memory store: the run replays exactly.
    Memory,
    /// A SQLite file at this path (a soak: its threads make the run not replay exactly).
    Sqlite(std::path::PathBuf),
}

/// How a simulation runs.
#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub store: StoreKind,
    /// Writer processes.
    pub writers: usize,
    /// Operations each writer issues.
    pub ops_per_writer: usize,
}

impl Options {
    /// The standard world for `seed`.
    pub fn new(seed: u64) -> Self {
        Options {
            seed,
            store: StoreKind::Memory,
            writers: 4,
            ops_per_writer: 30,
        }
    }
}

/// What a run found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub seed: u64,
    /// Every step worth replaying: operations and answers, faults, crashes.
    pub trace: Vec<String>,
    /// Faults injected (store and queue; delays not counted).
    pub faults: u64,
    /// Writes issued.
    pub writes: usize,
    /// What the invariants found wrong.
    pub violations: Vec<String>,
    /// The relays' publishes of outbox entries.
    pub relay_publishes: u64,
    /// Of those, publishes of an entry a relay had published before (after a crash, a
    /// stall past the fence, or a removal that failed).
    pub republished: u64,
}

impl Report {
    /// The last `n` lines of the trace and the violations, for a failing run.
    pub fn summary(&self, n: usize) -> String {
        let skip = self.trace.len().saturating_sub(n);
        let mut text = format!(
            "seed {} ({} writes, {} faults): {} violation(s)\n",
            self.seed,
            self.writes,
            self.faults,
            self.violations.len()
        );
        for v in &self.violations {
            text.push_str(&format!("  VIOLATION {v}\n"));
        }
        text.push_str(&format!("last {} trace lines:\n", self.trace.len() - skip));
        for line in &self.trace[skip..] {
            text.push_str(&format!("  {line}\n"));
        }
        text.push_str(&format!("replay: TABLEKIT_SIM_SEED={} cargo test -p tablekit-sim --test simulation replay -- --nocapture\n", self.seed));
        text
    }
}

/// The simulated clock: the paused Tokio clock from a fixed start, a microsecond further
/// at every reading (a real clock never stands still), plus the jumps of the run.
/// Once the run has drained it stops (see [`SimClock::freeze`]).
#[derive(Debug)]
struct SimClock {
    base: DateTime<Utc>,
    start: tokio::time::Instant,
    ticks: std::sync::atomic::AtomicI64,
    frozen: std::sync::Mutex<Option<DateTime<Utc>>>,
}

impl SimClock {
    /// Stops the clock for the checks: over SQLite the paused Tokio clock moves on while
    /// a blocking call is in flight, and an entity expiring (or a background pass
    /// starting) in the middle of the checks is not something the run did.
    fn freeze(&self) {
        let now = self.now();
        if let Ok(mut frozen) = self.frozen.lock() {
            *frozen = Some(now);
        }
    }
}

impl Clock for SimClock {
    fn now(&self) -> DateTime<Utc> {
        if let Some(at) = self.frozen.lock().ok().and_then(|f| *f) {
            return at;
        }
        let ticks = self.ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let elapsed = chrono::Duration::from_std(self.start.elapsed()).unwrap_or_default();
        self.base + elapsed + chrono::Duration::microseconds(ticks)
    }
}

type Store = ChaosStore<backing::Backing>;

const FAULTS: FaultRates = FaultRates {
    before_write: 0.02,
    lost_answer: 0.03,
    failed_read: 0.01,
    latency: 0.3,
    max_latency: Duration::from_millis(30),
    crash: 0.004,
};

const QUEUE_FAULTS: QueueFaults = QueueFaults {
    duplicate: 0.1,
    delay: 0.1,
    max_delay: Duration::from_secs(3),
    short_lease: 0.05,
};

const TEAMS: [&str; 2] = ["t0", "t1"];
const IDS: u32 = 5;
const EMAILS: u32 = 8;
const ARCHIVE: &str = "MembersArchive";

/// Everything the processes share.
struct World {
    chaos: Store,
    blobs: BlobStore,
    queue: SimQueue,
    clock: SharedClock,
    sim_clock: Arc<SimClock>,
    model: RefCell<Model>,
    trace: RefCell<Vec<String>>,
    next_rev: Cell<i64>,
    writers_left: Cell<usize>,
    stopping: Cell<bool>,
    /// Background passes and deliveries under way: the drain ends only between them.
    busy: Cell<usize>,
    /// What is under way (for the trace of a drain that does not end).
    under_way: RefCell<Vec<&'static str>>,
    /// Set by the director while it checks that the system drained: periodic passes
    /// wait before they start.
    held: Cell<bool>,
    options: Options,
    /// Operations each writer started (kept across its crashes: the workload is fixed).
    started: RefCell<std::collections::HashMap<usize, usize>>,
    /// What the sinks published, for the trace.
    published: Arc<std::sync::Mutex<Vec<String>>>,
    /// The change events consumed: (key, version, rev or `None` for a delete).
    events: Arc<std::sync::Mutex<Vec<Event>>>,
    /// The relays' publishes made without their share's lease (see [`fence`]).
    unfenced: Arc<std::sync::Mutex<Vec<String>>>,
    /// How often the relays published each entry (by its operation's id).
    relay_published: Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>>,
}

/// A background pass or delivery under way (see [`World::busy`]); a crash drops it.
struct Busy<'a>(&'a World, &'static str);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.busy.set(self.0.busy.get().saturating_sub(1));
        let mut under_way = self.0.under_way.borrow_mut();
        if let Some(at) = under_way.iter().position(|w| *w == self.1) {
            under_way.remove(at);
        }
    }
}

impl World {
    /// Marks a background pass or delivery under way until the guard drops.
    fn busy(&self, what: &'static str) -> Busy<'_> {
        self.busy.set(self.busy.get() + 1);
        self.under_way.borrow_mut().push(what);
        Busy(self, what)
    }

    /// Waits while the director holds new periodic passes (see `direct`), then marks
    /// one under way.
    async fn pass(&self, what: &'static str) -> Busy<'_> {
        while self.held.get() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.busy(what)
    }

    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    fn log(&self, line: String) {
        let ms = tokio::time::Instant::now()
            .duration_since(self.start_instant())
            .as_millis();
        self.trace.borrow_mut().push(format!("{ms:>8} {line}"));
    }

    fn start_instant(&self) -> tokio::time::Instant {
        START
            .with(|s| s.get())
            .unwrap_or_else(tokio::time::Instant::now)
    }

    fn rev(&self) -> i64 {
        let rev = self.next_rev.get() + 1;
        self.next_rev.set(rev);
        rev
    }

    async fn engine(&self, store: &Store) -> Engine<Store> {
        // Tombstones stay past the longest a plan may wait (30 s) plus a request (30 s).
        let engine = Engine::new(store.clone()).with_tombstone_grace(Duration::from_secs(120));
        match self.sink().await {
            Some(sink) => engine.with_sink(sink),
            None => engine,
        }
    }

    /// The queue sink, noting in the trace what it publishes.
    async fn sink(&self) -> Option<Arc<dyn OutboxSink>> {
        let sink = QueueSink::open(self.queue.clone(), "index").await.ok()?;
        Some(Arc::new(TracedSink {
            inner: sink,
            log: self.published.clone(),
        }))
    }
}

/// A sink that notes each publish for the trace.
struct TracedSink {
    inner: QueueSink<SimQueue>,
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

impl OutboxSink for TracedSink {
    fn publish<'a>(
        &'a self,
        envelope: &'a tablekit_patterns::consistency::Envelope,
    ) -> tablekit_patterns::consistency::BoxFuture<'a, tablekit_patterns::Result<()>> {
        Box::pin(async move {
            let result = self.inner.publish(envelope).await;
            if let (Ok(bytes), Ok(mut log)) = (envelope.to_bytes(), self.log.lock()) {
                log.push(format!(
                    "publish {}{}",
                    describe(&bytes),
                    if result.is_ok() { "" } else { " FAILED" }
                ));
            }
            result
        })
    }
}

thread_local! {
    static START: Cell<Option<tokio::time::Instant>> = const { Cell::new(None) };
}

struct Tracer<'a>(&'a World);

impl Observer for Tracer<'_> {
    fn polled(&self, task: &str) {
        for line in self.0.chaos.take_log() {
            self.0.log(format!("{task}: fault {line}"));
        }
        for line in self.0.queue.take_log() {
            self.0.log(format!("{task}: queue {line}"));
        }
        let published = self.0.published.lock().map(|mut p| std::mem::take(&mut *p));
        for line in published.unwrap_or_default() {
            self.0.log(format!("{task}: {line}"));
        }
    }

    fn crashed(&self, task: &str) {
        self.0.log(format!("{task}: CRASHED, restarts"));
    }
}

/// Runs one simulation (on a thread of its own: every task runs on it, with a stack deep
/// enough for the unoptimised futures of a debug build).
pub fn simulate(options: Options) -> Report {
    let seed = options.seed;
    let run = std::thread::Builder::new()
        .name(format!("simulation-{seed}"))
        .stack_size(256 * 1024 * 1024)
        .spawn(move || simulate_here(options));
    match run.map(std::thread::JoinHandle::join) {
        Ok(Ok(report)) => report,
        Ok(Err(panic)) => Report {
            seed,
            violations: vec![format!(
                "the simulation panicked: {}",
                panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)")
            )],
            ..Report::default()
        },
        Err(e) => Report {
            seed,
            violations: vec![format!("no thread for the simulation: {e}")],
            ..Report::default()
        },
    }
}

fn simulate_here(options: Options) -> Report {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            return Report {
                seed: options.seed,
                violations: vec![format!("no runtime: {e}")],
                ..Report::default()
            };
        }
    };
    let _seeded = random::seed(options.seed);
    runtime.block_on(run(options))
}

async fn run(options: Options) -> Report {
    START.with(|s| s.set(Some(tokio::time::Instant::now())));
    let sim_clock = Arc::new(SimClock {
        base: DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default(),
        start: tokio::time::Instant::now(),
        ticks: Default::default(),
        frozen: std::sync::Mutex::new(None),
    });
    let clock: SharedClock = sim_clock.clone();
    let _clock = tablekit_core::clock::simulate(clock.clone());
    let base = match &options.store {
        StoreKind::Memory => AnyStore::Memory(MemoryStore::new()),
        StoreKind::Sqlite(path) => match tablekit_core::SqliteStore::open(path).await {
            Ok(store) => AnyStore::Sqlite(store),
            Err(e) => {
                return Report {
                    seed: options.seed,
                    violations: vec![format!("cannot open {}: {e}", path.display())],
                    ..Report::default()
                };
            }
        },
    };
    let world = Rc::new(World {
        chaos: ChaosStore::new(backing::Backing(base, clock.clone())),
        blobs: BlobStore::memory(),
        queue: SimQueue::default(),
        clock,
        sim_clock,
        model: RefCell::default(),
        trace: RefCell::default(),
        next_rev: Cell::new(0),
        writers_left: Cell::new(options.writers),
        stopping: Cell::new(false),
        busy: Cell::new(0),
        under_way: RefCell::default(),
        held: Cell::new(false),
        options: options.clone(),
        started: RefCell::default(),
        published: Arc::default(),
        events: Arc::default(),
        unfenced: Arc::default(),
        relay_published: Arc::default(),
    });
    let mut violations = Vec::new();
    CHECKED.with(|c| c.take());
    if let Err(e) = setup(&world).await {
        violations.push(format!("setup failed: {e}"));
    } else {
        let spawner = Spawner::default();
        let main = {
            let world = world.clone();
            let spawner = spawner.clone();
            async move {
                let found = direct(&world, &spawner).await;
                world
                    .trace
                    .borrow_mut()
                    .push(format!("checks: {} violation(s)", found.len()));
                *CHECKED.with(|c| c.clone()).borrow_mut() = found;
            }
        };
        let tracer = Tracer(&world);
        exec::run(spawner, main, &tracer).await;
        violations.extend(CHECKED.with(|c| c.take()));
    }
    let counts = world.chaos.counts();
    let queue = world.queue.injected();
    let writes = world.model.borrow().writes.len();
    let (relay_publishes, republished) = world
        .relay_published
        .lock()
        .map(|p| {
            let all: u64 = p.values().sum();
            (all, all - p.len() as u64)
        })
        .unwrap_or_default();
    Report {
        seed: options.seed,
        trace: world.trace.take(),
        faults: counts.total() + queue.iter().sum::<u64>(),
        writes,
        violations,
        relay_publishes,
        republished,
    }
}

thread_local! {
    static CHECKED: Rc<RefCell<Vec<String>>> = Rc::default();
}

async fn setup(world: &World) -> tablekit_patterns::Result<()> {
    let store = world.chaos.clone();
    let engine = world.engine(&store).await;
    IndexedTable::<Member, _>::new(store.clone())
        .with_engine(engine.clone())
        .with_blobs(world.blobs.clone())
        .open()
        .await?;
    IndexedTable::<Badge, _>::new(store.clone())
        .with_engine(engine.clone())
        .with_blobs(world.blobs.clone())
        .open()
        .await?;
    documents::documents(world, &store, &engine).open().await?;
    for queue in ["index", "archive", "member-changes", "badge-changes"] {
        world
            .queue
            .declare(queue, &WorkerConfig::new(queue).queue_options())
            .await
            .map_err(|e| tablekit_patterns::Error::Publish(Box::new(e)))?;
    }
    Ok(())
}

fn members(world: &World, store: &Store, engine: &Engine<Store>) -> IndexedTable<Member, Store> {
    IndexedTable::new(store.clone())
        .with_engine(engine.clone())
        .with_blobs(world.blobs.clone())
}

fn badges(world: &World, store: &Store, engine: &Engine<Store>) -> IndexedTable<Badge, Store> {
    IndexedTable::new(store.clone())
        .with_engine(engine.clone())
        .with_blobs(world.blobs.clone())
}

/// A process whose body `body(world, store)` gets its own crashable store handle.
fn process<F, Fut>(world: &Rc<World>, body: F) -> Factory
where
    F: Fn(Rc<World>, Store, u32) -> Fut + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let world = world.clone();
    let body = Rc::new(body);
    Rc::new(move |life| {
        let (store, crash) = world.chaos.process();
        let (world, body) = (world.clone(), body.clone());
        let future = async move {
            if life > 0 {
                // A restarted process comes back after a while.
                tokio::time::sleep(Duration::from_millis(200 + random::u64() % 800)).await;
            }
            body(world, store, life).await;
        };
        (
            Box::pin(future) as std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>,
            Some(crash),
        )
    })
}

/// The director: starts every process, runs the workload under faults, then drains and
/// checks.
async fn direct(world: &Rc<World>, spawner: &Spawner) -> Vec<String> {
    world.chaos.set_rates(Some(FAULTS));
    world.queue.set_faults(Some(QUEUE_FAULTS));
    for n in 0..world.options.writers {
        spawner.spawn_process(
            format!("writer{n}"),
            process(world, move |w, s, _| writer(w, s, n)),
        );
    }
    for n in 0..2 {
        spawner.spawn_process(
            format!("index-worker{n}"),
            process(world, |w, s, _| index_worker(w, s)),
        );
    }
    spawner.spawn_process(
        "archive-worker",
        process(world, |w, s, _| archive_worker(w, s)),
    );
    spawner.spawn_process(
        "member-changes",
        process(world, |w, s, _| change_consumer::<Member>(w, s)),
    );
    spawner.spawn_process(
        "badge-changes",
        process(world, |w, s, _| change_consumer::<Badge>(w, s)),
    );
    // Two relays divide the pending partitions by leased shares; a crashed one comes
    // back under its id (and takes its shares back), or the other takes them over once
    // their lease ends.
    for n in 0..2 {
        spawner.spawn_process(
            format!("relay{n}"),
            process(world, move |w, s, _| relay(w, s, n)),
        );
    }
    spawner.spawn_process("sweeper", process(world, |w, s, _| sweeper(w, s)));
    spawner.spawn_process("auditor", process(world, |w, s, _| auditor(w, s)));
    spawner.spawn_process(
        "migrator",
        process(world, |w, s, _| migration::migrator(w, s)),
    );

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

    // Faults stop; everything drains: the relay, workers, sweeper, leases lapse.
    world.log("director: faults stop, draining".into());
    world.chaos.set_rates(None);
    world.queue.set_faults(None);
    // The director sweeps too, each round: drained means the sweeper found nothing left
    // to delete (over SQLite a sweeper pass can outlast the quiet rounds).
    let sweeper = {
        let store = world.chaos.clone();
        let engine = world.engine(&store).await;
        Sweeper::new(store)
            .with_engine(engine)
            .with_blobs(world.blobs.clone())
    };
    // The drain lasts 400 rounds, and at least as long (in the simulation's time) as an
    // entity written at the end of the workload takes to expire, be swept and have its
    // tombstone buried: a badge lives an hour, a tombstone five minutes, a marker one
    // more. Over SQLite the rounds are longer than 5 s (the paused clock moves on while
    // the store's thread works), so expiries fall inside the drain and keep it busy
    // until they are done.
    let patience = Duration::from_secs(75 * 60);
    let draining = tokio::time::Instant::now();
    let mut quiet = 0;
    let mut rounds = 0;
    while quiet < 3 && (rounds < 400 || draining.elapsed() < patience) && rounds < 4_000 {
        tokio::time::sleep(Duration::from_secs(5)).await;
        rounds += 1;
        let swept_at = world.now();
        let swept = sweeper.sweep().await.map(|r| r.deleted);
        let orphans = documents::sweep(world, &world.chaos).await;
        let backlog = tablekit_patterns::consistency::backlog(world.chaos.inner()).await;
        // Read last, with no await after it: no pass or delivery is under way when the
        // drain ends and the processes stop.
        let workless =
            |backlog: &tablekit_patterns::Result<tablekit_patterns::consistency::Backlog>| {
                world.queue.pending_total() == 0
                    && backlog
                        .as_ref()
                        .is_ok_and(|b| b.entries == 0 && b.markers == 0)
            };
        let mut idle = swept.as_ref().is_ok_and(|deleted| *deleted == 0)
            && orphans.as_ref().is_ok_and(|deleted| *deleted == 0)
            && workless(&backlog);
        if idle && world.busy.get() > 0 {
            // Nothing to do, but a periodic pass is under way (over SQLite a pass spans
            // the paused clock's jumps, so one is often under way at any instant): hold
            // new passes, let the ones under way end, and look again.
            world.held.set(true);
            for _ in 0..3_000 {
                if world.busy.get() == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let again = tablekit_patterns::consistency::backlog(world.chaos.inner()).await;
            // Time passed while the passes ended (a stalled relay's pass lasts up to 25
            // s): what expired meanwhile is the next round's to sweep.
            let waited =
                world.busy.get() > 0 || world.now() > swept_at + chrono::Duration::seconds(1);
            idle = workless(&again) && !waited;
        }
        // Read last, with no await after it: no pass or delivery is under way when the
        // drain ends and the processes stop.
        idle = idle && world.busy.get() == 0;
        quiet = if idle { quiet + 1 } else { 0 };
        // Passes stay held once the drain ends.
        if quiet < 3 {
            world.held.set(false);
        }
        if !idle && rounds % 50 == 0 {
            // What keeps the drain going, for the trace of a seed that does not drain.
            world.log(format!(
                "director: round {rounds} not quiet: swept {swept:?}, orphans {orphans:?}, \
                 queued {}, backlog {:?}, under way {:?}",
                world.queue.pending_total(),
                backlog.as_ref().map(|b| (b.entries, b.markers, b.delayed)),
                world.under_way.borrow()
            ));
        }
    }
    world.stopping.set(true);
    world.queue.stop();
    world.sim_clock.freeze();
    world.log(format!("director: drained after {rounds} rounds"));
    let mut found = Vec::new();
    if quiet < 3 {
        found.push(format!(
            "the system did not drain in {rounds} rounds ({} min)",
            draining.elapsed().as_secs() / 60
        ));
    }
    found.extend(check(world).await);
    found
}

async fn request_archive(world: &World) -> bool {
    let team = TEAMS[(random::u64() % 2) as usize];
    let id = (random::u64() % u64::from(IDS)) as u32;
    let key: Key = ("Member", team.to_owned(), format!("m_{id:02}"));
    {
        let model = world.model.borrow();
        if model.archived.contains(&key) || model.in_flight(&key) {
            return false;
        }
    }
    let op = ArchiveOperation {
        source_table: "Members".into(),
        target_table: ARCHIVE.into(),
        partition_key: key.1.clone(),
        row_key: key.2.clone(),
    };
    let Ok(envelope) = Envelope::new(&op) else {
        return false;
    };
    let Ok(body) = envelope.to_bytes() else {
        return false;
    };
    world.log(format!("director: archive {key:?}"));
    {
        let mut model = world.model.borrow_mut();
        model.archived.push(key.clone());
        model.system_remove(key, "the archive", world.now());
    }
    let _ = world
        .queue
        .send("archive", &envelope.id.to_string(), &body)
        .await;
    true
}

/// A key of `kind` no archive has taken.
fn pick_key(world: &World, kind: &'static str) -> Option<(String, u32)> {
    for _ in 0..10 {
        let team = TEAMS[(random::u64() % 2) as usize].to_owned();
        let id = (random::u64() % u64::from(IDS)) as u32;
        let rk = if kind == "Member" {
            format!("m_{id:02}")
        } else {
            format!("b_{id:02}")
        };
        if !world
            .model
            .borrow()
            .archived
            .contains(&(kind, team.clone(), rk))
        {
            return Some((team, id));
        }
    }
    None
}

fn pick<'a>(choices: &[&'a str]) -> &'a str {
    choices[(random::u64() % choices.len() as u64) as usize]
}

fn member(world: &World, team: String, id: u32) -> Member {
    Member {
        team,
        id,
        nick: pick(&["ann", "bo", "cy", "di"]).to_owned(),
        city: pick(&["Oslo", "Lima", "Pune"]).to_owned(),
        level: (random::u64() % 3) as u32,
        tag: pick(&["red", "blue", "green"]).to_owned(),
        email: format!("e{}", random::u64() % u64::from(EMAILS)),
        rev: world.rev(),
        ends: (random::u64() % 100 < 15)
            .then(|| world.now() + chrono::Duration::minutes((random::u64() % 90) as i64)),
        photo: (random::u64().is_multiple_of(2))
            .then(|| format!("photo {}", world.next_rev.get()).into_bytes()),
    }
}

fn badge(world: &World, team: String, id: u32) -> Badge {
    Badge {
        team,
        id,
        code: pick(&["x", "y", "z"]).to_owned(),
        holder: (random::u64() % u64::from(IDS)) as u32,
        holder_email: None,
        rev: world.rev(),
        note: (random::u64().is_multiple_of(3))
            .then(|| format!("note {}", world.next_rev.get()).into_bytes()),
    }
}

fn answer_of(error: &tablekit_patterns::Error) -> Answer {
    match error.kind() {
        ErrorKind::AlreadyExists | ErrorKind::PreconditionFailed | ErrorKind::NotFound => {
            Answer::Refused(error.to_string())
        }
        _ => Answer::Unknown(error.to_string()),
    }
}

/// One typed entity type the writers write.
trait Written: tablekit_core::typed::EntityType + Clone + Send + Sync + 'static {
    const NAME: &'static str;
    fn make(world: &World, team: String, id: u32) -> Self;
    fn rev(&self) -> i64;
    fn effect(&self) -> Effect;
    /// The effect of a partial update with this value (fields it leaves keep theirs).
    fn updated(&self) -> Effect {
        self.effect()
    }
    fn key_of(id: u32) -> String;
    /// Fields a partial update may set (beside `rev`).
    const FIELDS: &'static [&'static str];
}

impl Written for Member {
    const NAME: &'static str = "Member";
    const FIELDS: &'static [&'static str] = &["nick", "city", "level", "tag", "email", "photo"];
    fn make(world: &World, team: String, id: u32) -> Self {
        member(world, team, id)
    }
    fn rev(&self) -> i64 {
        self.rev
    }
    fn effect(&self) -> Effect {
        member_put(self.rev, self.ends)
    }
    fn updated(&self) -> Effect {
        member_updated(self.rev)
    }
    fn key_of(id: u32) -> String {
        format!("m_{id:02}")
    }
}

/// A member write's effect (either program's).
fn member_put(rev: i64, ends: Option<DateTime<Utc>>) -> Effect {
    Effect::Put {
        rev,
        expires: ends,
        ttl: None,
        unknown_expiry: false,
    }
}

/// A member update's effect: `ends` is not among the fields an update sets, so the
/// stored one stays.
fn member_updated(rev: i64) -> Effect {
    Effect::Put {
        rev,
        expires: None,
        ttl: None,
        unknown_expiry: true,
    }
}

impl Written for Badge {
    const NAME: &'static str = "Badge";
    const FIELDS: &'static [&'static str] = &["code", "holder", "note"];
    fn make(world: &World, team: String, id: u32) -> Self {
        badge(world, team, id)
    }
    fn rev(&self) -> i64 {
        self.rev
    }
    fn effect(&self) -> Effect {
        Effect::Put {
            rev: self.rev,
            expires: None,
            ttl: Some(chrono::Duration::hours(1)),
            unknown_expiry: false,
        }
    }
    fn key_of(id: u32) -> String {
        format!("b_{id:02}")
    }
}

async fn writer(world: Rc<World>, store: Store, n: usize) {
    let engine = world.engine(&store).await;
    let members = members(&world, &store, &engine);
    let badges = badges(&world, &store, &engine);
    let documents = documents::documents(&world, &store, &engine);
    // The last writer still runs the previous program for some of its member writes.
    let legacy = (n + 1 == world.options.writers).then(|| {
        IndexedTable::<LegacyMember, _>::new(store.clone())
            .with_engine(engine.clone())
            .with_blobs(world.blobs.clone())
    });
    loop {
        let done = {
            let mut started = world.started.borrow_mut();
            let count = started.entry(n).or_insert(0);
            *count += 1;
            *count > world.options.ops_per_writer
        };
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(random::u64() % 300)).await;
        match (random::u64() % 10, &legacy) {
            (0..=2, Some(legacy)) => write_one(&world, legacy, n).await,
            (0..=5, _) => write_one(&world, &members, n).await,
            (6..=8, _) => write_one(&world, &badges, n).await,
            _ => documents::write_document(&world, &documents, n).await,
        }
    }
    world.writers_left.set(world.writers_left.get() - 1);
    world.log(format!("writer{n}: done"));
}

async fn write_one<E: Written>(world: &World, table: &IndexedTable<E, Store>, n: usize) {
    let Some((team, id)) = pick_key(world, E::NAME) else {
        return;
    };
    let key: Key = (E::NAME, team.clone(), E::key_of(id));
    if random::u64() % 100 < 15 {
        return write_batch(world, table, n).await;
    }
    let value = E::make(world, team.clone(), id);
    let choice = random::u64() % 100;
    // Conditional writes read the ETag first.
    let etag = if (30..50).contains(&choice) || (60..75).contains(&choice) || choice >= 90 {
        match table.get(&team, &E::key_of(id)).await {
            Ok(Some(stored)) => stored.etag.map(IfMatch::ETag),
            _ => None,
        }
    } else {
        None
    };
    let if_match = etag.clone().unwrap_or(IfMatch::Any);
    let (what, effect) = match choice {
        0..=19 => ("insert", value.effect()),
        20..=39 => ("upsert", value.effect()),
        40..=59 => ("replace", value.effect()),
        60..=79 => ("update", value.updated()),
        _ => ("delete", Effect::Remove),
    };
    let what = format!(
        "writer{n} {what} {key:?} rev {} {}",
        value.rev(),
        if etag.is_some() { "if-match" } else { "any" }
    );
    let at = world
        .model
        .borrow_mut()
        .start(key.clone(), what.clone(), effect, world.now());
    world.log(format!("{what}: start"));
    // An unknown outcome is retried, as the error asks, up to twice.
    let mut answer = Answer::Pending;
    for attempt in 0..3 {
        let result = match choice {
            0..=19 => table.insert(&value).await,
            20..=39 => table.upsert(&value).await,
            40..=59 => table.replace(&value, if_match.clone()).await,
            60..=79 => {
                let mut fields: Vec<&str> = vec!["rev"];
                fields.extend(E::FIELDS.iter().filter(|_| random::u64().is_multiple_of(2)));
                table.update(&value, &fields, if_match.clone()).await
            }
            _ => table.delete(&team, &E::key_of(id), if_match.clone()).await,
        };
        answer = match result {
            Ok(_) => Answer::Ok,
            Err(e) => answer_of(&e),
        };
        if !matches!(answer, Answer::Unknown(_)) || attempt == 2 {
            break;
        }
        world.log(format!("{what}: unknown outcome, retried"));
    }
    world.log(format!("{what}: {answer:?}"));
    world.model.borrow_mut().end(at, answer, world.now());
}

async fn write_batch<E: Written>(world: &World, table: &IndexedTable<E, Store>, n: usize) {
    let mut writes = Vec::new();
    let mut records = Vec::new();
    let mut keys = Vec::new();
    for _ in 0..(2 + random::u64() % 3) {
        let Some((team, id)) = pick_key(world, E::NAME) else {
            continue;
        };
        let key: Key = (E::NAME, team.clone(), E::key_of(id));
        if keys.contains(&key) {
            continue;
        }
        keys.push(key.clone());
        let value = E::make(world, team.clone(), id);
        let (what, effect, write) = match random::u64() % 4 {
            0 => ("insert", value.effect(), TypedWrite::Insert(value.clone())),
            1 => ("upsert", value.effect(), TypedWrite::Upsert(value.clone())),
            2 => (
                "replace",
                value.effect(),
                TypedWrite::Replace(value.clone(), IfMatch::Any),
            ),
            _ => (
                "delete",
                Effect::Remove,
                TypedWrite::Delete {
                    partition_key: team.clone(),
                    row_key: E::key_of(id),
                    if_match: IfMatch::Any,
                },
            ),
        };
        let what = format!("writer{n} batch {what} {key:?} rev {}", value.rev());
        records.push(
            world
                .model
                .borrow_mut()
                .start(key, what, effect, world.now()),
        );
        writes.push(write);
    }
    world.log(format!("writer{n}: write_all of {}", writes.len()));
    let result = table.write_all(writes).await;
    let mut answers = vec![Answer::Unknown("no report".into()); records.len()];
    match result {
        Ok(report) => {
            for (at, _) in &report.written {
                answers[*at] = Answer::Ok;
            }
            for (at, e) in &report.refused {
                answers[*at] = answer_of(e);
            }
            for (ats, e) in &report.failed {
                for at in ats {
                    answers[*at] = Answer::Unknown(e.to_string());
                }
            }
        }
        Err(e) => answers.fill(Answer::Unknown(e.to_string())),
    }
    let now = world.now();
    let mut model = world.model.borrow_mut();
    for (record, answer) in records.into_iter().zip(answers) {
        let what = model.writes[record].what.clone();
        drop(model);
        world.log(format!("{what}: {answer:?}"));
        model = world.model.borrow_mut();
        model.end(record, answer, now);
    }
}

fn worker_config(queue: &str) -> WorkerConfig {
    let mut config = WorkerConfig::new(queue);
    config.max_deliveries = 20;
    config.base_backoff = Duration::from_millis(50);
    config.max_backoff = Duration::from_secs(2);
    config.lease = Duration::from_secs(30);
    config
}

/// Deliveries a simulated worker handles at once, as the worker runtime does (their
/// writes to one partition share transactions: see `CoalescingStore`).
const DELIVERIES_AT_ONCE: usize = 4;

/// Consumes `queue` with the workers' own delivery handling, up to
/// [`DELIVERIES_AT_ONCE`] deliveries at once.
async fn consume(world: &World, queue: &str, registry: &Registry) {
    use futures::StreamExt;
    let config = worker_config(queue);
    let options = ConsumeOptions {
        prefetch: u16::try_from(DELIVERIES_AT_ONCE).unwrap_or(1),
        lease: config.lease,
    };
    let Ok(mut consumer) = world.queue.consume(queue, options).await else {
        return;
    };
    let mut in_flight = futures::stream::FuturesUnordered::new();
    loop {
        // The queue's `next` takes a message only when it returns it: dropping it while
        // a delivery finishes loses nothing.
        let next = if in_flight.len() < DELIVERIES_AT_ONCE {
            tokio::select! {
                biased;
                Some(()) = in_flight.next(), if !in_flight.is_empty() => continue,
                next = consumer.next() => next,
            }
        } else {
            in_flight.next().await;
            continue;
        };
        let Ok(Some(delivery)) = next else {
            break;
        };
        in_flight.push(deliver(world, queue, registry, &config, delivery));
    }
    while in_flight.next().await.is_some() {}
}

/// Handles one delivery and notes how it was settled.
async fn deliver<D: Delivery>(
    world: &World,
    queue: &str,
    registry: &Registry,
    config: &WorkerConfig,
    delivery: D,
) {
    let about = describe(&delivery.received().body);
    let busy = world.busy("a delivery");
    let report = handle_delivery(delivery, registry, config).await;
    drop(busy);
    let how = if report.processed > 0 {
        "processed"
    } else if report.retried > 0 {
        "retried"
    } else if report.poisoned > 0 {
        "poisoned"
    } else {
        "unsettled"
    };
    world.log(format!("{queue}: {about}: {how}"));
    if report.poisoned > 0 {
        world.log(format!("{queue}: a message was poisoned"));
    }
}

/// A delivery in a few words, for the trace: its kind and the keys it touches.
fn describe(body: &[u8]) -> String {
    let Ok(envelope) = Envelope::from_bytes(body) else {
        return "a malformed message".into();
    };
    let mut keys = Vec::new();
    if let Some(ops) = envelope
        .payload
        .get("operations")
        .and_then(|o| o.as_array())
    {
        for op in ops {
            let field = |name: &str| op.get(name).cloned().unwrap_or_default();
            let kind = field("op");
            let source = op
                .get("source")
                .or_else(|| op.get("dependent"))
                .cloned()
                .unwrap_or_default();
            let pk = source
                .get("partition_key")
                .and_then(|v| v.as_str())
                .unwrap_or("?")
                .to_owned();
            let source = source
                .get("row_key")
                .and_then(|v| v.as_str())
                .unwrap_or("?")
                .to_owned();
            // A copy's place (an expiry entry's instant, an index key), else the value.
            // A link's dependent.
            let value = op
                .get("target")
                .or_else(|| op.get("source").and(op.get("dependent")))
                .and_then(|t| t.get("row_key"))
                .cloned()
                .unwrap_or_else(|| field("value"));
            let version = field("version");
            let kind = kind.as_str().unwrap_or("?");
            let value = value.as_str().unwrap_or("");
            keys.push(format!("{kind}({pk}/{source} {value} v{version})"));
        }
    }
    if envelope.kind == "reclaim" {
        // The undoing of a write: its entity, the links and reservations it may have made.
        let rk = |v: &serde_json::Value| {
            v.get("row_key")
                .and_then(|r| r.as_str())
                .unwrap_or("?")
                .to_owned()
        };
        let p = &envelope.payload;
        if let Some(source) = p.get("source") {
            keys.push(format!("of {}", rk(source)));
        }
        for link in p
            .get("links")
            .and_then(|l| l.as_array())
            .into_iter()
            .flatten()
        {
            if let Some(from) = link.get(1) {
                keys.push(format!("link {}", rk(from)));
            }
        }
        for at in p
            .get("reservations")
            .and_then(|r| r.as_array())
            .into_iter()
            .flatten()
        {
            keys.push(format!(
                "reservation {}",
                at.get("partition_key")
                    .and_then(|v| v.as_str())
                    .unwrap_or("?")
            ));
        }
    }
    format!(
        "{} {} [{}]",
        envelope.kind,
        &envelope.id.simple().to_string()[..8],
        keys.join(" ")
    )
}

async fn index_worker(world: Rc<World>, store: Store) {
    let registry =
        tablekit_workers::index::register(Registry::new(), store, Some(world.blobs.clone()));
    consume(&world, "index", &registry).await;
}

async fn archive_worker(world: Rc<World>, store: Store) {
    let engine = world.engine(&store).await;
    let archiver = std::sync::Arc::new(Archiver::new(engine, Some(world.blobs.clone())));
    let registry = Registry::new().register(move |op: ArchiveOperation| {
        let archiver = archiver.clone();
        async move {
            archiver.archive(&op).await?;
            Ok(())
        }
    });
    consume(&world, "archive", &registry).await;
}

async fn change_consumer<E: Written>(world: Rc<World>, _store: Store) {
    let events = world.events.clone();
    let registry = Changes::<E>::registry(move |change| {
        let rev = match change.change {
            tablekit_patterns::changes::ChangeKind::Delete => None,
            _ => Some(change.value.rev()),
        };
        if let Ok(mut events) = events.lock() {
            events.push((
                (E::NAME, change.partition_key, change.row_key),
                change.version,
                rev,
            ));
        }
        async { Ok(()) }
    });
    let queue = E::schema().changes.unwrap_or_default();
    consume(&world, queue, &registry).await;
}

async fn relay(world: Rc<World>, store: Store, n: u32) {
    let Some(sink) = world.sink().await else {
        return;
    };
    let sink = Arc::new(fence::FencedSink {
        inner: sink,
        relay: format!("relay{n}"),
        store: world.chaos.inner().clone(),
        unfenced: world.unfenced.clone(),
        published: world.relay_published.clone(),
    });
    // Now and then the relay's process stalls for longer than its share lease (10 s)
    // after reading a page of entries (see `fence`).
    let store = fence::Stalling {
        inner: store,
        chance: 0.02,
        longest: Duration::from_secs(25),
    };
    let relay = Relay::new(store, sink)
        .with_id(format!("relay{n}"))
        .share_lease(Duration::from_secs(10));
    while !world.stopping.get() {
        let busy = world.pass("a relay pass").await;
        if let Err(e) = relay.step().await {
            world.log(format!("relay: pass failed: {e}"));
        }
        drop(busy);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn sweeper(world: Rc<World>, store: Store) {
    let engine = world.engine(&store).await;
    let sweeper = Sweeper::new(store)
        .with_engine(engine)
        .with_blobs(world.blobs.clone());
    while !world.stopping.get() {
        let busy = world.pass("a sweep").await;
        if let Err(e) = sweeper.sweep().await {
            world.log(format!("sweeper: pass failed: {e}"));
        }
        drop(busy);
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

async fn auditor(world: Rc<World>, store: Store) {
    let engine = world.engine(&store).await;
    let members = members(&world, &store, &engine);
    while !world.stopping.get() {
        tokio::time::sleep(Duration::from_secs(20)).await;
        let options = AuditOptions {
            blobs: Some(world.blobs.clone()),
            ..AuditOptions::default()
        };
        let _ = members.audit(&options).await;
    }
}

/// The invariants, over the drained store (no faults).
async fn check(world: &World) -> Vec<String> {
    let mut found = Vec::new();
    let store = world.chaos.clone();
    let engine = Engine::new(store.clone());
    let members = members(world, &store, &engine);
    let badges = badges(world, &store, &engine);
    let now = world.now();

    // Nothing left in outboxes, markers or queues; nothing poisoned by accident.
    match tablekit_patterns::consistency::backlog(&store).await {
        Ok(b) if b.entries > 0 || b.markers > 0 => {
            found.push(format!(
                "left behind: {} outbox entries, {} pending markers",
                b.entries, b.markers
            ));
        }
        Ok(_) => {}
        Err(e) => found.push(format!("the backlog does not read: {e}")),
    }
    let malformed = world.model.borrow().malformed.clone();
    for (queue, id, reason) in world.queue.poisoned() {
        if !malformed.contains(&id) {
            found.push(format!("{queue}: {id} was poisoned: {reason}"));
        }
    }
    let poisoned: Vec<String> = world.queue.poisoned().into_iter().map(|p| p.1).collect();
    let discarded = world.model.borrow().discarded.clone();
    for id in &malformed {
        if !poisoned.contains(id) && !discarded.contains(id) {
            found.push(format!("the malformed message {id} was not poisoned"));
        }
    }

    // The audits are clean.
    let options = || AuditOptions {
        blobs: Some(world.blobs.clone()),
        ..AuditOptions::default()
    };
    for (table, report) in [
        ("Members", members.audit(&options()).await),
        ("Badges", badges.audit(&options()).await),
    ] {
        match report {
            Ok(r) if !r.is_clean() => {
                let mut kinds = std::collections::BTreeMap::<String, usize>::new();
                for f in &r.findings {
                    *kinds
                        .entry(format!("{:?} {}", f.drift, f.index))
                        .or_default() += 1;
                }
                found.push(format!(
                    "the audit of {table} is not clean: {kinds:?}; first: {:?}",
                    r.findings.first()
                ));
            }
            Ok(_) => {}
            Err(e) => found.push(format!("the audit of {table} failed: {e}")),
        }
    }

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

    // Every archive left its entity in exactly one table, with its blobs.
    for key in &model.archived {
        let primary = store
            .get("Members", &key.1, &key.2, None)
            .await
            .ok()
            .flatten();
        let archived = store
            .get(ARCHIVE, &key.1, &key.2, None)
            .await
            .ok()
            .flatten();
        if primary.is_some() && archived.is_some() {
            found.push(format!("{key:?} is in both Members and {ARCHIVE}"));
        }
        if let Some(entity) = &archived {
            for (_, name, _) in tablekit_patterns::large::addresses(entity) {
                if !matches!(world.blobs.get(&name).await, Ok(Some(_))) {
                    found.push(format!("the archived {key:?} lost its blob {name}"));
                }
            }
        }
    }

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

    // Each relay published only what its shares' leases covered.
    if let Ok(unfenced) = world.unfenced.lock() {
        found.extend(unfenced.iter().cloned());
    }

    found.extend(migration::converges(&members).await);
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
