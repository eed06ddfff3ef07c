//! The one HTTP client of the Azure Storage services: a request to one service of one
//! account, signed by the [signer](super::signer) (or carrying the account's SAS), with
//! the service's `x-ms-version`, sent and retried under the one [`RetryPolicy`]; and the
//! one wait for a table or queue the service is still deleting.
//!
//! Retried with the policy's jittered backoff: a read after any transient failure (5xx,
//! 408, a timeout, a lost connection); a write only when it surely was not applied (no
//! connection, or the service answered 503 "busy"): after a timeout it may have been, and
//! a repeat would report a wrong error (AlreadyExists for an insert that succeeded).

use std::time::Duration;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use reqwest::{Method, StatusCode};
use tokio::time::Instant;

use super::account::{Credential, Service, StorageAccount};
use crate::retry::RetryPolicy;

/// Characters escaped in URL paths: everything but unreserved characters and the few
/// OData needs as they are (`'`, `(`, `)`, `=`, `,`).
pub(crate) const PATH: &AsciiSet = &CONTROLS
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

/// The longest pause between two attempts to create a table or queue being deleted.
pub const MAX_BEING_DELETED_PAUSE: Duration = Duration::from_secs(5);

/// A request that got no answer.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The request's URL does not read.
    #[error("invalid request URL: {source}")]
    InvalidUrl {
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The request failed without an answer (after the retries the policy allows).
    #[error("{method} {path}: {source}")]
    Failed {
        /// The method.
        method: Method,
        /// The URL's path.
        path: String,
        /// The HTTP client's error.
        #[source]
        source: reqwest::Error,
    },
}

impl SendError {
    /// Whether the same request may succeed later: the service was not reached, or did
    /// not answer in time.
    pub fn is_transient(&self) -> bool {
        match self {
            SendError::InvalidUrl { .. } => false,
            SendError::Failed { source, .. } => source.is_timeout() || source.is_connect(),
        }
    }
}

impl From<SendError> for crate::Error {
    fn from(e: SendError) -> Self {
        if e.is_transient() {
            crate::Error::Transient {
                message: e.to_string(),
            }
        } else {
            crate::Error::Backend {
                message: e.to_string(),
            }
        }
    }
}

/// A client of one service of one account.
#[derive(Clone, Debug)]
pub struct ServiceClient {
    http: reqwest::Client,
    service: Service,
    account: String,
    endpoint: String,
    credential: Credential,
    retry: RetryPolicy,
    /// How long a request's retries may go on, whatever attempts are left.
    retry_within: Option<Duration>,
    /// Headers every request of this client carries (the Table service's OData ones).
    default_headers: Vec<(&'static str, &'static str)>,
}

/// The settings of a [`ServiceClient`], given in any order, then built for an account's
/// service with [`build`](Self::build) or for an endpoint with
/// [`for_endpoint`](Self::for_endpoint). Each setter given twice keeps the last value.
///
/// ```
/// use std::time::Duration;
/// use tablekit_core::azure::{RetryPolicy, Service, ServiceClient, StorageAccount};
///
/// # fn main() -> tablekit_core::Result<()> {
/// let account = StorageAccount::from_connection_string("UseDevelopmentStorage=true")?;
/// let client = ServiceClient::options()
///     .retry_policy(RetryPolicy::azure().attempts(3))
///     .retry_within(Duration::from_secs(10))
///     .build(&account, Service::Queue)?;
/// assert_eq!(client.retry_policy().max_attempts, 3);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ServiceClientOptions {
    retry: RetryPolicy,
    retry_within: Option<Duration>,
    default_headers: Vec<(&'static str, &'static str)>,
}

impl Default for ServiceClientOptions {
    fn default() -> Self {
        ServiceClientOptions {
            retry: RetryPolicy::azure(),
            retry_within: None,
            default_headers: Vec::new(),
        }
    }
}

