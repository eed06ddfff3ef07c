//! The Azure Queue Storage backend: the queue the design guides build the eventually
//! consistent transactions pattern on, so a deployment on Azure Storage needs no broker of
//! its own.
//!
//! - A receive makes a message invisible for the consumer's lease (the visibility
//!   timeout) and counts the delivery (`DequeueCount`); the pop receipt names the lease,
//!   so an ack after the lease ran out is refused by the service and reported as
//!   [`Error::Unavailable`] (the message comes back: operations are idempotent). While a
//!   delivery is held its lease is renewed (Update Message) every half lease.
//! - A retry makes the message invisible for the delay (whole seconds, at least one; the
//!   service counts visibility in seconds); the next receive counts the delivery.
//! - A poisoned message moves to `<queue>-poison` (the Azure Functions convention) with its
//!   reason and delivery count; [`poison_list`](Queue::poison_list) peeks it and
//!   [`poison_replay`](Queue::poison_replay) sends it back as a new message.
//! - Messages never expire unless asked ([`AzureQueue::with_message_ttl`]), so nothing is
//!   dropped silently.
//! - A message whose text would pass the service's 64 KiB is stored in the blob store and
//!   the queue carries its address (claim check); the blob is deleted after the ack.
//! - Queue names follow the service's rules (3–63 lowercase letters, digits and single
//!   hyphens) with room for the `-poison` suffix, checked before any request.
//!
//! Message text is tablekit's JSON (`{"tk": 1, "id", "sent", "body" (base64) | "claim",
//! "reason", "count"}`). A message another producer wrote (a script, a function's output
//! binding) is delivered with its text as the body and the service's message id: an
//! operation envelope's JSON put as plain text is handled like one tablekit sent, and
//! anything else is poisoned with a reason while the worker keeps running.
//!
//! The client is written on `reqwest` beside the Table client and signs with the same
//! account key (SharedKeyLite) or appends the same SAS: the official `azure_storage_queue`
//! crate authenticates with Entra ID tokens only (which it refuses over plain HTTP, the
//! way the storage emulator is reached) or with one pre-signed URL per queue, and cannot
//! use an account key or an account SAS for the queues a worker derives.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use rand::Rng;
use reqwest::{Method, StatusCode};
use serde::{Deserialize, Serialize};
use tablekit_core::azure::{Credential, DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY};
use tablekit_core::blob::BlobStore;
use tokio::sync::{Mutex, OnceCell, OwnedSemaphorePermit, Semaphore, oneshot};

use super::{
    ConsumeOptions, Consumer, Delivery, PoisonMessage, Queue, QueueOptions, QueueStats, Received,
    check_queue_name, poison_queue,
};
use crate::error::{Error, Result};

/// The service version the client speaks.
const API_VERSION: &str = "2021-08-06";
/// The emulator's queue endpoint.
pub const DEVELOPMENT_QUEUE_ENDPOINT: &str = "http://127.0.0.1:10001/devstoreaccount1";
/// The largest message text the service stores (64 KiB).
pub const MAX_MESSAGE_TEXT: usize = 64 * 1024;
/// How long a consumer waits for held deliveries to settle before a receive, so that one
/// receive brings several messages.
const GATHER: Duration = Duration::from_millis(20);
/// The most messages one receive or peek returns.
const MAX_BATCH: usize = 32;
/// The longest queue name the service allows.
const MAX_SERVICE_NAME: usize = 63;
/// The container claim-checked bodies go to unless the connection string names another
/// (`ClaimContainer=`).
pub const DEFAULT_CLAIM_CONTAINER: &str = "tablekit-queue-claims";

