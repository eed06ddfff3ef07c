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
    /// A unique value (`#[unique]`) is held by another entity; nothing was written.
    #[error(
        "unique value `{name}` = `{value}` is taken by {holder}{}",
        if *.in_flight { " (its write is in flight)" } else { "" }
    )]
    ValueTaken {
        /// The unique value's name.
        name: String,
        /// The value, as reserved.
        value: String,
        /// The entity holding it.
        holder: Box<crate::address::EntityRef>,
        /// Whether the holder has reserved the value and not yet written itself (its
        /// reservation is within its lease): the value may come free if that write fails.
        in_flight: bool,
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
    /// A record tablekit keeps could not be encoded; nothing was written.
    #[error("cannot encode {what}")]
    Encode {
        /// What was being encoded.
        what: String,
        /// Why.
        #[source]
        source: serde_json::Error,
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
    /// The sink could not publish follow-up work; its outbox entry stays for the relay.
    #[error("publishing follow-up work failed: {0}")]
    Publish(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// The kind of failure, in the storage core's terms.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Store(e) => e.kind(),
            Error::IndexValueTaken { .. } | Error::ValueTaken { .. } => ErrorKind::AlreadyExists,
            Error::Contention { .. } | Error::Publish(_) => ErrorKind::Transient,
            Error::Malformed { .. } => ErrorKind::InvalidData,
            Error::NoBlobStore { .. } | Error::Unsupported(_) | Error::Encode { .. } => {
                ErrorKind::InvalidInput
            }
        }
    }

    /// Whether the same request may succeed later.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Store(e) => e.is_retryable(),
            other => other.kind() == ErrorKind::Transient,
        }
    }

    /// JSON text of a record tablekit writes.
    pub(crate) fn json<T: serde::Serialize + ?Sized>(what: &str, value: &T) -> Result<String> {
        serde_json::to_string(value).map_err(|source| Error::Encode {
            what: what.to_owned(),
            source,
        })
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

/// A loop of the patterns spent the attempts its [`RetryPolicy`] allows: contention.
///
/// [`RetryPolicy`]: tablekit_core::retry::RetryPolicy
impl From<tablekit_core::retry::Exhausted> for Error {
    fn from(e: tablekit_core::retry::Exhausted) -> Self {
        Error::Contention {
            what: e.what,
            attempts: e.attempts,
        }
    }
}

/// An operation's retry loop spent its attempts: a retryable failure, as
/// [`Error::Contention`] is.
impl From<tablekit_core::retry::Exhausted> for crate::consistency::OperationError {
    fn from(e: tablekit_core::retry::Exhausted) -> Self {
        Error::from(e).into()
    }
}
