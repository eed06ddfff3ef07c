//! [`WriteOp`]: one write as the table service defines it, its keys, its checks against
//! the data model's limits and the bytes it adds to a batch.

use crate::limits::{self, Violation};
use crate::model::{Entity, IfMatch};

/// One write, as the table service defines it.
#[derive(Clone, Debug, PartialEq)]
pub enum WriteOp {
    /// Insert; fails with `AlreadyExists` if the keys are taken.
    Insert(Entity),
    /// Replace the whole stored entity; fails with `NotFound` or `PreconditionFailed`.
    Replace(Entity, IfMatch),
    /// Overwrite the given properties, keep the others; fails with `NotFound` or
    /// `PreconditionFailed`.
    Merge(Entity, IfMatch),
    /// Insert, or replace whatever is stored.
    InsertOrReplace(Entity),
    /// Insert, or merge into whatever is stored.
    InsertOrMerge(Entity),
    /// Delete; fails with `NotFound` or `PreconditionFailed`.
    Delete {
        /// The partition key.
        partition_key: String,
        /// The row key.
        row_key: String,
        /// The concurrency condition.
        if_match: IfMatch,
    },
}

impl WriteOp {
    /// The (PartitionKey, RowKey) the operation writes.
    pub fn key(&self) -> (&str, &str) {
        match self {
            WriteOp::Insert(e)
            | WriteOp::Replace(e, _)
            | WriteOp::Merge(e, _)
            | WriteOp::InsertOrReplace(e)
            | WriteOp::InsertOrMerge(e) => e.key(),
            WriteOp::Delete {
                partition_key,
                row_key,
                ..
            } => (partition_key, row_key),
        }
    }

    /// The entity the operation writes, if it writes one.
    pub fn entity(&self) -> Option<&Entity> {
        match self {
            WriteOp::Insert(e)
            | WriteOp::Replace(e, _)
            | WriteOp::Merge(e, _)
            | WriteOp::InsertOrReplace(e)
            | WriteOp::InsertOrMerge(e) => Some(e),
            WriteOp::Delete { .. } => None,
        }
    }

    /// Checks the operation against the data model's limits.
    ///
    /// # Errors
    /// The first [`Violation`] found.
    pub fn check(&self) -> Result<(), Violation> {
        self.checked_size().map(drop)
    }

    /// Checks the operation as [`check`](Self::check) does and returns its
    /// [`size`](Self::size), walking the entity once.
    ///
    /// # Errors
    /// The first [`Violation`] found.
    pub fn checked_size(&self) -> Result<usize, Violation> {
        match self.entity() {
            Some(e) => limits::check_entity_sized(e),
            None => {
                let (pk, rk) = self.key();
                limits::check_keys(pk, rk).map(|()| limits::key_size(pk, rk))
            }
        }
    }

    /// The bytes the operation adds to a batch request, estimated from the JSON the table
    /// service receives (binary values travel in base64, typed values with their
    /// `@odata.type` annotation, each operation with its own headers and URL): the 4 MiB
    /// batch limit is a limit on that payload.
    pub fn payload_size(&self) -> usize {
        const PER_OPERATION: usize = 400;
        let (pk, rk) = self.key();
        let keys = 2 * (pk.len() + rk.len()) + 64;
        let properties: usize = self.entity().map_or(0, |e| {
            e.properties
                .iter()
                .map(|(name, value)| {
                    let annotation = name.len() + 36;
                    name.len()
                        + 4
                        + match value {
                            crate::model::Value::String(s) => s.len() + 2,
                            crate::model::Value::Int32(_) => 11,
                            crate::model::Value::Boolean(_) => 5,
                            crate::model::Value::Int64(_) => 22 + annotation,
                            crate::model::Value::Double(_) => 26 + annotation,
                            crate::model::Value::DateTime(_) => 32 + annotation,
                            crate::model::Value::Guid(_) => 38 + annotation,
                            crate::model::Value::Binary(b) => {
                                b.len().div_ceil(3) * 4 + 2 + annotation
                            }
                        }
                })
                .sum()
        });
        PER_OPERATION + keys + properties
    }

    /// The bytes the operation adds to a batch, as the service counts them.
    pub fn size(&self) -> usize {
        match self.entity() {
            Some(e) => limits::entity_size(e),
            None => {
                let (pk, rk) = self.key();
                limits::key_size(pk, rk)
            }
        }
    }
}
