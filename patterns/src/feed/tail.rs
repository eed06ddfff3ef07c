//! A read-only reader of a whole feed: every share from a position, without a group, a
//! lease or a checkpoint — what `tablekit-worker feed tail` prints. It writes nothing.

use std::collections::BTreeMap;

use tablekit_core::TableStore;

use super::{FeedChange, Position};
use crate::error::Result;

/// Reads every share of a table's feed from a position (see the module docs).
#[derive(Debug)]
pub struct Tail<S> {
    store: S,
    table: String,
    shares: u32,
    from: Position,
    /// Per share, the next sequence number to read (once started).
    next: BTreeMap<u32, u64>,
    read: usize,
}

impl<S: TableStore> Tail<S> {
    /// A reader of `table`'s feed (divided into `shares`) from `from`.
    pub fn new(store: S, table: &str, shares: u32, from: Position) -> Self {
        Tail {
            store,
            table: table.to_owned(),
            shares: shares.max(1),
            from,
            next: BTreeMap::new(),
            read: super::DEFAULT_READ,
        }
    }

    /// The changes after what was read, up to a read size per share: per share in
    /// sequence order.
    ///
    /// # Errors
    /// The store's errors; [`Error::PositionExpired`](crate::Error::PositionExpired) when
    /// the position is no longer kept; [`Error::Config`](crate::Error::Config) for a
    /// checkpoint naming a share beyond the reader's count.
    pub async fn next(&mut self) -> Result<Vec<FeedChange>> {
        let mut all = Vec::new();
        for share in 0..self.shares {
            let next = match self.next.get(&share) {
                Some(next) => *next,
                None => {
                    let head = super::head(&self.store, &self.table, share).await?;
                    let last = super::start(
                        &self.store,
                        &self.table,
                        (share, self.shares),
                        &self.from,
                        &head,
                    )
                    .await?;
                    self.next.insert(share, last + 1);
                    last + 1
                }
            };
            let changes = super::read(&self.store, &self.table, share, next, self.read).await?;
            if let Some(last) = changes.last() {
                self.next.insert(share, last.seq + 1);
            }
            all.extend(changes);
        }
        Ok(all)
    }

    /// Where it is: per share, the last sequence number read.
    pub fn position(&self) -> super::Checkpoint {
        super::Checkpoint {
            shares: self
                .next
                .iter()
                .map(|(share, next)| (*share, next.saturating_sub(1)))
                .collect(),
        }
    }
}
