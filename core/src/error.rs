//! The one error type of the storage core, with kinds that every backend maps onto.

use std::fmt;

use crate::filter::ParseError;
use crate::limits::Violation;

/// A result with the core [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, independent of the backend: patterns and workers match on this, never
/// on a backend's native codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The entity does not exist.
    NotFound,
    /// An entity with the same keys already exists (insert).
    AlreadyExists,
    /// The stored entity's ETag did not match the condition (optimistic concurrency).
    PreconditionFailed,
    /// The table does not exist.
    TableNotFound,
    /// The table already exists (create).
    TableAlreadyExists,
    /// The table was deleted a moment ago and the service is still removing it: a table
    /// of that name cannot be created yet. Retryable.
    TableBeingDeleted,
    /// The credential does not allow the request: a shared access signature scoped to
    /// another table, permission, key range or time, or the service's 403. Not retryable.
    PermissionDenied,
    /// The request breaks a rule of the data model (keys, names, batch rules, filter syntax).
    InvalidInput,
    /// The request is over a size limit (entity, property, batch).
    TooLarge,
    /// A stored entity does not read as the type asked for (a missing property, another
    /// type, another kind, a newer version).
    InvalidData,
    /// The store is busy or unreachable for now; the same request may succeed later.
    Transient,
    /// Anything else a backend reported.
    Backend,
}

impl ErrorKind {
    /// The kind as a metric label (`not_found`, `precondition_failed`, …).
    pub fn label(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::PreconditionFailed => "precondition_failed",
            ErrorKind::TableNotFound => "table_not_found",
            ErrorKind::TableAlreadyExists => "table_already_exists",
            ErrorKind::TableBeingDeleted => "table_being_deleted",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::InvalidData => "invalid_data",
            ErrorKind::Transient => "transient",
            ErrorKind::Backend => "backend",
        }
    }
}

