//! The wide declaration's steps on the write path and the read path.

use tablekit_core::{Entity, IfMatch, Query, TableStore, Value, WriteOp, filter};

use super::split::{
    CHUNK_OF_PROPERTY, CHUNK_VERSIONS_PROPERTY, CHUNKS_PROPERTY, chunk_key, chunk_version,
    count_of, merge, same_properties, split, versions_of,
};
use crate::error::{Error, Result};
use crate::index::write::declaration::{
    Attempt, ReadSteps, Request, Restoring, Role, Step, WriteSteps, Writer, nothing,
};

/// How many times a read of a wide primary is tried when a writer moves its chunks on
/// between the read of chunk 0 and the read of the others.
const READ_ATTEMPTS: usize = 8;

/// Wide primaries: cut into chunks by the last step of a write, put back together on
/// reads.
pub(crate) struct Wide;

impl<S: TableStore + Clone + 'static> WriteSteps<S> for Wide {
    fn complete(&self, writer: &Writer<S>, request: &mut Request) -> Result<()> {
        let Some(most) = writer.layout.wide else {
            return Ok(());
        };
        let Some(entity) = &request.entity else {
            return Ok(());
        };
        if request.source.row_key.contains('~') {
            return Err(Error::Unsupported(format!(
                "the RowKey of a wide entity cannot hold `~` (`{}`): its chunks use it",
                request.source.row_key
            )));
        }
        let (_, rest) = split(entity, &writer.layout.kind_property);
        let chunks = rest.len() + 1;
        if chunks > most {
            return Err(Error::Unsupported(format!(
                "{} needs {chunks} chunks, more than the {most} its type allows",
                request.source
            )));
        }
        if chunks > 1
            && let Some(index) = writer
                .layout
                .indexes
                .iter()
                .find(|i| i.properties.is_none())
        {
            return Err(Error::Unsupported(format!(
                "{} needs {chunks} chunks, and index `{}` copies whole entities: name the properties its copies carry",
                request.source, index.name
            )));
        }
        Ok(())
    }

    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        let old_count = attempt.old.map_or(1, count_of);
        if attempt.writer.layout.wide.is_none() && old_count <= 1 {
            return nothing();
        }
        Box::pin(plan(attempt, old_count))
    }
}

/// Splits the planned primary (op 0) into chunks, writes the chunks that changed and
/// deletes those no longer needed.
async fn plan<S: TableStore + Clone + 'static>(
    attempt: &mut Attempt<'_, S>,
    old_count: usize,
) -> Result<()> {
    let writer = attempt.writer;
    let source = attempt.source;
    let old_chunks = if old_count > 1 {
        read_chunks(
            writer.store(),
            source.table.as_str(),
            &source.partition_key,
            &source.row_key,
            old_count,
        )
        .await?
    } else {
        Vec::new()
    };
    let old_versions = attempt.old.map(versions_of).unwrap_or_default();
    let old_at = |n: usize| {
        let key = chunk_key(&source.row_key, n);
        old_chunks.iter().find(|c| c.row_key == key)
    };
    let mut writes = Vec::new();
    let mut new_count = 1;
    let wide = writer.layout.wide.is_some() && attempt.entity.is_some();
    if wide
        && let Some(WriteOp::Insert(primary) | WriteOp::Replace(primary, _)) =
            attempt.plan.operation_mut(0)
    {
        let (mut chunk0, rest) = split(primary, &writer.layout.kind_property);
        new_count = rest.len() + 1;
        let mut versions = Vec::with_capacity(rest.len());
        for (i, mut chunk) in rest.into_iter().enumerate() {
            let n = i + 1;
            // A chunk stored as chunk 0 lists it, with the same properties, stays.
            let kept = old_at(n)
                .filter(|old| same_properties(old, &chunk))
                .and_then(chunk_version)
                .filter(|v| old_versions.get(i) == Some(v));
            match kept {
                Some(version) => versions.push(version),
                None => {
                    chunk
                        .properties
                        .insert(CHUNK_OF_PROPERTY.to_owned(), Value::Int64(attempt.version));
                    versions.push(attempt.version);
                    writes.push(WriteOp::InsertOrReplace(chunk));
                }
            }
        }
        if new_count > 1 {
            let count = i32::try_from(new_count).unwrap_or(i32::MAX);
            chunk0
                .properties
                .insert(CHUNKS_PROPERTY.to_owned(), Value::Int32(count));
            let list: Vec<String> = versions.iter().map(i64::to_string).collect();
            chunk0.properties.insert(
                CHUNK_VERSIONS_PROPERTY.to_owned(),
                Value::String(list.join(",")),
            );
        }
        *primary = chunk0;
    }
    for n in new_count..old_count {
        if let Some(old) = old_at(n) {
            writes.push(WriteOp::Delete {
                partition_key: source.partition_key.clone(),
                row_key: old.row_key.clone(),
                if_match: old.etag.clone().map_or(IfMatch::Any, IfMatch::ETag),
            });
        }
    }
    for write in writes {
        attempt.plan.push(write, Role::Chunk);
    }
    Ok(())
}

