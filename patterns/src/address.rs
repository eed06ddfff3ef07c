//! Addresses the pattern modules share: an entity's ([`EntityRef`]) and the encoding of
//! keys into blob names.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC};
use serde::{Deserialize, Serialize};
use tablekit_core::Entity;

/// The characters a key keeps in a blob name; the rest are percent-encoded.
pub(crate) const BLOB_NAME_SET: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_');

/// An entity's address.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EntityRef {
    /// The table.
    pub table: String,
    /// The PartitionKey.
    pub partition_key: String,
    /// The RowKey.
    pub row_key: String,
}

impl EntityRef {
    /// An address.
    pub fn new(
        table: impl Into<String>,
        partition_key: impl Into<String>,
        row_key: impl Into<String>,
    ) -> Self {
        EntityRef {
            table: table.into(),
            partition_key: partition_key.into(),
            row_key: row_key.into(),
        }
    }

    /// The address of a stored entity.
    pub fn of(table: &str, entity: &Entity) -> Self {
        EntityRef::new(table, &entity.partition_key, &entity.row_key)
    }

    /// `NotFound` for this entity.
    pub(crate) fn not_found(&self) -> crate::Error {
        tablekit_core::Error::NotFound {
            table: self.table.clone(),
            partition_key: self.partition_key.clone(),
            row_key: self.row_key.clone(),
        }
        .into()
    }

    /// `PreconditionFailed` for this entity (its ETag is not the one expected).
    pub(crate) fn precondition_failed(&self) -> crate::Error {
        tablekit_core::Error::PreconditionFailed {
            table: self.table.clone(),
            partition_key: self.partition_key.clone(),
            row_key: self.row_key.clone(),
        }
        .into()
    }
}

impl std::fmt::Display for EntityRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}({}, {})",
            self.table, self.partition_key, self.row_key
        )
    }
}
