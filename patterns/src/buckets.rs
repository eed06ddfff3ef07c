//! Hash-prefixed keys against the prepend/append anti-pattern (the Tablestore guide's
//! method): the PartitionKey starts with the first `n` hex characters of the md5 of the
//! natural key, so sequential keys spread over `16^n` buckets instead of one hot
//! partition. A point read computes the bucket from the natural key; a range over natural
//! keys queries every bucket in parallel and merges the results back into key order.
//!
//! ```
//! use tablekit_patterns::buckets::HashBuckets;
//!
//! let buckets = HashBuckets::new(2).unwrap();
//! assert_eq!(buckets.all().len(), 256);
//! assert_eq!(buckets.of("200004").len(), 2);
//! assert_eq!(buckets.of("200004"), buckets.of("200004"));
//! ```

use futures::{StreamExt, TryStreamExt};
use tablekit_core::keys;
use tablekit_core::typed::{Record, Stored, Table};
use tablekit_core::{Query, TableStore};

use crate::error::{Error, Result};

/// The hash-prefix buckets of `chars` hex characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashBuckets {
    chars: usize,
}

impl HashBuckets {
    /// Buckets of 1 to 4 hex characters (16 to 65,536 buckets).
    ///
    /// # Errors
    /// [`Error::Unsupported`] outside 1 ..= 4.
    pub fn new(chars: usize) -> Result<Self> {
        if !(1..=4).contains(&chars) {
            return Err(Error::Unsupported(format!(
                "a hash prefix has 1 to 4 hex characters, not {chars}"
            )));
        }
        Ok(HashBuckets { chars })
    }

    /// The bucket of a natural key.
    pub fn of(&self, natural_key: &str) -> String {
        keys::hash_prefix(natural_key, self.chars)
    }

    /// Every bucket, in order.
    pub fn all(&self) -> Vec<String> {
        (0..16usize.pow(u32::try_from(self.chars).unwrap_or(1)))
            .map(|n| format!("{n:0width$x}", width = self.chars))
            .collect()
    }

    /// Runs `query_of(bucket)` on every bucket, at most `concurrency` at a time, and
    /// returns every result in key order of the RowKey (the natural key), then of the
    /// PartitionKey.
    ///
    /// # Errors
    /// The first query's error.
    pub async fn fan_out<R: Record, S: TableStore>(
        &self,
        table: &Table<R, S>,
        query_of: impl Fn(&str) -> Query,
        concurrency: usize,
    ) -> Result<Vec<Stored<R>>> {
        let pages: Vec<Vec<Stored<R>>> = futures::stream::iter(self.all())
            .map(|bucket| {
                let query = query_of(&bucket);
                async move { table.query(query).await }
            })
            .buffer_unordered(concurrency.max(1))
            .try_collect()
            .await?;
        let mut all: Vec<Stored<R>> = pages.into_iter().flatten().collect();
        let order = table.store().key_order();
        all.sort_by(|a, b| {
            order
                .compare(&a.row_key, &b.row_key)
                .then_with(|| order.compare(&a.partition_key, &b.partition_key))
        });
        Ok(all)
    }
}
