//! `AzureTableStore`: the Table REST API of Azure Table Storage and Cosmos DB for Table
//! (and Azurite, the emulator).
//!
//! This client is written here because no maintained Rust crate covers the Table service.
//! It is built on `reqwest` (one connection pool per store), `hmac`/`sha2` for
//! SharedKeyLite signatures, and `serde_json`. It sends:
//! - JSON with `@odata.type` annotations for the types JSON cannot tell apart;
//! - `If-Match` for conditional writes;
//! - `$batch` multipart changesets for entity group transactions, mapping the index of the
//!   failing operation back;
//! - the continuation headers (`NextPartitionKey`, `NextRowKey`), carried inside the core's
//!   continuation token.
//!
//! Service errors map onto the core's error kinds. Transient failures (5xx, server busy,
//! timeouts, lost connections) are retried with exponential backoff and jitter; creating a
//! table the service is still deleting (`TableBeingDeleted`) is retried for up to
//! [`RetryPolicy::table_being_deleted_wait`].
//!
//! The core's limits are checked before every request, because the emulator does not
//! enforce all of them and behaviour must match Azure. So is the scope of a shared access
//! signature the store was opened with (its table, permissions, key range and times; see
//! [`sas`] to build one): an operation outside it fails with
//! [`Error::PermissionDenied`] before any request, and the service's 403 maps to the same
//! error.

mod acl;
mod batch;
mod connection;
mod json;
pub mod sas;
mod scope;

use std::time::Duration;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use rand::Rng;
use reqwest::{Method, StatusCode};
use serde_json::Value as Json;

pub use acl::{MAX_SIGNED_IDENTIFIERS, SignedIdentifier};
pub use connection::{
    AzureConfig, Credential, DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY, DEVELOPMENT_TABLE_ENDPOINT,
    account_from_endpoint, account_sas, http_date, sign,
};
pub use scope::SAS_CLOCK_SKEW;

/// The `KEY=VALUE` fields of a storage connection string (keys lower-cased, values
/// trimmed), and the parts that are not `KEY=VALUE`: for the other storage services'
/// clients (queues, blobs) reading the same connection strings as the Table client.
pub fn connection_fields(
    connection: &str,
) -> (std::collections::HashMap<String, String>, Vec<&str>) {
    crate::connection_string::fields(connection)
}

use crate::error::{Error, Result};
use crate::limits;
use crate::model::{ETag, Entity};
use crate::query::{ContinuationToken, Page, Query};
use crate::store::{Batch, TableStore, WriteOp};

/// The service version this client speaks.
pub const API_VERSION: &str = "2019-02-02";
const ACCEPT_JSON: &str = "application/json;odata=minimalmetadata";

/// Characters escaped in URL paths: everything but unreserved characters and the few
/// OData needs as they are (`'`, `(`, `)`, `=`, `,`).
const PATH: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'/')
    .add(b'\\')
    .add(b'[')
    .add(b']')
    .add(b'^')
    .add(b'|')
    .add(b'&')
    .add(b'+')
    .add(b':')
    .add(b';')
    .add(b'@')
    .add(b'$')
    .add(b'!')
    .add(b'*');
/// Characters escaped in query values.
const QUERY: &AsciiSet = &PATH.add(b'\'').add(b'(').add(b')').add(b'=').add(b',');

/// How transient failures are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all (1 = no retry).
    pub attempts: u32,
    /// The first pause; doubled per attempt, with up to 50 % jitter.
    pub base_delay: Duration,
    /// How long creating a table waits while the service is still deleting a table of
    /// that name (it answers `TableBeingDeleted` for up to about 40 seconds after a
    /// delete), retrying with the same backoff, pauses capped at
    /// [`MAX_TABLE_CREATE_PAUSE`]; then [`Error::TableBeingDeleted`]. Zero does not wait.
    pub table_being_deleted_wait: Duration,
}

/// The longest pause between two attempts to create a table being deleted.
pub const MAX_TABLE_CREATE_PAUSE: Duration = Duration::from_secs(5);

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            base_delay: Duration::from_millis(100),
            table_being_deleted_wait: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The pause before attempt `attempt + 1` (from 1): the base delay doubled per
    /// attempt, at most `cap`, with up to 50 % jitter.
    fn pause(&self, attempt: u32, cap: Duration) -> Duration {
        let pause = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
            .min(cap);
        pause.mul_f64(rand::rng().random_range(1.0..1.5))
    }
}

/// A Table service client implementing [`TableStore`].
#[derive(Clone, Debug)]
pub struct AzureTableStore {
    client: reqwest::Client,
    config: AzureConfig,
    table_prefix: String,
    retry: RetryPolicy,
    emulator: bool,
    /// Whether query results are filtered again by the core's rules.
    refilter: bool,
    /// Emulator only: the stored spelling of each table name, by lower-case name.
    spellings: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
    /// The scope of the shared access signature the store was opened with.
    scope: Option<std::sync::Arc<scope::SasScope>>,
}

