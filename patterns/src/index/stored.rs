//! The reads and conditional deletes the declarations' worker steps and checks share: a
//! leaf every declaration imports.

use tablekit_core::{Entity, ErrorKind, IfMatch, TableStore};

use super::record::EntityRef;
use crate::error::Result;

/// The entity at `at`, or `None` when it (or its table) is absent.
///
/// # Errors
/// The store's errors.
pub(crate) async fn get_or_none<S: TableStore>(
    store: &S,
    at: &EntityRef,
) -> Result<Option<Entity>> {
    store
        .get_if_table_exists(&at.table, &at.partition_key, &at.row_key)
        .await
}

/// Deletes `at` under `if_match`; one that changed or went meanwhile is left as it is.
/// Whether it deleted.
pub(crate) async fn delete_unless_changed<S: TableStore>(
    store: &S,
    at: &EntityRef,
    if_match: IfMatch,
) -> Result<bool> {
    match store
        .delete(&at.table, &at.partition_key, &at.row_key, if_match)
        .await
    {
        Ok(()) => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::PreconditionFailed | ErrorKind::NotFound
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
