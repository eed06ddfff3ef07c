//! The worker's side of the one write path: [`IndexApplier`] hands each operation of a
//! write's follow-up work to its own type ([`Applies`], dispatched by the operation's
//! variant), and the undoing of a write that never committed to every declaration
//! ([`Upkeep::undo`](super::upkeep::Upkeep::undo)). The burial of a delete's tombstone
//! is the planner's own operation and is applied here.

use tablekit_core::{IfMatch, TableStore};

use super::operation::Bury;
use super::operation::{Applied, IndexApplier, IndexOperation, IndexOperations, Resource};
use super::reclaim::Reclaim;
use super::record::{EntityRef, is_tombstone, version_of};
use super::registry::{applies, upkeep};
use super::stored::{delete_unless_changed, get_or_none};
use super::upkeep::{Applies, Applying};
use crate::consistency::Registry;
use crate::error::Result;

/// How many operations of one message [`IndexApplier::apply_all`] runs at once.
pub(crate) const APPLY_AT_ONCE: usize = 8;

impl<S: TableStore + Clone + 'static> IndexApplier<S> {
    /// Registers the handlers of index work (kind `index`) and of the undoing of writes
    /// that never committed (kind `reclaim`) in `registry`.
    pub fn register(self, registry: Registry) -> Registry {
        let reclaimer = self.clone();
        registry
            .register(move |operations: IndexOperations| {
                let applier = self.clone();
                async move { Ok(applier.apply_all(&operations).await?) }
            })
            .register(move |reclaim: Reclaim| {
                let applier = reclaimer.clone();
                async move { Ok(applier.undo(&reclaim).await?) }
            })
    }

    /// Applies every operation of a message: the operations on different targets at once
    /// (up to 8), those on one target in the message's order. Each
    /// operation converges on its own (see [`super::operation`]), so their order across
    /// targets never mattered; running them at once makes a message cost the round trips
    /// of its longest operation, not their sum.
    ///
    /// # Errors
    /// The first failure, once every operation under way has finished; the message can
    /// be applied again.
    pub async fn apply_all(&self, operations: &IndexOperations) -> Result<()> {
        use futures::StreamExt;
        let mut groups: Vec<(Resource<'_>, Vec<&IndexOperation>)> = Vec::new();
        for operation in &operations.operations {
            let resource = operation.resource();
            match groups.iter_mut().find(|(r, _)| *r == resource) {
                Some((_, group)) => group.push(operation),
                None => groups.push((resource, vec![operation])),
            }
        }
        let mut applying = Vec::with_capacity(groups.len());
        for (_, group) in groups {
            applying.push(self.apply_in_order(group));
        }
        let outcomes: Vec<Result<()>> = futures::stream::iter(applying)
            .buffer_unordered(APPLY_AT_ONCE)
            .collect()
            .await;
        outcomes.into_iter().collect()
    }

    /// Applies operations on one resource, one after another.
    async fn apply_in_order(&self, operations: Vec<&IndexOperation>) -> Result<()> {
        for operation in operations {
            self.apply(operation).await?;
        }
        Ok(())
    }

    /// Applies one operation.
    ///
    /// # Errors
    /// The store's errors; [`Error::NoBlobStore`](crate::Error::NoBlobStore); [`Error::Contention`](crate::Error::Contention).
    pub async fn apply(&self, operation: &IndexOperation) -> Result<Applied> {
        applies::<S>(operation)?.apply(self).await
    }

    /// Removes the tombstone of the delete of `source` at `version`, if it is still
    /// there (a write that replaced it, or a later delete's, stays).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn bury(&self, source: &EntityRef, version: i64) -> Result<Applied> {
        let Some(found) = get_or_none(&self.store, source).await? else {
            return Ok(Applied::Unchanged);
        };
        if !is_tombstone(&found) || version_of(&found) != Some(version) {
            return Ok(Applied::Unchanged);
        }
        let if_match = found.etag.map_or(IfMatch::Any, IfMatch::ETag);
        Ok(
            if delete_unless_changed(&self.store, source, if_match).await? {
                Applied::Changed
            } else {
                Applied::Unchanged
            },
        )
    }

    /// Undoes what a write that never committed did outside its transaction and holds no
    /// more (see [`super::reclaim`]): each declaration its own part (reservations, links,
    /// blobs).
    ///
    /// # Errors
    /// The store's and blob store's errors; the work can be applied again.
    pub async fn undo(&self, undoing: &Reclaim) -> Result<()> {
        for declaration in upkeep::<S>() {
            declaration.undo(self, undoing).await?;
        }
        Ok(())
    }
}

impl<S: TableStore + Clone + 'static> Applies<S> for Bury {
    fn apply<'a>(&'a self, applier: &'a IndexApplier<S>) -> Applying<'a> {
        Box::pin(applier.bury(&self.source, self.version))
    }
}
