//! The worker's steps of unique values: a reservation released (see [`super::release`])
//! and a reservation restored for the entity that lists it (the audit's repair).

use tablekit_core::TableStore;

use super::record::{ClaimUnique, ReleaseUnique};
use crate::error::Result;
use crate::index::operation::{Applied, IndexApplier};
use crate::index::record::EntityRef;
use crate::index::upkeep::{Applies, Applying};

impl<S: TableStore + Clone + 'static> Applies<S> for ReleaseUnique {
    fn apply<'a>(&'a self, applier: &'a IndexApplier<S>) -> Applying<'a> {
        Box::pin(release(applier, &self.at, &self.source, self.version))
    }
}

impl<S: TableStore + Clone + 'static> Applies<S> for ClaimUnique {
    fn apply<'a>(&'a self, applier: &'a IndexApplier<S>) -> Applying<'a> {
        Box::pin(applier.claim_unique(&self.source, self.version, &self.at))
    }
}

/// Releases the reservation at `at` of `source`'s write at `version` (see
/// [`super::release`]).
///
/// # Errors
/// The store's errors.
pub(super) async fn release<S: TableStore>(
    applier: &IndexApplier<S>,
    at: &EntityRef,
    source: &EntityRef,
    version: i64,
) -> Result<Applied> {
    Ok(
        if super::release(applier.store(), at, source, version).await? {
            Applied::Changed
        } else {
            Applied::Unchanged
        },
    )
}

impl<S: TableStore> IndexApplier<S> {
    /// Restores the reservation at `at` for `source`, if `source` still lists it: the
    /// reservation is made again (with no lease: its holder is committed) or renewed.
    ///
    /// # Errors
    /// [`Error::ValueTaken`](crate::Error::ValueTaken) when another entity holds the
    /// value; the store's errors.
    pub(crate) async fn claim_unique(
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
