//! Hash-prefixed keys against the prepend/append anti-pattern (the Tablestore guide's
//! method): the PartitionKey starts with the first `n` hex characters of the md5 of the
//! natural key, so sequential keys spread over `16^n` buckets instead of one hot
//! partition. A point read computes the bucket from the natural key; a range over natural
//! keys queries every bucket and merges the results back into key order, a page at a time
//! ([`HashBuckets::fan_out_page`], resumable from a [`Cursor`] in any process, or
//! [`HashBuckets::fan_out_stream`]): each bucket is read a few results at a time, so
//! memory holds about two pages, never the whole result.
//!
//! ```
//! use tablekit_patterns::buckets::HashBuckets;
//!
//! let buckets = HashBuckets::new(2).unwrap();
//! assert_eq!(buckets.all().len(), 256);
//! assert_eq!(buckets.of("200004").len(), 2);
//! assert_eq!(buckets.of("200004"), buckets.of("200004"));
//! ```

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use futures::{Stream, StreamExt, TryStreamExt};
use tablekit_core::typed::{Record, Stored, Table};
use tablekit_core::{ContinuationToken, KeyOrder, Query, TableStore, keys};

use crate::cursor::{Cursor, CursorPage, Position, row_key_first};
use crate::error::{Error, Result};

/// How many buckets a page queries at once.
const FETCH_CONCURRENCY: usize = 16;

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

    /// Runs `query_of(bucket)` on every bucket and returns every result in key order of
    /// the RowKey (the natural key), then of the PartitionKey, collected: for results that
    /// fit in memory; [`fan_out_stream`](Self::fan_out_stream) and
    /// [`fan_out_page`](Self::fan_out_page) page through any size.
    ///
    /// # Errors
    /// The first query's error.
    pub async fn fan_out<R: Record, S: TableStore>(
        &self,
        table: &Table<R, S>,
        query_of: impl Fn(&str) -> Query + Send + Sync,
        concurrency: usize,
    ) -> Result<Vec<Stored<R>>> {
        let _ = concurrency;
        self.fan_out_stream(table, query_of, 1000)
            .try_collect()
            .await
    }

    /// One page of at most `page_size` (1 ..= 1000) results of `query_of(bucket)` over
    /// every bucket, merged into key order of the RowKey, then the PartitionKey, and the
    /// cursor that resumes the read after it (`None` at the end). Each bucket is queried
    /// from its position in `cursor`, at most a page of results at a time.
    ///
    /// # Errors
    /// The queries' errors; [`Error::Unsupported`] for a cursor of another read.
    pub async fn fan_out_page<R: Record, S: TableStore>(
        &self,
        table: &Table<R, S>,
        query_of: impl Fn(&str) -> Query,
        page_size: usize,
        cursor: Option<&Cursor>,
    ) -> Result<CursorPage<Stored<R>>> {
        let buckets = self.all();
        let read = format!("hash-buckets-{}", self.chars);
        let mut positions = match cursor {
            Some(cursor) => cursor.positions_for(&read, buckets.len())?.to_vec(),
            None => vec![Position::Start; buckets.len()],
        };
        let size = page_size.clamp(1, 1000);
        // Each bucket is read a little at a time (twice its share of a page) and topped
        // up when it runs dry: memory holds about two pages, not a page per bucket.
        let per_bucket = (2 * size.div_ceil(buckets.len())).clamp(2, size.max(2));
        let queries: Vec<(usize, Query)> = buckets
            .iter()
            .enumerate()
            .filter_map(|(i, bucket)| {
                Some((i, positions[i].resume(query_of(bucket))?.top(per_bucket)))
            })
            .collect();
        let first: Vec<(usize, Fetched<R>)> = futures::stream::iter(queries)
            .map(|(i, query)| async move { Ok::<_, Error>((i, fetch(table, query).await?)) })
            .buffer_unordered(FETCH_CONCURRENCY)
            .try_collect()
            .await?;
        let order = table.store().key_order();
        let mut sources: Vec<Option<Fetched<R>>> = (0..buckets.len()).map(|_| None).collect();
        let mut heap = BinaryHeap::new();
        for (i, fetched) in first {
            if let Some(head) = fetched.items.front() {
                heap.push(Head::of(order, i, head));
            } else {
                positions[i] = Position::Done;
            }
            sources[i] = Some(fetched);
        }
        let mut items = Vec::with_capacity(size);
        while items.len() < size {
            let Some(Head { source: i, .. }) = heap.pop() else {
                break;
            };
            let Some(fetched) = sources[i].as_mut() else {
                continue;
            };
            let Some(item) = fetched.items.pop_front() else {
                continue;
            };
            positions[i] = Position::After(item.partition_key.clone(), item.row_key.clone());
            if fetched.items.is_empty()
                && let Some(more) = fetched.more.take()
            {
                let query = positions[i]
                    .resume(query_of(&buckets[i]))
                    .map(|q| q.top(per_bucket).continue_from(Some(more)));
                if let Some(query) = query {
                    *fetched = fetch(table, query).await?;
                }
            }
            match fetched.items.front() {
                Some(head) => heap.push(Head::of(order, i, head)),
                None if fetched.more.is_none() => positions[i] = Position::Done,
                None => {}
            }
            items.push(item);
        }
        let cursor = positions
            .iter()
            .any(|p| *p != Position::Done)
            .then(|| Cursor::new(read, positions));
        Ok(CursorPage { items, cursor })
    }

    /// Every result of `query_of(bucket)` over every bucket, in the order of
    /// [`fan_out_page`](Self::fan_out_page), read a page of `page_size` at a time.
    pub fn fan_out_stream<'a, R: Record + Send + 'a, S: TableStore>(
        &'a self,
        table: &'a Table<R, S>,
        query_of: impl Fn(&str) -> Query + Send + Sync + 'a,
        page_size: usize,
    ) -> impl Stream<Item = Result<Stored<R>>> + Send + 'a {
        let query_of = std::sync::Arc::new(query_of);
        crate::cursor::stream_pages(move |cursor| {
            let query_of = std::sync::Arc::clone(&query_of);
            async move {
                self.fan_out_page(table, |b| query_of(b), page_size, cursor.as_ref())
                    .await
            }
        })
    }
}

/// What one query of a bucket returned, and how to read more of it.
struct Fetched<R> {
    items: VecDeque<Stored<R>>,
    more: Option<ContinuationToken>,
}

/// Reads a page of a bucket; a page left empty by the store with more to come is read on.
async fn fetch<R: Record, S: TableStore>(
    table: &Table<R, S>,
    mut query: Query,
) -> Result<Fetched<R>> {
    loop {
        let (items, more) = table.query_page(query.clone()).await?;
        if !items.is_empty() || more.is_none() {
            return Ok(Fetched {
                items: items.into(),
                more,
            });
        }
        query = query.continue_from(more);
    }
}

/// The next result of a bucket, ordered for the merge (the smallest first).
struct Head {
    order: KeyOrder,
    partition_key: String,
    row_key: String,
    source: usize,
}

impl Head {
    fn of<R>(order: KeyOrder, source: usize, item: &Stored<R>) -> Self {
        Head {
            order,
            partition_key: item.partition_key.clone(),
            row_key: item.row_key.clone(),
            source,
        }
    }
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: the heap pops its greatest, the merge wants the smallest key.
        row_key_first(
            self.order,
            (&other.partition_key, &other.row_key),
            (&self.partition_key, &self.row_key),
        )
        .then_with(|| other.source.cmp(&self.source))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}