/// Checks a queue name against the service's rules, leaving room for the `-poison`
/// suffix: 3 to 56 characters, lowercase letters, digits and hyphens, starting and ending
/// with a letter or digit, no two hyphens in a row.
///
/// # Errors
/// [`Error::InvalidQueueName`].
pub fn check_azure_queue_name(name: &str) -> Result<()> {
    check_queue_name(name)?;
    let longest = MAX_SERVICE_NAME - super::POISON_SUFFIX.len();
    let reason = if name.len() < 3 {
        Some("an Azure queue name has at least 3 characters")
    } else if name.len() > longest {
        Some("an Azure queue name has at most 56 characters (63, less the `-poison` suffix)")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        Some("an Azure queue name holds lowercase letters, digits and hyphens only")
    } else if name.starts_with('-') || name.ends_with('-') {
        Some("an Azure queue name starts and ends with a letter or a digit")
    } else if name.contains("--") {
        Some("an Azure queue name cannot hold two hyphens in a row")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidQueueName {
            name: name.chars().take(64).collect(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Where the queue service is and how to sign for it.
#[derive(Clone, Debug)]
struct Account {
    name: String,
    /// The queue endpoint, without a trailing slash.
    endpoint: String,
    credential: Credential,
    /// What a shared access signature allows, read from the token.
    scope: Option<SasScope>,
}

/// What a queue shared access signature allows, as far as the token itself says: checked
/// before each request so a call outside it fails with a typed error and sends nothing.
/// A token bound to a stored access policy (`si`) without its own permissions or expiry
/// leaves those to the service (a 403 maps to the same error).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct SasScope {
    /// An account SAS (`ss`): the services it covers.
    services: Option<String>,
    /// The permission letters (`sp`).
    permissions: Option<String>,
    start: Option<DateTime<Utc>>,
    expiry: Option<DateTime<Utc>>,
}

/// Clock skew allowed between this host and the service when checking a token's times.
const SAS_CLOCK_SKEW: Duration = Duration::from_secs(60);

impl SasScope {
    fn parse(token: &str) -> Self {
        let mut scope = SasScope::default();
        for (key, value) in token.split('&').filter_map(|p| p.split_once('=')) {
            let value = percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .into_owned();
            let time = || {
                DateTime::parse_from_rfc3339(&value)
                    .ok()
                    .map(|t| t.with_timezone(&Utc))
            };
            match key {
                "ss" => scope.services = Some(value),
                "sp" => scope.permissions = Some(value),
                "st" => scope.start = time(),
                "se" => scope.expiry = time(),
                _ => {}
            }
        }
        scope
    }

    fn is_account_sas(&self) -> bool {
        self.services.is_some()
    }

    /// Checks one call: `letters` are the permissions any of which allows it (service SAS
    /// letters `raup`; account SAS letters `rwdlacup`).
    fn check(&self, queue: &str, letters: &str, what: &str) -> Result<()> {
        let denied = |reason: String| {
            Err(Error::PermissionDenied {
                queue: queue.to_owned(),
                reason,
            })
        };
        let now = Utc::now();
        let skew = chrono::Duration::from_std(SAS_CLOCK_SKEW).unwrap_or_default();
        if let Some(expiry) = self.expiry
            && expiry + skew < now
        {
            return denied(format!("the access signature expired at {expiry}"));
        }
        if let Some(start) = self.start
            && start - skew > now
        {
            return denied(format!("the access signature is valid from {start}"));
        }
        if let Some(services) = &self.services
            && !services.contains('q')
        {
            return denied(format!(
                "the account access signature covers services `{services}`, not queues"
            ));
        }
        if let Some(permissions) = &self.permissions
            && !permissions.contains(|c| letters.contains(c))
        {
            return denied(format!(
                "{what} needs permission `{}`; the access signature allows `{permissions}`",
                letters
                    .chars()
                    .map(String::from)
                    .collect::<Vec<_>>()
                    .join("` or `")
            ));
        }
        Ok(())
    }
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidBroker {
        // The connection string holds a secret: it is never echoed.
        broker: "azure:…".to_owned(),
        reason: reason.into(),
    }
}

impl Account {
    fn parse(connection: &str) -> Result<(Self, std::collections::HashMap<String, String>)> {
        let (fields, malformed) = tablekit_core::azure::connection_fields(connection);
        if let Some(part) = malformed.first() {
            return Err(invalid(format!(
                "`{}` is not KEY=VALUE",
                part.chars().take(20).collect::<String>()
            )));
        }
        let get = |k: &str| fields.get(k).cloned();
        let development =
            get("usedevelopmentstorage").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let (name, endpoint) = if development {
            let endpoint = get("queueendpoint")
                .or_else(|| {
                    get("developmentstorageproxyuri").map(|proxy| {
                        format!("{}/{DEVELOPMENT_ACCOUNT}", proxy.trim_end_matches('/'))
                    })
                })
                .unwrap_or_else(|| DEVELOPMENT_QUEUE_ENDPOINT.to_owned());
            (DEVELOPMENT_ACCOUNT.to_owned(), endpoint)
        } else {
            let endpoint = match get("queueendpoint") {
                Some(endpoint) => endpoint,
                None => {
                    let account = get("accountname")
                        .ok_or_else(|| invalid("missing AccountName (or QueueEndpoint)"))?;
                    let protocol =
                        get("defaultendpointsprotocol").unwrap_or_else(|| "https".into());
                    let suffix = get("endpointsuffix").unwrap_or_else(|| "core.windows.net".into());
                    format!("{protocol}://{account}.queue.{suffix}")
                }
            };
            let name = match get("accountname") {
                Some(name) => name,
                None => tablekit_core::azure::account_from_endpoint(&endpoint)
                    .ok_or_else(|| invalid("missing AccountName"))?,
            };
            (name, endpoint)
        };
        let endpoint = endpoint.trim_end_matches('/').to_owned();
        if reqwest::Url::parse(&endpoint).is_err()
            || !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            return Err(invalid("the queue endpoint must be an http(s) URL"));
        }
        let credential = if development {
            Credential::SharedKey(
                STANDARD
                    .decode(DEVELOPMENT_KEY)
                    .map_err(|_| invalid("the development key"))?,
            )
        } else {
            match (get("accountkey"), get("sharedaccesssignature")) {
                (Some(key), _) => Credential::SharedKey(
                    STANDARD
                        .decode(key)
                        .map_err(|_| invalid("AccountKey is not base64"))?,
                ),
                (None, Some(sas)) => Credential::Sas(sas.trim_start_matches('?').to_owned()),
                (None, None) => {
                    return Err(invalid("missing AccountKey or SharedAccessSignature"));
                }
            }
        };
        let scope = match &credential {
            Credential::Sas(token) => Some(SasScope::parse(token)),
            Credential::SharedKey(_) => None,
        };
        Ok((
            Account {
                name,
                endpoint,
                credential,
                scope,
            },
            fields,
        ))
    }
}

/// A message as tablekit writes it into the message text.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Wire {
    /// The wire form's version (1): tells tablekit's messages from other producers' JSON.
    tk: u32,
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sent: Option<DateTime<Utc>>,
    /// The body, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<String>,
    /// The blob holding the body (claim check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    claim: Option<String>,
    /// Why a poisoned message was poisoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// The deliveries a poisoned message had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    count: Option<u32>,
}

/// One message of a Get Messages or Peek Messages answer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ServiceMessage {
    message_id: String,
    #[serde(default)]
    pop_receipt: Option<String>,
    #[serde(default)]
    dequeue_count: Option<u32>,
    #[serde(default)]
    insertion_time: Option<String>,
    #[serde(default)]
    message_text: String,
}

#[derive(Debug, Default, Deserialize)]
struct ServiceMessages {
    #[serde(rename = "QueueMessage", default)]
    messages: Vec<ServiceMessage>,
}

/// A message received, not yet handed out.
#[derive(Debug)]
struct Leased {
    message_id: String,
    receipt: String,
    received: Received,
    claim: Option<String>,
    /// The message text as received (a poisoned copy keeps it).
    wire: Wire,
    /// When the lease taken by the receive runs out.
    lease_ends: Instant,
}

/// An Azure Queue Storage queue backend.
#[derive(Clone, Debug)]
pub struct AzureQueue {
    inner: Arc<Inner>,
}

#[derive(Clone, Debug)]
struct Inner {
    client: reqwest::Client,
    account: Account,
    message_ttl: Option<Duration>,
    max_poll_interval: Duration,
    /// The blob store claim-checked bodies go to, and the connection string that made it
    /// (to create its container on first use).
    claims: Option<(BlobStore, Option<(String, String)>)>,
    claims_ready: OnceCell<()>,
    /// How long calls keep retrying an unreachable service before reporting it.
    reconnect_within: Duration,
    /// Whether held deliveries have their leases renewed.
    renew_leases: bool,
}

