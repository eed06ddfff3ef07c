//! Operations: the units of follow-up work, as a versioned serde-JSON envelope (id, kind,
//! version, created-at, payload), and the [`Registry`] that maps kinds to handlers. The
//! outbox records envelopes, sinks publish them, and a worker or an
//! [`InlineSink`](super::InlineSink) runs them through a registry.
//!
//! Every step of an operation must be idempotent (insert-or-replace, delete-if-exists,
//! conditional writes, set-add/set-remove, content-addressed blobs): a message delivered
//! twice, or again after a crash between two steps, must converge to the same state.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::BoxFuture;

/// The envelope every operation travels in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// A unique id, kept across retries (the queue message id, the outbox entry's key).
    pub id: Uuid,
    /// The operation's kind, which picks its handler.
    pub kind: String,
    /// The version of the payload's shape.
    pub version: u32,
    /// When the operation was created.
    pub created_at: DateTime<Utc>,
    /// The operation itself.
    pub payload: serde_json::Value,
    /// Work that must wait (a delete's tombstone is buried after a grace period): the
    /// writer leaves it in the outbox, the relay publishes it once this time has passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<DateTime<Utc>>,
}

impl Envelope {
    /// Wraps an operation under a new id.
    ///
    /// # Errors
    /// [`Error::Encode`](crate::Error::Encode) when the payload cannot be serialised.
    pub fn new<O: Operation>(operation: &O) -> crate::Result<Self> {
        Self::with_id(tablekit_core::random::uuid(), operation)
    }

    /// Wraps an operation under a given id (one write's work keeps its id wherever it is
    /// published from).
    ///
    /// # Errors
    /// [`Error::Encode`](crate::Error::Encode) when the payload cannot be serialised.
    pub fn with_id<O: Operation>(id: Uuid, operation: &O) -> crate::Result<Self> {
        Ok(Envelope {
            id,
            kind: O::KIND.to_owned(),
            version: O::VERSION,
            created_at: tablekit_core::clock::now(),
            payload: serde_json::to_value(operation)
                .map_err(|e| crate::Error::encode(format!("operation `{}`", O::KIND), e))?,
            not_before: None,
        })
    }

    /// The same work, to be published no sooner than `at` (see [`Envelope::not_before`]).
    pub fn not_before(mut self, at: DateTime<Utc>) -> Self {
        self.not_before = Some(at);
        self
    }

    /// Whether the work must still wait at `now`.
    pub fn waits(&self, now: DateTime<Utc>) -> bool {
        self.not_before.is_some_and(|at| at > now)
    }

    /// The envelope as JSON bytes.
    ///
    /// # Errors
    /// [`Error::Encode`](crate::Error::Encode) when serialisation fails.
    pub fn to_bytes(&self) -> crate::Result<Vec<u8>> {
        serde_json::to_vec(self)
            .map_err(|e| crate::Error::encode(format!("operation `{}`", self.kind), e))
    }

    /// Reads an envelope.
    ///
    /// # Errors
    /// [`OperationError::Permanent`] naming what is malformed.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, OperationError> {
        serde_json::from_slice(bytes)
            .map_err(|e| OperationError::Permanent(format!("malformed operation envelope: {e}")))
    }
}

/// The queue an operation travels on unless it names another ([`Operation::QUEUE`]): the
/// queue the relay and the writers' queue sinks publish follow-up work to in a default
/// deployment.
pub const DEFAULT_QUEUE: &str = "index";

/// A kind of operation: its payload type, kind name and version.
pub trait Operation: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The kind, unique among the operations a worker handles.
    const KIND: &'static str;
    /// The payload version this program writes and reads.
    const VERSION: u32;
    /// The queue operations of this kind travel on: a [`Registry`] records it with the
    /// handler, and a worker told no queue serves the queues of the operations it
    /// handles ([`Registry::queues`]). [`DEFAULT_QUEUE`] unless the kind says otherwise.
    const QUEUE: &'static str = DEFAULT_QUEUE;
}

