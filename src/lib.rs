//! tablekit: declarative, crash-safe table-design patterns for partitioned table stores.
//!
//! This is the crate applications depend on. It re-exports the storage core
//! ([`core`]), the pattern modules ([`patterns`]) and, with the features below, the queues
//! and workers (`workers`) and `#[derive(Entity)]`.
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
//!
//! # One error
//!
//! [`Error`] is the error of the store, the patterns and the workers alike: an
//! `IndexedTable` write, a queue's send and a worker's run all return a
//! [`Result`], so one `?` and one `match` serve an application that uses them all.
//! [`Error::kind`] says what went wrong in backend-neutral terms, [`Error::is_retryable`]
//! whether the same call may succeed later, and the source chain keeps the backend's own
//! error (`std::error::Error::source`).
//!
//! # Features
//!
//! Without default features tablekit is the storage core (with its in-memory store) and
//! the patterns; each feature adds one part and the dependencies only that part needs.
//! The last column says which features are on by default.
//!
//! | feature | adds | default |
//! |---|---|---|
//! | `sqlite` | `core::SqliteStore` (bundled SQLite) and, with `workers`, the SQLite queue | yes |
//! | `derive` | `#[derive(Entity)]`, `#[derive(EntityKind)]`, `#[derive(Projection)]`, `#[derive(FieldEnum)]` | yes |
//! | `workers` | `workers`: operations, the worker runtime, the archive, index and change workers | yes |
//! | `rabbitmq` | the RabbitMQ queue (lapin); brings `workers` | yes |
//! | `amqps` | TLS for `amqps://` brokers; brings `rabbitmq` | no |
//! | `console` | `workers::console`, the operator's console (axum, maud); brings `workers` | yes |
//! | `prometheus` | `workers::runtime::install_prometheus`, metrics served for Prometheus; brings `workers` | yes |
//! | `cli` | `workers::cli`, the `tablekit-worker` command line (clap) that an application's own worker binary calls (`main_with`); brings `console` and `prometheus` | yes |
//! | `azure` | Azure Table Storage, blob containers on Azure Blob Storage and, with `workers`, Azure Queue Storage (reqwest) | no |
//! | `blob` | `core::blob`, blobs on local files and in memory (always on: the patterns keep blobs) | — |
//!
//! An application that writes through the patterns on SQLite, without workers:
//!
//! ```toml
//! [dependencies]
//! tablekit = { version = "0.1", default-features = false, features = ["sqlite", "derive"] }
//! ```

// Examples show the current API: a doctest that calls a deprecated item fails to
// compile. `allow(unused)` is rustdoc's default, which any `test(attr(..))` replaces.
#![doc(test(attr(allow(unused), deny(deprecated))))]

pub use tablekit_core as core;
pub use tablekit_core::typed;
pub use tablekit_core::{Entity, Error, ErrorKind, Result, Value};
pub use tablekit_patterns as patterns;
#[cfg(feature = "workers")]
pub use tablekit_workers as workers;

#[cfg(feature = "derive")]
pub use tablekit_derive as derive;
#[cfg(feature = "derive")]
pub use tablekit_derive::{Entity, EntityKind, FieldEnum, Projection};

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
    pub mod feed {
        #![doc = include_str!("../docs/feed.md")]
    }
    pub mod large_entities {
        #![doc = include_str!("../docs/large_entities.md")]
    }
    pub mod workers {
        #![doc = include_str!("../docs/workers.md")]
    }
    pub mod own_worker {
        #![doc = include_str!("../docs/own_worker.md")]
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
    pub use tablekit_derive::{Entity, EntityKind, FieldEnum, Projection};
    pub use tablekit_patterns::index::IndexedTable;
}
