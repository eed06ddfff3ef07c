//! The one error type of the workers crate.

/// A boxed error kept as a source.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

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
    /// The queue does not exist yet: a worker declares it when it starts (or `enqueue`
    /// when it sends the first message).
    #[error("queue `{queue}` is not declared yet (a worker declares it when it starts)")]
    NotDeclared {
        /// The queue.
        queue: String,
    },
    /// The broker could not be reached, or dropped the connection; the same call may
    /// succeed later.
    #[error("queue unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
        /// The broker's or the queue file's own error.
        #[source]
        source: Option<BoxError>,
    },
    /// The broker refused a message (a negative publisher confirm, an unroutable message).
    #[error("the broker refused the message: {message}")]
    Refused {
        /// What the broker said.
        message: String,
        /// The broker's own error.
        #[source]
        source: Option<BoxError>,
    },
    /// The credential does not allow the call: refused before any request when the
    /// shared access signature shows it (a permission it lacks, its start or expiry), or
    /// answered 403 by the service.
    #[error("permission denied on queue `{queue}`: {reason}")]
    PermissionDenied {
        /// The queue.
        queue: String,
        /// What is outside the credential (or the service's error code and message).
        reason: String,
    },
    /// The queue's own storage failed.
    #[error("queue storage failure: {message}")]
    Storage {
        /// What failed.
        message: String,
        /// The queue file's own error.
        #[source]
        source: Option<BoxError>,
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
    /// An import left entities unwritten (their keys are in the output).
    #[error(
        "{0} entities could not be written (see the output; running the import again retries them)"
    )]
    Incomplete(usize),
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

    #[cfg_attr(
        not(any(feature = "sqlite", feature = "rabbitmq", feature = "azure")),
        allow(dead_code)
    )]
    pub(crate) fn unavailable(message: impl std::fmt::Display) -> Self {
        Error::Unavailable {
            message: message.to_string(),
            source: None,
        }
    }

    /// The broker or queue file failed with `source` while doing `what`.
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "rabbitmq", feature = "azure")),
        allow(dead_code)
    )]
    pub(crate) fn unavailable_because(
        what: impl std::fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Unavailable {
            message: what.to_string(),
            source: Some(Box::new(source)),
        }
    }

    #[cfg_attr(not(any(feature = "sqlite", feature = "azure")), allow(dead_code))]
    pub(crate) fn storage(message: impl std::fmt::Display) -> Self {
        Error::Storage {
            message: message.to_string(),
            source: None,
        }
    }

    #[cfg_attr(not(any(feature = "sqlite", feature = "azure")), allow(dead_code))]
    pub(crate) fn storage_because(
        what: impl std::fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Storage {
            message: what.to_string(),
            source: Some(Box::new(source)),
        }
    }

    #[cfg_attr(not(any(feature = "rabbitmq", feature = "azure")), allow(dead_code))]
    pub(crate) fn refused(message: impl std::fmt::Display) -> Self {
        Error::Refused {
            message: message.to_string(),
            source: None,
        }
    }

    #[cfg_attr(not(feature = "rabbitmq"), allow(dead_code))]
    pub(crate) fn refused_because(
        what: impl std::fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Refused {
            message: what.to_string(),
            source: Some(Box::new(source)),
        }
    }
}
