//! Copies of a primary (secondary index entries): how one is made from its primary, read
//! back as the primary, and compared.

use tablekit_core::typed::EXPIRES_PROPERTY;
use tablekit_core::{Entity, Value};

use super::{EntityRef, SOURCE_PROPERTY, VERSION_PROPERTY, is_hidden, version_of};
use crate::error::Result;

/// The primary a copy was made from, and its version.
pub fn copy_source(entity: &Entity) -> Option<(EntityRef, i64)> {
    let Some(Value::String(json)) = entity.properties.get(SOURCE_PROPERTY) else {
        return None;
    };
    let source = serde_json::from_str(json).ok()?;
    Some((source, version_of(entity)?))
}

/// The copy of a primary for an index: the primary's application properties (or the
/// declared subset), its kind marked `<kind>#<index>`, its source and version.
pub fn copy_of(
    primary: &Entity,
    source: &EntityRef,
    version: i64,
    index: &str,
    at: &EntityRef,
    properties: Option<&[String]>,
    kind_property: &str,
) -> Result<Entity> {
    let mut copy = Entity::new(at.partition_key.clone(), at.row_key.clone());
    for (name, value) in &primary.properties {
        if is_hidden(name) {
            continue;
        }
        let keep = name == kind_property
            || name == EXPIRES_PROPERTY
            || properties.is_none_or(|subset| subset.iter().any(|p| p == name));
        if !keep {
            continue;
        }
        let value = match value {
            Value::String(kind) if name == kind_property => {
                Value::String(format!("{kind}#{index}"))
            }
            other => other.clone(),
        };
        copy.properties.insert(name.clone(), value);
    }
    copy.properties.insert(
        SOURCE_PROPERTY.to_owned(),
        Value::String(crate::error::json("a copy's source", source)?),
    );
    copy.properties
        .insert(VERSION_PROPERTY.to_owned(), Value::Int64(version));
    Ok(copy)
}

/// A copy as its primary's entity type reads it: the kind marker undone, tablekit's
/// properties removed.
pub fn as_primary(mut copy: Entity, kind_property: &str) -> Entity {
    if let Some(Value::String(kind)) = copy.properties.get_mut(kind_property)
        && let Some(at) = kind.rfind('#')
    {
        kind.truncate(at);
    }
    copy.properties.retain(|name, _| !is_hidden(name));
    copy
}

/// Whether two entities hold the same application properties (copies are compared with
/// what they should be; timestamps and ETags are ignored).
pub fn same_content(a: &Entity, b: &Entity) -> bool {
    a.partition_key == b.partition_key
        && a.row_key == b.row_key
        && a.properties.len() == b.properties.len()
        && a.properties
            .iter()
            .all(|(name, value)| b.properties.get(name) == Some(value))
}