/// Marks a continuation token that carries the service's own (opaque) markers, as opposed
/// to a token naming the key to resume at: U+FFFF, a noncharacter no real key starts with.
const SERVICE_TOKEN: char = '\u{FFFF}';

fn transient(message: impl Into<String>) -> Error {
    Error::Transient {
        message: message.into(),
    }
}

fn quote(key: &str) -> String {
    key.replace('\'', "''")
}

impl AzureTableStore {
    /// A store for a storage connection string (see
    /// [`AzureConfig::from_connection_string`]).
    ///
    /// # Errors
    /// [`Error::InvalidConnection`].
    pub fn connect(connection_string: &str) -> Result<Self> {
        Self::new(AzureConfig::from_connection_string(connection_string)?)
    }

    /// A store for a configuration. With a shared access signature, every operation is
    /// checked against the token's scope before it is sent.
    ///
    /// # Errors
    /// [`Error::Backend`] when the HTTP client cannot be built;
    /// [`Error::InvalidConnection`] when the token's times or keys do not read.
    pub fn new(config: AzureConfig) -> Result<Self> {
        let scope = match &config.credential {
            Credential::Sas(token) => Some(std::sync::Arc::new(
                scope::SasScope::parse(token).map_err(|reason| Error::InvalidConnection {
                    connection: "SharedAccessSignature".to_owned(),
                    reason,
                })?,
            )),
            Credential::SharedKey(_) => None,
        };
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Error::Backend {
                message: format!("building the HTTP client: {e}"),
            })?;
        let emulator = config.account == DEVELOPMENT_ACCOUNT;
        Ok(AzureTableStore {
            client,
            table_prefix: config.table_prefix.clone(),
            config,
            retry: RetryPolicy::default(),
            emulator,
            refilter: true,
            spellings: Default::default(),
            scope,
        })
    }

    /// Whether to work around the emulator's differences from the service (on by default
    /// for the development account): Azurite does not enforce the property and size
    /// limits on merges, compares table names with case, matches `ne` and `not` over
    /// absent properties, and fails on some typed comparisons. With the workarounds on,
    /// merges read the stored entity to check the merged result first, server filters are
    /// loosened where Azurite is wrong (results are always filtered again by the core's
    /// rules), and table names are matched without case.
    pub fn with_emulator_workarounds(mut self, enabled: bool) -> Self {
        self.emulator = enabled;
        self
    }

    /// Whether query results are filtered again here by [`Filter::matches`] (on by
    /// default), which makes every query answer by the core's filter rules whatever the
    /// service or emulator decides.
    ///
    /// Off, a query returns what the service answered to its `$filter`, sent as
    /// [`Display`](std::fmt::Display) writes it and never loosened for the emulator: use
    /// it to compare the service's own answers with the core's (the differential test
    /// also turns [`with_emulator_workarounds`](Self::with_emulator_workarounds) off).
    /// Keys are still scoped to a shared access signature's range.
    ///
    /// [`Filter::matches`]: crate::filter::Filter::matches
    pub fn with_result_filtering(mut self, enabled: bool) -> Self {
        self.refilter = enabled;
        self
    }

    /// Every table name gets this prefix on the service (letters and digits): tenants, or
    /// tests sharing one account, each see only their own tables. No prefix may begin
    /// another (`ab` and `abc`): the service cannot tell their tables apart.
    pub fn with_table_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.table_prefix = prefix.into();
        self
    }

    /// How transient failures are retried.
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
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
    fn prefixed(&self, table: &str) -> String {
        format!("{}{table}", self.table_prefix)
    }

    fn service_table(&self, table: &str) -> Result<String> {
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
    async fn respell(&self, table: &str) -> Result<Option<String>> {
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
    async fn service_tables(&self) -> Result<Vec<String>> {
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
    async fn on_table<T, F, Fut>(&self, table: &str, attempt: F) -> Result<T>
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

    fn table_url(&self, service_table: &str) -> String {
        format!("{}/{service_table}", self.config.endpoint)
    }

    fn entity_url(&self, service_table: &str, pk: &str, rk: &str) -> String {
        format!(
            "{}/{service_table}(PartitionKey='{}',RowKey='{}')",
            self.config.endpoint,
            utf8_percent_encode(&quote(pk), PATH),
            utf8_percent_encode(&quote(rk), PATH)
        )
    }

    /// Sends a request, signing it and retrying transient failures.
    async fn send(
        &self,
        method: Method,
        url: &str,
        query: &[(&str, String)],
        headers: &[(&str, String)],
        body: Option<(String, String)>,
    ) -> Result<reqwest::Response> {
        let mut url = url.to_owned();
        let mut params: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{k}={}", utf8_percent_encode(v, QUERY)))
            .collect();
        if let Credential::Sas(sas) = &self.config.credential {
            params.push(sas.clone());
        }
        if !params.is_empty() {
            url.push('?');
            url.push_str(&params.join("&"));
        }
        let parsed = reqwest::Url::parse(&url).map_err(|e| Error::Backend {
            message: format!("invalid request URL: {e}"),
        })?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let date = connection::http_date();
            let mut request = self
                .client
                .request(method.clone(), parsed.clone())
                .header("x-ms-date", &date)
                .header("x-ms-version", API_VERSION)
                .header("Accept", ACCEPT_JSON)
                .header("DataServiceVersion", "3.0;NetFx")
                .header("MaxDataServiceVersion", "3.0;NetFx");
            if let Credential::SharedKey(key) = &self.config.credential {
                let comp = parsed
                    .query_pairs()
                    .find(|(k, _)| k == "comp")
                    .map(|(_, v)| v.into_owned());
                request = request.header(
                    "Authorization",
                    connection::shared_key_lite(
                        key,
                        &self.config.account,
                        &date,
                        parsed.path(),
                        comp.as_deref(),
                    ),
                );
            }
            for (name, value) in headers {
                request = request.header(*name, value);
            }
            if let Some((content_type, body)) = &body {
                request = request
                    .header("Content-Type", content_type)
                    .body(body.clone());
            }
            let outcome = request.send().await;
            // A read may be repeated after any transient failure. A write is repeated only
            // when it surely was not applied (no connection, or the service said it is
            // busy): after a timeout it may have been, and a repeat would report a wrong
            // error (AlreadyExists for an insert that succeeded).
            let idempotent = method == Method::GET || method == Method::HEAD;
            let retryable = match &outcome {
                Ok(response) => {
                    let status = response.status();
                    status == StatusCode::SERVICE_UNAVAILABLE
                        || (idempotent
                            && (status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT))
                }
                Err(e) => e.is_connect() || (idempotent && (e.is_timeout() || e.is_request())),
            };
            if !retryable || attempt >= self.retry.attempts {
                return outcome.map_err(|e| {
                    if e.is_timeout() || e.is_connect() {
                        transient(format!("{method} {}: {e}", parsed.path()))
                    } else {
                        Error::Backend {
                            message: format!("{method} {}: {e}", parsed.path()),
                        }
                    }
                });
            }
            tokio::time::sleep(self.retry.pause(attempt, Duration::MAX)).await;
        }
    }

    async fn json<T: serde::de::DeserializeOwned>(response: reqwest::Response) -> Result<T> {
        let bytes = response
            .bytes()
            .await
            .map_err(|e| transient(e.to_string()))?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Backend {
            message: format!("unreadable service response: {e}"),
        })
    }

    /// Maps an unsuccessful response onto the core's errors.
    async fn error(response: reqwest::Response, table: &str, key: Option<(&str, &str)>) -> Error {
        let status = response.status();
        let header_code = response
            .headers()
            .get("x-ms-error-code")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = response.text().await.unwrap_or_default();
        match header_code {
            // A body without a code of its own (a HEAD, a proxy's page): the header's.
            Some(code) if error_parts(&text).0.is_empty() => {
                let body = serde_json::json!({
                    "odata.error": { "code": code, "message": { "value": text } }
                });
                service_error(status.as_u16(), &body.to_string(), table, key)
            }
            _ => service_error(status.as_u16(), &text, table, key),
        }
    }

    fn etag(response: &reqwest::Response) -> Option<ETag> {
        response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(ETag::new)
    }
}

