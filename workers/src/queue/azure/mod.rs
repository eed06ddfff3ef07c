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
//! - A paused queue carries the metadata `tablekitpaused=true`
//!   ([`set_paused`](Queue::set_paused)); one metadata read tells it.
//! - Messages never expire unless asked ([`AzureQueueOptions::message_ttl`]), so nothing is
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
//! The client is the core's one Azure Storage layer ([`tablekit_core::azure`]), shared with
//! the Table client: the same connection-string reader, signer (SharedKeyLite), SAS reader
//! and send-and-retry loop. The official `azure_storage_queue` crate authenticates with
//! Entra ID tokens only (which it refuses over plain HTTP, the way the storage emulator is
//! reached) or with one pre-signed URL per queue, and cannot use an account key or an
//! account SAS for the queues a worker derives.
//!
//! The backend's parts: [`wire`](self) (the message text and the service's answers),
//! the message calls, the poison queue, and the consumer with its deliveries, each a
//! module of this folder.

mod access;
mod consumer;
mod listing;
mod messages;
mod options;
mod poison;
mod wire;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::Utc;
use reqwest::{Method, StatusCode};
use tablekit_core::azure::{SendError, ServiceClient, StorageAccount};
use tablekit_core::blob::BlobStore;
use tokio::sync::{OnceCell, Semaphore};

pub use consumer::{AzureConsumer, AzureDelivery};
pub use options::AzureQueueOptions;
/// The emulator's queue endpoint.
pub use tablekit_core::azure::DEVELOPMENT_QUEUE_ENDPOINT;

use super::{
    ConsumeOptions, PeekQuery, PoisonAction, PoisonMessage, Queue, QueueOptions, QueueStats,
    WaitingAction, WaitingMessage, check_queue_name, is_poison_queue, poison_queue,
};
use crate::error::{Error, Result};
use access::QueueAccess;
use wire::{Wire, error_code, escaped_len, service_error};

/// The largest message text the service stores (64 KiB).
pub const MAX_MESSAGE_TEXT: usize = 64 * 1024;
/// The most messages one receive or peek returns.
const MAX_BATCH: usize = 32;
/// The longest queue name the service allows.
const MAX_SERVICE_NAME: usize = 63;
/// The metadata a paused queue carries.
const PAUSED_HEADER: &str = "x-ms-meta-tablekitpaused";
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

/// An Azure Queue Storage queue backend.
#[derive(Clone, Debug)]
pub struct AzureQueue {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The queue service of the account, retrying unreachable or busy calls for
    /// `reconnect_within`.
    client: ServiceClient,
    /// The account, for the claim store's container.
    account: StorageAccount,
    /// What a shared access signature allows, read from the token.
    access: Option<QueueAccess>,
    message_ttl: Option<Duration>,
    max_poll_interval: Duration,
    /// The blob store claim-checked bodies go to, and the container to create on first
    /// use when it is the account's.
    claims: Option<(BlobStore, Option<String>)>,
    claims_ready: OnceCell<()>,
    /// How long calls keep retrying an unreachable service before reporting it.
    reconnect_within: Duration,
    /// Whether held deliveries have their leases renewed.
    renew_leases: bool,
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidBroker {
        // The connection string holds a secret: it is never echoed.
        broker: "azure:…".to_owned(),
        reason: reason.into(),
    }
}

/// A core error about the connection string, as the workers report it.
fn invalid_connection(e: tablekit_core::Error) -> Error {
    match e {
        tablekit_core::Error::InvalidConnection { reason, .. } => invalid(reason),
        tablekit_core::Error::InvalidSas { .. } => invalid(e.to_string()),
        other => other,
    }
}

/// A request that got no answer, as the workers report it.
fn unanswered(e: SendError) -> Error {
    match e {
        SendError::Failed {
            method,
            path,
            source,
        } => Error::unavailable_because(format!("{method} {path}"), source),
        invalid @ SendError::InvalidUrl { .. } => Error::Config(invalid.to_string()),
    }
}

impl AzureQueue {
    /// The settings of a queue backend, given in any order, then
    /// [`connect`](AzureQueueOptions::connect) to a connection string.
    pub fn options() -> AzureQueueOptions {
        AzureQueueOptions::new()
    }

