//! The one chunk layout of wide entities, for the declared `#[wide]` path and the untyped
//! [`WideTable`](crate::wide::WideTable) alike: how an entity is cut into chunks, how
//! the chunks are marked, and how they are put back together.
//!
//! Chunk 0 sits at the entity's RowKey and, when there is more than one chunk, records
//! their number ([`CHUNKS_PROPERTY`]) and the version each further chunk was written at
//! ([`CHUNK_VERSIONS_PROPERTY`]); chunk `n` sits at `<RowKey>~<n:03>` and records its
//! own version ([`CHUNK_OF_PROPERTY`]). A chunk 0 that records a count but no versions
//! (written by `WideTable` before chunks were marked) is read by RowKeys alone.

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

/// The properties chunk 0 keeps room for beside the entity's: the count and the versions.
const CHUNK_ZERO_MARKERS: [&str; 2] = [CHUNKS_PROPERTY, CHUNK_VERSIONS_PROPERTY];

/// The most chunks a chunk 0 is believed to record (one entity group transaction).
const MOST_CHUNKS: usize = limits::MAX_BATCH_OPERATIONS;

/// The RowKey of chunk `n` of the wide entity at `row_key`.
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

/// Whether a property is one of the chunk layout's markers.
pub(crate) fn is_marker(name: &str) -> bool {
    CHUNK_ZERO_MARKERS.contains(&name) || name == CHUNK_OF_PROPERTY
}

/// What a cut keeps in chunk 0 before any of the application's properties.
#[derive(Clone, Copy, Debug)]
pub(crate) enum FirstChunk<'a> {
    /// A typed primary's: tablekit's own properties, its kind, type version and expiry.
    Typed {
        /// The property naming the entity's kind.
        kind_property: &'a str,
    },
    /// An untyped wide entity's: every property is the application's.
    Untyped,
}

impl FirstChunk<'_> {
    /// Whether `name` stays in chunk 0 whatever the room.
    fn keeps(self, name: &str) -> bool {
        match self {
            FirstChunk::Typed { kind_property } => {
                name.starts_with("Tablekit")
                    || name == EXPIRES_PROPERTY
                    || name == kind_property
                    || name == tablekit_core::typed::DEFAULT_VERSION_PROPERTY
            }
            FirstChunk::Untyped => false,
        }
    }
}

/// Whether chunk `n` (stored, or being cut) has room for one more application property:
/// chunk 0 holds 252 properties less the markers' room and what it keeps, each further
/// chunk 250, and every chunk under 900 KiB.
pub(crate) fn has_room(
    chunk: &Entity,
    n: usize,
    first: FirstChunk<'_>,
    name: &str,
    value: &Value,
) -> bool {
    let (held, most) =
        if n == 0 {
            let (kept, held) = chunk.properties.keys().filter(|k| !is_marker(k)).fold(
                (0, 0),
                |(kept, held), k| {
                    if first.keeps(k) {
                        (kept + 1, held)
                    } else {
                        (kept, held + 1)
                    }
                },
            );
            let most = PROPERTIES_PER_ENTITY.saturating_sub(kept + CHUNK_ZERO_MARKERS.len());
            (held, most)
        } else {
            let held = chunk.properties.keys().filter(|k| !is_marker(k)).count();
            (held, FIELDS_PER_CHUNK)
        };
    held < most
        && limits::entity_size(chunk) + name.len() * 2 + limits::value_size(value) < BYTES_PER_CHUNK
}

/// The number of chunks chunk 0 records (1 when it records none).
pub(crate) fn count_of(chunk0: &Entity) -> usize {
    match chunk0.properties.get(CHUNKS_PROPERTY) {
        Some(Value::Int32(n)) => usize::try_from(*n).unwrap_or(1).clamp(1, MOST_CHUNKS),
        _ => 1,
    }
}