/// The service's error code and message from an error body (JSON, or XML for the
/// service's authorization failures).
fn error_parts(text: &str) -> (String, String) {
    if let Some(parts) = acl::xml_error(text) {
        return parts;
    }
    let json: Json = serde_json::from_str(text).unwrap_or(Json::Null);
    let error = &json["odata.error"];
    let code = error["code"].as_str().unwrap_or_default().to_owned();
    let message = error["message"]["value"]
        .as_str()
        .unwrap_or(text)
        .to_owned();
    (code, message)
}

fn service_error(status: u16, text: &str, table: &str, key: Option<(&str, &str)>) -> Error {
    let (code, message) = error_parts(text);
    let (pk, rk) = key.unwrap_or(("", ""));
    match code.as_str() {
        "TableNotFound" => Error::table_not_found(table),
        "TableAlreadyExists" => Error::TableAlreadyExists {
            table: table.to_owned(),
        },
        "TableBeingDeleted" => Error::TableBeingDeleted {
            table: table.to_owned(),
        },
        "EntityAlreadyExists" => Error::already_exists(table, pk, rk),
        "ResourceNotFound" => Error::not_found(table, pk, rk),
        "UpdateConditionNotSatisfied" | "ConditionNotMet" => {
            Error::precondition_failed(table, pk, rk)
        }
        "ServerBusy" | "OperationTimedOut" | "InternalError" => {
            transient(format!("{code}: {message}"))
        }
        _ if status == 403 => Error::PermissionDenied {
            table: table.to_owned(),
            reason: if code.is_empty() {
                format!("HTTP 403: {message}")
            } else {
                format!("the service refused the request ({code}): {message}")
            },
            service_code: (!code.is_empty()).then_some(code),
        },
        _ => match status {
            404 if key.is_some() => Error::not_found(table, pk, rk),
            404 => Error::table_not_found(table),
            409 => Error::already_exists(table, pk, rk),
            412 => Error::precondition_failed(table, pk, rk),
            408 | 500..=599 => transient(format!("HTTP {status} {code}: {message}")),
            _ => Error::Backend {
                message: format!("HTTP {status} {code}: {message}"),
            },
        },
    }
}