/// Why an operation failed: a retry may help, or it never will.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum OperationError {
    /// A failure that may pass (a busy store, a lost connection): retried with backoff.
    Retryable(String),
    /// A failure no retry will fix (malformed input, a broken invariant): poisoned at once.
    Permanent(String),
    /// A failure of the store, a pattern or a queue, kept whole (its source chain and
    /// whether it is retryable).
    Failed {
        /// Whether a retry may help.
        retryable: bool,
        /// The failure.
        error: Arc<dyn std::error::Error + Send + Sync>,
    },
}

impl std::fmt::Display for OperationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OperationError::Retryable(m) | OperationError::Permanent(m) => f.write_str(m),
            OperationError::Failed { error, .. } => error.fmt(f),
        }
    }
}

impl std::error::Error for OperationError {
    /// A kept failure is shown as this error: its sources follow.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OperationError::Failed { error, .. } => error.source(),
            _ => None,
        }
    }
}

impl PartialEq for OperationError {
    fn eq(&self, other: &Self) -> bool {
        self.is_retryable() == other.is_retryable() && self.to_string() == other.to_string()
    }
}

impl OperationError {
    /// Whether a retry may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            OperationError::Retryable(_) => true,
            OperationError::Permanent(_) => false,
            OperationError::Failed { retryable, .. } => *retryable,
        }
    }

    /// A failure kept whole, retried when `retryable`.
    pub fn failed(error: impl std::error::Error + Send + Sync + 'static, retryable: bool) -> Self {
        OperationError::Failed {
            retryable,
            error: Arc::new(error),
        }
    }
}

impl From<tablekit_core::Error> for OperationError {
    fn from(e: tablekit_core::Error) -> Self {
        let retryable = e.is_retryable();
        OperationError::failed(e, retryable)
    }
}

type ErasedHandler =
    Arc<dyn Fn(serde_json::Value) -> BoxFuture<'static, Result<(), OperationError>> + Send + Sync>;

/// A registered handler: the version it reads, the queue its operations travel on, and
/// the handler.
#[derive(Clone)]
struct Registered {
    version: u32,
    queue: String,
    handler: ErasedHandler,
}

