//! A store chosen at run time from a connection string, for binaries and examples whose
//! backend is a command-line flag. Libraries stay generic over [`TableStore`].

pub mod forms;

use self::forms::{Argument, Form};
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
    /// The forms [`AnyStore::connect`] accepts.
    pub const FORMS: &'static [Form] = &[
        Form::new("sqlite", Argument::Path, "sqlite:PATH"),
        Form::new("memory", Argument::Nothing, "memory:"),
        Form::new(
            "azure",
            Argument::ConnectionString,
            "azure:CONNECTION-STRING",
        ),
    ];

    /// Opens the store a connection string names as [`connect`](Self::connect) does, and
    /// creates a SQLite file that does not exist yet (as `sqlite:PATH?mode=rwc`): for an
    /// application that owns its store. A worker never creates one.
    ///
    /// # Errors
    /// As [`connect`](Self::connect), but a missing SQLite file is created.
    pub async fn create(connection: &str) -> Result<Self> {
        match connection.strip_prefix("sqlite:") {
            Some(path) if !path.is_empty() && !path.ends_with("?mode=rwc") => {
                Self::connect(&format!("{connection}?mode=rwc")).await
            }
            _ => Self::connect(connection).await,
        }
    }

    /// Opens the store a connection string names, in one of [`FORMS`](Self::FORMS):
    ///
    /// - `sqlite:PATH`: the existing SQLite file at PATH, relative (`sqlite:app.db`) or
    ///   absolute (`sqlite:/var/lib/app.db`); `sqlite:PATH?mode=rwc` creates it when it
    ///   does not exist (sqlx's spelling of *read, write, create*);
    /// - `memory:`: a fresh in-memory store;
    /// - `azure:CONNECTION-STRING` (feature `azure`): Azure Table Storage, Cosmos DB for
    ///   Table or Azurite (`azure:UseDevelopmentStorage=true`).
    ///
    /// Any other string is refused before anything is opened or created: a bare path
    /// (write `sqlite:PATH`), `sqlite://app.db` (which would be `/app.db` at the root of
    /// the filesystem), `memory` without its colon.
    ///
    /// # Errors
    /// [`Error::InvalidConnection`] (kind `InvalidInput`) for a string in none of the
    /// forms, with a hint and the forms accepted (never showing the key a storage
    /// connection string holds), or naming a backend not compiled in;
    /// [`Error::StoreNotFound`] for a SQLite file that does not exist, without
    /// `?mode=rwc`; the backend's own errors when it cannot open.
    pub async fn connect(connection: &str) -> Result<Self> {
        let refused = |reason: String| Error::InvalidConnection {
            connection: forms::shown(connection),
            reason,
        };
        let (form, rest) = forms::accept(connection, Self::FORMS).map_err(refused)?;
        #[cfg(not(any(feature = "sqlite", feature = "azure")))]
        let _ = rest; // only the SQLite and Azure forms have an argument
        match form.scheme {
            "memory" => Ok(AnyStore::Memory(MemoryStore::new())),
            #[cfg(feature = "sqlite")]
            "sqlite" => Ok(AnyStore::Sqlite(match rest.strip_suffix("?mode=rwc") {
                Some(path) => SqliteStore::create(path).await?,
                None => SqliteStore::open(rest).await?,
            })),
            #[cfg(feature = "azure")]
            "azure" => Ok(AnyStore::Azure(crate::azure::AzureTableStore::connect(
                rest,
            )?)),
            #[cfg(not(feature = "azure"))]
            "azure" => Err(refused(
                "this build has no Azure Table Storage support: build it with the `azure` feature (`cargo build --features azure`)".to_owned(),
            )),
            _ => Err(refused(format!(
                "this build has no support for `{}`: build it with the `{}` feature",
                form.written, form.scheme
            ))),
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
            let store = AnyStore::connect(&format!("sqlite:{}?mode=rwc", path.display()))
                .await
                .expect("sqlite");
            assert!(matches!(store, AnyStore::Sqlite(_)));
            store.create_table("Items").await.expect("create");
            assert!(path.exists());
            AnyStore::connect(&format!("sqlite:{}", path.display()))
                .await
                .expect("an existing file opens");
            let err = AnyStore::connect("postgres://x")
                .await
                .expect_err("unknown scheme");
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
            assert!(AnyStore::connect("sqlite:").await.is_err());
        });
    }

    /// A mistyped path is an error naming it, not a new, empty store: nothing is created.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_sqlite_store_that_does_not_exist_is_not_created_unless_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let typo = dir.path().join("app.bd");
        let error = AnyStore::connect(&format!("sqlite:{}", typo.display()))
            .await
            .expect_err("no such store");
        assert!(matches!(error, Error::StoreNotFound { .. }), "{error}");
        assert_eq!(error.kind(), crate::ErrorKind::NotFound);
        assert!(error.to_string().contains("app.bd"), "{error}");
        assert!(error.to_string().contains("?mode=rwc"), "{error}");
        assert!(!typo.exists(), "nothing created");
        let error = SqliteStore::open(&typo).await.expect_err("no such store");
        assert!(matches!(error, Error::StoreNotFound { .. }), "{error}");
        assert!(!typo.exists(), "nothing created");
        SqliteStore::create(&typo)
            .await
            .expect("created when asked");
        assert!(typo.exists());
    }
}
