//! The pattern modules' error: the storage core's errors, and what the patterns add
//! (a taken unique index value, contention that outlasted the retries, a record that does
//! not read).

use tablekit_core::ErrorKind;

/// The pattern modules' error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A store failure.
    #[error(transparent)]
    Store(#[from] tablekit_core::Error),
    /// A same-partition index copy's keys are held by another entity: same-partition index
    /// values are unique within their partition. Nothing was written.
    #[error(
        "index `{index}` value taken: RowKey `{row_key}` in partition `{partition_key}` of table `{table}` belongs to another entity"
    )]
    IndexValueTaken {
        /// The index.
        index: String,
        /// The table of the copy.
        table: String,
        /// The copy's PartitionKey.
        partition_key: String,
        /// The copy's RowKey.
        row_key: String,
    },
    /// Concurrent writers kept changing what a write depends on; nothing was written and
    /// the same write may succeed later.
    #[error("{what}: still conflicting after {attempts} attempts")]
    Contention {
        /// What kept conflicting.
        what: String,
        /// The attempts made.
        attempts: usize,
    },
    /// A record tablekit keeps (index state, an id list page, an outbox entry, a schema)
    /// does not read.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// What does not read.
        what: String,
        /// Why.
        reason: String,
    },
    /// Blob-stored data (an index entity, a large property) without a blob store
    /// configured.
    #[error("`{index}` is stored in blobs: configure a blob store")]
    NoBlobStore {
        /// The index entity.
        index: String,
    },
    /// A name the table's registered schema does not declare, or a request it cannot
    /// serve (a sparse index backfilled without the entity type).
    #[error("{0}")]
    Unsupported(String),
    /// The outbox sink could not publish; the outbox entry stays for the relay.
    #[error("publishing outbox entry failed: {0}")]
    Publish(String),
}

impl Error {
    /// The kind of failure, in the storage core's terms.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Store(e) => e.kind(),
            Error::IndexValueTaken { .. } => ErrorKind::AlreadyExists,
            Error::Contention { .. } | Error::Publish(_) => ErrorKind::Transient,
            Error::Malformed { .. } => ErrorKind::InvalidData,
            Error::NoBlobStore { .. } | Error::Unsupported(_) => ErrorKind::InvalidInput,
        }
    }

    /// Whether the same request may succeed later.
    pub fn is_retryable(&self) -> bool {
        self.kind() == ErrorKind::Transient
    }

    pub(crate) fn malformed(what: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        Error::Malformed {
            what: what.into(),
            reason: reason.to_string(),
        }
    }
}

/// The pattern modules' result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