impl ServiceClientOptions {
    /// The defaults: retries under [`RetryPolicy::azure`] for as many attempts as it
    /// allows, whatever the time they take, and no headers of the client's own.
    pub fn new() -> Self {
        Self::default()
    }

    /// How requests are retried (default [`RetryPolicy::azure`]).
    #[must_use]
    pub fn retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// How long a request's retries may go on, whatever attempts the policy has left
    /// (default: no bound but the policy's attempts).
    #[must_use]
    pub fn retry_within(mut self, within: Duration) -> Self {
        self.retry_within = Some(within);
        self
    }

    /// Headers every request carries (default none; the Table client's OData ones).
    #[must_use]
    pub fn default_headers(mut self, headers: Vec<(&'static str, &'static str)>) -> Self {
        self.default_headers = headers;
        self
    }

    /// The client of `service` of `account`.
    ///
    /// # Errors
    /// [`Error::InvalidConnection`](crate::Error::InvalidConnection) when the account has
    /// no endpoint for the service; [`Error::Backend`](crate::Error::Backend) when the
    /// HTTP client cannot be built.
    pub fn build(self, account: &StorageAccount, service: Service) -> crate::Result<ServiceClient> {
        self.for_endpoint(
            service,
            account.name(),
            account.endpoint(service)?,
            account.credential().clone(),
        )
    }

    /// The client of `service` at `endpoint` (without a trailing slash) of `account`.
    ///
    /// # Errors
    /// [`Error::Backend`](crate::Error::Backend) when the HTTP client cannot be built.
    pub fn for_endpoint(
        self,
        service: Service,
        account: &str,
        endpoint: &str,
        credential: Credential,
    ) -> crate::Result<ServiceClient> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| crate::Error::Backend {
                message: format!("building the HTTP client: {e}"),
            })?;
        Ok(ServiceClient {
            http,
            service,
            account: account.to_owned(),
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            credential,
            retry: self.retry,
            retry_within: self.retry_within,
            default_headers: self.default_headers,
        })
    }
}

impl ServiceClient {
    /// The settings of a client, given in any order, then
    /// [`build`](ServiceClientOptions::build) for an account's service or
    /// [`for_endpoint`](ServiceClientOptions::for_endpoint).
    pub fn options() -> ServiceClientOptions {
        ServiceClientOptions::new()
    }

    /// A client of `service` of `account` with the default settings (see
    /// [`ServiceClientOptions::new`]): the shortcut for
    /// `ServiceClient::options().build(account, service)`.
    ///
    /// # Errors
    /// [`Error::InvalidConnection`](crate::Error::InvalidConnection) when the account has
    /// no endpoint for the service; [`Error::Backend`](crate::Error::Backend) when the
    /// HTTP client cannot be built.
    pub fn new(account: &StorageAccount, service: Service) -> crate::Result<Self> {
        Self::options().build(account, service)
    }

