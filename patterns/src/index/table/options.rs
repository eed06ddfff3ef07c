//! [`IndexedTableOptions`]: the settings of an [`IndexedTable`], given in any order, then
//! [`open`](IndexedTableOptions::open)ed on a store (tables created, schema registered)
//! or [`build`](IndexedTableOptions::build)t without I/O. A type whose declarations need
//! follow-up work outside a write's own transaction must say where that work is done
//! (a [`sink`](IndexedTableOptions::sink), [`inline_apply`](IndexedTableOptions::inline_apply)
//! or [`follow_up_elsewhere`](IndexedTableOptions::follow_up_elsewhere)); both refuse it
//! otherwise.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tablekit_core::TableStore;
use tablekit_core::blob::BlobStore;
use tablekit_core::clock::SharedClock;
use tablekit_core::typed::EntityType;

use super::IndexedTable;
use crate::consistency::{Engine, InlineSink, OutboxSink};
use crate::error::Result;
use crate::index::record::Layout;

/// Where a table's follow-up work goes after each commit.
#[derive(Clone)]
enum SinkChoice {
    /// Applied in this process, right after the commit.
    Inline,
    /// Handed to a sink (a queue).
    Given(Arc<dyn OutboxSink>),
    /// Left in the partition's outbox for a relay of another process.
    Elsewhere,
}

/// The settings of an [`IndexedTable`]: every setter may come in any order; each one
/// set twice keeps the last value. [`open`](Self::open) returns the opened table.
///
/// A type that declares work outside a write's own transaction (copies in other
/// partitions or tables, id lists in a table or in blobs, unique values, expiry, change
/// events, denormalised fields from other partitions; or a table given a blob store, or
/// whose properties other types copy) needs one of three choices of where that work is
/// done, or it is refused ([`Error::NoFollowUpChoice`](crate::Error::NoFollowUpChoice)):
///
/// | choice | the work | converges |
/// |---|---|---|
/// | [`sink(queue_sink)`](Self::sink), or an [`engine`](Self::engine) with one | goes to a queue after each commit | when a worker of the queue applies it |
/// | [`inline_apply()`](Self::inline_apply) | is applied in this process after each commit | when the write returns |
/// | [`follow_up_elsewhere()`](Self::follow_up_elsewhere) | waits in the partition's outbox | when the relay of `tablekit-worker run` publishes it and a worker applies it |
///
/// A type whose declarations all live in the primary's partition (same-partition copies
/// and id lists, wide entities) needs no choice.
///
/// ```
/// use tablekit_core::MemoryStore;
/// use tablekit_derive::Entity;
/// use tablekit_patterns::index::IndexedTable;
///
/// #[derive(Entity, Clone, Debug, PartialEq)]
/// #[entity(table = "Employees", kind = "Employee", partition_key = "{department}",
///          row_key = "empid_{id:06}", crate = "tablekit_core")]
/// #[index(name = "by_email", table = "EmployeesByEmail", partition_key = "{department}",
///         row_key = "{email}")]
/// struct Employee {
///     department: String,
///     id: u32,
///     email: String,
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let employees = IndexedTable::<Employee, _>::options()
///     .inline_apply()
///     .max_attempts(16)
///     .open(MemoryStore::new())
///     .await?;
/// employees
///     .insert(&Employee { department: "Sales".into(), id: 1, email: "a@x.com".into() })
///     .await?;
/// # Ok::<_, tablekit_core::Error>(())
/// # }).unwrap();
/// ```
pub struct IndexedTableOptions<E, S> {
    name: Option<String>,
    clock: Option<SharedClock>,
    engine: Option<Engine<S>>,
    sink: Option<SinkChoice>,
    blobs: Option<BlobStore>,
    verified_lookups: bool,
    lookup_concurrency: usize,
    max_attempts: Option<usize>,
    unique_lease: Option<Duration>,
    track_dependents: Option<bool>,
    entity: std::marker::PhantomData<fn() -> E>,
}

impl<E, S> std::fmt::Debug for IndexedTableOptions<E, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexedTableOptions")
            .field("name", &self.name)
            .field("engine", &self.engine.is_some())
            .field(
                "sink",
                &match self.sink {
                    None => "none",
                    Some(SinkChoice::Inline) => "inline",
                    Some(SinkChoice::Given(_)) => "given",
                    Some(SinkChoice::Elsewhere) => "elsewhere",
                },
            )
            .field("blobs", &self.blobs.is_some())
            .field("verified_lookups", &self.verified_lookups)
            .field("lookup_concurrency", &self.lookup_concurrency)
            .field("max_attempts", &self.max_attempts)
            .field("unique_lease", &self.unique_lease)
            .field("track_dependents", &self.track_dependents)
            .finish()
    }
}

