//! tablekit-workers: queues, idempotent operations and the worker runtime that keep copies
//! eventually consistent across partitions, tables and blob storage.
//!
//! The queue backends and the `tablekit-worker` binary land with their own issue on top of
//! the storage core.
