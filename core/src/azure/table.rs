//! `AzureTableStore`: the Table client's settings, its table names (prefix, emulator
//! spellings) and URLs, and its requests through the one [`ServiceClient`].

use std::time::Duration;

use percent_encoding::utf8_percent_encode;
use reqwest::Method;
use serde_json::Value as Json;

use super::account::{Credential, DEVELOPMENT_ACCOUNT, Service};
use super::client::{PATH, SendError, ServiceClient};
use super::{AzureConfig, sas, scope};
use crate::error::{Error, Result};
use crate::limits;
use crate::model::ETag;
use crate::retry::RetryPolicy;

const ACCEPT_JSON: &str = "application/json;odata=minimalmetadata";

/// How long creating a table waits, by default, while the service is still deleting a
/// table of that name.
pub const TABLE_BEING_DELETED_WAIT: Duration = Duration::from_secs(60);

/// A Table service client implementing [`TableStore`](crate::TableStore).
#[derive(Clone, Debug)]
pub struct AzureTableStore {
    /// Shared by the clones of the store (one connection pool).
    pub(super) client: std::sync::Arc<ServiceClient>,
    pub(super) config: AzureConfig,
    pub(super) table_prefix: String,
    /// How long creating a table waits while the service is still deleting one of that
    /// name.
    pub(super) being_deleted_wait: Duration,
    pub(super) emulator: bool,
    /// Whether query results are filtered again by the core's rules.
    pub(super) refilter: bool,
    /// Emulator only: the stored spelling of each table name, by lower-case name.
    pub(super) spellings:
        std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
    /// The scope of the shared access signature the store was opened with.
    pub(super) scope: Option<std::sync::Arc<scope::SasScope>>,
}

/// Marks a continuation token that carries the service's own (opaque) markers, as opposed
/// to a token naming the key to resume at: U+FFFF, a noncharacter no real key starts with.
pub(super) const SERVICE_TOKEN: char = '\u{FFFF}';

pub(super) fn transient(message: impl Into<String>) -> Error {
    Error::Transient {
        message: message.into(),
    }
}

pub(super) fn quote(key: &str) -> String {
    key.replace('\'', "''")
}

/// The settings of an [`AzureTableStore`], given in any order, then opened on a
/// connection string with [`connect`](Self::connect) or on a configuration with
/// [`build`](Self::build) (no request is sent). Each setter given twice keeps the last
/// value.
///
/// ```
/// use std::time::Duration;
/// use tablekit_core::azure::{AzureTableStore, RetryPolicy};
///
/// # fn main() -> tablekit_core::Result<()> {
/// let store = AzureTableStore::options()
///     .table_prefix("tenant1")
///     .retry_policy(RetryPolicy::azure().attempts(3))
///     .being_deleted_wait(Duration::ZERO)
///     .connect("UseDevelopmentStorage=true")?;
/// assert_eq!(store.config().table_prefix, "tenant1");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct AzureTableStoreOptions {
    table_prefix: Option<String>,
    retry: RetryPolicy,
    being_deleted_wait: Duration,
    emulator: Option<bool>,
    refilter: bool,
}

impl Default for AzureTableStoreOptions {
    fn default() -> Self {
        AzureTableStoreOptions {
            table_prefix: None,
            retry: RetryPolicy::azure(),
            being_deleted_wait: TABLE_BEING_DELETED_WAIT,
            emulator: None,
            refilter: true,
        }
    }
}

impl AzureTableStoreOptions {
    /// The defaults: the configuration's table prefix, retries under
    /// [`RetryPolicy::azure`], [`TABLE_BEING_DELETED_WAIT`] for a table being deleted,
    /// the emulator's workarounds for the development account only, and query results
    /// filtered again by the core's rules.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether to work around the emulator's differences from the service (default: on
    /// for the development account, off for any other): Azurite does not enforce the
    /// property and size limits on merges, compares table names with case, matches `ne`
    /// and `not` over absent properties, and fails on some typed comparisons. With the
    /// workarounds on, merges read the stored entity to check the merged result first,
    /// server filters are loosened where Azurite is wrong (results are always filtered
    /// again by the core's rules), and table names are matched without case.
    #[must_use]
    pub fn emulator_workarounds(mut self, enabled: bool) -> Self {
        self.emulator = Some(enabled);
        self
    }

    /// Whether query results are filtered again here by [`Filter::matches`] (default
    /// on), which makes every query answer by the core's filter rules whatever the
    /// service or emulator decides.
    ///
    /// Off, a query returns what the service answered to its `$filter`, sent as
    /// [`Display`](std::fmt::Display) writes it and never loosened for the emulator: use
    /// it to compare the service's own answers with the core's (the differential test
    /// also turns the [emulator workarounds](Self::emulator_workarounds) off). Keys are
    /// still scoped to a shared access signature's range.
    ///
    /// [`Filter::matches`]: crate::filter::Filter::matches
    #[must_use]
    pub fn result_filtering(mut self, enabled: bool) -> Self {
        self.refilter = enabled;
        self
    }

