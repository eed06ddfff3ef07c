//! Index maintenance without the entity type: deleting a primary written through an
//! indexed table removes everything its record names, through the one write path with
//! the layout the registry holds for its kind (its change event, the blobs it stops
//! referencing and its reservations go with it, as a typed delete's do), or, for a kind
//! no type registered, a layout that declares nothing. The archive operation of the
//! worker uses it, so a moved entity leaves no index entry behind.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tablekit_core::{ErrorKind, IfMatch, TableStore};
use tokio::time::Instant;

use super::record::{EntityRef, IndexRecord, Layout, is_tombstone};
use super::registry::schema::SchemaRecord;
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
    GenericDeleter::new(engine.clone())
        .delete(at, if_match)
        .await
}

/// How long a [`GenericDeleter`] keeps a table's registered layouts before it reads
/// them again (a type registered meanwhile is seen within it).
pub const LAYOUTS_RECHECK: Duration = Duration::from_secs(30);

/// Deletes primaries without their types, as [`delete_indexed`] does, for a caller that
/// deletes many (the archive worker): the registry's layouts of a table are kept for
/// [`LAYOUTS_RECHECK`], and a primary the caller has just read is not read again.
#[derive(Debug)]
pub struct GenericDeleter<S> {
    engine: Engine<S>,
    layouts: Mutex<HashMap<String, (Instant, Vec<SchemaRecord>)>>,
}

impl<S: TableStore + Clone + 'static> GenericDeleter<S> {
    /// A deleter committing through `engine`.
    pub fn new(engine: Engine<S>) -> Self {
        GenericDeleter {
            engine,
            layouts: Mutex::default(),
        }
    }

    /// The engine deletes commit through.
    pub fn engine(&self) -> &Engine<S> {
        &self.engine
    }

    /// Deletes the primary at `at`, as [`delete_indexed`] does.
    ///
    /// # Errors
    /// As [`delete_indexed`].
    pub async fn delete(&self, at: &EntityRef, if_match: IfMatch) -> Result<bool> {
        let Some(primary) = self
            .engine
            .store()
            .get_if_table_exists(&at.table, &at.partition_key, &at.row_key)
            .await?
        else {
            return Ok(false);
        };
        self.delete_read(at, if_match, primary).await
    }

    /// Deletes the primary at `at` as the caller read it (`primary`, with its ETag): the
    /// delete is conditional on `if_match`, so a primary changed since fails with
    /// `PreconditionFailed` as it would after a read here.
    ///
    /// # Errors
    /// As [`delete_indexed`].
    pub async fn delete_read(
        &self,
        at: &EntityRef,
        if_match: IfMatch,
        primary: tablekit_core::Entity,
    ) -> Result<bool> {
        if is_tombstone(&primary) {
            return Ok(false);
        }
        // A primary no indexed table wrote (no record) is deleted as it is, without asking
        // the registry: nothing indexes it.
        let registered = match IndexRecord::read(&primary)? {
            Some(_) => self.registered_layout(&at.table, &primary).await?,
            None => None,
        };
        let layout = registered.unwrap_or_else(|| Layout::bare(&at.table));
        let writer = Writer::for_layout(self.engine.clone(), layout);
        match writer.delete_read(at.clone(), if_match, primary).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The layout registered on `table` for the kind of `primary`, from the layouts
    /// kept (read again when older than [`LAYOUTS_RECHECK`]).
    async fn registered_layout(
        &self,
        table: &str,
        primary: &tablekit_core::Entity,
    ) -> Result<Option<Layout>> {
        let kept = self.layouts.lock().ok().and_then(|layouts| {
            layouts
                .get(table)
                .filter(|(read, _)| read.elapsed() < LAYOUTS_RECHECK)
                .map(|(_, schemas)| schemas.clone())
        });
        let schemas = match kept {
            Some(schemas) => schemas,
            None => {
                let schemas = SchemaRecord::list(self.engine.store(), Some(table)).await?;
                if let Ok(mut layouts) = self.layouts.lock() {
                    layouts.insert(table.to_owned(), (Instant::now(), schemas.clone()));
                }
                schemas
            }
        };
        layout_of(&schemas, primary)
    }
}

/// The layout among `schemas` for the kind of `primary`.
fn layout_of(schemas: &[SchemaRecord], primary: &tablekit_core::Entity) -> Result<Option<Layout>> {
    for schema in schemas {
        if let Some(tablekit_core::Value::String(kind)) =
            primary.properties.get(&schema.kind_property)
            && *kind == schema.kind
        {
            return Ok(Some(schema.layout()?));
        }
    }
    Ok(None)
}
