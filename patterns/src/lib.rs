//! tablekit-patterns: the table-design patterns as composable modules over a
//! [`TableStore`](tablekit_core::TableStore).
//!
//! The pattern modules (secondary indexes, index entities, log tail, wide and large
//! entities, …) land with their own issues on top of the storage core.