    /// Connects to the queue service of a storage connection string with the default
    /// settings (see [`AzureQueueOptions::new`] and, for the connection string's forms,
    /// [`AzureQueueOptions::connect`]): the shortcut for
    /// `AzureQueue::options().connect(connection)`.
    ///
    /// Nothing is sent until the first call.
    ///
    /// # Errors
    /// [`Error::InvalidBroker`] naming what is missing or malformed (never the key),
    /// including a shared access signature whose times do not read.
    pub fn connect(connection: &str) -> Result<Self> {
        Self::options().connect(connection)
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
        match &self.inner.access {
            Some(access) => access.check(queue, letters, what),
            None => Ok(()),
        }
    }

    /// Sends one request to `path` of the queue endpoint through the core's client:
    /// signed, and retried while the service is unreachable or busy.
    async fn request(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<String>,
    ) -> Result<reqwest::Response> {
        let url = format!("{}{path}", self.inner.client.endpoint());
        self.inner
            .client
            .send(
                method,
                &url,
                query,
                &[],
                body.map(|body| ("application/xml".to_owned(), body)),
            )
            .await
            .map_err(unanswered)
    }

    /// Creates a queue unless it exists; a queue being deleted is waited for.
    async fn create(&self, name: &str) -> Result<()> {
        if let Some(access) = &self.inner.access
            && !access.is_account_sas()
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
        self.inner
            .client
            .wait_while_being_deleted(
                self.inner.reconnect_within,
                || async {
                    let response = self
                        .request(Method::PUT, &format!("/{name}"), &[], None)
                        .await
                        .map_err(|e| (String::new(), e))?;
                    let code = error_code(&response);
                    // Exists with other metadata: tablekit sets none, so it is the queue.
                    if response.status().is_success() || code == "QueueAlreadyExists" {
                        return Ok(());
                    }
                    Err((code, service_error(response, name).await))
                },
                |(code, _)| code == "QueueBeingDeleted",
            )
            .await
            .map_err(|(_, e)| e)
    }