/// The handlers of a worker (or an inline sink), by operation kind, each with the queue
/// its operations travel on.
#[derive(Clone, Default)]
pub struct Registry {
    handlers: HashMap<String, Registered>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("kinds", &self.kinds())
            .field("queues", &self.queues())
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Registers the handler of operation `O` (replacing an earlier one of its kind), its
    /// operations travelling on `O`'s queue ([`Operation::QUEUE`]).
    pub fn register<O, F, Fut>(self, handler: F) -> Self
    where
        O: Operation,
        F: Fn(O) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), OperationError>> + Send + 'static,
    {
        self.register_on(O::QUEUE, handler)
    }

    /// Registers the handler of operation `O` as [`register`](Self::register) does, its
    /// operations travelling on `queue` (a kind whose queue is chosen at run time, such as
    /// a type's change queue).
    pub fn register_on<O, F, Fut>(mut self, queue: &str, handler: F) -> Self
    where
        O: Operation,
        F: Fn(O) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), OperationError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let erased: ErasedHandler = Arc::new(move |payload| {
            let handler = handler.clone();
            Box::pin(async move {
                let operation: O = serde_json::from_value(payload).map_err(|e| {
                    OperationError::Permanent(format!("invalid `{}` payload: {e}", O::KIND))
                })?;
                handler(operation).await
            })
        });
        self.handlers.insert(
            O::KIND.to_owned(),
            Registered {
                version: O::VERSION,
                queue: queue.to_owned(),
                handler: erased,
            },
        );
        self
    }

    /// Adds every handler of `other` (its handlers win for kinds both have).
    pub fn merge(mut self, other: Registry) -> Self {
        self.handlers.extend(other.handlers);
        self
    }

    /// The kinds registered.
    pub fn kinds(&self) -> Vec<&str> {
        let mut kinds: Vec<&str> = self.handlers.keys().map(String::as_str).collect();
        kinds.sort_unstable();
        kinds
    }

    /// Whether a kind is registered.
    pub fn handles(&self, kind: &str) -> bool {
        self.handlers.contains_key(kind)
    }

    /// The queues the registered operations travel on, sorted, each once: the queues a
    /// worker of this registry serves when it is told none.
    pub fn queues(&self) -> Vec<&str> {
        let mut queues: Vec<&str> = self.handlers.values().map(|r| r.queue.as_str()).collect();
        queues.sort_unstable();
        queues.dedup();
        queues
    }

    /// Runs the handler of an envelope's kind.
    ///
    /// # Errors
    /// [`OperationError::Permanent`] for an unknown kind, a version other than the
    /// handler's, or a payload that does not decode; the handler's own errors.
    pub async fn handle(&self, envelope: Envelope) -> Result<(), OperationError> {
        let Some(Registered {
            version, handler, ..
        }) = self.handlers.get(&envelope.kind)
        else {
            return Err(OperationError::Permanent(format!(
                "unknown operation kind `{}` (this worker handles {:?})",
                envelope.kind,
                self.kinds()
            )));
        };
        if envelope.version != *version {
            return Err(OperationError::Permanent(format!(
                "unknown version {} of operation `{}` (this worker reads version {version})",
                envelope.version, envelope.kind
            )));
        }
        handler(envelope.payload).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Ping {
        n: u32,
    }

    impl Operation for Ping {
        const KIND: &'static str = "ping";
        const VERSION: u32 = 2;
    }

    #[test]
    fn envelopes_round_trip_through_json() {
        let envelope = Envelope::new(&Ping { n: 7 }).expect("serialises");
        let back = Envelope::from_bytes(&envelope.to_bytes().expect("serialises")).expect("reads");
        assert_eq!(back, envelope);
        assert_eq!((back.kind.as_str(), back.version), ("ping", 2));
    }

    #[tokio::test]
    async fn the_registry_refuses_unknown_kinds_versions_and_payloads() {
        let registry = Registry::new().register(|ping: Ping| async move {
            if ping.n == 0 {
                Err(OperationError::Retryable("zero".into()))
            } else {
                Ok(())
            }
        });
        let ok = Envelope::new(&Ping { n: 1 }).expect("serialises");
        assert_eq!(registry.handle(ok.clone()).await, Ok(()));
        let mut other = ok.clone();
        other.kind = "pong".into();
        assert!(
            matches!(registry.handle(other).await, Err(OperationError::Permanent(m)) if m.contains("unknown operation kind `pong`"))
        );
        let mut old = ok.clone();
        old.version = 1;
        assert!(
            matches!(registry.handle(old).await, Err(OperationError::Permanent(m)) if m.contains("unknown version 1"))
        );
        let mut bad = ok;
        bad.payload = serde_json::json!({"n": "x"});
        assert!(
            matches!(registry.handle(bad).await, Err(OperationError::Permanent(m)) if m.contains("invalid `ping` payload"))
        );
        let zero = Envelope::new(&Ping { n: 0 }).expect("serialises");
        assert!(registry.handle(zero).await.is_err_and(|e| e.is_retryable()));
        assert!(Envelope::from_bytes(b"{").is_err());
    }

    #[derive(Serialize, Deserialize)]
    struct Audit;

    impl Operation for Audit {
        const KIND: &'static str = "audit";
        const VERSION: u32 = 1;
        const QUEUE: &'static str = "audits";
    }

    #[test]
    fn the_registry_knows_the_queue_of_each_kind() {
        let registry = Registry::new()
            .register(|_: Ping| async { Ok(()) })
            .register(|_: Audit| async { Ok(()) });
        assert_eq!(registry.queues(), ["audits", DEFAULT_QUEUE]);
        // A kind registered again keeps one queue: the last registration's.
        let moved = registry.register_on("pings", |_: Ping| async { Ok(()) });
        assert_eq!(moved.queues(), ["audits", "pings"]);
        assert!(Registry::new().queues().is_empty());
    }

    #[test]
    fn a_store_failure_keeps_its_source_and_retryability() {
        let store = tablekit_core::Error::Transient {
            message: "busy".into(),
        };
        let e = OperationError::from(store);
        assert!(e.is_retryable());
        let OperationError::Failed { error, .. } = &e else {
            panic!("kept whole: {e:?}")
        };
        assert!(error.downcast_ref::<tablekit_core::Error>().is_some());
        assert_eq!(e.to_string(), "transient store failure, retry later: busy");
    }
}
