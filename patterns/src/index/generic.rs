//! Index maintenance without the entity type: deleting a primary written through an
//! indexed table removes everything its record names, through the one write path with
//! the layout the registry holds for its kind (its change event, the blobs it stops
//! referencing and its reservations go with it, as a typed delete's do), or, for a kind
//! no type registered, a layout that declares nothing. The archive operation of the
//! worker uses it, so a moved entity leaves no index entry behind.

use tablekit_core::{ErrorKind, IfMatch, TableStore};

use super::record::{EntityRef, IndexRecord, Layout, is_tombstone};
use super::registry::SchemaRecord;
use super::write::Writer;
use crate::consistency::Engine;
use crate::error::Result;

/// Deletes the primary at `at` if its ETag is still `if_match`, with its index entries
/// (see the module docs); `false` when it is not there. The engine's sink gets the
/// follow-up work after the commit; without one it waits for the relay.
///
/// # Errors
/// `PreconditionFailed` when the primary changed; the store's errors;
/// [`Error::Malformed`](crate::Error::Malformed) for a record that does not read;
/// [`Error::Contention`](crate::Error::Contention).
pub async fn delete_indexed<S: TableStore + Clone + 'static>(
    engine: &Engine<S>,
    at: &EntityRef,
    if_match: IfMatch,
) -> Result<bool> {
    let Some(primary) = engine
        .store()
        .get_if_table_exists(&at.table, &at.partition_key, &at.row_key)
        .await?
    else {
        return Ok(false);
    };
    if is_tombstone(&primary) {
        return Ok(false);
    }
    // A primary no indexed table wrote (no record) is deleted as it is, without asking
    // the registry: nothing indexes it.
    let registered = match IndexRecord::read(&primary)? {
        Some(_) => registered_layout(engine.store(), &at.table, &primary).await?,
        None => None,
    };
    let layout = registered.unwrap_or_else(|| Layout::bare(&at.table));
    let writer = Writer::for_layout(engine.clone(), layout);
    match writer.delete_read(at.clone(), if_match, primary).await {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The layout registered on `table` for the kind of `primary`.
async fn registered_layout<S: TableStore>(
    store: &S,
    table: &str,
    primary: &tablekit_core::Entity,
) -> Result<Option<Layout>> {
    for schema in SchemaRecord::list(store, Some(table)).await? {
        if let Some(tablekit_core::Value::String(kind)) =
            primary.properties.get(&schema.kind_property)
            && *kind == schema.kind
        {
            return Ok(Some(schema.layout()?));
        }
    }
    Ok(None)
}
