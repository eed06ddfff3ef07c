//! The one reader of Azure Storage connection strings: the account, its credential (the
//! account key or a shared access signature), the development storage (Azurite), and the
//! endpoint of each service (tables, queues, blobs). The Table client, the Queue backend
//! of the workers and the blob store all read their connection strings here.
//!
//! The forms read:
//! - `UseDevelopmentStorage=true` (Azurite on its default ports, the well-known key),
//!   optionally with `DevelopmentStorageProxyUri=…` or a service endpoint;
//! - `DefaultEndpointsProtocol=https;AccountName=…;AccountKey=…;EndpointSuffix=…`, the
//!   endpoints built from the account (`https://ACCOUNT.table.core.windows.net`);
//! - any of these with `TableEndpoint=…`, `QueueEndpoint=…` or `BlobEndpoint=…` (Azurite on
//!   other ports, Cosmos DB for Table's `https://ACCOUNT.table.cosmos.azure.com:443/`);
//! - `TableEndpoint=…;SharedAccessSignature=…` (a SAS, no key; the account is read from
//!   the endpoint, and only the services given an endpoint are reachable);
//! - and tablekit's own keys (`TablePrefix=`, `ClaimContainer=`, `Container=`, …), kept as
//!   [`settings`](StorageAccount::setting) for the client that reads them.
//!
//! The key and the signature are secrets: no error and no `Debug` output shows them.

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::error::{Error, Result};

/// The account name of the storage emulator (Azurite).
pub const DEVELOPMENT_ACCOUNT: &str = "devstoreaccount1";
/// The well-known key of the storage emulator (public, documented by Microsoft).
pub const DEVELOPMENT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// The emulator's blob endpoint.
pub const DEVELOPMENT_BLOB_ENDPOINT: &str = "http://127.0.0.1:10000/devstoreaccount1";
/// The emulator's queue endpoint.
pub const DEVELOPMENT_QUEUE_ENDPOINT: &str = "http://127.0.0.1:10001/devstoreaccount1";
/// The emulator's table endpoint.
pub const DEVELOPMENT_TABLE_ENDPOINT: &str = "http://127.0.0.1:10002/devstoreaccount1";

/// A storage service of an account.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Service {
    /// Blob Storage.
    Blob,
    /// Queue Storage.
    Queue,
    /// Table Storage (and Cosmos DB for Table).
    Table,
}

impl Service {
    /// Every service, in the order their endpoints are looked for an account name.
    pub const ALL: [Service; 3] = [Service::Table, Service::Queue, Service::Blob];

    /// The service version tablekit speaks to it (`x-ms-version`): the one table of them.
    pub const fn api_version(self) -> &'static str {
        match self {
            Service::Table => "2019-02-02",
            Service::Queue | Service::Blob => "2021-08-06",
        }
    }

    /// The service's label in host names (`ACCOUNT.table.core.windows.net`).
    pub const fn label(self) -> &'static str {
        match self {
            Service::Blob => "blob",
            Service::Queue => "queue",
            Service::Table => "table",
        }
    }

    /// The connection-string key naming its endpoint.
    pub const fn endpoint_key(self) -> &'static str {
        match self {
            Service::Blob => "BlobEndpoint",
            Service::Queue => "QueueEndpoint",
            Service::Table => "TableEndpoint",
        }
    }

    const fn development_endpoint(self) -> &'static str {
        match self {
            Service::Blob => DEVELOPMENT_BLOB_ENDPOINT,
            Service::Queue => DEVELOPMENT_QUEUE_ENDPOINT,
            Service::Table => DEVELOPMENT_TABLE_ENDPOINT,
        }
    }

    const fn index(self) -> usize {
        match self {
            Service::Blob => 0,
            Service::Queue => 1,
            Service::Table => 2,
        }
    }
}

/// How requests are authorised.
#[derive(Clone)]
pub enum Credential {
    /// Shared key (SharedKey and SharedKeyLite signatures): the account key, decoded.
    SharedKey(Vec<u8>),
    /// A shared access signature: the query string to append (without `?`).
    Sas(String),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::SharedKey(_) => f.write_str("SharedKey(…)"),
            Credential::Sas(_) => f.write_str("Sas(…)"),
        }
    }
}

/// An account read from a connection string: see the [module](self) docs.
#[derive(Clone)]
pub struct StorageAccount {
    name: String,
    credential: Credential,
    development: bool,
    /// Each service's endpoint without a trailing slash, by [`Service::index`]; `None`
    /// for a service the string gives no way to reach.
    endpoints: [Option<String>; 3],
    /// The fields that are neither the credential nor read here, keys lower-cased.
    settings: HashMap<String, String>,
}

impl std::fmt::Debug for StorageAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut settings: Vec<&str> = self.settings.keys().map(String::as_str).collect();
        settings.sort_unstable();
        f.debug_struct("StorageAccount")
            .field("name", &self.name)
            .field("credential", &self.credential)
            .field("development", &self.development)
            .field("endpoints", &self.endpoints)
            .field("settings", &settings)
            .finish()
    }
}

