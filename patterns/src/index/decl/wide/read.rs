//! Reading a wide entity back, for the declared path and `WideTable` alike: chunk 0, then
//! its further chunks in one range query, taken when they are the ones chunk 0 lists and
//! read again while a writer moves them on.

use tablekit_core::{Entity, Query, TableStore, filter};

use super::split::{chunk_key, chunk_version, count_of, lists_versions, versions_of};
use crate::error::{Error, Result};

/// How many times a read of a wide entity is tried when a writer moves its chunks on
/// between the read of chunk 0 and the read of the others.
const READ_ATTEMPTS: usize = 8;

/// Chunks 1.. of the wide entity at `row_key` (one range query).
pub(crate) async fn read_chunks<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    row_key: &str,
    count: usize,
) -> Result<Vec<Entity>> {
    let start = chunk_key(row_key, 1);
    let end = chunk_key(row_key, count.saturating_sub(1).max(1));
    store
        .query_all(
            table,
            Query::with_filter(
                filter::partition_key().eq(partition_key)
                    & filter::row_key().ge(start.as_str())
                    & filter::row_key().le(end.as_str()),
            ),
        )
        .await
}

/// The chunks chunk 0 lists, in order, each at the version it lists; `None` when one of
/// them is not among `chunks` (a writer moved on, or one is missing). A chunk 0 that
/// lists no versions (a layout written before chunks were marked) takes its chunks by
/// RowKey alone.
fn listed(chunk0: &Entity, mut chunks: Vec<Entity>) -> Option<Vec<Entity>> {
    let count = count_of(chunk0);
    let marked = lists_versions(chunk0);
    let versions = versions_of(chunk0);
    if marked && versions.len() + 1 != count {
        return None;
    }
    (1..count)
        .map(|n| {
            let key = chunk_key(&chunk0.row_key, n);
            let version = versions.get(n - 1).copied();
            let at = chunks
                .iter()
                .position(|c| c.row_key == key && (!marked || chunk_version(c) == version))?;
            Some(chunks.swap_remove(at))
        })
        .collect()
}

/// Chunk 0 and the further chunks it lists (none when it is the whole entity), read
/// again while a writer moves them on; `None` when chunk 0 is deleted in between, or
/// becomes one a reader does not see (`hidden`).
///
/// # Errors
/// The store's; [`Error::Malformed`] when an unchanged chunk 0 does not match its chunks
/// (one is missing, or was changed outside tablekit); [`Error::Contention`] when writers
/// keep moving them on.
pub(crate) async fn read_listed<S: TableStore>(
    store: &S,
    table: &str,
    chunk0: Entity,
    hidden: impl Fn(&Entity) -> bool + Send,
) -> Result<Option<(Entity, Vec<Entity>)>> {
    let mut chunk0 = chunk0;
    let mut attempts = 0;
    loop {
        let count = count_of(&chunk0);
        if count <= 1 {
            return Ok(Some((chunk0, Vec::new())));
        }
        if attempts == READ_ATTEMPTS {
            return Err(moved_on(&chunk0.partition_key, &chunk0.row_key));
        }
        attempts += 1;
        let (partition_key, row_key) = (&chunk0.partition_key, &chunk0.row_key);
        let chunks = read_chunks(store, table, partition_key, row_key, count).await?;
        if let Some(chunks) = listed(&chunk0, chunks) {
            return Ok(Some((chunk0, chunks)));
        }
        match store.get(table, partition_key, row_key, None).await? {
            Some(again) if again.etag.is_some() && again.etag == chunk0.etag => {
                return Err(Error::Malformed {
                    what: format!("wide entity {partition_key}/{row_key}"),
                    reason: "its chunks are not the ones chunk 0 lists (missing, or changed outside tablekit)".to_owned(),
                });
            }
            Some(again) if hidden(&again) => return Ok(None),
            Some(again) => chunk0 = again,
            None => return Ok(None),
        }
    }
}

/// The refusal of a read whose wide entity writers kept rewriting, or deleted, while its
/// chunks were read.
pub(crate) fn moved_on(partition_key: &str, row_key: &str) -> Error {
    Error::Contention {
        what: format!(
            "read of wide entity {partition_key}/{row_key}: it was rewritten or deleted while its chunks were read"
        ),
        attempts: READ_ATTEMPTS,
    }
}

#[cfg(test)]
mod tests {
    use tablekit_core::Value;

    use super::*;
    use crate::index::decl::wide::split::{CHUNKS_PROPERTY, mark_chunk, mark_chunk0};

    fn chunk(n: usize, version: Option<i64>) -> Entity {
        let mut chunk = Entity::new("p", chunk_key("r", n));
        chunk.properties.insert(format!("f{n}"), Value::Int64(1));
        if let Some(version) = version {
            mark_chunk(&mut chunk, version);
        }
        chunk
    }

    #[test]
    fn marked_chunks_are_taken_only_at_the_versions_chunk_zero_lists() {
        let mut chunk0 = chunk(0, None);
        mark_chunk0(&mut chunk0, &[3, 5]);
        let found = listed(&chunk0, vec![chunk(2, Some(5)), chunk(1, Some(3))]).expect("listed");
        let keys: Vec<&str> = found.iter().map(|c| c.row_key.as_str()).collect();
        assert_eq!(keys, ["r~001", "r~002"]);
        assert!(listed(&chunk0, vec![chunk(1, Some(3)), chunk(2, Some(6))]).is_none());
        assert!(listed(&chunk0, vec![chunk(1, Some(3))]).is_none());
    }

    #[test]
    fn unmarked_chunks_of_a_chunk_zero_listing_no_versions_are_taken_by_row_key() {
        let mut chunk0 = chunk(0, None);
        chunk0
            .properties
            .insert(CHUNKS_PROPERTY.to_owned(), Value::Int32(3));
        let found = listed(&chunk0, vec![chunk(2, None), chunk(1, None)]).expect("listed");
        assert_eq!(found.len(), 2);
        assert!(
            listed(&chunk0, vec![chunk(1, None)]).is_none(),
            "one missing"
        );
    }
}
