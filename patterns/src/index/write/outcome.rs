//! What a write answers: [`WriteOutcome`] for one write, [`IndexedWriteReport`] for
//! [`IndexedTable::write_all`](super::super::IndexedTable::write_all).

use tablekit_core::ETag;

use crate::error::{Error, Result};

/// What [`IndexedTable::write_all`](super::super::IndexedTable::write_all) did.
#[derive(Debug)]
pub struct IndexedWriteReport {
    /// The writes applied: (input position, version recorded), in input order.
    pub written: Vec<(usize, i64)>,
    /// Writes refused on their own (a taken key or index value, a stale ETag, a missing
    /// entity), in input order: nothing of them was written.
    pub refused: Vec<(usize, Error)>,
    /// Transactions that failed as a whole: their input positions and why.
    pub failed: Vec<(Vec<usize>, Error)>,
    /// Whether all follow-up work went to the sink at once (otherwise the relay takes
    /// the rest).
    pub published: bool,
}

impl Default for IndexedWriteReport {
    fn default() -> Self {
        IndexedWriteReport {
            written: Vec::new(),
            refused: Vec::new(),
            failed: Vec::new(),
            published: true,
        }
    }
}

impl IndexedWriteReport {
    /// Whether every write was applied.
    pub fn is_complete(&self) -> bool {
        self.refused.is_empty() && self.failed.is_empty()
    }

    /// The first failure, if any.
    ///
    /// # Errors
    /// The first refused write's or failed transaction's error.
    pub fn into_result(mut self) -> Result<Self> {
        if !self.refused.is_empty() {
            return Err(self.refused.remove(0).1);
        }
        if !self.failed.is_empty() {
            return Err(self.failed.remove(0).1);
        }
        Ok(self)
    }
}

/// What an indexed write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The primary's new ETag (`None` for a delete).
    pub etag: Option<ETag>,
    /// The version recorded on the primary.
    pub version: i64,
    /// The operations recorded as follow-up work for the worker (0: everything was
    /// atomic).
    pub operations: usize,
    /// Whether the follow-up work was handed to the sink and its entries removed. When
    /// `false`, it waits in the partition's outbox until a relay publishes it (the one
    /// `tablekit-worker run` runs): always so for a table opened with
    /// [`follow_up_elsewhere`](super::super::IndexedTableOptions::follow_up_elsewhere), and
    /// when a sink failed.
    pub published: bool,
}

impl WriteOutcome {
    /// The condition a next write takes to apply only over this one: its ETag, or `Any`
    /// after a delete.
    pub fn if_match(&self) -> tablekit_core::IfMatch {
        self.etag
            .clone()
            .map_or(tablekit_core::IfMatch::Any, tablekit_core::IfMatch::ETag)
    }
}