/// The keys this reader consumes; every other field is a setting.
const READ_HERE: [&str; 10] = [
    "usedevelopmentstorage",
    "developmentstorageproxyuri",
    "defaultendpointsprotocol",
    "accountname",
    "accountkey",
    "sharedaccesssignature",
    "endpointsuffix",
    "tableendpoint",
    "queueendpoint",
    "blobendpoint",
];

/// An unreadable connection string, shown by its keys only (it holds a secret).
pub(crate) fn invalid(connection: &str, reason: impl Into<String>) -> Error {
    let keys: Vec<&str> = connection
        .split(';')
        .filter_map(|part| part.split_once('=').map(|(k, _)| k.trim()))
        .collect();
    Error::InvalidConnection {
        connection: format!("connection string with keys {keys:?}"),
        reason: reason.into(),
    }
}

impl StorageAccount {
    /// Reads a storage connection string (see the [module](self) docs).
    ///
    /// # Errors
    /// [`Error::InvalidConnection`] naming what is missing or malformed, never echoing the
    /// key or the signature.
    pub fn from_connection_string(connection: &str) -> Result<Self> {
        let (mut fields, malformed) = crate::connection_string::fields(connection);
        if !malformed.is_empty() {
            // Not echoed: a key pasted without its `AccountKey=` is still a secret.
            return Err(invalid(
                connection,
                format!("{} part(s) are not KEY=VALUE", malformed.len()),
            ));
        }
        let development = fields
            .get("usedevelopmentstorage")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let mut endpoints: [Option<String>; 3] = Default::default();
        for service in Service::ALL {
            if let Some(endpoint) = fields.get(&service.endpoint_key().to_ascii_lowercase()) {
                let endpoint = endpoint.trim_end_matches('/');
                if !is_http_url(endpoint) {
                    return Err(invalid(
                        connection,
                        format!("{} must be an http(s) URL", service.endpoint_key()),
                    ));
                }
                endpoints[service.index()] = Some(endpoint.to_owned());
            }
        }
        let (name, credential) = if development {
            let proxy = fields
                .get("developmentstorageproxyuri")
                .map(|proxy| format!("{}/{DEVELOPMENT_ACCOUNT}", proxy.trim_end_matches('/')));
            for service in Service::ALL {
                let endpoint = &mut endpoints[service.index()];
                if endpoint.is_none() {
                    *endpoint = Some(
                        proxy
                            .clone()
                            .unwrap_or_else(|| service.development_endpoint().to_owned()),
                    );
                }
            }
            let key = STANDARD
                .decode(DEVELOPMENT_KEY)
                .map_err(|_| invalid(connection, "the development key"))?;
            (DEVELOPMENT_ACCOUNT.to_owned(), Credential::SharedKey(key))
        } else {
            let name = match fields.get("accountname") {
                Some(name) => {
                    let protocol = fields
                        .get("defaultendpointsprotocol")
                        .map_or("https", String::as_str);
                    let suffix = fields
                        .get("endpointsuffix")
                        .map_or("core.windows.net", String::as_str);
                    for service in Service::ALL {
                        endpoints[service.index()].get_or_insert_with(|| {
                            format!("{protocol}://{name}.{}.{suffix}", service.label())
                        });
                    }
                    name.clone()
                }
                None => endpoints
                    .iter()
                    .flatten()
                    .find_map(|endpoint| account_from_endpoint(endpoint))
                    .ok_or_else(|| {
                        invalid(connection, "missing AccountName (or a service endpoint)")
                    })?,
            };
            let credential = match (
                fields.get("accountkey"),
                fields.get("sharedaccesssignature"),
            ) {
                (Some(key), _) => Credential::SharedKey(
                    STANDARD
                        .decode(key)
                        .map_err(|_| invalid(connection, "AccountKey is not base64"))?,
                ),
                (None, Some(sas)) => Credential::Sas(sas.trim_start_matches('?').to_owned()),
                (None, None) => {
                    return Err(invalid(
                        connection,
                        "missing AccountKey or SharedAccessSignature",
                    ));
                }
            };
            (name, credential)
        };
        fields.retain(|key, _| !READ_HERE.contains(&key.as_str()));
        Ok(StorageAccount {
            name,
            credential,
            development,
            endpoints,
            settings: fields,
        })
    }

    /// The account name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How requests are authorised.
    pub fn credential(&self) -> &Credential {
        &self.credential
    }

    /// The account key, when the string has one (a SAS string has not).
    pub fn key(&self) -> Option<&[u8]> {
        match &self.credential {
            Credential::SharedKey(key) => Some(key),
            Credential::Sas(_) => None,
        }
    }

    /// Whether this is the development storage (`UseDevelopmentStorage=true`).
    pub fn is_development(&self) -> bool {
        self.development
    }

    /// The service's endpoint, without a trailing slash.
    ///
    /// # Errors
    /// [`Error::InvalidConnection`] when the string gives no way to reach the service
    /// (a SAS string naming another service's endpoint only).
    pub fn endpoint(&self, service: Service) -> Result<&str> {
        self.endpoints[service.index()]
            .as_deref()
            .ok_or_else(|| Error::InvalidConnection {
                connection: format!("the connection string of account `{}`", self.name),
                reason: format!("missing {} (or AccountName)", service.endpoint_key()),
            })
    }

