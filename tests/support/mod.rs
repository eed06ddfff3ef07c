//! What the facade's integration tests share: the backends a pattern test runs on, reporting
//! a skip.

#![allow(dead_code, missing_docs)]

use tablekit::core::{AnyStore, ErrorKind};

/// Azurite's connection string with a table prefix of its own, when the Azure backend is
/// compiled in and an emulator answers; under `CI=true` a missing Azurite fails.
pub(crate) fn azurite() -> Option<String> {
    let base = std::env::var("TABLEKIT_AZURE_CONNECTION").ok().or_else(|| {
        let up = "127.0.0.1:10002"
            .parse()
            .ok()
            .and_then(|a| {
                std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(2)).ok()
            })
            .is_some();
        up.then(|| "UseDevelopmentStorage=true".to_owned())
    });
    if base.is_none() {
        service_missing(
            "no Azurite table service: set TABLEKIT_AZURE_CONNECTION or run scripts/services.sh",
        );
    }
    let prefix = &uuid_like()[..10];
    base.map(|b| format!("azure:{b};TablePrefix=t{prefix}"))
}

fn uuid_like() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Azurite's blob service: the storage connection string (without a container).
pub(crate) fn azurite_blobs() -> Option<String> {
    let up = "127.0.0.1:10000"
        .parse()
        .ok()
        .and_then(|a| {
            std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(2)).ok()
        })
        .is_some();
    if !up {
        service_missing("no Azurite blob service: run scripts/services.sh");
        return None;
    }
    Some("UseDevelopmentStorage=true".to_owned())
}

pub(crate) mod kill;
mod skips;
// Not every test binary calls both.
#[allow(unused_imports)]
pub(crate) use skips::{service_missing, skip};

/// A backend under test; the guard keeps its files.
pub(crate) struct Backend {
    pub(crate) store: AnyStore,
    pub(crate) name: &'static str,
    _dir: Option<tempfile::TempDir>,
}

pub(crate) async fn memory() -> Option<Backend> {
    Some(Backend {
        store: AnyStore::create("memory:").await.expect("memory store"),
        name: "memory",
        _dir: None,
    })
}

pub(crate) async fn sqlite() -> Option<Backend> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let url = format!("sqlite:{}", dir.path().join("patterns.db").display());
    Some(Backend {
        store: AnyStore::create(&url).await.expect("sqlite store"),
        name: "sqlite",
        _dir: Some(dir),
    })
}

pub(crate) async fn azure() -> Option<Backend> {
    match AnyStore::create("azure:UseDevelopmentStorage=true").await {
        Err(e) if e.kind() == ErrorKind::InvalidInput => {
            skip("built without the azure feature");
            None
        }
        _ => {
            let url = azurite()?;
            Some(Backend {
                store: AnyStore::create(&url).await.expect("azure store"),
                name: "azure",
                _dir: None,
            })
        }
    }
}

/// One `#[tokio::test]` per backend for each listed case: `case(store)`.
#[macro_export]
macro_rules! on_backends {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let backend = $crate::support::memory().await.expect("memory");
                    super::$case(backend.store.clone()).await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let backend = $crate::support::sqlite().await.expect("sqlite");
                    super::$case(backend.store.clone()).await;
                }
            )*
        }
        mod azure {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(backend) = $crate::support::azure().await else {
                        return;
                    };
                    super::$case(backend.store.clone()).await;
                }
            )*
        }
    };
}

/// Buries the tombstones deletes left in `store` (see
/// `tablekit::patterns::index::record::TOMBSTONE_KIND`): one relay pass, applying the
/// burials inline, on a clock past their grace period.
pub(crate) async fn bury_tombstones(store: &AnyStore) {
    use std::sync::Arc;
    use tablekit::patterns::index::{InlineSink, Relay, handlers};
    let later = tablekit::core::clock::ManualClock::new(
        tablekit::core::clock::now()
            + chrono::Duration::from_std(tablekit::patterns::consistency::DEFAULT_TOMBSTONE_GRACE)
                .expect("grace")
            + chrono::Duration::seconds(1),
    );
    let _clock = tablekit::core::clock::simulate(later.shared());
    let sink = Arc::new(InlineSink::new(handlers(store.clone(), None)));
    Relay::options()
        .grace(std::time::Duration::ZERO)
        .late(std::time::Duration::ZERO)
        .build(store.clone(), sink)
        .run_once()
        .await
        .expect("a relay pass burying tombstones");
}
