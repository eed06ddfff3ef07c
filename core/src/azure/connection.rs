//! Connection strings and request authentication (SharedKeyLite and SAS) for the Table
//! service.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{Error, Result};

/// The account name of the storage emulator (Azurite).
pub const DEVELOPMENT_ACCOUNT: &str = "devstoreaccount1";
/// The well-known key of the storage emulator (public, documented by Microsoft).
pub const DEVELOPMENT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// The emulator's table endpoint.
pub const DEVELOPMENT_TABLE_ENDPOINT: &str = "http://127.0.0.1:10002/devstoreaccount1";

/// How requests are authorised.
#[derive(Clone)]
pub enum Credential {
    /// Shared key (SharedKeyLite signatures): the account key, decoded.
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

/// Where the Table service is and how to sign for it.
#[derive(Clone, Debug)]
pub struct AzureConfig {
    /// The account name.
    pub account: String,
    /// The table endpoint, without a trailing slash
    /// (`https://ACCOUNT.table.core.windows.net`, or Azurite's
    /// `http://127.0.0.1:10002/devstoreaccount1`).
    pub endpoint: String,
    /// The credential.
    pub credential: Credential,
    /// A prefix for every table name (tablekit's own `TablePrefix=` key): tenants or test
    /// runs sharing an account each see only their tables.
    pub table_prefix: String,
}

fn invalid(connection: &str, reason: impl Into<String>) -> Error {
    // The connection string holds a secret: only its keys are shown.
    let keys: Vec<&str> = connection
        .split(';')
        .filter_map(|part| part.split_once('=').map(|(k, _)| k.trim()))
        .collect();
    Error::InvalidConnection {
        connection: format!("connection string with keys {keys:?}"),
        reason: reason.into(),
    }
}

impl AzureConfig {
    /// Reads a storage connection string:
    /// - `UseDevelopmentStorage=true` (Azurite on its default port);
    /// - `DefaultEndpointsProtocol=https;AccountName=…;AccountKey=…;EndpointSuffix=…`;
    /// - any of these with `TableEndpoint=…` (Azurite on another port, Cosmos DB for
    ///   Table's `https://ACCOUNT.table.cosmos.azure.com:443/`);
    /// - `TableEndpoint=…;SharedAccessSignature=…` (SAS, no key);
    /// - and tablekit's own `TablePrefix=…`, prefixed to every table name.
    ///
    /// # Errors
    /// [`Error::InvalidConnection`] naming what is missing or malformed (never echoing the
    /// key).
    pub fn from_connection_string(connection: &str) -> Result<Self> {
        let (fields, malformed) = crate::connection_string::fields(connection);
        if let Some(part) = malformed.first() {
            return Err(invalid(connection, format!("`{part}` is not KEY=VALUE")));
        }
        let get = |k: &str| fields.get(k).cloned();
        if get("usedevelopmentstorage").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            let endpoint = get("developmentstorageproxyuri")
                .map(|proxy| format!("{}/{DEVELOPMENT_ACCOUNT}", proxy.trim_end_matches('/')))
                .or_else(|| get("tableendpoint"))
                .unwrap_or_else(|| DEVELOPMENT_TABLE_ENDPOINT.to_owned());
            return Ok(AzureConfig {
                table_prefix: get("tableprefix").unwrap_or_default(),
                account: DEVELOPMENT_ACCOUNT.to_owned(),
                endpoint: endpoint.trim_end_matches('/').to_owned(),
                credential: Credential::SharedKey(
                    STANDARD
                        .decode(DEVELOPMENT_KEY)
                        .map_err(|_| invalid(connection, "the development key"))?,
                ),
            });
        }
        let endpoint = match get("tableendpoint") {
            Some(endpoint) => endpoint,
            None => {
                let account = get("accountname")
                    .ok_or_else(|| invalid(connection, "missing AccountName (or TableEndpoint)"))?;
                let protocol = get("defaultendpointsprotocol").unwrap_or_else(|| "https".into());
                let suffix = get("endpointsuffix").unwrap_or_else(|| "core.windows.net".into());
                format!("{protocol}://{account}.table.{suffix}")
            }
        };
        let endpoint = endpoint.trim_end_matches('/').to_owned();
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(invalid(
                connection,
                "the table endpoint must be an http(s) URL",
            ));
        }
        let account = match get("accountname") {
            Some(account) => account,
            None => account_from_endpoint(&endpoint)
                .ok_or_else(|| invalid(connection, "missing AccountName"))?,
        };
        let credential = match (get("accountkey"), get("sharedaccesssignature")) {
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
        let table_prefix = get("tableprefix").unwrap_or_default();
        if !table_prefix.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(invalid(
                connection,
                "TablePrefix holds letters and digits only",
            ));
        }
        Ok(AzureConfig {
            account,
            endpoint,
            credential,
            table_prefix,
        })
    }
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