    /// A field of the string that is not read here (tablekit's own `TablePrefix=`,
    /// `ClaimContainer=`, `Container=`, …), by its key in lower case.
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings.get(key).map(String::as_str)
    }
}

fn is_http_url(endpoint: &str) -> bool {
    endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
        .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
}

/// The account of a service endpoint: `https://ACCOUNT.table…` (or `.queue…`, `.blob…`), or
/// an emulator URL ending in the account (`http://127.0.0.1:10002/devstoreaccount1`).
pub fn account_from_endpoint(endpoint: &str) -> Option<String> {
    let rest = endpoint.split_once("://")?.1;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !path.is_empty() {
        return Some(path.trim_matches('/').to_owned());
    }
    host.split('.').next().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(connection: &str) -> StorageAccount {
        StorageAccount::from_connection_string(connection).expect("a valid connection string")
    }

    #[test]
    fn development_storage_reaches_azurite_on_each_services_port() {
        let account = read("UseDevelopmentStorage=true");
        assert_eq!(account.name(), DEVELOPMENT_ACCOUNT);
        assert!(account.is_development());
        assert!(account.key().is_some());
        for (service, endpoint) in [
            (Service::Table, DEVELOPMENT_TABLE_ENDPOINT),
            (Service::Queue, DEVELOPMENT_QUEUE_ENDPOINT),
            (Service::Blob, DEVELOPMENT_BLOB_ENDPOINT),
        ] {
            assert_eq!(account.endpoint(service).expect("an endpoint"), endpoint);
        }
        let moved =
            read("UseDevelopmentStorage=true;QueueEndpoint=http://127.0.0.1:1/devstoreaccount1/");
        assert_eq!(
            moved.endpoint(Service::Queue).expect("given"),
            "http://127.0.0.1:1/devstoreaccount1"
        );
        let proxied =
            read("UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://azurite:9");
        assert_eq!(
            proxied.endpoint(Service::Table).expect("proxied"),
            "http://azurite:9/devstoreaccount1"
        );
    }

    #[test]
    fn account_strings_build_every_public_endpoint() {
        let account = read(
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=a2V5;EndpointSuffix=core.windows.net;TablePrefix=t1",
        );
        assert_eq!(account.name(), "acme");
        assert_eq!(account.key(), Some(&b"key"[..]));
        for service in Service::ALL {
            assert_eq!(
                account.endpoint(service).expect("built"),
                format!("https://acme.{}.core.windows.net", service.label())
            );
        }
        assert_eq!(account.setting("tableprefix"), Some("t1"));
        assert_eq!(account.setting("accountkey"), None, "the key is no setting");
    }

    #[test]
    fn a_sas_string_reaches_only_the_services_it_names() {
        let account = read(
            "QueueEndpoint=https://acme.queue.core.windows.net/;SharedAccessSignature=?sv=1&sig=x",
        );
        assert_eq!(account.name(), "acme");
        assert!(matches!(account.credential(), Credential::Sas(q) if q == "sv=1&sig=x"));
        assert_eq!(
            account.endpoint(Service::Queue).expect("given"),
            "https://acme.queue.core.windows.net"
        );
        let missing = account.endpoint(Service::Table).expect_err("not given");
        assert!(missing.to_string().contains("TableEndpoint"), "{missing}");
        assert_eq!(
            read(
                "TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;SharedAccessSignature=sv=1"
            )
            .name(),
            DEVELOPMENT_ACCOUNT
        );
    }

    #[test]
    fn keys_and_signatures_never_show_in_errors_or_debug() {
        let account = read("AccountName=acme;AccountKey=c2VjcmV0a2V5;ClaimContainer=c");
        let shown = format!("{account:?}");
        assert!(
            !shown.contains("c2VjcmV0a2V5") && !shown.contains("secretkey"),
            "{shown}"
        );
        let sas = read(
            "TableEndpoint=https://acme.table.core.windows.net;SharedAccessSignature=sv=1&sig=SECRETSIG",
        );
        assert!(!format!("{sas:?}").contains("SECRETSIG"));
        for (bad, reason) in [
            (
                "AccountName=acme;AccountKey=!!secret!!",
                "AccountKey is not base64",
            ),
            (
                "AccountName=acme",
                "missing AccountKey or SharedAccessSignature",
            ),
            ("AccountKey=c2VjcmV0", "missing AccountName"),
            (
                "AccountName=acme;AccountKey=c2VjcmV0;secret",
                "are not KEY=VALUE",
            ),
            (
                "TableEndpoint=ftp://x;AccountKey=c2VjcmV0",
                "TableEndpoint must be an http(s) URL",
            ),
        ] {
            let error = StorageAccount::from_connection_string(bad).expect_err(bad);
            let message = error.to_string();
            assert!(message.contains(reason), "{bad}: {message}");
            assert!(
                !message.contains("c2VjcmV0") && !message.contains("!!secret"),
                "{message}"
            );
        }
    }
}
