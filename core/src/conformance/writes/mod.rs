//! Cases about single writes (insert, replace, merge, the upserts and delete), their
//! ETags and Timestamps, and point reads with a projection.

mod insert_replace_merge;
mod keys_and_select;
mod upsert_delete;
mod versions;

pub use insert_replace_merge::*;
pub use keys_and_select::*;
pub use upsert_delete::*;
pub use versions::*;

use crate::model::{ETag, Entity, IfMatch, Properties};
use crate::store::TableStore;

/// The properties of `entity`.
fn props(entity: &Entity) -> &Properties {
    &entity.properties
}

/// Inserts `entity` into `table` and returns its ETag.
async fn put<S: TableStore>(store: &S, table: &str, entity: Entity) -> ETag {
    store
        .insert(table, entity)
        .await
        .expect("insert of a new entity")
}

/// An ETag no store hands out.
fn made_up_etag() -> IfMatch {
    IfMatch::ETag(ETag::new("W/\"datetime'2001-01-01T00:00:00Z'.made-up\""))
}
