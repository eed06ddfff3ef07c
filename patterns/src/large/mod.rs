//! Large entities: `#[entity(blob)]` fields, and any property that would break the
//! table service's limits (a value over 64 KiB, an entity over 1 MiB), kept in the blob
//! store while the entity holds the blob's address.
//!
//! The order makes every crash safe:
//! 1. the blob is written first, under a name made of the entity's keys, the property, a
//!    part unique to the write and the SHA-256 of the content (a blob is never shared by
//!    two writes, so deleting a replaced one never takes one in use);
//! 2. the entity is written with the address in `TablekitBlob_<property>` through the
//!    consistency engine's commit, with a [`DeleteBlobs`] operation naming the blobs it no
//!    longer references as its follow-up work;
//! 3. after the commit those blobs are deleted (by the sink: in process, or the worker),
//!    each only if the entity does not reference it.
//!
//! A crash after 1 leaves a blob no entity references: [`LargeTable::sweep`] deletes such
//! blobs once they are older than a grace period. A crash after 2 leaves the outbox entry,
//! which the relay publishes.
//!
//! ```
//! use tablekit_core::MemoryStore;
//! use tablekit_core::blob::BlobStore;
//! use tablekit_derive::Entity;
//! use tablekit_patterns::large::LargeTable;
//!
//! #[derive(Entity, Clone, Debug, PartialEq)]
//! #[entity(table = "Employees", partition_key = "{department}", row_key = "{id:06}",
//!          crate = "tablekit_core")]
//! struct Employee {
//!     department: String,
//!     id: u32,
//!     #[entity(blob)]
//!     photo: Option<Vec<u8>>,
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let blobs = BlobStore::memory();
//! let employees = LargeTable::<Employee, _>::options()
//!     .inline_cleanup()
//!     .build(MemoryStore::new(), blobs.clone());
//! employees.open().await?;
//! let jun = Employee { department: "Sales".into(), id: 1, photo: Some(vec![7; 200_000]) };
//! employees.upsert(&jun).await?;
//! assert_eq!(employees.get("Sales", "000001").await?.map(|e| e.value), Some(jun));
//! assert_eq!(blobs.list("large/").await?.len(), 1);
//! # Ok::<_, tablekit_patterns::Error>(())
//! # }).unwrap();
//! ```

pub mod blobs;
mod table;

pub use blobs::{
    ADDRESS_PREFIX, DeleteBlobs, SweepReport, addresses, blob_folder, blob_root, offload,
    offload_with_nonce, references, restore, sweep_unreferenced, would_offload,
};
pub use table::{LargeTable, LargeTableOptions, LazyEntity};
