//! Denormalisation links: an entity that holds a copy of another entity's property (the
//! dependent, such as a department holding its manager's name) is named by a link entity
//! in the partition of the entity the value comes from (the source, the manager), RowKey
//! `~dep~<source RowKey>~<dependent table>~<dependent keys>~<property>`. A write of the
//! source reads its links and brings every dependent up to date: in the same entity group
//! transaction when the dependent shares the source's partition, through the worker
//! otherwise.

mod apply;
mod audit;
pub(crate) mod layout;
pub(crate) mod record;
pub(crate) mod write;

use tablekit_core::{ETag, Entity, ErrorKind, Query, TableStore, Value, filter};

use crate::error::{Error, Result};
use crate::index::record::{EntityRef, MARKER_PROPERTY};

/// The marker of a link entity.
pub const LINK_KIND: &str = "TablekitLink";
const DEPENDENT_PROPERTY: &str = "Dependent";
const SOURCE_PROPERTY: &str = "Source";
const PROPERTY_PROPERTY: &str = "Property";
const SOURCE_PROPERTY_PROPERTY: &str = "SourceProperty";

fn escape(text: &str) -> String {
    text.replace('~', "~~")
}

fn prefix(source: &EntityRef) -> String {
    format!("~dep~{}~", escape(&source.row_key))
}

/// Where the link of `dependent`'s `property` to `source` lives.
pub fn link_ref(dependent: &EntityRef, property: &str, source: &EntityRef) -> EntityRef {
    EntityRef::new(
        &source.table,
        &source.partition_key,
        format!(
            "{}{}~{}~{}~{}",
            prefix(source),
            escape(&dependent.table),
            escape(&dependent.partition_key),
            escape(&dependent.row_key),
            escape(property)
        ),
    )
}

/// A link, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// Where the link lives.
    pub at: EntityRef,
    /// Its ETag.
    pub etag: Option<ETag>,
    /// The entity holding the copy.
    pub dependent: EntityRef,
    /// The dependent's property.
    pub property: String,
    /// The entity the value comes from.
    pub source: EntityRef,
    /// The source's property.
    pub source_property: String,
}

/// The link entity.
pub fn link_entity(
    dependent: &EntityRef,
    property: &str,
    source: &EntityRef,
    source_property: &str,
) -> Result<Entity> {
    let at = link_ref(dependent, property, source);
    let json = |r: &EntityRef| crate::error::json("a link", r).map(Value::String);
    let mut entity = Entity::new(at.partition_key, at.row_key);
    entity.properties.insert(
        MARKER_PROPERTY.to_owned(),
        Value::String(LINK_KIND.to_owned()),
    );
    entity
        .properties
        .insert(DEPENDENT_PROPERTY.to_owned(), json(dependent)?);
    entity
        .properties
        .insert(SOURCE_PROPERTY.to_owned(), json(source)?);
    entity.properties.insert(
        PROPERTY_PROPERTY.to_owned(),
        Value::String(property.to_owned()),
    );
    entity.properties.insert(
        SOURCE_PROPERTY_PROPERTY.to_owned(),
        Value::String(source_property.to_owned()),
    );
    Ok(entity)
}

/// The property of a link naming the intent of the write that put it (see
/// [`crate::index::reclaim`]).
pub const INTENT_PROPERTY: &str = "TablekitIntent";

/// Reads a link entity of `table`.
///
/// # Errors
/// [`Error::Malformed`].
pub fn read_link(table: &str, entity: &Entity) -> Result<Link> {
    let what = || format!("link {}/{}", entity.partition_key, entity.row_key);
    let text = |name: &str| match entity.properties.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(Error::malformed(what(), format!("no {name} property"))),
    };
    let reference = |name: &str| -> Result<EntityRef> {
        serde_json::from_str(&text(name)?).map_err(|e| Error::malformed(what(), e))
    };
    Ok(Link {
        at: EntityRef::of(table, entity),
        etag: entity.etag.clone(),
        dependent: reference(DEPENDENT_PROPERTY)?,
        property: text(PROPERTY_PROPERTY)?,
        source: reference(SOURCE_PROPERTY)?,
        source_property: text(SOURCE_PROPERTY_PROPERTY)?,
    })
}

/// Whether an entity is a link.
pub fn is_link(entity: &Entity) -> bool {
    matches!(entity.properties.get(MARKER_PROPERTY), Some(Value::String(k)) if k == LINK_KIND)
}

/// The links naming `source` (one range query in its partition).
///
/// # Errors
/// The store's errors; [`Error::Malformed`].
pub async fn links_of<S: TableStore>(store: &S, source: &EntityRef) -> Result<Vec<Link>> {
    let start = prefix(source);
    let mut end = start.clone();
    end.pop();
    end.push('\u{7f}');
    let query = Query::with_filter(
        filter::partition_key().eq(source.partition_key.as_str())
            & filter::row_key().ge(start.as_str())
            & filter::row_key().lt(end.as_str()),
    );
    let rows = match store.query_all(&source.table, query).await {
        Ok(rows) => rows,
        Err(e) if e.kind() == ErrorKind::TableNotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut links = Vec::new();
    for row in rows.iter().filter(|r| is_link(r)) {
        let link = read_link(&source.table, row)?;
        if link.source == *source {
            links.push(link);
        }
    }
    Ok(links)
}

crate::index::registry::roles::declaration! {
    write::Denormalized {
        attribute: write::ATTRIBUTE,
        steps: [write, upkeep],
        targets: [record::DenormalizedTarget],
        operations: [record::SyncDenormalized, record::SyncNewDependents, record::RemoveLink],
        lays_out: layout::Links,
    }
}
