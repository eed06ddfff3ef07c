//! The simulated world: its processes, the run (faults, then a drain), and the checks.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tablekit_core::blob::BlobStore;
use tablekit_core::clock::SharedClock;
use tablekit_core::fault::{ChaosStore, FaultRates};
use tablekit_core::{AnyStore, MemoryStore, random};
use tablekit_patterns::consistency::{Engine, OutboxSink};
use tablekit_patterns::index::IndexedTable;
use tablekit_workers::WorkerConfig;
use tablekit_workers::index::QueueSink;
use tablekit_workers::queue::Queue;
use tablekit_workers::queue::poison_table::WithPoisonTable;

mod archive;
mod audit;
mod backing;
mod checks;
mod clock;
mod documents;
mod drain;
mod feed;
mod fence;
mod migration;
mod options;
mod relays;
mod report;
mod sweeper;
mod tallies;
mod trace;
mod workers;
mod workload;
mod writers;
mod written;

pub use options::{Options, StoreKind};
pub use report::Report;

use crate::entities::{Badge, Member};
use crate::exec::{self, Factory, Spawner};
use crate::model::{Key, Model};
use crate::queue::{QueueFaults, SimQueue};
use archive::archive_worker;
use audit::auditor;
use clock::SimClock;
use relays::relay;
use sweeper::sweeper;
use trace::{TracedSink, Tracer};
use workers::{change_consumer, index_worker};
use writers::writer;

/// A change event consumed: the entity's key, the event's version, and the `rev` written
/// (`None` for a delete).
type Event = (Key, i64, Option<i64>);

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
    hold_back: 0.05,
    stall: 0.05,
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
    /// The queue as the operator's console sees it: its poison messages swept from the
    /// queue's poison lanes into the store's poison table, listed, discarded and
    /// redriven there (through the faulty store).
    poison: WithPoisonTable<SimQueue, Store>,
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
    /// What the feed's groups delivered (see [`feed`]).
    feed: RefCell<feed::Record>,
    /// What the store applied to the feed's table, below the faults.
    observed: Arc<std::sync::Mutex<feed::Observed>>,
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

    /// Waits while the director holds new periodic passes (see `drain::run`), then marks
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
        let options = Engine::options().tombstone_grace(Duration::from_secs(120));
        match self.sink().await {
            Some(sink) => options.sink(sink),
            None => options,
        }
        .build(store.clone())
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

thread_local! {
    static START: Cell<Option<tokio::time::Instant>> = const { Cell::new(None) };
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
        StoreKind::Sqlite(path) => match tablekit_core::SqliteStore::create(path).await {
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
    let observed: Arc<std::sync::Mutex<feed::Observed>> = Arc::default();
    let chaos = ChaosStore::new(backing::Backing(base, clock.clone(), observed.clone()));
    let queue = SimQueue::default();
    let world = Rc::new(World {
        poison: WithPoisonTable::new(queue.clone(), chaos.clone()),
        chaos,
        blobs: BlobStore::memory(),
        queue,
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
        feed: RefCell::default(),
        observed,
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
    IndexedTable::<Member, _>::options()
        .engine(engine.clone())
        .follow_up_elsewhere()
        .blobs(world.blobs.clone())
        .build(store.clone())?
        .create()
        .await?;
    IndexedTable::<Badge, _>::options()
        .engine(engine.clone())
        .follow_up_elsewhere()
        .blobs(world.blobs.clone())
        .build(store.clone())?
        .create()
        .await?;
    documents::documents(world, &store, &engine).open().await?;
    tallies::tallies(&store, &engine).create().await?;
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
    IndexedTable::options()
        .engine(engine.clone())
        .follow_up_elsewhere()
        .blobs(world.blobs.clone())
        .build(store.clone())
        .expect("the choice of where follow-up work is done is made")
}

fn badges(world: &World, store: &Store, engine: &Engine<Store>) -> IndexedTable<Badge, Store> {
    IndexedTable::options()
        .engine(engine.clone())
        .follow_up_elsewhere()
        .blobs(world.blobs.clone())
        .build(store.clone())
        .expect("the choice of where follow-up work is done is made")
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
    feed::spawn(world, spawner);
    spawner.spawn_process("sweeper", process(world, |w, s, _| sweeper(w, s)));
    spawner.spawn_process("auditor", process(world, |w, s, _| auditor(w, s)));
    spawner.spawn_process(
        "migrator",
        process(world, |w, s, _| migration::migrator(w, s)),
    );

    workload::run(world).await;
    let mut found = drain::run(world).await;
    found.extend(checks::check(world).await);
    found
}