impl AzureTableStore {
    async fn get_raw(
        &self,
        name: &str,
        table: &str,
        pk: &str,
        rk: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        let mut query = Vec::new();
        if let Some(select) = select {
            query.push(("$select", select_list(select.iter().copied())));
        }
        let response = self
            .send(
                Method::GET,
                &self.entity_url(name, pk, rk),
                &query,
                &[],
                None,
            )
            .await?;
        match response.status() {
            status if status.is_success() => {
                let etag = Self::etag(&response);
                let mut entity = json::entity_from_json(Self::json(response).await?)?;
                if entity.etag.is_none() {
                    entity.etag = etag;
                }
                Ok(Some(entity))
            }
            StatusCode::NOT_FOUND => match Self::error(response, table, Some((pk, rk))).await {
                Error::NotFound { .. } => Ok(None),
                other => Err(other),
            },
            _ => Err(Self::error(response, table, Some((pk, rk))).await),
        }
    }

    /// One page of a query; `scope` narrows it to a shared access signature's key range.
    async fn query_raw(
        &self,
        name: &str,
        table: &str,
        query: &Query,
        scope: Option<&crate::filter::Filter>,
    ) -> Result<Page> {
        let mut filter = query.filter.clone();
        let mut params = Vec::new();
        match &query.continuation {
            Some(token) if token.next_partition_key().starts_with(SERVICE_TOKEN) => {
                params.push((
                    "NextPartitionKey",
                    token.next_partition_key()[SERVICE_TOKEN.len_utf8()..].to_owned(),
                ));
                if !token.next_row_key().is_empty() {
                    params.push(("NextRowKey", token.next_row_key().to_owned()));
                }
            }
            Some(token) => {
                // A token naming a key: resume at that key, inclusive.
                let (pk, rk) = (token.next_partition_key(), token.next_row_key());
                let resume = crate::filter::partition_key().gt(pk)
                    | (crate::filter::partition_key().eq(pk) & crate::filter::row_key().ge(rk));
                filter = Some(match filter {
                    Some(f) => f & resume,
                    None => resume,
                });
            }
            None => {}
        }
        let unscoped = filter.clone();
        if let Some(scope) = scope {
            filter = Some(match filter {
                Some(f) => f & scope.clone(),
                None => scope.clone(),
            });
        }
        // Over the service's comparison limit, the key range is applied here only (the
        // service applies its token's range by itself).
        let sent = match &filter {
            Some(f) if f.comparisons() > limits::MAX_FILTER_COMPARISONS => &unscoped,
            other => other,
        };
        let server_filter = match sent {
            Some(f) if self.emulator && self.refilter => emulator_filter(f),
            other => other.clone(),
        };
        if let Some(f) = &server_filter {
            params.push(("$filter", f.to_odata()));
        }
        params.push(("$top", query.page_size().to_string()));
        if let Some(select) = &query.select {
            // The filter's properties come too, so that results can be filtered again here.
            let mut names: Vec<&str> = select.iter().map(String::as_str).collect();
            let mut referenced = Vec::new();
            if let Some(f) = &filter {
                collect_properties(f, &mut referenced);
            }
            names.extend(referenced.iter().map(String::as_str));
            names.sort_unstable();
            names.dedup();
            params.push(("$select", select_list(names.into_iter())));
        }
        let response = self
            .send(
                Method::GET,
                &format!("{}/{name}()", self.config.endpoint),
                &params,
                &[],
                None,
            )
            .await?;
        if !response.status().is_success() {
            return Err(Self::error(response, table, None).await);
        }
        let header = |n: &str| {
            response
                .headers()
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let continuation = header("x-ms-continuation-NextPartitionKey").map(|npk| {
            ContinuationToken::new(
                format!("{SERVICE_TOKEN}{npk}"),
                header("x-ms-continuation-NextRowKey").unwrap_or_default(),
            )
        });
        let mut body: Json = Self::json(response).await?;
        let mut entities = Vec::new();
        if let Json::Array(values) = body["value"].take() {
            for value in values {
                let mut entity = json::entity_from_json(value)?;
                // The core's filter rules are the contract on every backend.
                if self.refilter && filter.as_ref().is_some_and(|f| !f.matches(&entity)) {
                    continue;
                }
                if let Some(select) = &query.select {
                    entity.project(select);
                }
                entities.push(entity);
            }
        }
        Ok(Page {
            entities,
            continuation,
        })
    }

    async fn execute_raw(&self, name: &str, table: &str, op: &WriteOp) -> Result<Option<ETag>> {
        let (pk, rk) = op.key();
        let request = batch::sub_request(op, &self.table_url(name), &self.entity_url(name, pk, rk));
        let method = Method::from_bytes(request.method.as_bytes()).map_err(|e| Error::Backend {
            message: e.to_string(),
        })?;
        let mut headers = Vec::new();
        if let Some(if_match) = request.if_match {
            headers.push(("If-Match", if_match));
        }
        if request.method == "POST" {
            headers.push(("Prefer", "return-no-content".to_owned()));
        }
        let response = self
            .send(
                method,
                &request.url,
                &[],
                &headers,
                request.body.map(|b| ("application/json".to_owned(), b)),
            )
            .await?;
        if response.status().is_success() {
            Ok(Self::etag(&response))
        } else {
            Err(Self::error(response, table, Some((pk, rk))).await)
        }
    }

    /// Emulator only: a merge is checked against the stored entity first (the emulator
    /// does not refuse a merged entity over the limits), then sent conditional on the
    /// version read. Returns the op to send and whether it was made conditional here.
    async fn guard(&self, name: &str, table: &str, op: WriteOp) -> Result<(WriteOp, bool)> {
        if !self.emulator || !matches!(op, WriteOp::Merge(..) | WriteOp::InsertOrMerge(_)) {
            return Ok((op, false));
        }
        let (pk, rk) = op.key();
        let current = self.get_raw(name, table, pk, rk, None).await?;
        crate::apply::plan(table, op.clone(), current.as_ref())?;
        let etag = current.and_then(|c| c.etag);
        Ok(match (op, etag) {
            (WriteOp::Merge(e, _) | WriteOp::InsertOrMerge(e), Some(etag)) => {
                (WriteOp::Merge(e, crate::model::IfMatch::ETag(etag)), true)
            }
            (WriteOp::InsertOrMerge(e), None) => (WriteOp::Insert(e), true),
            (other, _) => (other, false),
        })
    }
}

/// Emulator only: the filter to send, loosened where Azurite answers wrongly: `not`
/// (Azurite negates comparisons over absent properties), `true` and `false` (Azurite
/// refuses most filters without a property), `eq` with an Int32 literal (Azurite does not
/// widen it to Int64 values) and comparisons with Int64, Binary, DateTime or non-finite
/// Double literals become "any entity". The results are then filtered by the core's
/// rules, so loosening only costs transfer.
fn emulator_filter(filter: &crate::filter::Filter) -> Option<crate::filter::Filter> {
    use crate::filter::Filter;
    use crate::model::Value;
    match filter {
        Filter::Compare {
            property,
            value,
            op,
        } => {
            let loosened = match value {
                // Azurite fails on Int64 literals against other types, does not order
                // binaries, compares DateTimes to the millisecond, and reads no INF/NaN.
                Value::Int64(_) | Value::Binary(_) | Value::DateTime(_) => true,
                Value::Double(d) => !d.is_finite(),
                // It keeps Int64 values as strings, which never equal a number (they
                // order against one by JavaScript's coercion).
                Value::Int32(_) => *op == crate::filter::CompareOp::Eq,
                _ => false,
            };
            // Key comparisons are always exact: they are what limits the scan.
            let is_key = matches!(property.as_str(), "PartitionKey" | "RowKey");
            (is_key || !loosened).then(|| filter.clone())
        }
        Filter::Not(_) | Filter::Literal(_) => None,
        Filter::And(a, b) => match (emulator_filter(a), emulator_filter(b)) {
            (Some(a), Some(b)) => Some(a & b),
            (Some(x), None) | (None, Some(x)) => Some(x),
            (None, None) => None,
        },
        Filter::Or(a, b) => match (emulator_filter(a), emulator_filter(b)) {
            (Some(a), Some(b)) => Some(a | b),
            _ => None,
        },
    }
}

fn collect_properties(filter: &crate::filter::Filter, out: &mut Vec<String>) {
    use crate::filter::Filter;
    match filter {
        Filter::Compare { property, .. } => out.push(property.clone()),
        Filter::Not(inner) => collect_properties(inner, out),
        Filter::Literal(_) => {}
        Filter::And(a, b) | Filter::Or(a, b) => {
            collect_properties(a, out);
            collect_properties(b, out);
        }
    }
}

fn is_race(e: &Error) -> bool {
    matches!(
        e.kind(),
        crate::ErrorKind::PreconditionFailed | crate::ErrorKind::AlreadyExists
    )
}

/// How often a merge checked in emulator mode is retried when the entity changes between
/// the check and the write.
const GUARD_RETRIES: usize = 8;

impl TableStore for AzureTableStore {
    fn key_order(&self) -> crate::store::KeyOrder {
        crate::store::KeyOrder::Utf16
    }

