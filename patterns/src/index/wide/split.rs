//! How a wide primary is cut into chunks and put back together.

use tablekit_core::limits;
use tablekit_core::typed::{EXPIRES_PROPERTY, FIELDS_PER_CHUNK};
use tablekit_core::{Entity, Value};

/// The property of chunk 0 holding the number of chunks.
pub const CHUNKS_PROPERTY: &str = "TablekitChunks";
/// The property of chunk 0 listing the version each further chunk was last written at
/// (`"3,3,7"`).
pub const CHUNK_VERSIONS_PROPERTY: &str = "TablekitChunkVersions";
/// The property of a further chunk holding the version it was written at; it marks the
/// row as a chunk.
pub const CHUNK_OF_PROPERTY: &str = "TablekitChunkOf";

/// The most bytes of properties one chunk holds (under the 1 MiB entity limit).
const BYTES_PER_CHUNK: usize = 900 * 1024;

/// The table service's properties per entity.
const PROPERTIES_PER_ENTITY: usize = 252;

/// The RowKey of chunk `n` of the primary at `row_key`.
pub fn chunk_key(row_key: &str, n: usize) -> String {
    if n == 0 {
        row_key.to_owned()
    } else {
        format!("{row_key}~{n:03}")
    }
}

/// The chunk a chunk row is, and its primary's RowKey.
pub(crate) fn chunk_of(row_key: &str) -> Option<(&str, usize)> {
    let (base, n) = row_key.rsplit_once('~')?;
    let n: usize = n.parse().ok()?;
    (n > 0).then_some((base, n))
}

/// Whether a property stays in chunk 0: tablekit's own, the kind and version.
fn stays(name: &str, kind_property: &str) -> bool {
    name.starts_with("Tablekit")
        || name == EXPIRES_PROPERTY
        || name == kind_property
        || name == tablekit_core::typed::DEFAULT_VERSION_PROPERTY
}

/// The number of chunks chunk 0 records (1 when it records none).
pub(crate) fn count_of(chunk0: &Entity) -> usize {
    match chunk0.properties.get(CHUNKS_PROPERTY) {
        Some(Value::Int32(n)) => usize::try_from(*n).unwrap_or(1).clamp(1, 100),
        _ => 1,
    }
}

/// The versions chunk 0 lists for chunks 1.. (empty when it lists none).
pub(crate) fn versions_of(chunk0: &Entity) -> Vec<i64> {
    match chunk0.properties.get(CHUNK_VERSIONS_PROPERTY) {
        Some(Value::String(list)) => list
            .split(',')
            .filter_map(|v| v.parse::<i64>().ok())
            .collect(),
        _ => Vec::new(),
    }
}

/// The version a further chunk was written at.
pub(crate) fn chunk_version(chunk: &Entity) -> Option<i64> {
    match chunk.properties.get(CHUNK_OF_PROPERTY) {
        Some(Value::Int64(v)) => Some(*v),
        _ => None,
    }
}

/// Cuts a primary (as the write path planned it, with its record) into chunk 0 and the
/// further chunks' properties, in name order: chunk 0 keeps tablekit's properties and as
/// many of the application's as fit beside them; each further chunk takes up to 250 and
/// 900 KiB.
pub(crate) fn split(primary: &Entity, kind_property: &str) -> (Entity, Vec<Entity>) {
    let mut chunk0 = Entity::new(primary.partition_key.clone(), primary.row_key.clone());
    chunk0.etag = primary.etag.clone();
    let mut rest: Vec<(&String, &Value)> = Vec::new();
    for (name, value) in &primary.properties {
        if stays(name, kind_property) {
            chunk0.properties.insert(name.clone(), value.clone());
        } else {
            rest.push((name, value));
        }
    }
    rest.sort_by(|a, b| a.0.cmp(b.0));
    // Room for the chunk count and the versions beside tablekit's own.
    let first_room = PROPERTIES_PER_ENTITY.saturating_sub(chunk0.properties.len() + 2);
    let mut chunks: Vec<Entity> = Vec::new();
    for (name, value) in rest {
        let (current, room) = match chunks.last() {
            None => (&chunk0, user_count(&chunk0, kind_property) < first_room),
            Some(chunk) => (chunk, chunk.properties.len() < FIELDS_PER_CHUNK),
        };
        let fits = room
            && limits::entity_size(current) + name.len() * 2 + limits::value_size(value)
                < BYTES_PER_CHUNK;
        if !fits {
            let n = chunks.len() + 1;
            chunks.push(Entity::new(
                primary.partition_key.clone(),
                chunk_key(&primary.row_key, n),
            ));
        }
        let target = match chunks.last_mut() {
            Some(chunk) => chunk,
            None => &mut chunk0,
        };
        target.properties.insert(name.clone(), value.clone());
    }
    (chunk0, chunks)
}

fn user_count(entity: &Entity, kind_property: &str) -> usize {
    entity
        .properties
        .keys()
        .filter(|n| !stays(n, kind_property))
        .count()
}

/// Whether two chunks hold the same application properties.
pub(crate) fn same_properties(a: &Entity, b: &Entity) -> bool {
    let user = |e: &Entity| {
        e.properties
            .iter()
            .filter(|(n, _)| n.as_str() != CHUNK_OF_PROPERTY)
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    user(a) == user(b)
}

/// Puts chunk 0 and its further chunks back into the primary.
pub(crate) fn merge(mut chunk0: Entity, chunks: Vec<Entity>) -> Entity {
    chunk0.properties.shift_remove(CHUNKS_PROPERTY);
    chunk0.properties.shift_remove(CHUNK_VERSIONS_PROPERTY);
    for chunk in chunks {
        for (name, value) in chunk.properties {
            if name != CHUNK_OF_PROPERTY {
                chunk0.properties.insert(name, value);
            }
        }
    }
    chunk0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wide(n: usize) -> Entity {
        let mut e = Entity::new("p", "r");
        e.properties
            .insert("EntityKind".to_owned(), Value::String("K".to_owned()));
        e.properties
            .insert("TablekitTargets".to_owned(), Value::String("[]".to_owned()));
        for i in 0..n {
            e.properties
                .insert(format!("f{i:04}"), Value::Int64(i as i64));
        }
        e
    }

    #[test]
    fn a_primary_that_fits_stays_whole_and_a_wide_one_is_cut_within_limits() {
        let (first, rest) = split(&wide(200), "EntityKind");
        assert!(rest.is_empty());
        assert_eq!(first.properties.len(), 202);
        let (first, rest) = split(&wide(1000), "EntityKind");
        assert!(
            first.properties.len() + 2 <= 252,
            "{}",
            first.properties.len()
        );
        assert!(rest.iter().all(|c| c.properties.len() < 252));
        assert_eq!(rest[0].row_key, "r~001");
        let total: usize = user_count(&first, "EntityKind")
            + rest.iter().map(|c| c.properties.len()).sum::<usize>();
        assert_eq!(total, 1000);
        let back = merge(first, rest);
        assert_eq!(back.properties.len(), 1002);
    }

    #[test]
    fn chunk_rows_name_their_primary() {
        assert_eq!(chunk_of("day~002"), Some(("day", 2)));
        assert_eq!(chunk_of("day"), None);
        assert_eq!(chunk_of("a~b"), None);
    }
}