    async fn claims(&self) -> Result<&BlobStore> {
        let Some((store, origin)) = &self.inner.claims else {
            return Err(Error::Config(
                "a message over 64 KiB needs a blob store for its body: connect with an account key, or give one with AzureQueueOptions::claim_store".into(),
            ));
        };
        if let Some(container) = origin {
            self.inner
                .claims_ready
                .get_or_try_init(|| async {
                    tablekit_core::azure::create_container(&self.inner.account, container)
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
        let text = serde_json::to_string(&wire).map_err(|e| Error::encode("a queue message", e))?;
        if escaped_len(&text) <= MAX_MESSAGE_TEXT {
            return Ok(text);
        }
        let name = format!("{queue}/{}", uuid::Uuid::new_v4().simple());
        self.claims().await?.put(&name, body.to_vec()).await?;
        wire.body = None;
        wire.claim = Some(name);
        let text = serde_json::to_string(&wire).map_err(|e| Error::encode("a queue message", e))?;
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
            .access
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
        Ok(AzureConsumer::new(
            self.clone(),
            queue,
            prefetch,
            options.lease,
            Arc::new(Semaphore::new(prefetch)),
        ))
    }

    async fn poison_list(&self, queue: &str, limit: usize) -> Result<Vec<PoisonMessage>> {
        check_azure_queue_name(queue)?;
        self.list_poison(queue, limit).await
    }

    async fn poison_replay(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        check_azure_queue_name(queue)?;
        let wanted = id.map(|id| HashSet::from([id]));
        self.replay_poison(queue, wanted.as_ref(), false, queue)
            .await
            .map(|taken| taken.len())
    }

    async fn poison_discard(&self, queue: &str, id: Option<&str>) -> Result<usize> {
        check_azure_queue_name(queue)?;
        let wanted = id.map(|id| HashSet::from([id]));
        self.discard_poison(queue, wanted.as_ref(), false)
            .await
            .map(|taken| taken.len())
    }

    async fn poison_take(
        &self,
        queue: &str,
        handles: &[String],
        action: &PoisonAction,
    ) -> Result<Vec<String>> {
        check_azure_queue_name(queue)?;
        if let PoisonAction::ReplayTo(target) = action {
            check_azure_queue_name(target)?;
        }
        if handles.is_empty() {
            return Ok(Vec::new());
        }
        // A message's handle is the service's message id: exactly the messages named are
        // taken, in one pass over the poison queue.
        let wanted: HashSet<&str> = handles.iter().map(String::as_str).collect();
        let taken = match action {
            PoisonAction::Replay => {
                self.replay_poison(queue, Some(&wanted), true, queue)
                    .await?
            }
            PoisonAction::ReplayTo(target) => {
                self.replay_poison(queue, Some(&wanted), true, target)
                    .await?
            }
            PoisonAction::Discard => self.discard_poison(queue, Some(&wanted), true).await?,
        };
        Ok(super::poison::taken_in_order(handles, taken))
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<()> {
        check_azure_queue_name(queue)?;
        self.allowed(queue, "w", "pausing a queue")?;
        // The queue's metadata holds the mark; tablekit sets no other.
        let headers: &[(&str, String)] = if paused {
            &[(PAUSED_HEADER, "true".to_owned())]
        } else {
            &[]
        };
        let url = format!("{}/{queue}", self.inner.client.endpoint());
        let response = self
            .inner
            .client
            .send(
                Method::PUT,
                &url,
                &[("comp", "metadata".to_owned())],
                headers,
                None,
            )
            .await
            .map_err(unanswered)?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(service_error(response, queue).await)
        }
    }

    async fn paused(&self, queue: &str) -> Result<bool> {
        check_azure_queue_name(queue)?;
        Ok(self
            .metadata(queue, "reading a queue's metadata")
            .await?
            .is_some_and(|headers| {
                headers
                    .get(PAUSED_HEADER)
                    .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"))
            }))
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        check_azure_queue_name(queue)?;
        let Some(waiting) = self.count_if_declared(queue).await? else {
            return Err(Error::NotDeclared {
                queue: queue.to_owned(),
            });
        };
        let poison = poison_queue(queue);
        let (poisoned, waiting_since) =
            futures::try_join!(self.approximate_count(&poison), async {
                if waiting == 0 {
                    Ok(None)
                } else {
                    self.front_waiting_since(queue).await
                }
            })?;
        Ok(QueueStats {
            // The service's count includes leased and delayed messages.
            waiting,
            leased: 0,
            poisoned,
            // The service keeps no consumers: the front message's wait tells instead.
            consumers: None,
            waiting_since,
        })
    }

    /// A purge is one Clear Messages: the service removes every message, those leased to
    /// a consumer included (it has no purge that spares them; their consumers' settles
    /// then find them gone, which loses nothing), and says not how many. A message is
    /// named only by the pop receipt of its delivery, so one cannot be retried now or
    /// deleted from a peek.
    async fn act_on_waiting(&self, queue: &str, action: &WaitingAction) -> Result<Option<u64>> {
        check_azure_queue_name(queue)?;
        if !matches!(action, WaitingAction::Purge { .. }) {
            return Err(Error::Unsupported(format!(
                "Azure Queue Storage cannot {} one waiting message: it names a message only by its delivery's pop receipt",
                action.name()
            )));
        }
        self.allowed(queue, "p", "purging a queue")?;
        let response = self
            .request(Method::DELETE, &format!("/{queue}/messages"), &[], None)
            .await?;
        if response.status().is_success() {
            return Ok(None);
        }
        if error_code(&response) == "QueueNotFound" {
            return Err(Error::NotDeclared {
                queue: queue.to_owned(),
            });
        }
        Err(service_error(response, queue).await)
    }

    /// One Get Queue Metadata.
    async fn exists(&self, queue: &str) -> Result<bool> {
        check_azure_queue_name(queue)?;
        if is_poison_queue(queue) {
            return Ok(false);
        }
        Ok(self.count_if_declared(queue).await?.is_some())
    }

    /// The account's queues (List Queues, paged), poison queues left out; `None` through
    /// a queue's own access signature.
    async fn declared_queues(&self) -> Result<Option<Vec<String>>> {
        self.list_queues().await
    }

    /// Peek Messages: the visible messages at the front, oldest first, at most 32;
    /// newest first is [`Error::Unsupported`].
    async fn peek(&self, queue: &str, query: &PeekQuery) -> Result<Vec<WaitingMessage>> {
        check_azure_queue_name(queue)?;
        self.peek_front(queue, query).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tablekit_core::azure::Service;

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
    fn a_time_to_live_chosen_in_the_options_overrides_the_connection_strings() {
        let connection = "UseDevelopmentStorage=true;MessageTimeToLive=60";
        let ttl = |options: AzureQueueOptions| {
            options
                .connect(connection)
                .expect("valid")
                .inner
                .message_ttl
        };
        assert_eq!(ttl(AzureQueueOptions::new()), Some(Duration::from_secs(60)));
        assert_eq!(
            ttl(AzureQueueOptions::new().message_ttl(Duration::from_secs(5))),
            Some(Duration::from_secs(5))
        );
        assert_eq!(ttl(AzureQueueOptions::new().no_message_ttl()), None);
        let never = AzureQueueOptions::new()
            .message_ttl(Duration::from_secs(5))
            .no_message_ttl()
            .connect("UseDevelopmentStorage=true")
            .expect("valid");
        assert_eq!(never.inner.message_ttl, None);
    }

    #[test]
    fn connection_strings_find_the_queue_endpoint_without_echoing_keys() {
        let queue = AzureQueue::connect("UseDevelopmentStorage=true").expect("valid");
        assert_eq!(queue.inner.client.endpoint(), DEVELOPMENT_QUEUE_ENDPOINT);
        assert!(
            queue.inner.claims.is_some(),
            "a key string has a claim store"
        );
        let queue = AzureQueue::connect(
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=a2V5;EndpointSuffix=core.windows.net",
        )
        .expect("valid");
        assert_eq!(
            queue.inner.client.endpoint(),
            "https://acme.queue.core.windows.net"
        );
        let queue = AzureQueue::connect(
            "QueueEndpoint=https://acme.queue.core.windows.net/;SharedAccessSignature=?sv=1&sig=x",
        )
        .expect("valid");
        assert!(queue.inner.access.is_some());
        assert!(
            queue.inner.claims.is_none(),
            "a SAS string has no claim store"
        );
        let error =
            AzureQueue::connect("AccountName=acme;AccountKey=!!secret!!").expect_err("bad key");
        assert!(!error.to_string().contains("secret"), "{error}");
        assert!(AzureQueue::connect("AccountName=acme").is_err());
        assert!(AzureQueue::connect("garbage").is_err());
        let table_only = AzureQueue::connect(
            "TableEndpoint=https://acme.table.core.windows.net;SharedAccessSignature=sv=1",
        )
        .expect_err("no queue endpoint");
        assert!(
            matches!(table_only, Error::InvalidBroker { .. }),
            "{table_only}"
        );
    }

    #[test]
    fn a_sas_whose_times_do_not_read_is_refused_at_connect() {
        let error = AzureQueue::connect(
            "QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;SharedAccessSignature=sp=a&se=soon&sig=SECRET",
        )
        .expect_err("an unreadable expiry");
        let message = error.to_string();
        assert!(matches!(error, Error::InvalidBroker { .. }), "{message}");
        assert!(message.contains("is not a time"), "{message}");
        assert!(!message.contains("SECRET"), "{message}");
    }

    #[test]
    fn claims_go_to_the_accounts_blob_endpoint() {
        let queue = AzureQueue::connect(
            "UseDevelopmentStorage=true;QueueEndpoint=http://127.0.0.1:1/devstoreaccount1;ClaimContainer=x",
        )
        .expect("valid");
        assert_eq!(
            queue.inner.claims.as_ref().and_then(|(_, c)| c.as_deref()),
            Some("x")
        );
        assert_eq!(
            queue
                .inner
                .account
                .endpoint(Service::Blob)
                .expect("a blob endpoint"),
            tablekit_core::azure::DEVELOPMENT_BLOB_ENDPOINT
        );
    }
}