/// Whether chunk 0 lists its chunks' versions (a layout written before chunks were marked
/// lists none, and neither does a single chunk).
pub(crate) fn lists_versions(chunk0: &Entity) -> bool {
    chunk0.properties.contains_key(CHUNK_VERSIONS_PROPERTY)
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

/// Records in chunk 0 the number of chunks and the version of each further one (nothing
/// when there is no further one).
pub(crate) fn mark_chunk0(chunk0: &mut Entity, versions: &[i64]) {
    if versions.is_empty() {
        return;
    }
    let count = i32::try_from(versions.len() + 1).unwrap_or(i32::MAX);
    chunk0
        .properties
        .insert(CHUNKS_PROPERTY.to_owned(), Value::Int32(count));
    let list: Vec<String> = versions.iter().map(i64::to_string).collect();
    chunk0.properties.insert(
        CHUNK_VERSIONS_PROPERTY.to_owned(),
        Value::String(list.join(",")),
    );
}

/// Records in a further chunk the version it is written at.
pub(crate) fn mark_chunk(chunk: &mut Entity, version: i64) {
    chunk
        .properties
        .insert(CHUNK_OF_PROPERTY.to_owned(), Value::Int64(version));
}

/// Cuts an entity (a typed primary as the write path planned it, with its record, or an
/// untyped wide entity) into chunk 0 and the further chunks, unmarked, in name order:
/// chunk 0 keeps what `first` keeps and as many of the application's properties as fit
/// beside them; each further chunk takes up to 250 and 900 KiB. Markers the entity
/// carries are dropped: the caller marks the cut.
pub(crate) fn split(entity: &Entity, first: FirstChunk<'_>) -> (Entity, Vec<Entity>) {
    let mut chunk0 = Entity::new(entity.partition_key.clone(), entity.row_key.clone());
    chunk0.etag = entity.etag.clone();
    let mut rest: Vec<(&String, &Value)> = Vec::new();
    for (name, value) in &entity.properties {
        if is_marker(name) {
            continue;
        }
        if first.keeps(name) {
            chunk0.properties.insert(name.clone(), value.clone());
        } else {
            rest.push((name, value));
        }
    }
    rest.sort_by(|a, b| a.0.cmp(b.0));
    let mut chunks: Vec<Entity> = Vec::new();
    for (name, value) in rest {
        let fits = match chunks.last() {
            None => has_room(&chunk0, 0, first, name, value),
            Some(chunk) => has_room(chunk, chunks.len(), first, name, value),
        };
        if !fits {
            let n = chunks.len() + 1;
            chunks.push(Entity::new(
                entity.partition_key.clone(),
                chunk_key(&entity.row_key, n),
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
        let typed = FirstChunk::Typed {
            kind_property: "EntityKind",
        };
        let (first, rest) = split(&wide(200), typed);
        assert!(rest.is_empty());
        assert_eq!(first.properties.len(), 202);
        let (first, rest) = split(&wide(1000), typed);
        assert!(
            first.properties.len() + 2 <= 252,
            "{}",
            first.properties.len()
        );
        assert!(rest.iter().all(|c| c.properties.len() < 252));
        assert_eq!(rest[0].row_key, "r~001");
        let total: usize =
            first.properties.len() - 2 + rest.iter().map(|c| c.properties.len()).sum::<usize>();
        assert_eq!(total, 1000);
        let back = merge(first, rest);
        assert_eq!(back.properties.len(), 1002);
    }

    #[test]
    fn an_untyped_entity_fills_each_chunk_with_250_properties_in_name_order() {
        let mut entity = Entity::new("p", "r");
        for day in (1..=365).rev() {
            entity
                .properties
                .insert(format!("d{day:03}"), Value::Int64(day));
        }
        let (mut first, mut rest) = split(&entity, FirstChunk::Untyped);
        assert_eq!(first.properties.len(), 250);
        assert!(first.properties.contains_key("d250"));
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].row_key, "r~001");
        assert_eq!(rest[0].properties.len(), 115);
        assert!(rest[0].properties.contains_key("d251"));
        // Marked as stored, chunk 0 is full and a further chunk has room for 135 more.
        mark_chunk0(&mut first, &[7]);
        mark_chunk(&mut rest[0], 7);
        assert_eq!(count_of(&first), 2);
        assert_eq!(versions_of(&first), vec![7]);
        assert_eq!(chunk_version(&rest[0]), Some(7));
        let one = Value::Int64(1);
        assert!(!has_room(&first, 0, FirstChunk::Untyped, "x", &one));
        assert!(has_room(&rest[0], 1, FirstChunk::Untyped, "x", &one));
        let back = merge(first, rest);
        assert_eq!(back.properties.len(), 365);
        assert!(!back.properties.keys().any(|k| is_marker(k)));
    }

    #[test]
    fn a_cut_drops_the_markers_the_entity_carries() {
        let mut entity = wide(10);
        entity
            .properties
            .insert(CHUNKS_PROPERTY.to_owned(), Value::Int32(3));
        let (first, rest) = split(&entity, FirstChunk::Untyped);
        assert!(rest.is_empty());
        assert_eq!(count_of(&first), 1);
        assert_eq!(first.properties.len(), 12);
    }

    #[test]
    fn chunk_rows_name_their_primary() {
        assert_eq!(chunk_of("day~002"), Some(("day", 2)));
        assert_eq!(chunk_of("day"), None);
        assert_eq!(chunk_of("a~b"), None);
    }
}
