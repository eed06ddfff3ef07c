//! The Table client's configuration: where the Table service is and how to sign for it,
//! read from a connection string by the one [account reader](super::account).

use super::account::{Credential, Service, StorageAccount, invalid};
use crate::error::Result;

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

impl AzureConfig {
    /// Reads a storage connection string (the forms of the
    /// [account reader](super::account)) for its table endpoint, and tablekit's own
    /// `TablePrefix=…`, prefixed to every table name.
    ///
    /// # Errors
    /// [`Error::InvalidConnection`](crate::Error::InvalidConnection) naming what is
    /// missing or malformed (never echoing the key).
    pub fn from_connection_string(connection: &str) -> Result<Self> {
        let account = StorageAccount::from_connection_string(connection)?;
        Self::for_account(&account).map_err(|e| match e {
            crate::Error::InvalidConnection { reason, .. } => invalid(connection, reason),
            other => other,
        })
    }

    /// The Table service of an account read by the [account reader](super::account).
    ///
    /// # Errors
    /// [`Error::InvalidConnection`](crate::Error::InvalidConnection) when the account has
    /// no table endpoint, or its `TablePrefix` is not letters and digits.
    pub fn for_account(account: &StorageAccount) -> Result<Self> {
        let table_prefix = account.setting("tableprefix").unwrap_or_default();
        if !table_prefix.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(invalid("", "TablePrefix holds letters and digits only"));
        }
        Ok(AzureConfig {
            account: account.name().to_owned(),
            endpoint: account.endpoint(Service::Table)?.to_owned(),
            credential: account.credential().clone(),
            table_prefix: table_prefix.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::account::{DEVELOPMENT_ACCOUNT, DEVELOPMENT_TABLE_ENDPOINT};

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
        let queue_only = AzureConfig::from_connection_string(
            "QueueEndpoint=https://acme.queue.core.windows.net;SharedAccessSignature=sv=1",
        )
        .expect_err("no table endpoint");
        assert!(
            queue_only.to_string().contains("TableEndpoint"),
            "{queue_only}"
        );
        assert!(
            AzureConfig::from_connection_string("UseDevelopmentStorage=true;TablePrefix=a-b")
                .is_err()
        );
    }
}