    fn preserves_negative_zero(&self) -> bool {
        !self.emulator
    }

    /// Creates a table; while the service is still deleting a table of that name, waits
    /// and retries for up to [`RetryPolicy::table_being_deleted_wait`].
    async fn create_table(&self, table: &str) -> Result<()> {
        crate::observe::call(
            crate::observe::system::AZURE_TABLE,
            "create_table",
            table,
            None,
            async {
                let name = self.service_table(table)?;
                if let Some(scope) = &self.scope {
                    scope.check_table_operation(table, "creating a table")?;
                }
                if self.emulator && self.respell(table).await?.is_some() {
                    return Err(Error::TableAlreadyExists {
                        table: table.to_owned(),
                    });
                }
                let body = serde_json::json!({ "TableName": name }).to_string();
                let started = tokio::time::Instant::now();
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    let response = self
                        .send(
                            Method::POST,
                            &format!("{}/Tables", self.config.endpoint),
                            &[],
                            &[("Prefer", "return-no-content".into())],
                            Some(("application/json".into(), body.clone())),
                        )
                        .await?;
                    if response.status().is_success() {
                        return Ok(());
                    }
                    let error = Self::error(response, table, None).await;
                    let remaining = self
                        .retry
                        .table_being_deleted_wait
                        .saturating_sub(started.elapsed());
                    if !matches!(error, Error::TableBeingDeleted { .. }) || remaining.is_zero() {
                        return Err(error);
                    }
                    let pause = self.retry.pause(attempt, MAX_TABLE_CREATE_PAUSE);
                    tokio::time::sleep(pause.min(remaining)).await;
                }
            },
        )
        .await
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        crate::observe::call(
            crate::observe::system::AZURE_TABLE,
            "delete_table",
            table,
            None,
            async {
                if let Some(scope) = &self.scope {
                    self.service_table(table)?;
                    scope.check_table_operation(table, "deleting a table")?;
                }
                self.on_table(table, |name| async move {
                    let response = self
                        .send(
                            Method::DELETE,
                            &format!("{}/Tables('{name}')", self.config.endpoint),
                            &[],
                            &[],
                            None,
                        )
                        .await?;
                    if response.status().is_success() {
                        if let Ok(mut spellings) = self.spellings.lock() {
                            spellings.remove(&name.to_ascii_lowercase());
                        }
                        Ok(())
                    } else {
                        match Self::error(response, table, None).await {
                            Error::NotFound { .. } => Err(Error::table_not_found(table)),
                            other => Err(other),
                        }
                    }
                })
                .await
            },
        )
        .await
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        crate::observe::call(
            crate::observe::system::AZURE_TABLE,
            "list_tables",
            prefix,
            None,
            async {
                if let Some(scope) = &self.scope {
                    scope.check_table_operation("", "listing tables")?;
                }
                let mut names: Vec<String> = self
                    .service_tables()
                    .await?
                    .into_iter()
                    .filter_map(|name| {
                        let stripped = name.get(self.table_prefix.len()..)?.to_owned();
                        stripped.starts_with(prefix).then_some(stripped)
                    })
                    .collect();
                names.sort();
                Ok(names)
            },
        )
        .await
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        crate::observe::call(
            crate::observe::system::AZURE_TABLE,
            "get",
            table,
            Some(partition_key),
            async {
                limits::check_point_read(table, partition_key, row_key, select)?;
                if let Some(scope) = &self.scope {
                    scope.check_entity(
                        table,
                        &self.prefixed(table),
                        "r",
                        "reading",
                        (partition_key, row_key),
                    )?;
                }
                self.on_table(table, |name| async move {
                    self.get_raw(&name, table, partition_key, row_key, select)
                        .await
                })
                .await
            },
        )
        .await
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        crate::observe::call(
            crate::observe::system::AZURE_TABLE,
            "query",
            table,
            None,
            async {
                query.check()?;
                let narrowed = match &self.scope {
                    Some(scope) => {
                        limits::check_table_name(table)?;
                        scope.check_query(table, &self.prefixed(table), query)?
                    }
                    None => None,
                };
                let narrowed = narrowed.as_ref();
                self.on_table(table, |name| async move {
                    self.query_raw(&name, table, query, narrowed).await
                })
                .await
            },
        )
        .await
    }

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        let partition_key = op.key().0.to_owned();
        crate::observe::written(table, Some(&partition_key), 1);
        crate::observe::call(
            crate::observe::system::AZURE_TABLE,
            "execute",
            table,
            Some(partition_key.as_str()),
            async {
                op.check()?;
                if let Some(scope) = &self.scope {
                    limits::check_table_name(table)?;
                    scope.check_write(table, &self.prefixed(table), &op)?;
                }
                self.on_table(table, |name| {
                    let op = op.clone();
                    async move {
                        let mut tries = 0;
                        loop {
                            let (send, guarded) = self.guard(&name, table, op.clone()).await?;
                            match self.execute_raw(&name, table, &send).await {
                                Err(e) if guarded && is_race(&e) && tries < GUARD_RETRIES => {
                                    tries += 1
                                }
                                other => return other,
                            }
                        }
                    }
                })
                .await
            },
        )
        .await
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        let partition_key = batch.partition_key().map(str::to_owned);
        crate::observe::written(table, partition_key.as_deref(), batch.len());
        crate::observe::call(crate::observe::system::AZURE_TABLE, "submit_batch", table, partition_key.as_deref(), async {
            batch.check()?;
            if let Some(scope) = &self.scope {
                limits::check_table_name(table)?;
                for (index, op) in batch.operations().iter().enumerate() {
                    scope
                        .check_write(table, &self.prefixed(table), op)
                        .map_err(|e| e.in_batch(index))?;
                }
            }
            let ops = batch.into_operations();
            self.on_table(table, |name| {
                let ops = ops.clone();
                async move {
                    let mut tries = 0;
                    loop {
                        let mut sent = Vec::with_capacity(ops.len());
                        let mut guarded = Vec::with_capacity(ops.len());
                        for (index, op) in ops.iter().enumerate() {
                            let (op, g) =
                                self.guard(&name, table, op.clone())
                                    .await
                                    .map_err(|e| match e {
                                        Error::TableNotFound { .. } => e,
                                        other => other.in_batch(index),
                                    })?;
                            sent.push(op);
                            guarded.push(g);
                        }
                        match self.batch_raw(&name, table, &sent).await {
                            Err(e)
                                if tries < GUARD_RETRIES
                                    && e.batch_index()
                                        .is_some_and(|i| guarded.get(i) == Some(&true))
                                    && matches!(&e, Error::Batch { source, .. } if is_race(source)) =>
                            {
                                tries += 1;
                            }
                            other => return other,
                        }
                    }
                }
            })
            .await
        })
        .await
    }
}

