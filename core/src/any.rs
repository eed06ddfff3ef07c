//! A store chosen at run time from a connection string, for binaries and examples whose
//! backend is a command-line flag. Libraries stay generic over [`TableStore`].

use crate::error::{Error, Result};
use crate::memory::MemoryStore;
use crate::model::{ETag, Entity};
use crate::query::{Page, Query};
#[cfg(feature = "sqlite")]
use crate::sqlite::SqliteStore;
use crate::store::{Batch, TableStore, WriteOp};

/// One of the backends compiled in, chosen by [`AnyStore::connect`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AnyStore {
    /// The in-memory store (`memory:`).
    Memory(MemoryStore),
    /// The SQLite store (`sqlite:PATH`).
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteStore),
    /// The Table service (`azure:CONNECTION-STRING`).
    #[cfg(feature = "azure")]
    Azure(crate::azure::AzureTableStore),
}

impl AnyStore {
    /// Opens the store a connection string names:
    ///
    /// - `sqlite:PATH` (or a bare path): the SQLite file at PATH;
    /// - `memory:`: a fresh in-memory store;
    /// - `azure:CONNECTION-STRING` (feature `azure`): Azure Table Storage, Cosmos DB for
    ///   Table or Azurite (`azure:UseDevelopmentStorage=true`).
    ///
    /// # Errors
    /// `InvalidInput` for an unknown scheme or a backend not compiled in; the backend's
    /// own errors when it cannot open.
    pub async fn connect(connection: &str) -> Result<Self> {
        let (scheme, rest) = connection.split_once(':').unwrap_or(("sqlite", connection));
        #[cfg(not(any(feature = "sqlite", feature = "azure")))]
        let _ = rest; // only the SQLite and Azure schemes have an argument
        match scheme {
            "memory" => Ok(AnyStore::Memory(MemoryStore::new())),
            #[cfg(feature = "azure")]
            "azure" => Ok(AnyStore::Azure(crate::azure::AzureTableStore::connect(
                rest,
            )?)),
            #[cfg(feature = "sqlite")]
            "sqlite" if !rest.is_empty() => Ok(AnyStore::Sqlite(SqliteStore::open(rest).await?)),
            #[cfg(not(feature = "azure"))]
            "azure" => Err(Error::InvalidConnection {
                // A connection string holds a key: only its scheme is shown.
                connection: "azure:…".to_owned(),
                reason: "this build has no Azure Table Storage support: build it with the `azure` feature (`cargo build --features azure`)".to_owned(),
            }),
            "sqlite" if cfg!(not(feature = "sqlite")) => Err(Error::InvalidConnection {
                connection: connection.to_owned(),
                reason: "this build has no SQLite support: build it with the `sqlite` feature".to_owned(),
            }),
            _ => Err(Error::InvalidConnection {
                connection: connection.chars().take(80).collect(),
                reason: "expected `sqlite:PATH`, `memory:` or `azure:CONNECTION-STRING`".to_owned(),
            }),
        }
    }
}

macro_rules! each_backend {
    ($self:ident, $store:ident => $call:expr) => {
        match $self {
            AnyStore::Memory($store) => $call,
            #[cfg(feature = "sqlite")]
            AnyStore::Sqlite($store) => $call,
            #[cfg(feature = "azure")]
            AnyStore::Azure($store) => $call,
        }
    };
}

impl TableStore for AnyStore {
    fn key_order(&self) -> crate::store::KeyOrder {
        each_backend!(self, s => s.key_order())
    }

    fn preserves_negative_zero(&self) -> bool {
        each_backend!(self, s => s.preserves_negative_zero())
    }

    async fn create_table(&self, table: &str) -> Result<()> {
        each_backend!(self, s => s.create_table(table).await)
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        each_backend!(self, s => s.delete_table(table).await)
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        each_backend!(self, s => s.list_tables(prefix).await)
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        each_backend!(self, s => s.get(table, partition_key, row_key, select).await)
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        each_backend!(self, s => s.query(table, query).await)
    }

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        each_backend!(self, s => s.execute(table, op).await)
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        each_backend!(self, s => s.submit_batch(table, batch).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "sqlite")]
    #[test]
    fn connection_strings_pick_the_backend() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            assert!(matches!(
                AnyStore::connect("memory:").await,
                Ok(AnyStore::Memory(_))
            ));
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("x.db");
            let store = AnyStore::connect(&format!("sqlite:{}", path.display()))
                .await
                .expect("sqlite");
            assert!(matches!(store, AnyStore::Sqlite(_)));
            store.create_table("Items").await.expect("create");
            assert!(path.exists());
            let err = AnyStore::connect("postgres://x")
                .await
                .expect_err("unknown scheme");
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
            assert!(AnyStore::connect("sqlite:").await.is_err());
        });
    }
}