impl<E, S> Default for IndexedTableOptions<E, S> {
    fn default() -> Self {
        IndexedTableOptions {
            name: None,
            clock: None,
            engine: None,
            sink: None,
            blobs: None,
            verified_lookups: false,
            lookup_concurrency: super::DEFAULT_LOOKUP_CONCURRENCY,
            max_attempts: None,
            unique_lease: None,
            track_dependents: None,
            entity: std::marker::PhantomData,
        }
    }
}

impl<E: EntityType, S: TableStore + Clone + 'static> IndexedTableOptions<E, S> {
    /// The defaults: the table `E` declares, the wall clock, no blob store, and no choice
    /// of where follow-up work is done (which a type that needs follow-up work must make).
    pub fn new() -> Self {
        Self::default()
    }

    /// The table under another name than `E` declares (copies in the primaries' table
    /// follow it).
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// Decides expiry with `clock` (the wall clock by default): a time to live starts at
    /// the clock's time of the write, and reads leave out what expired by its time.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Commits through `engine` (its pending-marker lease, retry policy and sink). A
    /// [`sink`](Self::sink), [`inline_apply`](Self::inline_apply) or
    /// [`max_attempts`](Self::max_attempts) given too applies to it, whatever the order.
    pub fn engine(mut self, engine: Engine<S>) -> Self {
        self.engine = Some(engine);
        self
    }

    /// Hands each write's follow-up work to `sink` after the commit (a queue, which a
    /// worker serves). One of `sink`, [`inline_apply`](Self::inline_apply) and
    /// [`follow_up_elsewhere`](Self::follow_up_elsewhere): the last given is kept.
    pub fn sink(mut self, sink: Arc<dyn OutboxSink>) -> Self {
        self.sink = Some(SinkChoice::Given(sink));
        self
    }

    /// Applies each write's follow-up work in this process, right after the commit, with
    /// the [`blobs`](Self::blobs) store if one is given: a write returns once its copies
    /// are written. One of [`sink`](Self::sink), `inline_apply` and
    /// [`follow_up_elsewhere`](Self::follow_up_elsewhere): the last given is kept.
    pub fn inline_apply(mut self) -> Self {
        self.sink = Some(SinkChoice::Inline);
        self
    }

    /// Leaves each write's follow-up work in its partition's outbox, where the relay of
    /// another process (`tablekit-worker run`, which runs one beside the worker of the
    /// `index` queue) finds it and publishes it to the queue its worker applies it from.
    /// Until such a process runs, inserts report `published: false` and other-partition
    /// copies do not converge. One of [`sink`](Self::sink),
    /// [`inline_apply`](Self::inline_apply) and `follow_up_elsewhere`: the last given is
    /// kept; an [`engine`](Self::engine) given too keeps its own sink, if it has one (what
    /// that sink does not take waits for the relay as well).
    pub fn follow_up_elsewhere(mut self) -> Self {
        self.sink = Some(SinkChoice::Elsewhere);
        self
    }

    /// The blob store of blob-stored index entities and properties.
    pub fn blobs(mut self, blobs: BlobStore) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// Index look-ups check each hit against its primary and return the primary (read
    /// your own write: a copy the worker has not updated yet is never returned stale).
    /// Off by default; one look-up asks for it with its `verified()`.
    pub fn verified_lookups(mut self, on: bool) -> Self {
        self.verified_lookups = on;
        self
    }

    /// How many primaries a look-up reads at a time (default 16).
    pub fn lookup_concurrency(mut self, reads: usize) -> Self {
        self.lookup_concurrency = reads.max(1);
        self
    }

    /// How many concurrent writes may conflict before a write gives up (default 64).
    pub fn max_attempts(mut self, attempts: usize) -> Self {
        self.max_attempts = Some(attempts);
        self
    }

    /// How long a reservation of a unique value (`#[unique]`) protects the write that
    /// made it (default 30 s): another entity meeting the reservation within its lease
    /// is refused even if the write never lands, and after it may take a reservation
    /// whose write never landed over. It must exceed the time from a write's reservation
    /// to its commit.
    pub fn unique_lease(mut self, lease: Duration) -> Self {
        self.unique_lease = Some(lease);
        self
    }

    /// Whether writes look for entities that copy one of this type's properties
    /// (`#[entity(denormalized(from = "<this kind>", …))]` on another type) and update
    /// them. [`open`](Self::open) turns it on when the registry holds such a type.
    pub fn track_dependents(mut self, on: bool) -> Self {
        self.track_dependents = Some(on);
        self
    }

    /// The table on `store`, without I/O: its tables must exist and its schema be
    /// registered (as [`open`](Self::open) does) before the workers, the relay or the
    /// audit can serve it.
    ///
    /// # Errors
    /// [`Error::NoFollowUpChoice`](crate::Error::NoFollowUpChoice) when `E` declares work
    /// outside a write's own transaction (or a blob store or
    /// [`track_dependents`](Self::track_dependents) is given) and none of
    /// [`sink`](Self::sink), [`inline_apply`](Self::inline_apply),
    /// [`follow_up_elsewhere`](Self::follow_up_elsewhere) or an [`engine`](Self::engine)
    /// with a sink is.
    pub fn build(self, store: S) -> Result<IndexedTable<E, S>> {
        if !self.chosen() {
            let mut declarations = Layout::of(E::schema())
                .on_table(self.name.as_deref().unwrap_or(E::schema().table))
                .follow_up(&E::schema().partition_key);
            if self.blobs.is_some() {
                declarations.push(BLOB_WORK.to_owned());
            }
            if self.track_dependents == Some(true) {
                declarations.push(DEPENDENT_WORK.to_owned());
            }
            if !declarations.is_empty() {
                return Err(no_choice::<E>(declarations));
            }
        }
        let mut table = IndexedTable::new(store)?;
        if let Some(name) = &self.name {
            table = table.renamed(name);
        }
        if let Some(clock) = self.clock {
            table = table.clocked(clock);
        }
        if let Some(engine) = self.engine {
            table.writer.engine = engine;
        }
        // The blob store before the sink: an inline sink applies with it.
        table.writer.blobs = self.blobs;
        table = match self.sink {
            Some(SinkChoice::Inline) => table.applied_inline(),
            Some(SinkChoice::Given(sink)) => table.sunk(sink),
            Some(SinkChoice::Elsewhere) | None => table,
        };
        if let Some(attempts) = self.max_attempts {
            table = table.attempts(attempts);
        }
        if let Some(lease) = self.unique_lease {
            table.writer.unique_lease = lease;
        }
        if let Some(on) = self.track_dependents {
            table.writer.track_dependents.store(on, Ordering::Relaxed);
        }
        table.verify = self.verified_lookups;
        table.lookup_concurrency = self.lookup_concurrency;
        Ok(table)
    }

    /// The table on `store`, opened: the primaries' table and the index tables created,
    /// the schema recorded in the registry (for the workers' relay, the audit and the
    /// backfill).
    ///
    /// # Errors
    /// As [`build`](Self::build), before any I/O;
    /// [`Error::NoFollowUpChoice`](crate::Error::NoFollowUpChoice) too, once the tables
    /// are created and the schema registered, when no choice was made and the registry
    /// holds a type that copies this one's properties (its writes then update those
    /// copies by follow-up work); the store's errors.
    pub async fn open(self, store: S) -> Result<IndexedTable<E, S>> {
        let chosen = self.chosen();
        let table = self.build(store)?;
        table.create().await?;
        if !chosen && table.writer.track_dependents.load(Ordering::Relaxed) {
            return Err(no_choice::<E>(vec![DEPENDENT_WORK.to_owned()]));
        }
        Ok(table)
    }

    /// Whether a choice of where follow-up work is done was made.
    fn chosen(&self) -> bool {
        self.sink.is_some() || self.engine.as_ref().is_some_and(|e| e.sink().is_some())
    }
}