/// The storage core's error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The entity does not exist.
    #[error(
        "entity not found: table `{table}`, PartitionKey `{partition_key}`, RowKey `{row_key}`"
    )]
    NotFound {
        /// The table.
        table: String,
        /// The entity's partition key.
        partition_key: String,
        /// The entity's row key.
        row_key: String,
    },
    /// An entity with the same keys already exists.
    #[error(
        "entity already exists: table `{table}`, PartitionKey `{partition_key}`, RowKey `{row_key}`"
    )]
    AlreadyExists {
        /// The table.
        table: String,
        /// The entity's partition key.
        partition_key: String,
        /// The entity's row key.
        row_key: String,
    },
    /// The ETag condition failed: the entity changed since it was read.
    #[error(
        "precondition failed: the entity changed since it was read (table `{table}`, PartitionKey `{partition_key}`, RowKey `{row_key}`)"
    )]
    PreconditionFailed {
        /// The table.
        table: String,
        /// The entity's partition key.
        partition_key: String,
        /// The entity's row key.
        row_key: String,
    },
    /// The table does not exist.
    #[error("table not found: `{table}`")]
    TableNotFound {
        /// The table.
        table: String,
    },
    /// The table already exists.
    #[error("table already exists: `{table}`")]
    TableAlreadyExists {
        /// The table.
        table: String,
    },
    /// The service is still deleting a table of this name; it can be created again later.
    #[error("table `{table}` is being deleted; it cannot be created again yet")]
    TableBeingDeleted {
        /// The table.
        table: String,
    },
    /// The credential does not allow the request. Refused before any I/O when a shared
    /// access signature's scope excludes it (`service_code` is then `None`), or by the
    /// service (HTTP 403, with its error code).
    #[error("permission denied on table `{table}`: {reason}")]
    PermissionDenied {
        /// The table, as the caller named it (empty for account-wide requests).
        table: String,
        /// What is outside the credential's scope: the table, the missing permission, the
        /// key outside the range, the expiry; or the service's message.
        reason: String,
        /// The service's error code (`AuthorizationPermissionMismatch`,
        /// `AuthorizationFailure`, `AuthenticationFailed`, …) when the service refused.
        service_code: Option<String>,
    },
    /// A shared access signature or stored access policy that cannot be built or read.
    #[error("invalid shared access signature: {reason}")]
    InvalidSas {
        /// What is wrong.
        reason: String,
    },
    /// A limit or rule of the data model was broken; nothing was written.
    #[error(transparent)]
    Limit(#[from] Violation),
    /// A `$filter` string could not be parsed.
    #[error(transparent)]
    Filter(#[from] ParseError),
    /// A value could not be encoded as a key, or a key decoded.
    #[error(transparent)]
    Key(#[from] crate::keys::KeyError),
    /// A field of a typed entity could not be written or read.
    #[error(transparent)]
    Field(Box<crate::typed::field::FieldError>),
    /// A name (an index, an index entity) the entity type does not declare.
    #[error("{type_name} declares no {what} `{name}`")]
    Undeclared {
        /// The entity type.
        type_name: &'static str,
        /// What was looked up.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// A continuation token could not be decoded.
    #[error("invalid continuation token: {reason}")]
    InvalidContinuation {
        /// Why the token was refused.
        reason: String,
    },
    /// A connection string names no backend compiled in.
    #[error("invalid connection string `{connection}`: {reason}")]
    InvalidConnection {
        /// The connection string.
        connection: String,
        /// What was expected.
        reason: String,
    },
    /// An operation of an entity group transaction failed; the whole batch was rolled back.
    #[error("batch operation {index} failed, nothing was written: {source}")]
    Batch {
        /// The index of the failing operation in the batch.
        index: usize,
        /// Why it failed.
        #[source]
        source: Box<Error>,
    },
    /// The store is busy or unreachable for now.
    #[error("transient store failure, retry later: {message}")]
    Transient {
        /// What the backend said.
        message: String,
    },
    /// Any other backend failure.
    #[error("backend failure: {message}")]
    Backend {
        /// What the backend said.
        message: String,
    },
}

impl Error {
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            Error::PreconditionFailed { .. } => ErrorKind::PreconditionFailed,
            Error::TableNotFound { .. } => ErrorKind::TableNotFound,
            Error::TableAlreadyExists { .. } => ErrorKind::TableAlreadyExists,
            Error::TableBeingDeleted { .. } => ErrorKind::TableBeingDeleted,
            Error::PermissionDenied { .. } => ErrorKind::PermissionDenied,
            Error::Limit(v) if v.is_size_limit() => ErrorKind::TooLarge,
            Error::Limit(_)
            | Error::Filter(_)
            | Error::InvalidContinuation { .. }
            | Error::InvalidConnection { .. }
            | Error::InvalidSas { .. }
            | Error::Undeclared { .. }
            | Error::Key(_) => ErrorKind::InvalidInput,
            Error::Field(e) => match e.direction {
                crate::typed::field::Direction::Write => ErrorKind::InvalidInput,
                crate::typed::field::Direction::Read => ErrorKind::InvalidData,
            },
            Error::Batch { source, .. } => source.kind(),
            Error::Transient { .. } => ErrorKind::Transient,
            Error::Backend { .. } => ErrorKind::Backend,
        }
    }

    /// Whether the same request may succeed if it is sent again later: transient
    /// failures, and creating a table the service is still deleting.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind(),
            ErrorKind::Transient | ErrorKind::TableBeingDeleted
        )
    }

    /// For a batch failure, the index of the failing operation.
    pub fn batch_index(&self) -> Option<usize> {
        match self {
            Error::Batch { index, .. } => Some(*index),
            Error::Limit(v) => v.batch_index(),
            _ => None,
        }
    }

    pub(crate) fn not_found(table: &str, pk: &str, rk: &str) -> Self {
        Error::NotFound {
            table: table.to_owned(),
            partition_key: pk.to_owned(),
            row_key: rk.to_owned(),
        }
    }

    pub(crate) fn already_exists(table: &str, pk: &str, rk: &str) -> Self {
        Error::AlreadyExists {
            table: table.to_owned(),
            partition_key: pk.to_owned(),
            row_key: rk.to_owned(),
        }
    }

    pub(crate) fn precondition_failed(table: &str, pk: &str, rk: &str) -> Self {
        Error::PreconditionFailed {
            table: table.to_owned(),
            partition_key: pk.to_owned(),
            row_key: rk.to_owned(),
        }
    }

    pub(crate) fn table_not_found(table: &str) -> Self {
        Error::TableNotFound {
            table: table.to_owned(),
        }
    }

    #[cfg_attr(not(feature = "azure"), allow(dead_code))]
    pub(crate) fn permission_denied(table: &str, reason: impl Into<String>) -> Self {
        Error::PermissionDenied {
            table: table.to_owned(),
            reason: reason.into(),
            service_code: None,
        }
    }

    pub(crate) fn in_batch(self, index: usize) -> Self {
        Error::Batch {
            index,
            source: Box::new(self),
        }
    }
}

impl From<crate::typed::field::FieldError> for Error {
    fn from(error: crate::typed::field::FieldError) -> Self {
        Error::Field(Box::new(error))
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
