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
//! timeouts, lost connections) are retried with exponential backoff and jitter.
//!
//! The core's limits are checked before every request, because the emulator does not
//! enforce all of them and behaviour must match Azure.

mod batch;
mod connection;
mod json;

use std::time::Duration;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use rand::Rng;
use reqwest::{Method, StatusCode};
use serde_json::Value as Json;

pub use connection::{AzureConfig, Credential, DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY, DEVELOPMENT_TABLE_ENDPOINT};

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
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            base_delay: Duration::from_millis(100),
        }
    }
}

/// A Table service client implementing [`TableStore`].
#[derive(Clone, Debug)]
pub struct AzureTableStore {
    client: reqwest::Client,
    config: AzureConfig,
    table_prefix: String,
    retry: RetryPolicy,
}

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

    /// A store for a configuration.
    ///
    /// # Errors
    /// [`Error::Backend`] when the HTTP client cannot be built.
    pub fn new(config: AzureConfig) -> Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Error::Backend {
                message: format!("building the HTTP client: {e}"),
            })?;
        Ok(AzureTableStore {
            client,
            config,
            table_prefix: String::new(),
            retry: RetryPolicy::default(),
        })
    }

    /// Every table name gets this prefix on the service (letters and digits): tenants, or
    /// tests sharing one account, each see only their own tables.
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

    fn service_table(&self, table: &str) -> Result<String> {
        limits::check_table_name(table)?;
        let name = format!("{}{table}", self.table_prefix);
        limits::check_table_name(&name)?;
        Ok(name)
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
            let date = chrono::Utc::now()
                .format("%a, %d %b %Y %H:%M:%S GMT")
                .to_string();
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
                    connection::shared_key_lite(key, &self.config.account, &date, parsed.path(), comp.as_deref()),
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
            let retryable = match &outcome {
                Ok(response) => {
                    let status = response.status();
                    status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT
                }
                Err(e) => e.is_timeout() || e.is_connect() || e.is_request(),
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
            let pause = self.retry.base_delay * 2u32.saturating_pow(attempt - 1);
            let jitter = rand::rng().random_range(1.0..1.5);
            tokio::time::sleep(pause.mul_f64(jitter)).await;
        }
    }

    async fn json<T: serde::de::DeserializeOwned>(response: reqwest::Response) -> Result<T> {
        let bytes = response.bytes().await.map_err(|e| transient(e.to_string()))?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Backend {
            message: format!("unreadable service response: {e}"),
        })
    }

    /// Maps an unsuccessful response onto the core's errors.
    async fn error(response: reqwest::Response, table: &str, key: Option<(&str, &str)>) -> Error {
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        service_error(status.as_u16(), &text, table, key)
    }

    fn etag(response: &reqwest::Response) -> Option<ETag> {
        response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(ETag::new)
    }
}

