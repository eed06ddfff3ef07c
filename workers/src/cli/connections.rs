//! [`Connections`]: what a worker process connected to, and [`ConnectionsOptions`], its
//! settings.

use std::sync::Arc;

use tablekit_core::AnyStore;
use tablekit_core::blob::BlobStore;
use tablekit_patterns::index::OutboxSink;

/// What a worker process connected to before it builds its registry: the table store of
/// `--store` and, with `--blobs`, the blob store. Handlers clone what they need.
#[derive(Clone)]
#[non_exhaustive]
pub struct Connections {
    /// The table store (`--store`).
    pub store: AnyStore,
    /// The blob store (`--blobs`), if any.
    pub blobs: Option<BlobStore>,
    migrations: crate::migrate::Migrations,
    /// Where the archive's change events go (the process's queue), if anywhere.
    pub(super) events: Option<Arc<dyn OutboxSink>>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("store", &self.store)
            .field("blobs", &self.blobs)
            .field("events", &self.events.is_some())
            .finish_non_exhaustive()
    }
}

impl Connections {
    /// The settings of a process's connections, given in any order, then
    /// [`build`](ConnectionsOptions::build) on the store and blob store.
    pub fn options() -> ConnectionsOptions {
        ConnectionsOptions::new()
    }

    /// The connections to `store` and, optionally, `blobs`, with the default settings (see
    /// [`ConnectionsOptions::new`]): the shortcut for
    /// `Connections::options().build(store, blobs)`.
    pub fn new(store: AnyStore, blobs: Option<BlobStore>) -> Self {
        Self::options().build(store, blobs)
    }

    /// The entity types this worker binary can migrate (`migrate`, the console's migrate
    /// job): register the application's types here, beside its operations.
    pub fn migrations(&self) -> &crate::migrate::Migrations {
        &self.migrations
    }
}

/// The settings of a process's [`Connections`], given in any order, then built on the
/// table store and the blob store with [`build`](Self::build). Each setter given twice
/// keeps the last value.
///
/// ```
/// use std::sync::Arc;
/// use tablekit_core::{AnyStore, MemoryStore};
/// use tablekit_patterns::index::{InlineSink, handlers};
/// use tablekit_workers::cli::Connections;
///
/// let store = AnyStore::Memory(MemoryStore::new());
/// let events = Arc::new(InlineSink::new(handlers(store.clone(), None)));
/// let connections = Connections::options().events(events).build(store, None);
/// assert!(connections.blobs.is_none());
/// ```
#[derive(Clone, Default)]
pub struct ConnectionsOptions {
    events: Option<Arc<dyn OutboxSink>>,
}

impl std::fmt::Debug for ConnectionsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionsOptions")
            .field("events", &self.events.is_some())
            .finish()
    }
}

impl ConnectionsOptions {
    /// The defaults: the archive's change events left to the relay.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hands the archive's change events to `events`, the process's queue sink (default:
    /// none, they wait in the outbox for the relay).
    pub fn events(mut self, events: Arc<dyn OutboxSink>) -> Self {
        self.events = Some(events);
        self
    }

    /// The connections to `store` and, optionally, `blobs`.
    pub fn build(self, store: AnyStore, blobs: Option<BlobStore>) -> Connections {
        Connections {
            store,
            blobs,
            migrations: crate::migrate::Migrations::new(),
            events: self.events,
        }
    }
}
