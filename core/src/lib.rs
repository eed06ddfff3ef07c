//! tablekit-core: the table-service data model, its limits, filters and queries, the
//! [`TableStore`] trait and its backends.
//!
//! ```
//! use tablekit_core::prelude::*;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! # let dir = tempfile::tempdir().unwrap();
//! let store = SqliteStore::create(dir.path().join("app.db")).await?;
//! store.create_table("Employees").await?;
//! store.insert("Employees", Entity::new("Sales", "empid_000100").with("Age", 34)).await?;
//! store.insert("Employees", Entity::new("Sales", "empid_000200").with("Age", 47)).await?;
//!
//! let query = Query::parse("PartitionKey eq 'Sales' and Age gt 40")?;
//! assert!(matches!(query.explain(), QueryClass::PartitionScan { .. }));
//! let page = store.query("Employees", &query).await?;
//! assert_eq!(page.entities.len(), 1);
//! assert_eq!(page.entities[0].row_key, "empid_000200");
//! # Ok::<_, Error>(())
//! # }).unwrap();
//! ```

// Examples show the current API: a doctest that calls a deprecated item fails to
// compile. `allow(unused)` is rustdoc's default, which any `test(attr(..))` replaces.
#![doc(test(attr(allow(unused), deny(deprecated))))]

pub mod any;
pub mod apply;
#[cfg(feature = "azure")]
pub mod azure;
#[cfg(feature = "blob")]
pub mod blob;
pub mod clock;
pub mod coalesce;
#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "azure")]
pub(crate) mod connection_string;
pub mod error;
pub mod fault;
pub mod filter;
pub mod keys;
pub mod limits;
pub mod memory;
pub mod model;
pub mod observe;
pub mod query;
pub mod random;
pub mod retry;
pub mod roundtrip;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod store;
pub mod typed;

pub use any::AnyStore;
#[cfg(feature = "azure")]
pub use azure::AzureTableStore;
pub use error::{Error, ErrorKind, Result};
pub use filter::{CompareOp, Filter, ParseError};
pub use limits::Violation;
pub use memory::MemoryStore;
pub use model::{ETag, EdmType, Entity, EntityRef, IfMatch, Properties, Value};
pub use query::{ContinuationToken, Page, Query, QueryClass};
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteOptions, SqliteStore};
pub use store::{Batch, KeyOrder, TableStore, WriteOp};

/// The names most code needs, in one `use`.
pub mod prelude {
    pub use crate::any::AnyStore;
    pub use crate::error::{Error, ErrorKind, Result};
    pub use crate::filter::Filter;
    pub use crate::memory::MemoryStore;
    pub use crate::model::{ETag, Entity, IfMatch, Value};
    pub use crate::query::{ContinuationToken, Page, Query, QueryClass};
    #[cfg(feature = "sqlite")]
    pub use crate::sqlite::SqliteStore;
    pub use crate::store::{Batch, TableStore, WriteOp};
    pub use crate::typed::{EntityKinds, EntityType, Projection, Record, Stored, Table};
}
