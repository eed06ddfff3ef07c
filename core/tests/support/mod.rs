//! What the core's service tests share: finding Azurite, reporting a skip.

#![allow(dead_code)]

/// Azurite's connection string: the variable `env_var` names, if set, else the development
/// storage when `address` (the service's port on loopback) answers. Without one the test
/// reports a skip, except under `CI=true`, where a missing Azurite is a failure
/// (`scripts/services.sh` starts it).
pub(crate) fn azurite(env_var: Option<&str>, address: &str) -> Option<String> {
    if let Some(connection) = env_var.and_then(|name| std::env::var(name).ok()) {
        return Some(connection);
    }
    let up = address
        .parse()
        .ok()
        .and_then(|a| {
            std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(2)).ok()
        })
        .is_some();
    if up {
        return Some("UseDevelopmentStorage=true".to_owned());
    }
    service_missing(&format!(
        "no Azurite on {address}: set TABLEKIT_AZURE_CONNECTION or run scripts/services.sh"
    ));
    None
}

/// Azurite's table service.
pub(crate) fn azurite_tables() -> Option<String> {
    azurite(Some("TABLEKIT_AZURE_CONNECTION"), "127.0.0.1:10002")
}

#[path = "../../../tests/support/skips.rs"]
mod skips;
// Not every test binary calls both.
#[allow(unused_imports)]
pub(crate) use skips::{service_missing, skip};
