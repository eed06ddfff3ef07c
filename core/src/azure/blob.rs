//! The Blob service requests tablekit makes itself, beside the blob store (which is
//! `object_store`'s): creating a container, through the one client and signer.

use reqwest::Method;

use super::account::{Service, StorageAccount};
use super::client::ServiceClient;
use crate::error::{Error, Result};

/// Creates a blob container unless it exists (`true` when this call created it), for a
/// storage connection string with shared-key credentials (`UseDevelopmentStorage=true`
/// for Azurite, whose blob service listens on port 10000, or
/// `AccountName=…;AccountKey=…[;BlobEndpoint=…]`).
///
/// # Errors
/// [`Error::InvalidConnection`] for a string without a key; [`Error::Backend`] or
/// [`Error::Transient`] from the service.
pub async fn create_blob_container(connection: &str, container: &str) -> Result<bool> {
    create_container(
        &StorageAccount::from_connection_string(connection)?,
        container,
    )
    .await
}

/// Creates a blob container of `account` unless it exists (`true` when this call created
/// it).
///
/// # Errors
/// As [`create_blob_container`].
pub async fn create_container(account: &StorageAccount, container: &str) -> Result<bool> {
    if account.key().is_none() {
        return Err(Error::InvalidConnection {
            connection: format!("the connection string of account `{}`", account.name()),
            reason: "creating a container needs the AccountKey".to_owned(),
        });
    }
    let client = ServiceClient::new(account, Service::Blob)?;
    let url = format!("{}/{container}", client.endpoint());
    let response = client
        .send(
            Method::PUT,
            &url,
            &[("restype", "container".to_owned())],
            &[],
            None,
        )
        .await?;
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