impl AzureTableStore {
    async fn batch_raw(
        &self,
        name: &str,
        table: &str,
        ops: &[WriteOp],
    ) -> Result<Vec<Option<ETag>>> {
        let requests: Vec<_> = ops
            .iter()
            .map(|op| {
                let (pk, rk) = op.key();
                batch::sub_request(op, &self.table_url(name), &self.entity_url(name, pk, rk))
            })
            .collect();
        let (body, content_type) = batch::encode(&requests);
        let response = self
            .send(
                Method::POST,
                &format!("{}/$batch", self.config.endpoint),
                &[],
                &[],
                Some((content_type, body)),
            )
            .await?;
        if !response.status().is_success() {
            return Err(Self::error(response, table, None).await);
        }
        let text = response
            .text()
            .await
            .map_err(|e| transient(e.to_string()))?;
        let parts = batch::decode(&text);
        if let Some(failed) = parts.iter().find(|p| p.status >= 300 || p.status < 100) {
            let (_, message) = error_parts(&failed.body);
            let index = message
                .split_once(':')
                .and_then(|(n, _)| n.trim().parse::<usize>().ok())
                .filter(|i| *i < ops.len())
                .unwrap_or(0);
            let key = ops.get(index).map(WriteOp::key);
            let error = service_error(failed.status, &failed.body, table, key);
            return Err(match error {
                Error::TableNotFound { .. } | Error::TableBeingDeleted { .. } => error,
                other => other.in_batch(index),
            });
        }
        if parts.len() != ops.len() {
            return Err(Error::Backend {
                message: format!(
                    "the batch response has {} parts for {} operations",
                    parts.len(),
                    ops.len()
                ),
            });
        }
        Ok(parts.into_iter().map(|p| p.etag).collect())
    }
}

