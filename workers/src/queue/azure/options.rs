//! [`AzureQueueOptions`]: the settings of an [`AzureQueue`], given in any order.

use std::sync::Arc;
use std::time::Duration;

use tablekit_core::azure::{Credential, Service, ServiceClient, StorageAccount};
use tablekit_core::blob::BlobStore;
use tablekit_core::retry::RetryPolicy;
use tokio::sync::OnceCell;

use super::access::QueueAccess;
use super::{AzureQueue, DEFAULT_CLAIM_CONTAINER, Inner, invalid, invalid_connection};
use crate::error::Result;

/// How long calls keep retrying an unreachable service by default.
const RECONNECT_WITHIN: Duration = Duration::from_secs(120);

/// The settings of an [`AzureQueue`], given in any order, then connected to a storage
/// connection string with [`connect`](Self::connect) (nothing is sent until the first
/// call). Each setter given twice keeps the last value.
///
/// ```
/// use std::time::Duration;
/// use tablekit_workers::queue::azure::AzureQueue;
///
/// # fn main() -> tablekit_workers::Result<()> {
/// let queue = AzureQueue::options()
///     .max_poll_interval(Duration::from_secs(5))
///     .reconnect_within(Duration::from_secs(30))
///     .connect("UseDevelopmentStorage=true")?;
/// # drop(queue);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct AzureQueueOptions {
    /// The time to live chosen here (`Some(None)`: never expire), overriding the
    /// connection string's; `None` leaves it to the connection string.
    message_ttl: Option<Option<Duration>>,
    max_poll_interval: Duration,
    claim_store: Option<BlobStore>,
    reconnect_within: Duration,
    renew_leases: bool,
}

impl Default for AzureQueueOptions {
    fn default() -> Self {
        AzureQueueOptions {
            message_ttl: None,
            max_poll_interval: Duration::from_secs(1),
            claim_store: None,
            reconnect_within: RECONNECT_WITHIN,
            renew_leases: true,
        }
    }
}

impl AzureQueueOptions {
    /// The defaults: messages that live as the connection string says (forever without
    /// `MessageTimeToLive=`), an idle consumer polling at least every second, bodies over
    /// 64 KiB in the connection's account, unreachable calls retried for 120 s, and held
    /// deliveries' leases renewed.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a sent message lives in the queue, instead of the connection string's
    /// `MessageTimeToLive=` (default: that, or without it until received and
    /// acknowledged, never dropped by the service).
    #[must_use]
    pub fn message_ttl(mut self, ttl: Duration) -> Self {
        self.message_ttl = Some(Some(ttl));
        self
    }

    /// Sent messages never expire (they live until received and acknowledged), whatever
    /// the connection string's `MessageTimeToLive=` says.
    #[must_use]
    pub fn no_message_ttl(mut self) -> Self {
        self.message_ttl = Some(None);
        self
    }

    /// The longest pause between two receives of an idle consumer (default 1 s; at least
    /// 1 ms). Each receive is a billed transaction: a longer pause costs less and adds
    /// latency.
    #[must_use]
    pub fn max_poll_interval(mut self, interval: Duration) -> Self {
        self.max_poll_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// The blob store for bodies over 64 KiB (default: the container of the connection
    /// string's `ClaimContainer=`, [`DEFAULT_CLAIM_CONTAINER`] without it, on the
    /// connection's account; none for a connection without an account key).
    #[must_use]
    pub fn claim_store(mut self, store: BlobStore) -> Self {
        self.claim_store = Some(store);
        self
    }

    /// How long calls keep retrying an unreachable service before they report
    /// [`Error::Unavailable`](crate::Error::Unavailable) (default 120 s).
    #[must_use]
    pub fn reconnect_within(mut self, within: Duration) -> Self {
        self.reconnect_within = within;
        self
    }

    /// Whether a delivery held longer than its lease has the lease renewed (default
    /// `true`). Without renewal, a handler slower than the consumer's lease loses the
    /// message to another consumer and its ack is refused.
    #[must_use]
    pub fn lease_renewal(mut self, renew: bool) -> Self {
        self.renew_leases = renew;
        self
    }

    /// Connects to the queue service of a storage connection string (read by the core's
    /// [account reader](tablekit_core::azure::account)):
    /// `UseDevelopmentStorage=true` (Azurite, queues on port 10001),
    /// `DefaultEndpointsProtocol=https;AccountName=…;AccountKey=…`, any of them with
    /// `QueueEndpoint=…`, or `QueueEndpoint=…;SharedAccessSignature=…`. tablekit's own keys:
    /// `ClaimContainer=NAME` (the blob container for bodies over 64 KiB, default
    /// `tablekit-queue-claims`, on the same account's blob endpoint; needs an account key)
    /// and `MessageTimeToLive=SECONDS` (default: never expire).
    ///
    /// Nothing is sent until the first call.
    ///
    /// # Errors
    /// [`Error::InvalidBroker`](crate::Error::InvalidBroker) naming what is missing or
    /// malformed (never the key), including a shared access signature whose times do not
    /// read.
    pub fn connect(self, connection: &str) -> Result<AzureQueue> {
        let account =
            StorageAccount::from_connection_string(connection).map_err(invalid_connection)?;
        let client = ServiceClient::options()
            .retry_policy(RetryPolicy::azure().attempts(usize::MAX))
            .retry_within(self.reconnect_within)
            .build(&account, Service::Queue)
            .map_err(invalid_connection)?;
        let access = match account.credential() {
            Credential::Sas(token) => Some(QueueAccess::parse(token).map_err(invalid_connection)?),
            Credential::SharedKey(_) => None,
        };
        let connection_ttl = match account.setting("messagetimetolive") {
            None => None,
            Some(v) => {
                Some(Duration::from_secs(v.parse::<u64>().map_err(|_| {
                    invalid("MessageTimeToLive is a number of seconds")
                })?))
            }
        };
        let claims = match self.claim_store {
            Some(store) => Some((store, None)),
            None => Self::account_claims(&account),
        };
        Ok(AzureQueue {
            inner: Arc::new(Inner {
                client,
                account,
                access,
                message_ttl: self.message_ttl.unwrap_or(connection_ttl),
                max_poll_interval: self.max_poll_interval,
                claims,
                claims_ready: OnceCell::new(),
                reconnect_within: self.reconnect_within,
                renew_leases: self.renew_leases,
            }),
        })
    }

    /// The container of the connection's account that claim-checked bodies go to, and
    /// its name to create on first use; none without an account key.
    fn account_claims(account: &StorageAccount) -> Option<(BlobStore, Option<String>)> {
        let container = account
            .setting("claimcontainer")
            .unwrap_or(DEFAULT_CLAIM_CONTAINER)
            .to_owned();
        account.key()?;
        BlobStore::azure_container(account, &container)
            .ok()
            .map(|store| (store, Some(container)))
    }
}