    /// Every table name gets this prefix on the service (letters and digits), instead of
    /// the configuration's (`TablePrefix=`, default none): tenants, or tests sharing one
    /// account, each see only their own tables. No prefix may begin another (`ab` and
    /// `abc`): the service cannot tell their tables apart.
    #[must_use]
    pub fn table_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.table_prefix = Some(prefix.into());
        self
    }

    /// How transient failures are retried (default [`RetryPolicy::azure`]); the same
    /// policy paces the wait for a table being deleted.
    #[must_use]
    pub fn retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// How long creating a table waits while the service is still deleting a table of
    /// that name (it answers `TableBeingDeleted` for up to about 40 seconds after a
    /// delete), retrying under the retry policy with pauses of at most
    /// [`MAX_BEING_DELETED_PAUSE`](super::MAX_BEING_DELETED_PAUSE); then
    /// [`Error::TableBeingDeleted`]. Zero does not wait; the default is
    /// [`TABLE_BEING_DELETED_WAIT`].
    #[must_use]
    pub fn being_deleted_wait(mut self, wait: Duration) -> Self {
        self.being_deleted_wait = wait;
        self
    }

    /// The store for a storage connection string (see
    /// [`AzureConfig::from_connection_string`]).
    ///
    /// # Errors
    /// [`Error::InvalidConnection`]; then as [`build`](Self::build).
    pub fn connect(self, connection_string: &str) -> Result<AzureTableStore> {
        self.build(AzureConfig::from_connection_string(connection_string)?)
    }

    /// The store for a configuration. With a shared access signature, every operation is
    /// checked against the token's scope before it is sent.
    ///
    /// # Errors
    /// [`Error::Backend`] when the HTTP client cannot be built;
    /// [`Error::InvalidSas`] when the token's times or keys do not read.
    pub fn build(self, mut config: AzureConfig) -> Result<AzureTableStore> {
        let scope = match &config.credential {
            Credential::Sas(token) => Some(std::sync::Arc::new(scope::SasScope::parse(token)?)),
            Credential::SharedKey(_) => None,
        };
        let client = std::sync::Arc::new(
            ServiceClient::options()
                .retry_policy(self.retry)
                .default_headers(vec![
                    ("Accept", ACCEPT_JSON),
                    ("DataServiceVersion", "3.0;NetFx"),
                    ("MaxDataServiceVersion", "3.0;NetFx"),
                ])
                .for_endpoint(
                    Service::Table,
                    &config.account,
                    &config.endpoint,
                    config.credential.clone(),
                )?,
        );
        if let Some(prefix) = self.table_prefix {
            config.table_prefix = prefix;
        }
        let emulator = self
            .emulator
            .unwrap_or(config.account == DEVELOPMENT_ACCOUNT);
        Ok(AzureTableStore {
            client,
            table_prefix: config.table_prefix.clone(),
            config,
            being_deleted_wait: self.being_deleted_wait,
            emulator,
            refilter: self.refilter,
            spellings: Default::default(),
            scope,
        })
    }
}

impl AzureTableStore {
    /// The settings of a store, given in any order, then
    /// [`connect`](AzureTableStoreOptions::connect) on a connection string or
    /// [`build`](AzureTableStoreOptions::build) on a configuration.
    pub fn options() -> AzureTableStoreOptions {
        AzureTableStoreOptions::new()
    }

    /// A store for a storage connection string (see
    /// [`AzureConfig::from_connection_string`]) with the default settings (see
    /// [`AzureTableStoreOptions::new`]): the shortcut for
    /// `AzureTableStore::options().connect(connection_string)`.
    ///
    /// # Errors
    /// [`Error::InvalidConnection`]; then as [`new`](Self::new).
    pub fn connect(connection_string: &str) -> Result<Self> {
        Self::options().connect(connection_string)
    }

    /// A store for a configuration with the default settings: the shortcut for
    /// `AzureTableStore::options().build(config)`. With a shared access signature, every
    /// operation is checked against the token's scope before it is sent.
    ///
    /// # Errors
    /// [`Error::Backend`] when the HTTP client cannot be built;
    /// [`Error::InvalidSas`] when the token's times or keys do not read.
    pub fn new(config: AzureConfig) -> Result<Self> {
        Self::options().build(config)
    }

    /// The configuration.
    pub fn config(&self) -> &AzureConfig {
        &self.config
    }

    /// A shared access signature builder for `table` as this store names it on the
    /// service (with the table prefix).
    ///
    /// # Errors
    /// `InvalidInput` for a bad table name.
    pub fn table_sas(&self, table: &str) -> Result<sas::TableSas> {
        limits::check_table_name(table)?;
        Ok(sas::TableSas::new(format!("{}{table}", self.table_prefix)))
    }

