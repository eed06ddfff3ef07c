//! The worker's steps of unique values: a reservation restored for the entity that lists
//! it (the audit's repair); a release is [`super::release`].

use tablekit_core::TableStore;

use super::super::operation::{Applied, IndexApplier};
use super::super::record::EntityRef;
use crate::error::Result;

impl<S: TableStore> IndexApplier<S> {
    /// Restores the reservation at `at` for `source`, if `source` still lists it: the
    /// reservation is made again (with no lease: its holder is committed) or renewed.
    ///
    /// # Errors
    /// [`Error::ValueTaken`](crate::Error::ValueTaken) when another entity holds the
    /// value; the store's errors.
    pub async fn claim_unique(
        &self,
        source: &EntityRef,
        version: i64,
        at: &EntityRef,
    ) -> Result<Applied> {
        if !super::holder_lists(&self.store, source, at).await? {
            return Ok(Applied::Superseded);
        }
        if let Some(found) = super::read(&self.store, at).await?
            && found.holder == *source
        {
            return Ok(Applied::Unchanged);
        }
        super::reserve(&self.store, at, source, version, std::time::Duration::ZERO).await?;
        Ok(Applied::Changed)
    }
}