impl AzureQueue {
    /// Connects to the queue service of a storage connection string:
    /// `UseDevelopmentStorage=true` (Azurite, queues on port 10001),
    /// `DefaultEndpointsProtocol=https;AccountName=…;AccountKey=…`, any of them with
    /// `QueueEndpoint=…`, or `QueueEndpoint=…;SharedAccessSignature=…`. tablekit's own keys:
    /// `ClaimContainer=NAME` (the blob container for bodies over 64 KiB, default
    /// `tablekit-queue-claims`, on the same account; needs an account key) and
    /// `MessageTimeToLive=SECONDS` (default: never expire).
    ///
    /// Nothing is sent until the first call.
    ///
    /// # Errors
    /// [`Error::InvalidBroker`] naming what is missing or malformed (never the key).
    pub fn connect(connection: &str) -> Result<Self> {
        let (account, fields) = Account::parse(connection)?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Error::unavailable_because("building the HTTP client", e))?;
        let message_ttl = match fields.get("messagetimetolive") {
            None => None,
            Some(v) => {
                Some(Duration::from_secs(v.parse::<u64>().map_err(|_| {
                    invalid("MessageTimeToLive is a number of seconds")
                })?))
            }
        };
        let container = fields
            .get("claimcontainer")
            .cloned()
            .unwrap_or_else(|| DEFAULT_CLAIM_CONTAINER.to_owned());
        let has_key = matches!(account.credential, Credential::SharedKey(_));
        let claims = if has_key {
            let blob_connection = blob_connection(connection);
            BlobStore::azure(&format!("{blob_connection};Container={container}"))
                .ok()
                .map(|store| (store, Some((blob_connection, container))))
        } else {
            None
        };
        Ok(AzureQueue {
            inner: Arc::new(Inner {
                client,
                account,
                message_ttl,
                max_poll_interval: Duration::from_secs(1),
                claims,
                claims_ready: OnceCell::new(),
                reconnect_within: Duration::from_secs(120),
                renew_leases: true,
            }),
        })
    }

    fn with_inner(mut self, change: impl FnOnce(&mut Inner)) -> Self {
        change(Arc::make_mut(&mut self.inner));
        self
    }

    /// How long a sent message lives in the queue (`None`, the default: until received and
    /// acknowledged, never dropped by the service).
    #[must_use]
    pub fn with_message_ttl(self, ttl: Option<Duration>) -> Self {
        self.with_inner(|inner| inner.message_ttl = ttl)
    }

    /// The longest pause between two receives of an idle consumer (default 1 s). Each
    /// receive is a billed transaction: a longer pause costs less and adds latency.
    #[must_use]
    pub fn with_max_poll_interval(self, interval: Duration) -> Self {
        self.with_inner(|inner| inner.max_poll_interval = interval.max(Duration::from_millis(1)))
    }

    /// The blob store for bodies over 64 KiB, instead of the connection's account.
    #[must_use]
    pub fn with_claim_store(self, store: BlobStore) -> Self {
        self.with_inner(|inner| inner.claims = Some((store, None)))
    }

    /// How long calls keep retrying an unreachable service before they report
    /// [`Error::Unavailable`] (default 120 s).
    #[must_use]
    pub fn with_reconnect_within(self, within: Duration) -> Self {
        self.with_inner(|inner| inner.reconnect_within = within)
    }

    /// Whether a delivery held longer than its lease has the lease renewed (default
    /// `true`). Without renewal, a handler slower than the consumer's lease loses the
    /// message to another consumer and its ack is refused.
    #[must_use]
    pub fn with_lease_renewal(self, renew: bool) -> Self {
        self.with_inner(|inner| inner.renew_leases = renew)
    }

    /// Puts a message text on a queue as another producer would (no tablekit wire form):
    /// consumers receive the text itself as the body, with the service's message id.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`]; [`Error::Refused`] for a text over 64 KiB or an
    /// undeclared queue; [`Error::Unavailable`].
    pub async fn send_text(&self, queue: &str, text: &str) -> Result<()> {
        check_azure_queue_name(queue)?;
        if escaped_len(text) > MAX_MESSAGE_TEXT {
            return Err(Error::refused(format!(
                "a message text has at most 64 KiB on the service, this one {} bytes",
                escaped_len(text)
            )));
        }
        self.put(queue, text, Duration::ZERO).await
    }

    /// Deletes a queue and its poison queue (and their messages). Claim-checked bodies of
    /// the deleted messages stay in the blob store.
    ///
    /// # Errors
    /// [`Error::InvalidQueueName`], [`Error::Unavailable`].
    pub async fn delete_queue(&self, queue: &str) -> Result<()> {
        check_azure_queue_name(queue)?;
        self.allowed(queue, "d", "deleting a queue")?;
        for name in [queue.to_owned(), poison_queue(queue)] {
            let response = self
                .request(Method::DELETE, &format!("/{name}"), &[], None)
                .await?;
            let status = response.status();
            if !status.is_success() && status != StatusCode::NOT_FOUND {
                return Err(service_error(response, &name).await);
            }
        }
        Ok(())
    }

    /// Checks a call against the access signature, if the queue was opened with one.
    fn allowed(&self, queue: &str, letters: &str, what: &str) -> Result<()> {
        match &self.inner.account.scope {
            Some(scope) => scope.check(queue, letters, what),
            None => Ok(()),
        }
    }

    /// Sends one signed request, retrying what surely did not reach the service (and the
    /// service's "busy") with jittered backoff.
    async fn request(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<String>,
    ) -> Result<reqwest::Response> {
        let account = &self.inner.account;
        let mut url = format!("{}{path}", account.endpoint);
        let mut params: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{k}={}", utf8_percent_encode(v, NON_ALPHANUMERIC)))
            .collect();
        if let Credential::Sas(sas) = &account.credential {
            params.push(sas.clone());
        }
        if !params.is_empty() {
            url.push('?');
            url.push_str(&params.join("&"));
        }
        let parsed = reqwest::Url::parse(&url)
            .map_err(|e| Error::Config(format!("invalid queue URL: {e}")))?;
        let comp = query
            .iter()
            .find(|(k, _)| *k == "comp")
            .map(|(_, v)| v.as_str());
        let deadline = Instant::now() + self.inner.reconnect_within;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let date = tablekit_core::azure::http_date();
            let content_type = if body.is_some() {
                "application/xml"
            } else {
                ""
            };
            let mut request = self
                .inner
                .client
                .request(method.clone(), parsed.clone())
                .header("x-ms-date", &date)
                .header("x-ms-version", API_VERSION);
            if let Credential::SharedKey(key) = &account.credential {
                // SharedKeyLite for the queue service: verb, Content-MD5, Content-Type, Date
                // (empty: x-ms-date is sent), the x-ms- headers, then the resource.
                let mut resource = format!("/{}{}", account.name, parsed.path());
                if let Some(comp) = comp {
                    resource.push_str("?comp=");
                    resource.push_str(comp);
                }
                let to_sign = format!(
                    "{method}\n\n{content_type}\n\nx-ms-date:{date}\nx-ms-version:{API_VERSION}\n{resource}"
                );
                request = request.header(
                    "Authorization",
                    format!(
                        "SharedKeyLite {}:{}",
                        account.name,
                        tablekit_core::azure::sign(key, &to_sign)
                    ),
                );
            }
            if let Some(body) = &body {
                request = request
                    .header("Content-Type", content_type)
                    .body(body.clone());
            } else if method == Method::PUT || method == Method::POST {
                request = request.header("Content-Length", "0");
            }
            let outcome = request.send().await;
            // Repeated only when the request surely was not applied (no connection, or the
            // service said it is busy), or when repeating it is harmless (a read).
            let read = method == Method::GET || method == Method::HEAD;
            let retryable = match &outcome {
                Ok(response) => {
                    let status = response.status();
                    status == StatusCode::SERVICE_UNAVAILABLE
                        || (read
                            && (status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT))
                }
                Err(e) => e.is_connect() || (read && (e.is_timeout() || e.is_request())),
            };
            if !retryable || Instant::now() >= deadline {
                return outcome.map_err(|e| {
                    Error::unavailable_because(format!("{method} {}", parsed.path()), e)
                });
            }
            let pause = Duration::from_millis(50)
                .saturating_mul(2u32.saturating_pow(attempt.min(6)))
                .min(Duration::from_secs(2));
            let jitter = rand::rng().random_range(1.0..1.5);
            tracing::debug!(
                attempt,
                path = parsed.path(),
                "queue service unreachable or busy, retrying"
            );
            tokio::time::sleep(pause.mul_f64(jitter)).await;
        }
    }

    /// Creates a queue unless it exists; a queue being deleted is waited for.
    async fn create(&self, name: &str) -> Result<()> {
        if let Some(scope) = &self.inner.account.scope
            && !scope.is_account_sas()
        {
            // A queue's own access signature cannot create queues: the queue must exist
            // (made by the account's owner), which reading its metadata shows.
            self.allowed(
                name,
                "r",
                "declaring a queue through a queue access signature",
            )?;
            let response = self
                .request(
                    Method::GET,
                    &format!("/{name}"),
                    &[("comp", "metadata".to_owned())],
                    None,
                )
                .await?;
            return if response.status().is_success() {
                Ok(())
            } else {
                Err(service_error(response, name).await)
            };
        }
        self.allowed(name, "cw", "creating a queue")?;
        let deadline = Instant::now() + self.inner.reconnect_within;
        loop {
            let response = self
                .request(Method::PUT, &format!("/{name}"), &[], None)
                .await?;
            let status = response.status();
            if status.is_success() {
                return Ok(());
            }
            let code = error_code(&response);
            if code == "QueueBeingDeleted" && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            // Exists with other metadata: tablekit sets none, so it is the queue.
            if code == "QueueAlreadyExists" {
                return Ok(());
            }
            return Err(service_error(response, name).await);
        }
    }

    async fn claims(&self) -> Result<&BlobStore> {
        let Some((store, origin)) = &self.inner.claims else {
            return Err(Error::Config(
                "a message over 64 KiB needs a blob store for its body: connect with an account key, or give one with AzureQueue::with_claim_store".into(),
            ));
        };
        if let Some((connection, container)) = origin {
            self.inner
                .claims_ready
                .get_or_try_init(|| async {
                    tablekit_core::azure::create_blob_container(connection, container)
                        .await
                        .map(|_| ())
                })
                .await?;
        }
        Ok(store)
    }

    /// Puts a message text on a queue.
    async fn put(&self, queue: &str, text: &str, visible_after: Duration) -> Result<()> {
        self.allowed(queue, "a", "sending a message")?;
        let ttl = match self.inner.message_ttl {
            None => "-1".to_owned(),
            Some(ttl) => ttl.as_secs().max(1).to_string(),
        };
        let body = format!(
            "<QueueMessage><MessageText>{}</MessageText></QueueMessage>",
            quick_xml::escape::escape(text)
        );
        let response = self
            .request(
                Method::POST,
                &format!("/{queue}/messages"),
                &[
                    ("visibilitytimeout", visible_after.as_secs().to_string()),
                    ("messagettl", ttl),
                ],
                Some(body),
            )
            .await?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(service_error(response, queue).await)
        }
    }

    /// The wire form of a message: its body inline, or claim-checked when the text would
    /// pass the service's limit.
    async fn encode(&self, queue: &str, mut wire: Wire, body: &[u8]) -> Result<String> {
        wire.body = Some(STANDARD.encode(body));
        let text = serde_json::to_string(&wire)?;
        if escaped_len(&text) <= MAX_MESSAGE_TEXT {
            return Ok(text);
        }
        let name = format!("{queue}/{}", uuid::Uuid::new_v4().simple());
        self.claims().await?.put(&name, body.to_vec()).await?;
        wire.body = None;
        wire.claim = Some(name);
        let text = serde_json::to_string(&wire)?;
        if escaped_len(&text) > MAX_MESSAGE_TEXT {
            return Err(Error::Config(format!(
                "a message's id and reason take {} bytes, over the service's 64 KiB",
                text.len()
            )));
        }
        Ok(text)
    }

    /// A message's body: inline, or read back from its claim (empty, with a warning, when
    /// the claim is gone).
    async fn body_of(&self, wire: &Wire) -> Result<Vec<u8>> {
        if let Some(claim) = &wire.claim {
            return match self.claims().await?.get(claim).await? {
                Some(body) => Ok(body),
                None => Err(Error::storage(format!(
                    "the claim-checked body `{claim}` of message `{}` is missing",
                    wire.id
                ))),
            };
        }
        Ok(wire
            .body
            .as_deref()
            .and_then(|b| STANDARD.decode(b).ok())
            .unwrap_or_default())
    }

    /// Receives up to `count` messages, each leased for `lease`.
    async fn receive(&self, queue: &str, count: usize, lease: Duration) -> Result<Vec<Leased>> {
        self.allowed(queue, "p", "receiving messages")?;
        let response = self
            .request(
                Method::GET,
                &format!("/{queue}/messages"),
                &[
                    ("numofmessages", count.clamp(1, MAX_BATCH).to_string()),
                    ("visibilitytimeout", lease_secs(lease).to_string()),
                ],
                None,
            )
            .await?;
        let started = Instant::now();
        let list = messages(response, queue).await?;
        let mut leased = Vec::with_capacity(list.len());
        for message in list {
            let Some(receipt) = message.pop_receipt.clone() else {
                continue;
            };
            let dequeue = message.dequeue_count.unwrap_or(1);
            let (wire, received) = match serde_json::from_str::<Wire>(&message.message_text) {
                Ok(wire) => {
                    let body = match self.body_of(&wire).await {
                        Ok(body) => body,
                        Err(e) => {
                            tracing::warn!(error = %e, queue, "a message's body is unreadable; it is delivered empty");
                            Vec::new()
                        }
                    };
                    let received = Received {
                        id: wire.id.clone(),
                        body,
                        delivery_count: dequeue,
                        sent_at: wire.sent,
                    };
                    (wire, received)
                }
                // Another producer's message: its text is the body (kept in this wire form
                // if the message is poisoned).
                Err(_) => {
                    let wire = Wire {
                        tk: 1,
                        id: message.message_id.clone(),
                        body: Some(STANDARD.encode(message.message_text.as_bytes())),
                        ..Wire::default()
                    };
                    let received = Received {
                        id: message.message_id.clone(),
                        body: message.message_text.clone().into_bytes(),
                        delivery_count: dequeue,
                        sent_at: message.insertion_time.as_deref().and_then(parse_http_date),
                    };
                    (wire, received)
                }
            };
            leased.push(Leased {
                message_id: message.message_id,
                receipt,
                claim: wire.claim.clone(),
                received,
                wire,
                lease_ends: started + lease_duration(lease),
            });
        }
        Ok(leased)
    }

    /// Sets a leased message's visibility; returns the new pop receipt.
    async fn set_visibility(
        &self,
        queue: &str,
        message_id: &str,
        receipt: &str,
        after: Duration,
    ) -> Result<String> {
        self.allowed(queue, "u", "changing a message's visibility")?;
        let response = self
            .request(
                Method::PUT,
                &format!("/{queue}/messages/{message_id}"),
                &[
                    ("popreceipt", receipt.to_owned()),
                    ("visibilitytimeout", after.as_secs().to_string()),
                ],
                None,
            )
            .await?;
        if !response.status().is_success() {
            return Err(lease_error(response, queue).await);
        }
        response
            .headers()
            .get("x-ms-popreceipt")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| Error::unavailable("the service returned no pop receipt"))
    }

    async fn delete_message(&self, queue: &str, message_id: &str, receipt: &str) -> Result<()> {
        self.allowed(queue, "p", "deleting a message")?;
        let response = self
            .request(
                Method::DELETE,
                &format!("/{queue}/messages/{message_id}"),
                &[("popreceipt", receipt.to_owned())],
                None,
            )
            .await?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(lease_error(response, queue).await)
        }
    }

    /// The service's approximate message count of a queue, 0 if it does not exist.
    async fn approximate_count(&self, queue: &str) -> Result<u64> {
        Ok(self.count_if_declared(queue).await?.unwrap_or(0))
    }

    /// The service's approximate message count of a queue, `None` if it does not exist.
    async fn count_if_declared(&self, queue: &str) -> Result<Option<u64>> {
        self.allowed(queue, "r", "reading a queue's count")?;
        let response = self
            .request(
                Method::GET,
                &format!("/{queue}"),
                &[("comp", "metadata".to_owned())],
                None,
            )
            .await?;
        match response.status() {
            status if status.is_success() => Ok(Some(
                response
                    .headers()
                    .get("x-ms-approximate-messages-count")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            )),
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(service_error(response, queue).await),
        }
    }

    /// Receives every message of a poison queue in turn, handing each to `keep`; a message
    /// `keep` returns is made visible again once the pass ends (so the pass sees each once).
    async fn drain_poison(
        &self,
        poison: &str,
        limit: usize,
        mut take: impl FnMut(&Leased) -> bool,
        mut on_taken: impl AsyncFnMut(&Leased) -> Result<()>,
    ) -> Result<usize> {
        let mut restore = Vec::new();
        let mut taken = 0;
        let lease = Duration::from_secs(60);
        let outcome = async {
            while taken + restore.len() < limit {
                let received = self
                    .receive(
                        poison,
                        (limit - taken - restore.len()).min(MAX_BATCH),
                        lease,
                    )
                    .await;
                if matches!(received, Err(Error::Refused { .. }))
                    && self.count_if_declared(poison).await?.is_none()
                {
                    // A poison queue never declared (or deleted) holds nothing.
                    break;
                }
                let batch = received?;
                if batch.is_empty() {
                    break;
                }
                for message in batch {
                    if take(&message) {
                        on_taken(&message).await?;
                        taken += 1;
                    } else {
                        restore.push(message);
                    }
                }
            }
            Ok::<_, Error>(())
        }
        .await;
        for message in restore {
            if let Err(e) = self
                .set_visibility(
                    poison,
                    &message.message_id,
                    &message.receipt,
                    Duration::ZERO,
                )
                .await
            {
                tracing::warn!(error = %e, poison, "a poison message stays hidden until its lease ends");
            }
        }
        outcome.map(|()| taken)
    }
}

