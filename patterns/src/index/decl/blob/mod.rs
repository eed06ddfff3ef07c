//! The declaration of blob fields (`#[entity(blob)]`, and any value over the table
//! service's limits) on the write path, for a table with a blob store: the values go to
//! the blob store before the transaction (under names with a part unique to the write,
//! recorded in its intent, so a write that never commits has them deleted), the entity
//! holds their addresses, and the blobs a write stops referencing are deleted after the
//! commit (`crate::large::blobs::DeleteBlobs`). Reads restore the values
//! ([`ReadSteps::restore`]).

use tablekit_core::{Entity, TableStore};

use crate::index::operation::IndexApplier;
use crate::index::reclaim::{Reclaim, undo_blobs};
use crate::index::upkeep::Upkeep;
use crate::index::write::declaration::{
    Attempt, Prepared, ReadSteps, Request, Restoring, Step, WriteSteps, Writer, nothing,
};

use crate::error::Result;
use crate::large::blobs::{DeleteBlobs, offload_with_nonce, restore, would_offload};

/// Blob fields.
pub(crate) struct Blobs;

impl<S: TableStore + Clone + 'static> WriteSteps<S> for Blobs {
    fn complete(&self, writer: &Writer<S>, request: &mut Request) -> Result<()> {
        if writer.blobs.is_some()
            && let Some(entity) = &request.entity
            && would_offload(&writer.blob_fields, entity)
        {
            let nonce = tablekit_core::random::uuid().simple().to_string();
            request.blob_nonce = Some(nonce[..12].to_owned());
        }
        Ok(())
    }

    fn prepare<'a>(&'a self, writer: &'a Writer<S>, prepared: &'a mut Prepared) -> Step<'a> {
        let (Some(blobs), Some(entity)) = (&writer.blobs, prepared.entity.as_mut()) else {
            return nothing();
        };
        let nonce = prepared.reclaim.blob_nonce.as_deref();
        Box::pin(async move {
            if let Some(nonce) = nonce {
                offload_with_nonce(blobs, &writer.table, &writer.blob_fields, entity, nonce)
                    .await?;
            }
            // What is left must fit the table service's limits: refused before the
            // commit, with the limit it breaks.
            tablekit_core::limits::check_entity(entity).map_err(tablekit_core::Error::from)?;
            Ok(())
        })
    }

    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        // Blobs this write stops referencing are deleted after the commit.
        let deletion = DeleteBlobs::dropped(attempt.source, attempt.old, attempt.entity.as_ref());
        Box::pin(async move {
            if let Some(dropped) = deletion {
                attempt.work_operations += dropped.names.len();
                attempt
                    .work
                    .push(crate::consistency::Envelope::new(&dropped)?);
            }
            Ok(())
        })
    }
}

impl<S: TableStore + Clone + 'static> Upkeep<S> for Blobs {
    fn undo<'a>(&'a self, applier: &'a IndexApplier<S>, undoing: &'a Reclaim) -> Step<'a> {
        let (Some(nonce), Some(blobs)) = (&undoing.blob_nonce, applier.blobs()) else {
            return nothing();
        };
        Box::pin(undo_blobs(applier.store(), blobs, &undoing.source, nonce))
    }
}

impl<S: TableStore + Clone + 'static> ReadSteps<S> for Blobs {
    fn restore<'a>(&'a self, writer: &'a Writer<S>, stored: Entity) -> Restoring<'a> {
        match &writer.blobs {
            Some(blobs) => Box::pin(restore(blobs, &writer.table, stored)),
            None => Box::pin(std::future::ready(Ok(stored))),
        }
    }
}

crate::index::registry::roles::declaration! {
    Blobs {
        attribute: "blob",
        steps: [write, read, upkeep],
        targets: [],
        operations: [],
    }
}
