//! tablekit-patterns: the table-design patterns as composable modules over a
//! [`TableStore`](tablekit_core::TableStore).
//!
//! - [`index`]: secondary indexes (same partition, other partition or table), index
//!   entities, the transactional outbox and its relay, audit, repair and backfill.

mod error;
pub mod index;

pub use error::{Error, Result};