/// The SharedKeyLite signature of a request: `x-ms-date` + "\n" + "/" + account + the
/// path as sent (+ `?comp=…` when present).
pub(crate) fn shared_key_lite(
    key: &[u8],
    account: &str,
    date: &str,
    path: &str,
    comp: Option<&str>,
) -> String {
    let mut resource = format!("/{account}{path}");
    if let Some(comp) = comp {
        resource.push_str("?comp=");
        resource.push_str(comp);
    }
    format!(
        "SharedKeyLite {account}:{}",
        sign(key, &format!("{date}\n{resource}"))
    )
}

/// The base64 HMAC-SHA256 of a string to sign: every storage signature (shared key, shared
/// key lite, SAS) ends in it.
pub fn sign(key: &[u8], to_sign: &str) -> String {
    #[allow(clippy::expect_used)]
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(to_sign.as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

/// Now, as the `x-ms-date` header carries it (RFC 1123).
pub fn http_date() -> String {
    chrono::Utc::now()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string()
}

/// An account shared access signature for the Table service, signed with the account
/// key: the query string a `SharedAccessSignature=` connection string carries. `permissions`
/// are the service's letters (`r` read, `a` add, `u` update, `d` delete, `l` list, `w`,
/// `c`), valid from now until `expiry`, over HTTP and HTTPS.
///
/// # Errors
/// [`Error::InvalidConnection`] when the key is not base64.
pub fn account_sas(
    account: &str,
    key_base64: &str,
    permissions: &str,
    expiry: chrono::DateTime<chrono::Utc>,
) -> Result<String> {
    let key = STANDARD
        .decode(key_base64)
        .map_err(|_| invalid("", "the account key is not base64"))?;
    let version = "2019-02-02";
    let expiry = expiry.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let to_sign =
        format!("{account}\n{permissions}\nt\nsco\n\n{expiry}\n\nhttps,http\n{version}\n");
    let signature = sign(&key, &to_sign);
    let encode = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    Ok(format!(
        "sv={version}&ss=t&srt=sco&sp={permissions}&se={}&spr=https,http&sig={}",
        encode(&expiry),
        encode(&signature)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn development_storage_points_at_azurite() {
        let config =
            AzureConfig::from_connection_string("UseDevelopmentStorage=true").expect("valid");
        assert_eq!(config.account, DEVELOPMENT_ACCOUNT);
        assert_eq!(config.endpoint, DEVELOPMENT_TABLE_ENDPOINT);
        assert!(matches!(config.credential, Credential::SharedKey(_)));
    }

    #[test]
    fn account_strings_build_the_public_endpoint() {
        let config = AzureConfig::from_connection_string(
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=a2V5;EndpointSuffix=core.windows.net",
        )
        .expect("valid");
        assert_eq!(config.endpoint, "https://acme.table.core.windows.net");
        assert_eq!(config.account, "acme");
        let sas = AzureConfig::from_connection_string(
            "TableEndpoint=https://acme.table.core.windows.net/;SharedAccessSignature=?sv=2019&sig=x",
        )
        .expect("valid");
        assert_eq!(sas.account, "acme");
        assert!(matches!(sas.credential, Credential::Sas(ref q) if q == "sv=2019&sig=x"));
    }

    #[test]
    fn bad_strings_name_the_problem_without_the_key() {
        let error =
            AzureConfig::from_connection_string("AccountName=acme;AccountKey=!!notbase64!!")
                .expect_err("bad key");
        let message = error.to_string();
        assert!(message.contains("AccountKey is not base64"), "{message}");
        assert!(
            !message.contains("notbase64"),
            "the key is not echoed: {message}"
        );
        assert!(AzureConfig::from_connection_string("AccountName=acme").is_err());
        assert!(AzureConfig::from_connection_string("garbage").is_err());
    }

    #[test]
    fn signatures_match_the_documented_string_to_sign() {
        // The emulator's account appears twice: once as the account, once in the path.
        let key = STANDARD.decode(DEVELOPMENT_KEY).expect("base64");
        let signature = shared_key_lite(
            &key,
            DEVELOPMENT_ACCOUNT,
            "Sun, 22 Nov 2026 02:53:09 GMT",
            "/devstoreaccount1/Tables",
            None,
        );
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("any key length");
        mac.update(b"Sun, 22 Nov 2026 02:53:09 GMT\n/devstoreaccount1/devstoreaccount1/Tables");
        let expected = STANDARD.encode(mac.finalize().into_bytes());
        assert_eq!(
            signature,
            format!("SharedKeyLite devstoreaccount1:{expected}")
        );
    }
}
