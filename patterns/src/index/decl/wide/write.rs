//! The wide declaration's steps on the write path and the read path.

use tablekit_core::{Entity, IfMatch, TableStore, WriteOp};

use super::read::{moved_on, read_chunks, read_listed};
use super::split::{
    CHUNK_OF_PROPERTY, CHUNKS_PROPERTY, FirstChunk, chunk_key, chunk_version, count_of, mark_chunk,
    mark_chunk0, merge, same_properties, split, versions_of,
};
use crate::error::{Error, Result};
use crate::index::write::declaration::{
    Attempt, ReadSteps, Request, Restoring, Role, Step, WriteSteps, Writer, nothing,
};

/// Wide primaries: cut into chunks by the last step of a write, put back together on
/// reads.
pub(crate) struct Wide;

/// The attribute that declares it.
pub(crate) const ATTRIBUTE: &str = "wide";

impl<S: TableStore + Clone + 'static> WriteSteps<S> for Wide {
    fn complete(&self, writer: &Writer<S>, request: &mut Request) -> Result<()> {
        let Some(most) = writer.layout.wide() else {
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
        let (_, rest) = split(entity, first_chunk(writer));
        let chunks = rest.len() + 1;
        if chunks > most {
            return Err(Error::Unsupported(format!(
                "{} needs {chunks} chunks, more than the {most} its type allows",
                request.source
            )));
        }
        if chunks > 1
            && let Some(copier) = writer.layout.declared.iter().find(|d| {
                crate::index::record::lays_out(&d.attribute).is_ok_and(|l| l.copies_whole(d))
            })
        {
            return Err(Error::Unsupported(format!(
                "{} needs {chunks} chunks, and {} `{}` copies whole entities: name the properties its copies carry",
                request.source, copier.attribute, copier.name
            )));
        }
        Ok(())
    }

    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        let old_count = attempt.old.map_or(1, count_of);
        if attempt.writer.layout.wide().is_none() && old_count <= 1 {
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
    let wide = writer.layout.wide().is_some() && attempt.entity.is_some();
    if wide
        && let Some(WriteOp::Insert(primary) | WriteOp::Replace(primary, _)) =
            attempt.plan.operation_mut(0)
    {
        let (mut chunk0, rest) = split(primary, first_chunk(writer));
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
                    mark_chunk(&mut chunk, attempt.version);
                    versions.push(attempt.version);
                    writes.push(WriteOp::InsertOrReplace(chunk));
                }
            }
        }
        mark_chunk0(&mut chunk0, &versions);
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
        attempt.plan.push(write, Role::of(ATTRIBUTE));
    }
    Ok(())
}

/// What a typed primary keeps in chunk 0.
fn first_chunk<S>(writer: &Writer<S>) -> FirstChunk<'_> {
    FirstChunk::Typed {
        kind_property: &writer.layout.kind_property,
    }
}

/// A wide primary with its chunks, read again while a writer moves them on.
async fn restore<S: TableStore + Clone + 'static>(
    writer: &Writer<S>,
    stored: Entity,
) -> Result<Entity> {
    let moved = moved_on(&stored.partition_key, &stored.row_key);
    match read_listed(writer.store(), &writer.table, stored, |e| writer.hidden(e)).await? {
        Some((chunk0, chunks)) => Ok(merge(chunk0, chunks)),
        None => Err(moved),
    }
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