/// `$select` with the keys and timestamp always included, so every result is an entity.
fn select_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut list = vec!["PartitionKey", "RowKey", "Timestamp"];
    list.extend(names.filter(|n| !matches!(*n, "PartitionKey" | "RowKey" | "Timestamp")));
    list.join(",")
}

/// Creates a blob container unless it exists (`true` when this call created it), for a
/// storage connection string with shared-key credentials (`UseDevelopmentStorage=true`
/// for Azurite, whose blob service listens on port 10000, or
/// `AccountName=…;AccountKey=…[;BlobEndpoint=…]`).
///
/// # Errors
/// [`Error::InvalidConnection`] for a string without a key; [`Error::Backend`] or
/// [`Error::Transient`] from the service.
pub async fn create_blob_container(connection: &str, container: &str) -> Result<bool> {
    use base64::Engine;
    let (fields, _) = crate::connection_string::fields(connection);
    let invalid = |reason: &str| Error::InvalidConnection {
        connection: "blob connection string".to_owned(),
        reason: reason.to_owned(),
    };
    let (account, key, endpoint) = if fields
        .get("usedevelopmentstorage")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        (
            DEVELOPMENT_ACCOUNT.to_owned(),
            DEVELOPMENT_KEY.to_owned(),
            format!("http://127.0.0.1:10000/{DEVELOPMENT_ACCOUNT}"),
        )
    } else {
        let account = fields
            .get("accountname")
            .ok_or_else(|| invalid("missing AccountName"))?
            .clone();
        let key = fields
            .get("accountkey")
            .ok_or_else(|| invalid("missing AccountKey"))?
            .clone();
        let endpoint = fields
            .get("blobendpoint")
            .cloned()
            .unwrap_or_else(|| format!("https://{account}.blob.core.windows.net"));
        (account, key, endpoint)
    };
    let key = base64::engine::general_purpose::STANDARD
        .decode(key)
        .map_err(|_| invalid("AccountKey is not base64"))?;
    let url = reqwest::Url::parse(&format!(
        "{}/{container}?restype=container",
        endpoint.trim_end_matches('/')
    ))
    .map_err(|e| invalid(&e.to_string()))?;
    let date = connection::http_date();
    let version = "2021-08-06";
    // The full SharedKey string to sign: verb, eleven standard headers (all empty here),
    // the x-ms- headers, then the resource with its query parameters.
    let to_sign = format!(
        "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{version}\n/{account}{}\nrestype:container",
        url.path()
    );
    let signature = connection::sign(&key, &to_sign);
    let response = reqwest::Client::new()
        .put(url)
        .header("x-ms-date", date)
        .header("x-ms-version", version)
        .header("Authorization", format!("SharedKey {account}:{signature}"))
        .header("Content-Length", "0")
        .body("")
        .send()
        .await
        .map_err(|e| transient(e.to_string()))?;
    match response.status().as_u16() {
        201 => Ok(true),
        409 => Ok(false),
        status => Err(Error::Backend {
            message: format!(
                "creating container `{container}`: HTTP {status} {}",
                response.text().await.unwrap_or_default()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn odata(code: &str) -> String {
        serde_json::json!({ "odata.error": { "code": code, "message": { "value": "said" } } })
            .to_string()
    }

    #[test]
    fn a_table_being_deleted_is_its_own_retryable_kind() {
        let error = service_error(409, &odata("TableBeingDeleted"), "Logs20261122", None);
        assert!(
            matches!(&error, Error::TableBeingDeleted { table } if table == "Logs20261122"),
            "{error:?}"
        );
        assert_eq!(error.kind(), ErrorKind::TableBeingDeleted);
        assert!(error.is_retryable());
        let exists = service_error(409, &odata("TableAlreadyExists"), "Logs20261122", None);
        assert_eq!(exists.kind(), ErrorKind::TableAlreadyExists);
        assert!(!exists.is_retryable());
    }

    #[test]
    fn every_403_is_permission_denied_with_the_services_code() {
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error>\
                   <Code>AuthorizationPermissionMismatch</Code>\
                   <Message>This request is not authorized.</Message></Error>";
        for (body, code) in [
            (xml.to_owned(), Some("AuthorizationPermissionMismatch")),
            (odata("AuthorizationFailure"), Some("AuthorizationFailure")),
            (odata("AuthenticationFailed"), Some("AuthenticationFailed")),
            (String::new(), None),
        ] {
            let error = service_error(403, &body, "Orders", Some(("p", "r")));
            assert_eq!(error.kind(), ErrorKind::PermissionDenied, "{error:?}");
            assert!(!error.is_retryable());
            match error {
                Error::PermissionDenied {
                    table,
                    service_code,
                    reason,
                } => {
                    assert_eq!(table, "Orders");
                    assert_eq!(service_code.as_deref(), code);
                    if let Some(code) = code {
                        assert!(reason.contains(code), "{reason}");
                    }
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
