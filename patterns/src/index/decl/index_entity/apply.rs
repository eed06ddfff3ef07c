//! How the worker applies id lists' follow-up work: a membership added or removed in a
//! list in the partition, a table or blobs.

use tablekit_core::{ErrorKind, TableStore};

use super::record::{AddMember, RemoveMember};
use super::{Member, plan_partition_change, read_partition_pages};
use crate::error::{Error, Result};
use crate::index::operation::{Applied, IndexApplier};
use crate::index::record::{EntityRef, MemberStorage};
use crate::index::upkeep::{Applies, Applying};

impl<S: TableStore + Clone + 'static> Applies<S> for AddMember {
    fn apply<'a>(&'a self, applier: &'a IndexApplier<S>) -> Applying<'a> {
        Box::pin(applier.change_member(
            &self.source,
            self.version,
            &self.index,
            self.storage,
            &self.table,
            &self.value,
            true,
            false,
        ))
    }
}

impl<S: TableStore + Clone + 'static> Applies<S> for RemoveMember {
    fn apply<'a>(&'a self, applier: &'a IndexApplier<S>) -> Applying<'a> {
        Box::pin(applier.change_member(
            &self.source,
            self.version,
            &self.index,
            self.storage,
            &self.table,
            &self.value,
            false,
            false,
        ))
    }
}

impl<S: TableStore> IndexApplier<S> {
    /// Adds `source` to or removes it from the id list of `value`. With `force` (repair)
    /// the membership is set whatever the versions say.
    ///
    /// # Errors
    /// The store's errors; [`Error::NoBlobStore`]; [`Error::Contention`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn change_member(
        &self,
        source: &EntityRef,
        version: i64,
        index: &str,
        storage: MemberStorage,
        table: &str,
        value: &str,
        present: bool,
        force: bool,
    ) -> Result<Applied> {
        let change = Member {
            source: source.clone(),
            version,
            present,
        };
        let changed = match storage {
            MemberStorage::Table => {
                super::change_table_member(&self.store, table, index, value, &change, force).await?
            }
            MemberStorage::Blob => {
                let blobs = self.blobs.as_ref().ok_or_else(|| Error::NoBlobStore {
                    index: index.to_owned(),
                })?;
                super::change_blob_member(blobs, table, index, value, &change, force).await?
            }
            MemberStorage::Partition => {
                self.change_partition_member(source, index, value, present)
                    .await?
            }
        };
        Ok(if changed {
            Applied::Changed
        } else {
            Applied::Unchanged
        })
    }

    /// Repairs a partition-stored id list outside a primary's write (the audit).
    async fn change_partition_member(
        &self,
        source: &EntityRef,
        index: &str,
        value: &str,
        present: bool,
    ) -> Result<bool> {
        let mut retry = self.retry.start();
        loop {
            retry
                .next(|| format!("id list `{index}` value `{value}` of {source}"))
                .await?;
            let pages = read_partition_pages(
                &self.store,
                &source.table,
                &source.partition_key,
                index,
                value,
            )
            .await?;
            let ops = plan_partition_change(
                &pages,
                &source.partition_key,
                index,
                value,
                &source.row_key,
                present,
            )?;
            let Some(op) = ops.into_iter().next() else {
                return Ok(false);
            };
            match self.store.execute(&source.table, op).await {
                Ok(_) => return Ok(true),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed | ErrorKind::AlreadyExists
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }
}
