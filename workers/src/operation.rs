//! Operations: the units of follow-up work a queue carries, as a versioned serde-JSON
//! envelope (id, kind, version, created-at, payload), and the registry that maps kinds to
//! handlers. They live in the consistency engine
//! ([`tablekit_patterns::consistency::operation`]), where writers record them in outboxes
//! and inline sinks run them; workers run the same registry.
//!
//! Every step of an operation must be idempotent (insert-or-replace, delete-if-exists,
//! conditional writes, set-add/set-remove, content-addressed blobs): a message delivered
//! twice, or again after a crash between two steps, must converge to the same state.

pub use tablekit_patterns::consistency::operation::{
    Envelope, Operation, OperationError, Registry,
};
