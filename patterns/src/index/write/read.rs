//! The read path of the declarations: a primary, or an index copy read as one, passes
//! every registered declaration of [`ReadSteps`](super::declaration::ReadSteps) on its
//! way to the reader — each may hide it
//! ([`hides`](super::declaration::ReadSteps::hides): an expired entity, a delete's
//! tombstone) or restore what a write moved out of it
//! ([`restore`](super::declaration::ReadSteps::restore): blob fields). The trait lives in
//! the leaf `super::declaration`, beside `WriteSteps`.

use tablekit_core::{Entity, TableStore};

use super::super::registry::read_steps;
use super::declaration::Writer;
use crate::error::Result;

impl<S: TableStore + Clone + 'static> Writer<S> {
    /// Whether a reader must not see `stored` (a primary or an index copy of one).
    pub(crate) fn hidden(&self, stored: &Entity) -> bool {
        read_steps::<S>().any(|d| d.hides(self, stored))
    }

    /// `stored` as the reader sees it, whether hidden or not.
    ///
    /// # Errors
    /// A declaration's: the blob store's errors, [`Error::Malformed`](crate::Error::Malformed)
    /// for a blob that is missing.
    pub(crate) async fn restore(&self, mut stored: Entity) -> Result<Entity> {
        for declaration in read_steps::<S>() {
            stored = declaration.restore(self, stored).await?;
        }
        Ok(stored)
    }

    /// What a reader sees of a stored entity: `None` when it is absent or hidden, else the
    /// entity restored.
    ///
    /// # Errors
    /// As [`restore`](Self::restore).
    pub(crate) async fn read(&self, found: Option<Entity>) -> Result<Option<Entity>> {
        match found {
            Some(stored) if !self.hidden(&stored) => Ok(Some(self.restore(stored).await?)),
            _ => Ok(None),
        }
    }
}