    /// Signs a table SAS with this store's account key: the token to give a client, for
    /// `SharedAccessSignature=` in its connection string.
    ///
    /// # Errors
    /// [`Error::PermissionDenied`] for a store opened without the key;
    /// [`Error::InvalidSas`] as [`sas::TableSas::sign`].
    pub fn sign_table_sas(&self, sas: &sas::TableSas) -> Result<String> {
        match &self.config.credential {
            Credential::SharedKey(key) => sas.sign_with(&self.config.account, key),
            Credential::Sas(_) => Err(Error::permission_denied(
                sas.table(),
                "signing an access signature needs the account key",
            )),
        }
    }

    /// The table's name on the service, before any emulator respelling.
    pub(super) fn prefixed(&self, table: &str) -> String {
        format!("{}{table}", self.table_prefix)
    }

    pub(super) fn service_table(&self, table: &str) -> Result<String> {
        limits::check_table_name(table)?;
        let name = format!("{}{table}", self.table_prefix);
        limits::check_table_name(&name)?;
        if self.emulator
            && let Ok(spellings) = self.spellings.lock()
            && let Some(stored) = spellings.get(&name.to_ascii_lowercase())
        {
            return Ok(stored.clone());
        }
        Ok(name)
    }

    /// Emulator only: after a `TableNotFound`, looks for the table under another case;
    /// returns the stored spelling when there is one.
    pub(super) async fn respell(&self, table: &str) -> Result<Option<String>> {
        // A table SAS cannot list tables: the name is the one the token was signed for.
        if !self.emulator || self.scope.as_ref().is_some_and(|s| s.is_table_sas()) {
            return Ok(None);
        }
        let wanted = format!("{}{table}", self.table_prefix).to_ascii_lowercase();
        for name in self.service_tables().await? {
            if name.to_ascii_lowercase() == wanted {
                if let Ok(mut spellings) = self.spellings.lock() {
                    spellings.insert(wanted, name.clone());
                }
                return Ok(Some(name));
            }
        }
        Ok(None)
    }

    /// Every table name on the service under this store's prefix, as stored.
    pub(super) async fn service_tables(&self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let mut query = vec![];
            if let Some(next) = &next {
                query.push(("NextTableName", next.clone()));
            }
            let response = self
                .send(
                    Method::GET,
                    &format!("{}/Tables", self.config.endpoint),
                    &query,
                    &[],
                    None,
                )
                .await?;
            if !response.status().is_success() {
                return Err(Self::error(response, "Tables", None).await);
            }
            next = response
                .headers()
                .get("x-ms-continuation-NextTableName")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body: Json = Self::json(response).await?;
            for table in body["value"].as_array().into_iter().flatten() {
                if let Some(name) = table["TableName"].as_str()
                    && name.starts_with(&self.table_prefix)
                {
                    names.push(name.to_owned());
                }
            }
            if next.is_none() {
                return Ok(names);
            }
        }
    }

    /// Runs `attempt` with the table's service name; in emulator mode a `TableNotFound`
    /// is retried once under the table's stored spelling.
    pub(super) async fn on_table<T, F, Fut>(&self, table: &str, attempt: F) -> Result<T>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let name = self.service_table(table)?;
        match attempt(name).await {
            Err(e) if e.kind() == crate::ErrorKind::TableNotFound => {
                match self.respell(table).await? {
                    Some(stored) => attempt(stored).await,
                    None => Err(e),
                }
            }
            other => other,
        }
    }

    pub(super) fn table_url(&self, service_table: &str) -> String {
        format!("{}/{service_table}", self.config.endpoint)
    }

    pub(super) fn entity_url(&self, service_table: &str, pk: &str, rk: &str) -> String {
        format!(
            "{}/{service_table}(PartitionKey='{}',RowKey='{}')",
            self.config.endpoint,
            utf8_percent_encode(&quote(pk), PATH),
            utf8_percent_encode(&quote(rk), PATH)
        )
    }

    /// Sends a request through the one client: signed, retried under the policy.
    pub(super) async fn send(
        &self,
        method: Method,
        url: &str,
        query: &[(&str, String)],
        headers: &[(&str, String)],
        body: Option<(String, String)>,
    ) -> Result<reqwest::Response> {
        self.client
            .send(method, url, query, headers, body)
            .await
            .map_err(|e: SendError| Error::from(e))
    }

    pub(super) async fn json<T: serde::de::DeserializeOwned>(
        response: reqwest::Response,
    ) -> Result<T> {
        let bytes = response
            .bytes()
            .await
            .map_err(|e| transient(e.to_string()))?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Backend {
            message: format!("unreadable service response: {e}"),
        })
    }

    pub(super) fn etag(response: &reqwest::Response) -> Option<ETag> {
        response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(ETag::new)
    }
}