    /// A client of `service` at `endpoint` (without a trailing slash) of `account`, with
    /// the default settings: the shortcut for
    /// `ServiceClient::options().for_endpoint(service, account, endpoint, credential)`.
    ///
    /// # Errors
    /// [`Error::Backend`](crate::Error::Backend) when the HTTP client cannot be built.
    pub fn for_endpoint(
        service: Service,
        account: &str,
        endpoint: &str,
        credential: Credential,
    ) -> crate::Result<Self> {
        Self::options().for_endpoint(service, account, endpoint, credential)
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// The service endpoint, without a trailing slash.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Sends a request to `url` (the endpoint and a path) with `query` parameters
    /// (percent-encoded here), `headers` and a body with its content type, signing it and
    /// retrying as the [module](self) docs say.
    ///
    /// # Errors
    /// [`SendError`] when no answer came; an answer of any status is `Ok`.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        query: &[(&str, String)],
        headers: &[(&str, String)],
        body: Option<(String, String)>,
    ) -> Result<reqwest::Response, SendError> {
        let mut url = url.to_owned();
        let mut params: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{k}={}", utf8_percent_encode(v, QUERY)))
            .collect();
        if let Credential::Sas(sas) = &self.credential {
            params.push(sas.clone());
        }
        if !params.is_empty() {
            url.push('?');
            url.push_str(&params.join("&"));
        }
        let parsed = reqwest::Url::parse(&url).map_err(|e| SendError::InvalidUrl {
            source: Box::new(e),
        })?;
        let deadline = self.retry_within.map(|within| Instant::now() + within);
        let mut attempt = 1;
        loop {
            let outcome = self.attempt(&method, &parsed, headers, &body).await;
            let out_of_time = deadline.is_some_and(|deadline| Instant::now() >= deadline);
            if !should_retry(&method, &outcome) || attempt >= self.retry.max_attempts || out_of_time
            {
                return outcome.map_err(|source| SendError::Failed {
                    method: method.clone(),
                    path: parsed.path().to_owned(),
                    source,
                });
            }
            attempt += 1;
            tracing::debug!(
                attempt,
                path = parsed.path(),
                "Azure Storage unreachable or busy, retrying"
            );
            tokio::time::sleep(self.retry.backoff(attempt)).await;
        }
    }

    async fn attempt(
        &self,
        method: &Method,
        url: &reqwest::Url,
        headers: &[(&str, String)],
        body: &Option<(String, String)>,
    ) -> reqwest::Result<reqwest::Response> {
        let mut request = self
            .http
            .request(method.clone(), url.clone())
            .header("x-ms-date", super::signer::http_date())
            .header("x-ms-version", self.service.api_version());
        for (name, value) in &self.default_headers {
            request = request.header(*name, *value);
        }
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        request = match body {
            Some((content_type, body)) => request
                .header("Content-Type", content_type)
                .body(body.clone()),
            None if *method == Method::PUT || *method == Method::POST => {
                request.header("Content-Length", "0")
            }
            None => request,
        };
        let mut request = request.build()?;
        if let Credential::SharedKey(key) = &self.credential {
            let authorization =
                super::signer::authorization(self.service, &self.account, key, &request);
            if let Ok(value) = reqwest::header::HeaderValue::from_str(&authorization) {
                request.headers_mut().insert("Authorization", value);
            }
        }
        self.http.execute(request).await
    }

    /// Runs `create` until the service stops refusing it because a resource of that name
    /// is still being deleted (`being_deleted` tells that refusal; the Table service keeps
    /// answering it for about 40 seconds after a delete), for up to `within`: between
    /// attempts, the policy's backoff, at most [`MAX_BEING_DELETED_PAUSE`]. Then the last
    /// refusal is returned. Zero does not wait.
    ///
    /// # Errors
    /// `create`'s error: the last one once `within` has passed, or the first that is not
    /// "being deleted".
    pub async fn wait_while_being_deleted<T, E, F>(
        &self,
        within: Duration,
        mut create: impl FnMut() -> F,
        being_deleted: impl Fn(&E) -> bool,
    ) -> Result<T, E>
    where
        F: std::future::Future<Output = Result<T, E>>,
    {
        let policy = self.retry.capped_at(MAX_BEING_DELETED_PAUSE);
        let started = Instant::now();
        let mut attempt = 1;
        loop {
            let refusal = match create().await {
                Err(refusal) if being_deleted(&refusal) => refusal,
                other => return other,
            };
            let remaining = within.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                return Err(refusal);
            }
            attempt += 1;
            tokio::time::sleep(policy.backoff(attempt).min(remaining)).await;
        }
    }
}

/// Whether an attempt's outcome is retried (see the [module](self) docs).
fn should_retry(method: &Method, outcome: &reqwest::Result<reqwest::Response>) -> bool {
    match outcome {
        Ok(response) => is_retried_status(method, response.status()),
        Err(e) => e.is_connect() || (is_read(method) && (e.is_timeout() || e.is_request())),
    }
}

