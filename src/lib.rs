//! tablekit: declarative, crash-safe table-design patterns for partitioned table stores.
//!
//! This is the crate applications depend on. It re-exports the storage core
//! ([`core`]), the pattern modules ([`patterns`]), the queues and workers ([`workers`]) and,
//! with the `derive` feature, `#[derive(Entity)]`.
//!
//! ```
//! use tablekit::prelude::*;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = MemoryStore::new();
//! store.create_table("Employees").await?;
//! store
//!     .insert("Employees", Entity::new("Sales", "empid_000123").with("FirstName", "Jun"))
//!     .await?;
//! let jun = store.get("Employees", "Sales", "empid_000123", None).await?;
//! assert_eq!(jun.unwrap().get("FirstName"), Some(&Value::from("Jun")));
//! # Ok::<_, tablekit::Error>(())
//! # }).unwrap();
//! ```

pub use tablekit_core as core;
pub use tablekit_core::typed;
pub use tablekit_core::{Entity, Error, ErrorKind, Result, Value};
pub use tablekit_patterns as patterns;
pub use tablekit_workers as workers;

#[cfg(feature = "derive")]
pub use tablekit_derive as derive;
#[cfg(feature = "derive")]
pub use tablekit_derive::{Entity, EntityKind, Projection};

/// The README's code, compiled as doctests so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The guides, one per module of tablekit (the files of `docs/`): read here or on
/// docs.rs; their code blocks are compiled and run as doctests.
pub mod guide {
    pub mod indexes {
        #![doc = include_str!("../docs/indexes.md")]
    }
    pub mod consistency {
        #![doc = include_str!("../docs/consistency.md")]
    }
    pub mod simulation {
        #![doc = include_str!("../docs/simulation.md")]
    }
    pub mod streaming {
        #![doc = include_str!("../docs/streaming.md")]
    }
    pub mod large_entities {
        #![doc = include_str!("../docs/large_entities.md")]
    }
    pub mod workers {
        #![doc = include_str!("../docs/workers.md")]
    }
    pub mod operations {
        #![doc = include_str!("../docs/operations.md")]
    }
    pub mod azure {
        #![doc = include_str!("../docs/azure.md")]
    }
    pub mod internals {
        #![doc = include_str!("../docs/internals.md")]
    }
}

/// The names most applications need, in one `use`.
pub mod prelude {
    pub use tablekit_core::prelude::*;
    #[cfg(feature = "derive")]
    pub use tablekit_derive::{Entity, EntityKind, Projection};
    pub use tablekit_patterns::index::IndexedTable;
}
