//! The one error type of the workers crate.

/// A result with the workers [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in a queue, an operation or the worker runtime.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A queue name the broker would refuse (empty, over 255 bytes, or reserved).
    #[error("invalid queue name `{name}`: {reason}")]
    InvalidQueueName {
        /// The name (shortened).
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// A connection string names no queue backend compiled in.
    #[error("invalid broker `{broker}`: {reason}")]
    InvalidBroker {
        /// The connection string.
        broker: String,
        /// What was expected.
        reason: String,
    },
    /// The broker could not be reached, or dropped the connection; the same call may
    /// succeed later.
    #[error("queue unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
    },
    /// The broker refused a message (a negative publisher confirm, an unroutable message).
    #[error("the broker refused the message: {message}")]
    Refused {
        /// What the broker said.
        message: String,
    },
    /// The queue's own storage failed.
    #[error("queue storage failure: {message}")]
    Storage {
        /// What failed.
        message: String,
    },
    /// The table store failed.
    #[error(transparent)]
    Store(#[from] tablekit_core::Error),
    /// An operation could not be encoded.
    #[error("operation cannot be encoded: {0}")]
    Encode(#[from] serde_json::Error),
    /// A setting of the worker is invalid.
    #[error("invalid setting: {0}")]
    Config(String),
    /// A pattern module failed (an index write, an audit, a backfill).
    #[error(transparent)]
    Pattern(#[from] tablekit_patterns::Error),
    /// An audit found drift and was not asked to repair it.
    #[error(
        "the audit left {0} index entries out of step (see the findings; --repair fixes what it can)"
    )]
    Drift(u64),
}

impl Error {
    /// Whether the same call may succeed if made again later.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Unavailable { .. } => true,
            Error::Store(e) => e.is_retryable(),
            Error::Pattern(e) => e.is_retryable(),
            _ => false,
        }
    }

    pub(crate) fn unavailable(message: impl std::fmt::Display) -> Self {
        Error::Unavailable {
            message: message.to_string(),
        }
    }

    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub(crate) fn storage(message: impl std::fmt::Display) -> Self {
        Error::Storage {
            message: message.to_string(),
        }
    }
}
