//! [`EngineOptions`]: the settings of an [`Engine`], given in any order.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use tablekit_core::TableStore;

use super::super::pending::{DEFAULT_LEASE, Markers};
use super::super::removal::Remover;
use super::super::sink::OutboxSink;
use super::{DEFAULT_TOMBSTONE_GRACE, Engine, RetryPolicy};

/// The settings of an [`Engine`], given in any order, then built on a store with
/// [`build`](Self::build) (no I/O: [`Engine::open`] creates the table of pending markers).
/// Each setter given twice keeps the last value.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tablekit_core::MemoryStore;
/// use tablekit_patterns::consistency::{Engine, InlineSink, Registry};
///
/// let store = MemoryStore::new();
/// let engine = Engine::options()
///     .sink(Arc::new(InlineSink::new(Registry::new())))
///     .tombstone_grace(Duration::from_secs(600))
///     .build(store);
/// assert!(engine.sink().is_some());
/// assert_eq!(engine.tombstone_grace(), Duration::from_secs(600));
/// ```
pub struct EngineOptions<S> {
    sink: Option<Arc<dyn OutboxSink>>,
    marker_lease: Duration,
    retry: RetryPolicy,
    tombstone_grace: Duration,
    removal_in_line: bool,
    store: PhantomData<fn() -> S>,
}

impl<S> std::fmt::Debug for EngineOptions<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineOptions")
            .field("sink", &self.sink.is_some())
            .field("marker_lease", &self.marker_lease)
            .field("retry", &self.retry)
            .field("tombstone_grace", &self.tombstone_grace)
            .field("removal_in_line", &self.removal_in_line)
            .finish()
    }
}

impl<S> Default for EngineOptions<S> {
    fn default() -> Self {
        EngineOptions {
            sink: None,
            marker_lease: DEFAULT_LEASE,
            retry: RetryPolicy::default(),
            tombstone_grace: DEFAULT_TOMBSTONE_GRACE,
            removal_in_line: false,
            store: PhantomData,
        }
    }
}

impl<S: TableStore + Clone + 'static> EngineOptions<S> {
    /// The defaults: no sink (follow-up work waits in the outbox for the relay), pending
    /// markers relied on for [`DEFAULT_LEASE`], the default [`RetryPolicy`], tombstones
    /// kept [`DEFAULT_TOMBSTONE_GRACE`], and published entries removed off the writers'
    /// path.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hands follow-up work to `sink` after each commit (default: none, the relay
    /// publishes it).
    pub fn sink(mut self, sink: Arc<dyn OutboxSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Relies on a pending marker for `lease` after writing it (default
    /// [`DEFAULT_LEASE`]; zero: every commit with follow-up work writes its marker).
    pub fn marker_lease(mut self, lease: Duration) -> Self {
        self.marker_lease = lease;
        self
    }

    /// Retries under `policy` (default [`RetryPolicy::default`]).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Keeps a delete's tombstone for `grace` (default [`DEFAULT_TOMBSTONE_GRACE`]): a
    /// write planned before the delete lands within [`MAX_PLAN_AGE`](super::MAX_PLAN_AGE)
    /// plus the store's bound on a request, so the grace must outlast both, with the
    /// writers' clock skew. The relay keeps visiting the partition until the tombstone is
    /// buried.
    pub fn tombstone_grace(mut self, grace: Duration) -> Self {
        self.tombstone_grace = grace;
        self
    }

    /// Makes each writer remove its published outbox entries before its write returns
    /// (one more round trip per write with follow-up work), instead of handing them to
    /// the engine's remover task (the default): for a process that may stop without
    /// [`flush`](Engine::flush) and must not leave entries for the relay to publish
    /// again.
    pub fn removal_in_line(mut self) -> Self {
        self.removal_in_line = true;
        self
    }

    /// The engine over `store`, without I/O.
    pub fn build(self, store: S) -> Engine<S> {
        let remover_store = store.clone();
        Engine {
            store,
            sink: self.sink,
            markers: Arc::new(Markers::new(self.marker_lease)),
            retry: self.retry,
            tombstone_grace: self.tombstone_grace,
            remover: Arc::default(),
            start_remover: Arc::new(move || Remover::start(remover_store.clone())),
            removal_in_line: self.removal_in_line,
        }
    }
}
