//! Migrations on demand, over the application's own entity types: a worker binary built
//! with [`cli::main_with`](crate::cli::main_with) registers its types where it registers
//! its operations, and then `tablekit-worker migrate --table … [--kind …]` and the
//! console's migrate job rewrite every entity stored under an older version of its type
//! (see [`tablekit_patterns::index::migrate`]).
//!
//! ```no_run
//! use tablekit_derive::Entity;
//!
//! #[derive(Entity, Clone, Debug, PartialEq)]
//! #[entity(table = "Members", version = 2, partition_key = "{team}", row_key = "{id}",
//!          crate = "tablekit_core")]
//! struct Member {
//!     team: String,
//!     id: u32,
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     tablekit_workers::cli::main_with(|registry, connections| {
//!         connections.migrations().register::<Member>();
//!         registry
//!     })
//! }
//! ```

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tablekit_core::AnyStore;
use tablekit_core::blob::BlobStore;
use tablekit_core::typed::EntityType;
use tablekit_patterns::index::{AuditOptions, IndexedTable, MigrateReport};

use crate::error::{Error, Result};

/// Runs one type's migration over a store.
type Run = Arc<
    dyn Fn(AnyStore, Option<BlobStore>, AuditOptions) -> BoxFuture<'static, Result<MigrateReport>>
        + Send
        + Sync,
>;

/// One registered type.
#[derive(Clone)]
pub struct Migration {
    /// The table of its entities.
    pub table: String,
    /// Its kind.
    pub kind: String,
    /// Its current version.
    pub version: u32,
    run: Run,
}

impl std::fmt::Debug for Migration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Migration")
            .field("table", &self.table)
            .field("kind", &self.kind)
            .field("version", &self.version)
            .finish()
    }
}

impl Migration {
    /// Rewrites the type's entities stored under an older version, through the write path
    /// of an [`IndexedTable`] over `store` (and `blobs` for blob fields).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn run(
        &self,
        store: AnyStore,
        blobs: Option<BlobStore>,
        options: AuditOptions,
    ) -> Result<MigrateReport> {
        (self.run)(store, blobs, options).await
    }
}

/// The entity types a worker process can migrate. Cheap to clone; clones share the list.
#[derive(Clone, Debug, Default)]
pub struct Migrations {
    types: Arc<Mutex<Vec<Migration>>>,
}

impl Migrations {
    /// No types.
    pub fn new() -> Self {
        Migrations::default()
    }

    /// Registers `E` (a type registered twice is kept once).
    pub fn register<E>(&self) -> &Self
    where
        E: EntityType + Send + Sync + 'static,
    {
        let schema = E::schema();
        let migration = Migration {
            table: schema.table.to_owned(),
            kind: E::KIND.to_owned(),
            version: E::VERSION,
            run: Arc::new(|store, blobs, options| {
                Box::pin(async move {
                    // The rewrites' follow-up work waits in the outboxes for the relay
                    // of `tablekit-worker run`, as any writer's without a sink does.
                    let settings = IndexedTable::<E, AnyStore>::options().follow_up_elsewhere();
                    let settings = match blobs {
                        Some(blobs) => settings.blobs(blobs),
                        None => settings,
                    };
                    let table = settings.open(store).await?;
                    tablekit_patterns::index::migrate(&table, &options).await
                })
            }),
        };
        let mut types = self.types.lock().unwrap_or_else(|e| e.into_inner());
        if !types
            .iter()
            .any(|m| m.table == migration.table && m.kind == migration.kind)
        {
            types.push(migration);
        }
        self
    }

    /// Every registered type.
    pub fn list(&self) -> Vec<Migration> {
        self.types.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The registered type of `table` (of `kind`, when the table holds several).
    ///
    /// # Errors
    /// [`Error::Config`] naming the registered types when none, or more than one, match.
    pub fn find(&self, table: &str, kind: Option<&str>) -> Result<Migration> {
        let types = self.list();
        let matching: Vec<&Migration> = types
            .iter()
            .filter(|m| m.table == table && kind.is_none_or(|k| m.kind == k))
            .collect();
        match matching.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(Error::Config(format!(
                "no entity type of table `{table}`{} is registered for migration in this worker binary (registered: {}); register it with `connections.migrations().register::<T>()` in `cli::main_with`",
                kind.map(|k| format!(" of kind `{k}`")).unwrap_or_default(),
                if types.is_empty() {
                    "none".to_owned()
                } else {
                    types
                        .iter()
                        .map(|m| format!("{} {} v{}", m.table, m.kind, m.version))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ))),
            several => Err(Error::Config(format!(
                "table `{table}` holds several registered types ({}): name one with --kind",
                several
                    .iter()
                    .map(|m| m.kind.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}