/// The service's error code and message from an error body.
fn error_parts(text: &str) -> (String, String) {
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
        "TableAlreadyExists" | "TableBeingDeleted" => Error::TableAlreadyExists {
            table: table.to_owned(),
        },
        "EntityAlreadyExists" => Error::already_exists(table, pk, rk),
        "ResourceNotFound" => Error::not_found(table, pk, rk),
        "UpdateConditionNotSatisfied" | "ConditionNotMet" => Error::precondition_failed(table, pk, rk),
        "ServerBusy" | "OperationTimedOut" | "InternalError" => transient(format!("{code}: {message}")),
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

impl TableStore for AzureTableStore {
    async fn create_table(&self, table: &str) -> Result<()> {
        let name = self.service_table(table)?;
        let body = serde_json::json!({ "TableName": name }).to_string();
        let response = self
            .send(
                Method::POST,
                &format!("{}/Tables", self.config.endpoint),
                &[],
                &[("Prefer", "return-no-content".into())],
                Some(("application/json".into(), body)),
            )
            .await?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(Self::error(response, table, None).await)
        }
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        let name = self.service_table(table)?;
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
            Ok(())
        } else {
            Err(Self::error(response, table, None).await)
        }
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        let full = format!("{}{prefix}", self.table_prefix);
        let mut names = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let mut query = vec![];
            if !full.is_empty() {
                // Every name starting with the prefix: from it up to the prefix with its
                // last character raised.
                let mut end = full.clone();
                if let Some(last) = end.pop() {
                    end.push(char::from_u32(last as u32 + 1).unwrap_or(char::MAX));
                }
                query.push((
                    "$filter",
                    format!("TableName ge '{}' and TableName lt '{}'", quote(&full), quote(&end)),
                ));
            }
            if let Some(next) = &next {
                query.push(("NextTableName", next.clone()));
            }
            let response = self
                .send(Method::GET, &format!("{}/Tables", self.config.endpoint), &query, &[], None)
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
                if let Some(name) = table["TableName"].as_str() {
                    // The service compares table names without case; keep exact prefixes.
                    if let Some(stripped) = name.strip_prefix(&self.table_prefix) {
                        if stripped.starts_with(prefix) {
                            names.push(stripped.to_owned());
                        }
                    }
                }
            }
            if next.is_none() {
                break;
            }
        }
        names.sort();
        Ok(names)
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        limits::check_point_read(table, partition_key, row_key, select)?;
        let name = self.service_table(table)?;
        let mut query = Vec::new();
        if let Some(select) = select {
            query.push(("$select", select_list(select.iter().copied())));
        }
        let response = self
            .send(
                Method::GET,
                &self.entity_url(&name, partition_key, row_key),
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
            StatusCode::NOT_FOUND => {
                match Self::error(response, table, Some((partition_key, row_key))).await {
                    Error::NotFound { .. } => Ok(None),
                    other => Err(other),
                }
            }
            _ => Err(Self::error(response, table, Some((partition_key, row_key))).await),
        }
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        query.check()?;
        let name = self.service_table(table)?;
        let mut params = Vec::new();
        if let Some(filter) = &query.filter {
            params.push(("$filter", filter.to_odata()));
        }
        params.push(("$top", query.page_size().to_string()));
        if let Some(select) = &query.select {
            params.push(("$select", select_list(select.iter().map(String::as_str))));
        }
        if let Some(token) = &query.continuation {
            params.push(("NextPartitionKey", token.next_partition_key().to_owned()));
            if !token.next_row_key().is_empty() {
                params.push(("NextRowKey", token.next_row_key().to_owned()));
            }
        }
        let response = self
            .send(Method::GET, &format!("{}/{name}()", self.config.endpoint), &params, &[], None)
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
        let continuation = header("x-ms-continuation-NextPartitionKey")
            .map(|npk| ContinuationToken::new(npk, header("x-ms-continuation-NextRowKey").unwrap_or_default()));
        let mut body: Json = Self::json(response).await?;
        let mut entities = Vec::new();
        if let Json::Array(values) = body["value"].take() {
            for value in values {
                let mut entity = json::entity_from_json(value)?;
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

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        op.check()?;
        let name = self.service_table(table)?;
        let (pk, rk) = op.key();
        let (pk, rk) = (pk.to_owned(), rk.to_owned());
        let request = batch::sub_request(&op, &self.table_url(&name), &self.entity_url(&name, &pk, &rk));
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
            Err(Self::error(response, table, Some((&pk, &rk))).await)
        }
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        batch.check()?;
        let name = self.service_table(table)?;
        let ops = batch.into_operations();
        let requests: Vec<_> = ops
            .iter()
            .map(|op| {
                let (pk, rk) = op.key();
                batch::sub_request(op, &self.table_url(&name), &self.entity_url(&name, pk, rk))
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
        let text = response.text().await.map_err(|e| transient(e.to_string()))?;
        let parts = batch::decode(&text);
        if let Some(failed) = parts.iter().find(|p| p.status >= 300) {
            let (_, message) = error_parts(&failed.body);
            let index = message
                .split_once(':')
                .and_then(|(n, _)| n.trim().parse::<usize>().ok())
                .unwrap_or(0);
            let key = ops.get(index).map(WriteOp::key);
            let error = service_error(failed.status, &failed.body, table, key);
            return Err(match error {
                Error::TableNotFound { .. } => error,
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
