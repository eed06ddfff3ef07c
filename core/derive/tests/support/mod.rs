//! What the typed-table tests share: finding Azurite, reporting a skip.

#![allow(dead_code)]

/// Azurite's connection string with a table prefix of its own, when the Azure backend is
/// compiled in (feature `azure`) and an emulator answers; under `CI=true` a missing
/// Azurite fails.
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
    let prefix = &uuid::Uuid::new_v4().simple().to_string()[..10];
    base.map(|b| format!("azure:{b};TablePrefix=t{prefix}"))
}

#[path = "../../../../tests/support/skips.rs"]
mod skips;
// Not every test binary calls both.
#[allow(unused_imports)]
pub(crate) use skips::{service_missing, skip};
