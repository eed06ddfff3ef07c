//! Azure Storage: one client layer for tables, queues and blobs, and `AzureTableStore`, the
//! Table REST API of Azure Table Storage and Cosmos DB for Table (and Azurite, the
//! emulator).
//!
//! The layer, used by the Table client here, the Queue backend of the workers and the
//! blob store's Azure containers:
//! - [`account`]: the one connection-string reader (account, key or SAS, development
//!   storage, the endpoint of each service);
//! - [`signer`]: SharedKey and SharedKeyLite signatures, one place for every service;
//! - [`sas`]: the shared access signature builders and the one token reader, with the one
//!   [`SAS_CLOCK_SKEW`];
//! - [`client`]: one `send` with retries under the one [`RetryPolicy`], the `x-ms-version`
//!   of each service ([`Service::api_version`]), and the one wait for a table or queue
//!   being deleted.
//!
//! This client is written here because no maintained Rust crate covers the Table service,
//! and the official `azure_storage_*` crates authenticate with Entra ID tokens only (refused
//! over the plain HTTP Azurite is reached by) or pre-signed URLs, never an account key or an
//! account SAS. It is built on `reqwest` (one connection pool per client), `hmac`/`sha2`
//! for the signatures, and `serde_json`. The Table client sends:
//! - JSON with `@odata.type` annotations for the types JSON cannot tell apart;
//! - `If-Match` for conditional writes;
//! - `$batch` multipart changesets for entity group transactions, mapping the index of the
//!   failing operation back;
//! - the continuation headers (`NextPartitionKey`, `NextRowKey`), carried inside the core's
//!   continuation token.
//!
//! Service errors map onto the core's error kinds. Transient failures (5xx, server busy,
//! timeouts, lost connections) are retried under the one [`RetryPolicy`]; creating a
//! table the service is still deleting (`TableBeingDeleted`) is retried for up to the
//! store's [being-deleted wait](AzureTableStoreOptions::being_deleted_wait).
//!
//! The core's limits are checked before every request, because the emulator does not
//! enforce all of them and behaviour must match Azure. So is the scope of a shared access
//! signature the store was opened with (its table, permissions, key range and times; see
//! [`sas`] to build one): an operation outside it fails with
//! [`Error::PermissionDenied`](crate::Error::PermissionDenied) before any request, and the
//! service's 403 maps to the same error.

pub mod account;
mod acl;
mod batch;
mod blob;
pub mod client;
mod connection;
mod errors;
mod json;
mod query;
pub mod sas;
mod scope;
pub mod signer;
mod store;
mod table;
mod writes;

pub use account::{
    Credential, DEVELOPMENT_ACCOUNT, DEVELOPMENT_BLOB_ENDPOINT, DEVELOPMENT_KEY,
    DEVELOPMENT_QUEUE_ENDPOINT, DEVELOPMENT_TABLE_ENDPOINT, Service, StorageAccount,
    account_from_endpoint,
};
pub use acl::{MAX_SIGNED_IDENTIFIERS, SignedIdentifier};
pub use blob::{create_blob_container, create_container};
pub use client::{MAX_BEING_DELETED_PAUSE, SendError, ServiceClient, ServiceClientOptions};
pub use connection::AzureConfig;
pub use sas::{SAS_CLOCK_SKEW, account_sas};
pub use signer::{http_date, sign};
pub use table::{AzureTableStore, AzureTableStoreOptions, TABLE_BEING_DELETED_WAIT};

/// The one retry policy, as the Azure clients take it ([`RetryPolicy::azure`] by default).
pub use crate::retry::RetryPolicy;
