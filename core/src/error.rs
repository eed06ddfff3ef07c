//! The one error type of tablekit: the storage core's failures, the pattern modules'
//! (a taken index or unique value, contention that outlasted the retries, a record that
//! does not read) and the queues' and workers' (a broker that is down or refuses, a
//! setting that is wrong), with kinds that every backend maps onto. The pattern modules
//! and the workers return this type, so one `?` and one `match` serve an application
//! that uses them all.

use std::fmt;

use crate::filter::ParseError;
use crate::limits::Violation;

/// A boxed error kept as a source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A result with tablekit's [`Error`].
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

/// tablekit's error: what the store, a pattern, a queue or a worker reports.
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
    /// A key template that does not parse.
    #[error(transparent)]
    Template(#[from] crate::typed::template::TemplateError),
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

    // The pattern modules' failures.
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
        holder: Box<crate::EntityRef>,
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
    /// A record tablekit keeps, or an operation, could not be encoded; nothing was
    /// written or sent.
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
    /// A table whose declarations need follow-up work outside each write's own
    /// transaction (copies in other partitions or tables, id lists in a table or in
    /// blobs, unique values, expiry, change events, blob deletions, denormalised
    /// dependents) was opened without saying where that work is done: without it, writes
    /// succeed while their copies wait for a relay that may never run. Nothing was
    /// written.
    #[error(
        "`{type_name}` needs follow-up work outside each write's own transaction ({}), and its table was opened without saying where that work is done. Choose one on `IndexedTable::options()`:\n  .sink(queue_sink)       hand it to a queue after each commit; a worker (`tablekit-worker run --queue <queue>`) applies it (an `.engine(..)` with a sink does the same)\n  .inline_apply()         apply it in this process right after each commit: the write returns once its copies are written\n  .follow_up_elsewhere()  leave it in the partition's outbox: the relay of `tablekit-worker run` publishes it and a worker applies it (nothing converges while none runs)",
        .declarations.join("; ")
    )]
    NoFollowUpChoice {
        /// The entity type.
        type_name: &'static str,
        /// The declarations that need follow-up work, each as its attribute names it
        /// with where its work goes (`index `by_email`: copies in table …`).
        declarations: Vec<String>,
    },
    /// A change feed was asked for changes it no longer keeps: the position is older than
    /// the feed's retention (or the log was trimmed past it). Nothing is skipped silently:
    /// read from `oldest`, or from the beginning for a snapshot of the table.
    #[error(
        "position {position} of the change feed of `{table}` (share {share}) is no longer kept: the oldest readable position is {oldest}"
    )]
    PositionExpired {
        /// The primaries' table.
        table: String,
        /// The share of the feed.
        share: u32,
        /// The sequence number asked for.
        position: u64,
        /// The lowest sequence number the share still keeps.
        oldest: u64,
    },
    /// A feed group's member was asked to checkpoint a change it was never handed: a
    /// sequence number at or past what its reads of the share have returned (a number
    /// made up, another member's, or one past the log's end). Nothing is recorded: a
    /// checkpoint beyond what was handled would skip changes for whoever reads next.
    #[error(
        "checkpoint of share {share} of the change feed of `{table}` at {seq} refused: this member was handed its changes up to {handed} only"
    )]
    NotHanded {
        /// The primaries' table.
        table: String,
        /// The share of the feed.
        share: u32,
        /// The sequence number asked to be recorded.
        seq: u64,
        /// The highest sequence number this member's reads returned for the share (0:
        /// none).
        handed: u64,
    },
    /// A feed group's member was started again elsewhere with the same id, and that
    /// newer instance took its shares over: this one reads and checkpoints nothing more.
    #[error(
        "member `{member}` of group `{group}` of the change feed of `{table}` was taken over by a newer instance of the same id (started {since}): this one reads nothing more; give each live process its own id"
    )]
    MemberReplaced {
        /// The primaries' table.
        table: String,
        /// The group.
        group: String,
        /// The member id.
        member: String,
        /// When the newer instance started.
        since: chrono::DateTime<chrono::Utc>,
    },
    /// The sink could not publish follow-up work; its outbox entry stays for the relay.
    #[error("publishing follow-up work failed: {0}")]
    Publish(#[source] BoxError),

    // The queues' and the workers' failures.
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
    /// The credential does not allow a queue call: refused before any request when the
    /// shared access signature shows it (a permission it lacks, its start or expiry), or
    /// answered 403 by the service.
    #[error("permission denied on queue `{queue}`: {reason}")]
    QueuePermissionDenied {
        /// The queue.
        queue: String,
        /// What is outside the credential (or the service's error code and message).
        reason: String,
    },
    /// A queue's own storage failed.
    #[error("queue storage failure: {message}")]
    Storage {
        /// What failed.
        message: String,
        /// The queue file's own error.
        #[source]
        source: Option<BoxError>,
    },
    /// A file or socket of the application or of a backend failed (a SQLite or queue
    /// file's directory, a blob directory, a temporary directory).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A setting of a worker is invalid.
    #[error("invalid setting: {0}")]
    Config(String),
    /// A store that should exist does not (a SQLite file opened without asking for its
    /// creation: a mistyped path is not taken for a new, empty store).
    #[error(
        "no store at `{}` ({hint})", path.display()
    )]
    StoreNotFound {
        /// Where it was looked for.
        path: std::path::PathBuf,
        /// How to create one, when that was meant.
        hint: &'static str,
    },
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
            | Error::Template(_)
            | Error::Key(_) => ErrorKind::InvalidInput,
            Error::Field(e) => match e.direction {
                crate::typed::field::Direction::Write => ErrorKind::InvalidInput,
                crate::typed::field::Direction::Read => ErrorKind::InvalidData,
            },
            Error::Batch { source, .. } => source.kind(),
            Error::Transient { .. } => ErrorKind::Transient,
            Error::Backend { .. } => ErrorKind::Backend,
            Error::IndexValueTaken { .. } | Error::ValueTaken { .. } => ErrorKind::AlreadyExists,
            Error::Contention { .. } | Error::Publish(_) | Error::Unavailable { .. } => {
                ErrorKind::Transient
            }
            Error::Malformed { .. } | Error::Drift(_) => ErrorKind::InvalidData,
            Error::NoBlobStore { .. }
            | Error::Unsupported(_)
            | Error::NoFollowUpChoice { .. }
            | Error::Encode { .. }
            | Error::InvalidQueueName { .. }
            | Error::InvalidBroker { .. }
            | Error::PositionExpired { .. }
            | Error::NotHanded { .. }
            | Error::MemberReplaced { .. }
            | Error::Config(_) => ErrorKind::InvalidInput,
            Error::NotDeclared { .. } | Error::StoreNotFound { .. } => ErrorKind::NotFound,
            Error::QueuePermissionDenied { .. } => ErrorKind::PermissionDenied,
            Error::Refused { .. } | Error::Storage { .. } | Error::Incomplete(_) | Error::Io(_) => {
                ErrorKind::Backend
            }
        }
    }

    /// Whether the same request may succeed if it is sent again later: transient
    /// failures (a busy store, contention, a broker that is down, a publish that failed),
    /// and creating a table the service is still deleting.
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

    /// A record tablekit keeps that does not read: `what` it is, and why.
    pub fn malformed(what: impl Into<String>, reason: impl fmt::Display) -> Self {
        Error::Malformed {
            what: what.into(),
            reason: reason.to_string(),
        }
    }

    /// A broker or queue that cannot be reached for now (retryable).
    pub fn unavailable(message: impl fmt::Display) -> Self {
        Error::Unavailable {
            message: message.to_string(),
            source: None,
        }
    }

    /// A broker or queue file that failed with `source` while doing `what` (retryable).
    pub fn unavailable_because(
        what: impl fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Unavailable {
            message: what.to_string(),
            source: Some(Box::new(source)),
        }
    }

    /// A queue's own storage that failed.
    pub fn storage(message: impl fmt::Display) -> Self {
        Error::Storage {
            message: message.to_string(),
            source: None,
        }
    }

    /// A queue's own storage that failed with `source` while doing `what`.
    pub fn storage_because(
        what: impl fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Storage {
            message: what.to_string(),
            source: Some(Box::new(source)),
        }
    }

    /// A message the broker refused.
    pub fn refused(message: impl fmt::Display) -> Self {
        Error::Refused {
            message: message.to_string(),
            source: None,
        }
    }

    /// A message the broker refused with `source` while doing `what`.
    pub fn refused_because(
        what: impl fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Refused {
            message: what.to_string(),
            source: Some(Box::new(source)),
        }
    }

    /// `what` could not be encoded as JSON.
    pub fn encode(what: impl Into<String>, source: serde_json::Error) -> Self {
        Error::Encode {
            what: what.into(),
            source,
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

/// A loop that spent the attempts its [`RetryPolicy`](crate::retry::RetryPolicy) allows:
/// contention.
impl From<crate::retry::Exhausted> for Error {
    fn from(e: crate::retry::Exhausted) -> Self {
        Error::Contention {
            what: e.what,
            attempts: e.attempts,
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

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn the_patterns_and_the_queues_failures_have_kinds_and_retryability() {
        let contention = Error::from(crate::retry::Exhausted {
            what: "a write".into(),
            attempts: 5,
        });
        assert_eq!(contention.kind(), ErrorKind::Transient);
        assert!(contention.is_retryable());
        let taken = Error::ValueTaken {
            name: "email".into(),
            value: "ann@contoso.com".into(),
            holder: Box::new(crate::EntityRef::new("Accounts", "sales", "ann")),
            in_flight: false,
        };
        assert_eq!(taken.kind(), ErrorKind::AlreadyExists);
        assert!(!taken.is_retryable());
        assert_eq!(
            Error::malformed("an outbox entry", "no kind").kind(),
            ErrorKind::InvalidData
        );
        let down = Error::unavailable_because(
            "connecting to the broker",
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        );
        assert_eq!(down.kind(), ErrorKind::Transient);
        assert!(down.is_retryable());
        assert!(down.source().is_some(), "the broker's own error is kept");
        assert!(!Error::refused("nack").is_retryable());
        assert_eq!(
            Error::NotDeclared {
                queue: "archive".into()
            }
            .kind(),
            ErrorKind::NotFound
        );
        assert_eq!(Error::Config("bad".into()).kind(), ErrorKind::InvalidInput);
        let io = Error::from(std::io::Error::other("disk full"));
        assert_eq!(io.to_string(), "disk full");
        assert!(io.source().is_some());
    }
}
