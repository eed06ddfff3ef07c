//! One cursor for reads that span several queries (the buckets of a hash-bucketed read,
//! the tables of a time range): a [`CursorPage`] holds at most a page of results in key
//! order and a [`Cursor`], an opaque token that resumes the read exactly after the last
//! result — in this process or another. A cursor records, for each source of the read,
//! the key of the last result it gave (or that it has none left); resuming queries each
//! source again from just after that key, so a cursor holds no results and a page costs
//! at most one page of results per source in memory.

use serde::{Deserialize, Serialize};
use tablekit_core::filter;
use tablekit_core::{Entity, ErrorKind, KeyOrder, Query, TableStore};

use crate::error::{Error, Result};

/// Where one source of a read stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Position {
    /// Nothing read yet.
    Start,
    /// Resume after this key (PartitionKey, RowKey).
    After(String, String),
    /// Nothing left.
    Done,
}

impl Position {
    /// The source's query from this position on (`None` when it has nothing left).
    pub(crate) fn resume(&self, query: Query) -> Option<Query> {
        match self {
            Position::Start => Some(query),
            Position::Done => None,
            Position::After(pk, rk) => {
                // Within one partition a RowKey bound, which the store turns into a key
                // range; across partitions the general "after this key".
                let after = if query.key_range().partition() == Some(pk.as_str()) {
                    filter::row_key().gt(rk.as_str())
                } else {
                    filter::partition_key().gt(pk.as_str())
                        | (filter::partition_key().eq(pk.as_str())
                            & filter::row_key().gt(rk.as_str()))
                };
                let filter = match query.filter.clone() {
                    Some(f) => f.and(after),
                    None => after,
                };
                Some(Query {
                    filter: Some(filter),
                    continuation: None,
                    ..query
                })
            }
        }
    }
}

/// Where a read that spans several queries stands: an opaque token (`to_string`, and
/// back with `parse`), valid for the same read (same sources, same queries) in any
/// process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// What read this is (the kind of read and its number of sources), checked on resume.
    read: String,
    positions: Vec<Position>,
}

impl Cursor {
    pub(crate) fn new(read: String, positions: Vec<Position>) -> Self {
        Cursor { read, positions }
    }

    /// The positions of the read `read` with `sources` sources.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a cursor of another read.
    pub(crate) fn positions_for(&self, read: &str, sources: usize) -> Result<&[Position]> {
        if self.read != read || self.positions.len() != sources {
            return Err(Error::Unsupported(format!(
                "this cursor resumes `{}` over {} sources, not `{read}` over {sources}",
                self.read,
                self.positions.len()
            )));
        }
        Ok(&self.positions)
    }

    /// Reads a cursor from its token.
    ///
    /// # Errors
    /// [`Error::Malformed`] when the token is not a cursor.
    pub fn parse(token: &str) -> Result<Self> {
        let bytes =
            hex_decode(token).ok_or_else(|| Error::malformed("cursor", "not a cursor token"))?;
        serde_json::from_slice(&bytes).map_err(|e| Error::malformed("cursor", e))
    }
}

impl std::fmt::Display for Cursor {
    /// The token: URL- and header-safe text.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let json = serde_json::to_vec(self).map_err(|_| std::fmt::Error)?;
        for byte in json {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect()
}

/// A page of a read that spans several queries, and where to resume it.
#[derive(Clone, Debug, PartialEq)]
pub struct CursorPage<T> {
    /// At most a page of results, in the read's key order.
    pub items: Vec<T>,
    /// Resumes the read after the last item; `None` when the read is complete.
    pub cursor: Option<Cursor>,
}

/// Reads at most `size` (1 ..= 1000) entities of one query of `table` from `position`:
/// the entities and the position after them. A missing table reads as empty.
///
/// # Errors
/// The store's errors.
pub(crate) async fn read_from<S: TableStore>(
    store: &S,
    table: &str,
    query: Query,
    position: &Position,
    size: usize,
) -> Result<(Vec<Entity>, Position)> {
    let mut out = Vec::new();
    let mut position = position.clone();
    let mut next = position.resume(query);
    while let Some(page_query) = next.take() {
        let wanted = size.clamp(1, 1000) - out.len();
        if wanted == 0 {
            break;
        }
        let page = match store.query(table, &page_query.clone().top(wanted)).await {
            Ok(page) => page,
            Err(e) if e.kind() == ErrorKind::TableNotFound => Default::default(),
            Err(e) => return Err(e),
        };
        if let Some(last) = page.entities.last() {
            position = Position::After(last.partition_key.clone(), last.row_key.clone());
        }
        out.extend(page.entities);
        match page.continuation {
            Some(token) => next = Some(page_query.continue_from(Some(token))),
            None => position = Position::Done,
        }
    }
    Ok((out, position))
}

/// The items of a paged read as a stream: `page(cursor)` reads the page after `cursor`
/// (the first for `None`); the stream reads the next page when it runs dry.
pub(crate) fn stream_pages<'a, T, F, Fut>(
    page: F,
) -> impl futures::Stream<Item = Result<T>> + Send + 'a
where
    T: Send + 'a,
    F: Fn(Option<Cursor>) -> Fut + Send + 'a,
    Fut: Future<Output = Result<CursorPage<T>>> + Send + 'a,
{
    use futures::TryStreamExt;
    futures::stream::try_unfold((Some(None), page), |(state, page)| async move {
        let Some(cursor) = state else {
            return Ok::<_, Error>(None);
        };
        let next = page(cursor).await?;
        let items = futures::stream::iter(next.items.into_iter().map(Ok));
        Ok(Some((items, (next.cursor.map(Some), page))))
    })
    .try_flatten()
}

/// Every item of a paged read, collected: `page(cursor)` as for [`stream_pages`].
pub(crate) async fn collect_pages<T, F, Fut>(page: F) -> Result<Vec<T>>
where
    F: Fn(Option<Cursor>) -> Fut,
    Fut: Future<Output = Result<CursorPage<T>>>,
{
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let next = page(cursor).await?;
        all.extend(next.items);
        match next.cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(all),
        }
    }
}

/// Compares two keys (PartitionKey, RowKey) as a merged read orders them: by RowKey, then
/// PartitionKey (a hash-bucketed key's natural order), in the store's key order.
pub(crate) fn row_key_first(
    order: KeyOrder,
    a: (&str, &str),
    b: (&str, &str),
) -> std::cmp::Ordering {
    order
        .compare(a.1, b.1)
        .then_with(|| order.compare(a.0, b.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_through_its_token_and_refuses_other_reads() {
        let cursor = Cursor::new(
            "buckets".into(),
            vec![
                Position::Start,
                Position::After("0a".into(), "k'1".into()),
                Position::Done,
            ],
        );
        let token = cursor.to_string();
        assert!(token.chars().all(|c| c.is_ascii_hexdigit()));
        let back = Cursor::parse(&token).expect("parses");
        assert_eq!(back, cursor);
        assert!(back.positions_for("buckets", 3).is_ok());
        assert!(back.positions_for("buckets", 4).is_err());
        assert!(back.positions_for("periods", 3).is_err());
        assert!(Cursor::parse("zz").is_err());
        assert!(Cursor::parse("7b").is_err());
    }
}