/// Chunks 1.. of the primary at `row_key` (one range query).
async fn read_chunks<S: TableStore>(
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
/// them is not among `chunks` (a writer moved on, or one is missing).
fn listed(chunk0: &Entity, mut chunks: Vec<Entity>) -> Option<Vec<Entity>> {
    let versions = versions_of(chunk0);
    if versions.len() + 1 != count_of(chunk0) {
        return None;
    }
    versions
        .iter()
        .enumerate()
        .map(|(i, version)| {
            let key = chunk_key(&chunk0.row_key, i + 1);
            let at = chunks
                .iter()
                .position(|c| c.row_key == key && chunk_version(c) == Some(*version))?;
            Some(chunks.swap_remove(at))
        })
        .collect()
}

/// A wide primary with its chunks, read again while a writer moves them on.
async fn restore<S: TableStore + Clone + 'static>(
    writer: &Writer<S>,
    stored: Entity,
) -> Result<Entity> {
    let mut chunk0 = stored;
    for _ in 0..READ_ATTEMPTS {
        let count = count_of(&chunk0);
        let chunks = read_chunks(
            writer.store(),
            &writer.table,
            &chunk0.partition_key,
            &chunk0.row_key,
            count,
        )
        .await?;
        if let Some(chunks) = listed(&chunk0, chunks) {
            return Ok(merge(chunk0, chunks));
        }
        let again = writer
            .store()
            .get(&writer.table, &chunk0.partition_key, &chunk0.row_key, None)
            .await?;
        match again {
            // Unchanged, and still not matching its chunks: one is missing or was
            // changed outside tablekit.
            Some(again) if again.etag.is_some() && again.etag == chunk0.etag => {
                return Err(Error::Malformed {
                    what: format!("wide entity {}/{}", chunk0.partition_key, chunk0.row_key),
                    reason: "its chunks are not the ones chunk 0 lists (missing, or changed outside tablekit)".to_owned(),
                });
            }
            Some(again) if writer.hidden(&again) => break,
            Some(again) if count_of(&again) > 1 => chunk0 = again,
            Some(again) => return Ok(merge(again, Vec::new())),
            None => break,
        }
    }
    Err(Error::Contention {
        what: format!(
            "read of wide entity {}/{}: it was rewritten or deleted while its chunks were read",
            chunk0.partition_key, chunk0.row_key
        ),
        attempts: READ_ATTEMPTS,
    })
}

impl<S: TableStore + Clone + 'static> ReadSteps<S> for Wide {
    fn hides(&self, _writer: &Writer<S>, stored: &Entity) -> bool {
        stored.properties.contains_key(CHUNK_OF_PROPERTY)
    }

    fn restore<'a>(&'a self, writer: &'a Writer<S>, stored: Entity) -> Restoring<'a> {
        if count_of(&stored) > 1 {
            Box::pin(restore(writer, stored))
        } else if stored.properties.contains_key(CHUNKS_PROPERTY) {
            Box::pin(std::future::ready(Ok(merge(stored, Vec::new()))))
        } else {
            Box::pin(std::future::ready(Ok(stored)))
        }
    }
}