/// The blob connection of a queue connection string: the same account (with the blob
/// endpoint it names), without the queue-only keys.
fn blob_connection(connection: &str) -> String {
    connection
        .split(';')
        .map(str::trim)
        .filter(|part| {
            let key = part
                .split_once('=')
                .map(|(k, _)| k.trim().to_ascii_lowercase());
            !matches!(
                key.as_deref(),
                Some("queueendpoint" | "claimcontainer" | "messagetimetolive" | "container") | None
            )
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// The length of a text once XML-escaped in a message body.
fn escaped_len(text: &str) -> usize {
    quick_xml::escape::escape(text).len()
}

/// A lease in the service's whole seconds, at least one.
fn lease_secs(lease: Duration) -> u64 {
    (lease.as_secs() + u64::from(lease.subsec_nanos() > 0)).max(1)
}

fn lease_duration(lease: Duration) -> Duration {
    Duration::from_secs(lease_secs(lease))
}

fn parse_http_date(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc2822(text)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

fn error_code(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("x-ms-error-code")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Maps an unsuccessful answer about a queue.
async fn service_error(response: reqwest::Response, queue: &str) -> Error {
    let status = response.status();
    let code = error_code(&response);
    let text = response.text().await.unwrap_or_default();
    let message = format!(
        "queue `{queue}`: HTTP {} {code} {}",
        status.as_u16(),
        text.chars().take(300).collect::<String>()
    );
    match (status, code.as_str()) {
        (_, "QueueNotFound") => Error::refused(format!("{message} (declare the queue first)")),
        (StatusCode::PAYLOAD_TOO_LARGE, _) | (_, "RequestBodyTooLarge") => Error::refused(message),
        (s, _) if s.is_server_error() || s == StatusCode::REQUEST_TIMEOUT => {
            Error::unavailable(message)
        }
        (StatusCode::FORBIDDEN, _) => Error::PermissionDenied {
            queue: queue.to_owned(),
            reason: format!("{code}: the service refused the credential"),
        },
        _ => Error::storage(message),
    }
}

/// Maps an unsuccessful answer about a leased message: a stale pop receipt or a message
/// gone means the lease was lost (the message is delivered again, or was settled).
async fn lease_error(response: reqwest::Response, queue: &str) -> Error {
    let code = error_code(&response);
    if matches!(code.as_str(), "PopReceiptMismatch" | "MessageNotFound") {
        return Error::unavailable(format!(
            "queue `{queue}`: the lease was lost ({code}); the message is delivered again"
        ));
    }
    service_error(response, queue).await
}

async fn messages(response: reqwest::Response, queue: &str) -> Result<Vec<ServiceMessage>> {
    if !response.status().is_success() {
        return Err(service_error(response, queue).await);
    }
    let text = response
        .text()
        .await
        .map_err(|e| Error::unavailable_because(format!("reading messages of `{queue}`"), e))?;
    let list: ServiceMessages = quick_xml::de::from_str(&text)
        .map_err(|e| Error::storage_because(format!("unreadable messages of `{queue}`"), e))?;
    Ok(list.messages)
}

impl Queue for AzureQueue {
    type Consumer = AzureConsumer;
    type Delivery = AzureDelivery;

    async fn declare(&self, queue: &str, options: &QueueOptions) -> Result<()> {
        check_azure_queue_name(queue)?;
        if options.max_deliveries == 0 {
            return Err(Error::Config("max_deliveries must be at least 1".into()));
        }
        if self
            .inner
            .account
            .scope
            .as_ref()
            .is_some_and(|scope| !scope.is_account_sas())
        {
            // A queue's own access signature reaches that queue only: declaring checks it
            // exists; poisoning through this token is refused by the service.
            return self.create(queue).await;
        }
        self.create(&poison_queue(queue)).await?;
        self.create(queue).await
    }

    async fn send(&self, queue: &str, id: &str, body: &[u8]) -> Result<()> {
        check_azure_queue_name(queue)?;
        let wire = Wire {
            tk: 1,
            id: id.to_owned(),
            sent: Some(Utc::now()),
            ..Wire::default()
        };
        let text = self.encode(queue, wire, body).await?;
        self.put(queue, &text, Duration::ZERO).await
    }

    async fn consume(&self, queue: &str, options: ConsumeOptions) -> Result<AzureConsumer> {
        check_azure_queue_name(queue)?;
        let prefetch = usize::from(options.prefetch.max(1));
        Ok(AzureConsumer {
            queue: self.clone(),
            name: queue.to_owned(),
            prefetch,
            lease: options.lease,
            permits: Arc::new(Semaphore::new(prefetch)),
            buffer: VecDeque::new(),
            idle: Duration::ZERO,
        })
    }

    async fn poison_list(&self, queue: &str, limit: usize) -> Result<Vec<PoisonMessage>> {
        check_azure_queue_name(queue)?;
        let poison = poison_queue(queue);
        let mut wires = Vec::new();
        if limit <= MAX_BATCH {
            self.allowed(&poison, "r", "peeking messages")?;
            // Peek: nothing is leased, nothing is counted.
            let response = self
                .request(
                    Method::GET,
                    &format!("/{poison}/messages"),
                    &[
                        ("peekonly", "true".to_owned()),
                        ("numofmessages", limit.max(1).to_string()),
                    ],
                    None,
                )
                .await?;
            if response.status() == StatusCode::NOT_FOUND {
                return Ok(Vec::new());
            }
            for message in messages(response, &poison).await? {
                wires.push(poison_wire(&message.message_id, &message.message_text));
            }
        } else {
            // More than one peek shows: receive each in turn, then make them visible again.
            let mut seen = Vec::new();
            self.drain_poison(
                &poison,
                limit,
                |message| {
                    seen.push(message.wire.clone());
                    false
                },
                async |_| Ok(()),
            )
            .await?;
            wires = seen;
        }
        let mut listed = Vec::with_capacity(wires.len());
        for wire in wires.into_iter().take(limit) {
            let body = match self.body_of(&wire).await {
                Ok(body) => body,
                Err(e) => e.to_string().into_bytes(),
            };
            listed.push(PoisonMessage {
                id: wire.id,
                body,
                reason: wire.reason.unwrap_or_default(),
                delivery_count: wire.count.unwrap_or(0),
            });
        }
        Ok(listed)
    }

    async fn poison_replay(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        check_azure_queue_name(queue)?;
        let poison = poison_queue(queue);
        if self.approximate_count(&poison).await? == 0 {
            return Ok(0);
        }
        let this = self.clone();
        let queue_name = queue.to_owned();
        let poison_name = poison.clone();
        self.drain_poison(
            &poison,
            usize::MAX,
            |message| id.is_none_or(|id| message.wire.id == id),
            async move |message| {
                // A new message with a fresh delivery count; then the poisoned copy goes.
                let wire = Wire {
                    reason: None,
                    count: None,
                    ..message.wire.clone()
                };
                let text = serde_json::to_string(&wire)?;
                this.put(&queue_name, &text, Duration::ZERO).await?;
                this.delete_message(&poison_name, &message.message_id, &message.receipt)
                    .await
            },
        )
        .await
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        check_azure_queue_name(queue)?;
        Ok(QueueStats {
            // The service's count includes leased and delayed messages.
            waiting: self.approximate_count(queue).await?,
            leased: 0,
            poisoned: self.approximate_count(&poison_queue(queue)).await?,
        })
    }
}

/// The wire form of a poison queue's message text (another producer's text as its body).
fn poison_wire(message_id: &str, text: &str) -> Wire {
    serde_json::from_str::<Wire>(text).unwrap_or_else(|_| Wire {
        tk: 1,
        id: message_id.to_owned(),
        body: Some(STANDARD.encode(text.as_bytes())),
        ..Wire::default()
    })
}

/// Receives the deliveries of one Azure queue.
#[derive(Debug)]
pub struct AzureConsumer {
    queue: AzureQueue,
    name: String,
    prefetch: usize,
    lease: Duration,
    /// One permit per delivery held: `prefetch` bounds them.
    permits: Arc<Semaphore>,
    /// Received, not yet handed out (their leases are running).
    buffer: VecDeque<Leased>,
    /// The current pause between empty receives.
    idle: Duration,
}

impl AzureConsumer {
    fn deliver(&self, message: Leased, permit: OwnedSemaphorePermit) -> AzureDelivery {
        let receipt = Arc::new(Mutex::new(message.receipt.clone()));
        let (stop, stopped) = oneshot::channel::<()>();
        let renewal = tokio::spawn(renew(
            self.queue.clone(),
            self.name.clone(),
            message.message_id.clone(),
            receipt.clone(),
            self.lease,
            stopped,
        ));
        AzureDelivery {
            queue: self.queue.clone(),
            name: self.name.clone(),
            message_id: message.message_id,
            receipt,
            received: message.received,
            claim: message.claim,
            wire: message.wire,
            renewal: Some((stop, renewal)),
            _permit: permit,
        }
    }
}

/// Keeps a delivery's lease: every half lease, the message stays invisible for another
/// lease. Ends when told, or when the lease is lost.
async fn renew(
    queue: AzureQueue,
    name: String,
    message_id: String,
    receipt: Arc<Mutex<String>>,
    lease: Duration,
    mut stop: oneshot::Receiver<()>,
) {
    let period = (lease_duration(lease) / 2).max(Duration::from_millis(500));
    if !queue.inner.renew_leases {
        let _ = stop.await;
        return;
    }
    loop {
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(period) => {}
        }
        let mut current = receipt.lock().await;
        match queue
            .set_visibility(&name, &message_id, &current, lease_duration(lease))
            .await
        {
            Ok(next) => *current = next,
            Err(e) => {
                tracing::warn!(error = %e, queue = name, "could not renew a delivery's lease");
                if !e.is_retryable() || e.to_string().contains("lease was lost") {
                    return;
                }
            }
        }
    }
}

impl Consumer for AzureConsumer {
    type Delivery = AzureDelivery;

    async fn next(&mut self) -> Result<Option<AzureDelivery>> {
        let Ok(permit) = self.permits.clone().acquire_owned().await else {
            return Ok(None);
        };
        let unreachable_since = Instant::now();
        loop {
            while let Some(message) = self.buffer.pop_front() {
                // A message whose lease ran out while buffered may be another consumer's
                // now: leave it to the service.
                if message.lease_ends.saturating_duration_since(Instant::now())
                    > lease_duration(self.lease) / 4
                {
                    return Ok(Some(self.deliver(message, permit)));
                }
            }
            // Every receive is a request: when most deliveries are still held, wait a
            // moment for more to be settled so one receive brings several.
            let batch = (self.prefetch / 2).max(1);
            if self.permits.available_permits() + 1 < batch {
                let more = u32::try_from(batch - 1).unwrap_or(u32::MAX);
                let _ = tokio::time::timeout(GATHER, self.permits.acquire_many(more)).await;
            }
            let want = 1 + self.permits.available_permits();
            match self.queue.receive(&self.name, want, self.lease).await {
                Ok(batch) if batch.is_empty() => {
                    self.idle = (self.idle * 2).clamp(
                        Duration::from_millis(20),
                        self.queue.inner.max_poll_interval,
                    );
                    tokio::time::sleep(self.idle).await;
                }
                Ok(batch) => {
                    self.idle = Duration::ZERO;
                    self.buffer.extend(batch);
                }
                Err(e)
                    if e.is_retryable()
                        && unreachable_since.elapsed() < self.queue.inner.reconnect_within =>
                {
                    tracing::warn!(error = %e, queue = self.name, "receiving failed, retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn close(mut self) {
        // Received but never handed out: visible again at once.
        for message in self.buffer.drain(..) {
            let _ = self
                .queue
                .set_visibility(
                    &self.name,
                    &message.message_id,
                    &message.receipt,
                    Duration::ZERO,
                )
                .await;
        }
    }
}

/// One delivery of an Azure queue.
#[derive(Debug)]
pub struct AzureDelivery {
    queue: AzureQueue,
    name: String,
    message_id: String,
    receipt: Arc<Mutex<String>>,
    received: Received,
    claim: Option<String>,
    wire: Wire,
    renewal: Option<(oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for AzureDelivery {
    fn drop(&mut self) {
        // Dropped without settling: the lease runs out and the message comes back.
        if let Some((_, renewal)) = self.renewal.take() {
            renewal.abort();
        }
    }
}

impl AzureDelivery {
    /// Stops the lease renewal (letting a renewal in flight finish) and returns the
    /// current pop receipt.
    async fn settle(&mut self) -> String {
        if let Some((stop, renewal)) = self.renewal.take() {
            let _ = stop.send(());
            let _ = renewal.await;
        }
        self.receipt.lock().await.clone()
    }
}

impl Delivery for AzureDelivery {
    fn received(&self) -> &Received {
        &self.received
    }

    async fn ack(mut self) -> Result<()> {
        let receipt = self.settle().await;
        self.queue
            .delete_message(&self.name, &self.message_id, &receipt)
            .await?;
        if let Some(claim) = &self.claim
            && let Ok(store) = self.queue.claims().await
            && let Err(e) = store.delete(claim).await
        {
            tracing::warn!(error = %e, claim, "a claim-checked body outlived its message");
        }
        Ok(())
    }

    async fn retry(mut self, delay: Duration) -> Result<()> {
        let receipt = self.settle().await;
        let after = if delay.is_zero() {
            Duration::ZERO
        } else {
            lease_duration(delay)
        };
        self.queue
            .set_visibility(&self.name, &self.message_id, &receipt, after)
            .await
            .map(|_| ())
    }

    async fn poison(mut self, reason: &str) -> Result<()> {
        let receipt = self.settle().await;
        let mut wire = self.wire.clone();
        wire.reason = Some(reason.chars().take(4096).collect());
        wire.count = Some(self.received.delivery_count);
        let text = serde_json::to_string(&wire)?;
        // The copy first: a crash in between leaves the message to be delivered (and
        // poisoned) again, never lost.
        self.queue
            .put(&poison_queue(&self.name), &text, Duration::ZERO)
            .await?;
        self.queue
            .delete_message(&self.name, &self.message_id, &receipt)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_service_rules_with_room_for_the_poison_queue() {
        for good in ["archive", "index-1", "abc", &"a".repeat(56)] {
            assert!(check_azure_queue_name(good).is_ok(), "{good}");
        }
        for bad in [
            "ab",
            "Archive",
            "a_b",
            "a.b",
            "-ab",
            "ab-",
            "a--b",
            &"a".repeat(57),
        ] {
            assert!(
                matches!(
                    check_azure_queue_name(bad),
                    Err(Error::InvalidQueueName { .. })
                ),
                "{bad}"
            );
        }
        assert_eq!(poison_queue("archive"), "archive-poison");
        assert_eq!(poison_queue(&"a".repeat(56)).len(), MAX_SERVICE_NAME);
    }

    #[test]
    fn leases_are_whole_seconds_and_never_zero() {
        assert_eq!(lease_secs(Duration::from_millis(200)), 1);
        assert_eq!(lease_secs(Duration::from_secs(1)), 1);
        assert_eq!(lease_secs(Duration::from_millis(1500)), 2);
        assert_eq!(lease_secs(Duration::ZERO), 1);
        assert_eq!(lease_secs(Duration::from_secs(60)), 60);
    }

    #[test]
    fn connection_strings_find_the_queue_endpoint_without_echoing_keys() {
        let (account, _) = Account::parse("UseDevelopmentStorage=true").expect("valid");
        assert_eq!(account.endpoint, DEVELOPMENT_QUEUE_ENDPOINT);
        assert_eq!(account.name, DEVELOPMENT_ACCOUNT);
        let (account, _) = Account::parse(
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=a2V5;EndpointSuffix=core.windows.net",
        )
        .expect("valid");
        assert_eq!(account.endpoint, "https://acme.queue.core.windows.net");
        let (account, _) = Account::parse(
            "QueueEndpoint=https://acme.queue.core.windows.net/;SharedAccessSignature=?sv=1&sig=x",
        )
        .expect("valid");
        assert_eq!(account.name, "acme");
        assert!(matches!(account.credential, Credential::Sas(ref q) if q == "sv=1&sig=x"));
        let error = Account::parse("AccountName=acme;AccountKey=!!secret!!").expect_err("bad key");
        assert!(!error.to_string().contains("secret"), "{error}");
        assert!(Account::parse("AccountName=acme").is_err());
        assert!(Account::parse("garbage").is_err());
    }

    #[test]
    fn the_blob_connection_keeps_the_account_and_drops_queue_keys() {
        Account::parse(
            "UseDevelopmentStorage=true;QueueEndpoint=http://127.0.0.1:1/devstoreaccount1;ClaimContainer=x",
        )
        .expect("valid");
        assert_eq!(
            blob_connection(
                "UseDevelopmentStorage=true;QueueEndpoint=http://127.0.0.1:1/devstoreaccount1;ClaimContainer=x"
            ),
            "UseDevelopmentStorage=true"
        );
    }

    #[test]
    fn message_lists_parse_and_foreign_text_is_kept() {
        let xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?><QueueMessagesList><QueueMessage><MessageId>m1</MessageId><InsertionTime>Mon, 23 Nov 2026 10:00:00 GMT</InsertionTime><ExpirationTime>Fri, 31 Dec 9999 23:59:59 GMT</ExpirationTime><PopReceipt>AgAA+/=</PopReceipt><TimeNextVisible>Mon, 23 Nov 2026 10:01:00 GMT</TimeNextVisible><DequeueCount>3</DequeueCount><MessageText>{&quot;id&quot;:&quot;a&amp;b&quot;}</MessageText></QueueMessage></QueueMessagesList>";
        let list: ServiceMessages = quick_xml::de::from_str(xml).expect("parses");
        assert_eq!(list.messages.len(), 1);
        let message = &list.messages[0];
        assert_eq!(message.dequeue_count, Some(3));
        assert_eq!(message.pop_receipt.as_deref(), Some("AgAA+/="));
        assert_eq!(message.message_text, "{\"id\":\"a&b\"}");
        let empty: ServiceMessages =
            quick_xml::de::from_str("<QueueMessagesList />").expect("parses");
        assert!(empty.messages.is_empty());
        let wire = poison_wire("m9", "not json");
        // An operation envelope put as plain text is not mistaken for the wire form.
        assert!(
            serde_json::from_str::<Wire>(r#"{"id":"e1","kind":"archive","payload":{}}"#).is_err()
        );
        assert_eq!(wire.id, "m9");
        assert_eq!(
            wire.body.as_deref(),
            Some(STANDARD.encode("not json").as_str())
        );
    }
}