/// The follow-up work of a table given a blob store.
const BLOB_WORK: &str = "a blob store: the blobs a write stops referencing are deleted after it";

/// The follow-up work of a table whose properties other types copy.
const DEPENDENT_WORK: &str = "tracked dependents: the entities of other types that copy its properties (`denormalized(from = …)`) are updated after each write";

/// The refusal of a table of `E` opened without a choice of where its follow-up work is
/// done.
fn no_choice<E: EntityType>(declarations: Vec<String>) -> crate::Error {
    crate::Error::NoFollowUpChoice {
        type_name: E::schema().type_name,
        declarations,
    }
}

/// The settings that change more than one field, used by [`IndexedTableOptions::build`].
impl<E: EntityType, S: TableStore + Clone + 'static> IndexedTable<E, S> {
    /// Expiry decided by `clock`, in the typed table's reads and in the writer.
    fn clocked(mut self, clock: SharedClock) -> Self {
        self.writer.clock = clock;
        self.retable();
        self
    }

    /// Follow-up work handed to `sink` after each commit.
    fn sunk(mut self, sink: Arc<dyn OutboxSink>) -> Self {
        self.writer.engine = self.writer.engine.with_sink(sink);
        self
    }

    /// Follow-up work applied in this process, with the blob store set so far.
    fn applied_inline(self) -> Self {
        let registry =
            crate::index::handlers(self.table.store().clone(), self.writer.blobs.clone());
        self.sunk(Arc::new(InlineSink::new(registry)))
    }

    /// At most `attempts` conflicting tries per write.
    fn attempts(mut self, attempts: usize) -> Self {
        let policy = self.writer.engine.retry().attempts(attempts);
        self.writer.engine = self.writer.engine.with_retry(policy);
        self
    }
}