/// Whether a request of `method` answered `status` is retried.
fn is_retried_status(method: &Method, status: StatusCode) -> bool {
    status == StatusCode::SERVICE_UNAVAILABLE
        || (is_read(method) && (status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT))
}

fn is_read(method: &Method) -> bool {
    *method == Method::GET || *method == Method::HEAD
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[test]
    fn busy_is_retried_for_every_request_other_failures_for_reads_only() {
        for method in [Method::GET, Method::POST, Method::PUT, Method::DELETE] {
            assert!(is_retried_status(&method, StatusCode::SERVICE_UNAVAILABLE));
            assert!(!is_retried_status(&method, StatusCode::BAD_REQUEST));
            assert!(!is_retried_status(&method, StatusCode::CONFLICT));
            assert!(!is_retried_status(&method, StatusCode::FORBIDDEN));
        }
        assert!(is_retried_status(
            &Method::GET,
            StatusCode::INTERNAL_SERVER_ERROR
        ));
        assert!(is_retried_status(&Method::GET, StatusCode::REQUEST_TIMEOUT));
        assert!(!is_retried_status(
            &Method::POST,
            StatusCode::INTERNAL_SERVER_ERROR
        ));
    }

    /// A service on loopback answering each request with the next status of `statuses`
    /// (the last one from then on); returns its endpoint and the requests it received.
    async fn service(statuses: Vec<u16>) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let endpoint = format!(
            "http://{}/devstoreaccount1",
            listener.local_addr().expect("bound")
        );
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let served = counted.fetch_add(1, Ordering::SeqCst);
                let status = statuses[served.min(statuses.len() - 1)];
                let mut buffer = vec![0; 8192];
                let _ = socket.read(&mut buffer).await;
                let answer = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        (endpoint, requests)
    }

    fn client(endpoint: &str) -> ServiceClient {
        ServiceClient::options()
            .retry_policy(RetryPolicy {
                max_attempts: 4,
                base: Duration::from_millis(1),
                cap: Duration::from_millis(5),
            })
            .for_endpoint(
                Service::Queue,
                "devstoreaccount1",
                endpoint,
                Credential::SharedKey(b"key".to_vec()),
            )
            .expect("a client")
    }

    #[tokio::test]
    async fn a_transient_status_is_retried_until_the_service_answers() {
        let (endpoint, requests) = service(vec![503, 500, 200]).await;
        let response = client(&endpoint)
            .send(Method::GET, &format!("{endpoint}/q"), &[], &[], None)
            .await
            .expect("an answer");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(requests.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_definite_status_is_answered_at_once() {
        let (endpoint, requests) = service(vec![404, 200]).await;
        let response = client(&endpoint)
            .send(Method::GET, &format!("{endpoint}/q"), &[], &[], None)
            .await
            .expect("an answer");
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(requests.load(Ordering::SeqCst), 1);
        // A write that may have been applied is not repeated.
        let (endpoint, requests) = service(vec![500, 200]).await;
        let response = client(&endpoint)
            .send(Method::POST, &format!("{endpoint}/q"), &[], &[], None)
            .await
            .expect("an answer");
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(requests.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn retries_stop_after_the_policys_attempts() {
        let (endpoint, requests) = service(vec![503]).await;
        let response = client(&endpoint)
            .send(Method::PUT, &format!("{endpoint}/q"), &[], &[], None)
            .await
            .expect("an answer");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(requests.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn an_unreachable_service_is_a_transient_send_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let endpoint = format!("http://{}", listener.local_addr().expect("bound"));
        drop(listener);
        let error = client(&endpoint)
            .send(Method::GET, &format!("{endpoint}/q"), &[], &[], None)
            .await
            .expect_err("nobody listens");
        assert!(error.is_transient(), "{error}");
        assert!(matches!(
            crate::Error::from(error),
            crate::Error::Transient { .. }
        ));
    }
}
