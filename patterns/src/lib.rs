//! tablekit-patterns: the table-design patterns as composable modules over a
//! [`TableStore`](tablekit_core::TableStore).
//!
//! - [`consistency`]: the consistency engine every cross-partition pattern uses: operations
//!   and their registry, the one commit primitive, the outbox, pending markers, sinks and
//!   the relay.
//! - [`index`]: secondary indexes (same partition, other partition or table), index
//!   entities, denormalised fields, audit, repair and backfill.
//! - [`large`]: large entities: blob fields and oversized properties in the blob store.
//! - [`log_tail`]: inverted-ticks RowKeys, the newest entities first.
//! - [`log_blobs`]: log data in blobs, by minute, with a time-range reader.
//! - [`cursor`]: one resumable cursor for reads that span several queries.
//! - [`buckets`]: hash-prefixed keys and fan-out queries over the buckets, merged a page
//!   at a time.
//! - [`periods`]: a table per day or month (high-volume delete, hot/cold tables).
//! - [`import`]: parallel bulk import in entity group transactions.
//! - [`wide`]: wide entities (more than 252 properties) and data series.
//!
//! ```
//! use tablekit_core::MemoryStore;
//! use tablekit_derive::Entity;
//! use tablekit_patterns::index::{AuditOptions, IndexedTable};
//!
//! #[derive(Entity, Clone, Debug, PartialEq)]
//! #[entity(table = "Employees", kind = "Employee", partition_key = "{department}",
//!          row_key = "empid_{id:06}", crate = "tablekit_core")]
//! #[index(name = "by_email", table = "EmployeesByEmail", partition_key = "{department}",
//!         row_key = "{email}")]
//! #[index_entity(name = "last_name", key = "{last_name}")]
//! struct Employee {
//!     department: String,
//!     id: u32,
//!     last_name: String,
//!     email: String,
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! // In process: the other table's copies are written right after each commit.
//! let employees = IndexedTable::<Employee, _>::options()
//!     .inline_apply()
//!     .open(MemoryStore::new())
//!     .await?;
//! for (id, last_name) in [(1, "Jones"), (2, "Jones"), (3, "Smith")] {
//!     let email = format!("e{id}@contoso.com");
//!     employees
//!         .insert(&Employee { department: "Sales".into(), id, last_name: last_name.into(), email })
//!         .await?;
//! }
//! let hit = employees
//!     .lookup(Employee::BY_EMAIL)
//!     .key("Sales")
//!     .key("e3@contoso.com")
//!     .get()
//!     .await?;
//! assert_eq!(hit.map(|e| e.id), Some(3));
//! let joneses = employees
//!     .list(Employee::LAST_NAME)
//!     .in_partition("Sales")
//!     .key("Jones")
//!     .ids()
//!     .await?;
//! assert_eq!(joneses.len(), 2);
//! assert!(employees.audit(&AuditOptions::default()).await?.is_clean());
//! # Ok::<_, tablekit_patterns::Error>(())
//! # }).unwrap();
//! ```

// Examples show the current API: a doctest that calls a deprecated item fails to
// compile. `allow(unused)` is rustdoc's default, which any `test(attr(..))` replaces.
#![doc(test(attr(allow(unused), deny(deprecated))))]

mod address;
pub mod buckets;
pub mod changes;
pub mod consistency;
pub mod cursor;
mod error;
pub mod feed;
pub mod import;
pub mod index;
pub mod large;
pub mod log_blobs;
pub mod log_tail;
pub mod periods;
pub mod wide;

pub use address::EntityRef;
pub use error::{Error, Result};
