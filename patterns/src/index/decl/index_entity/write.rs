//! The declaration of index entities (`#[index_entity]`, id lists) on the write path:
//! an id list in the primary's partition changes in the entity group transaction (one
//! page write per changed membership, under its ETag; an added membership pins its page
//! so a concurrent removal from it conflicts); an id list in a table or in blobs
//! changes by follow-up work.

use tablekit_core::TableStore;

use super::record::MemberTarget;
use super::{pin_partition_page, plan_partition_change, read_partition_pages};
use crate::error::Result;
use crate::index::record::MemberStorage;
use crate::index::write::declaration::{Attempt, Role, Step, WriteSteps};

/// Id lists.
pub(crate) struct Lists;

/// The attribute that declares it.
pub(crate) const ATTRIBUTE: &str = "index_entity";

impl Lists {
    async fn plan_lists<S: TableStore>(attempt: &mut Attempt<'_, S>) -> Result<()> {
        let source = attempt.source;
        for target in attempt.new_targets {
            if let Some(MemberTarget { storage, .. }) = target.get::<MemberTarget>()
                && *storage != MemberStorage::Partition
                && !attempt.kept(target)
            {
                attempt.hand_on(target, true);
            }
        }
        let dropped = attempt.dropped(
            |t| matches!(t.get::<MemberTarget>(), Some(MemberTarget { storage, .. }) if *storage != MemberStorage::Partition),
        );
        for target in &dropped {
            attempt.hand_on(target, false);
        }
        let changes = attempt
            .new_targets
            .difference(attempt.old_targets)
            .map(|t| (t, true))
            .chain(
                attempt
                    .old_targets
                    .difference(attempt.new_targets)
                    .map(|t| (t, false)),
            );
        // The pages of every changed list of the partition, read at once.
        let changes: Vec<(&String, &String, bool)> = changes
            .filter_map(|(target, add)| match target.get::<MemberTarget>() {
                Some(MemberTarget {
                    index,
                    storage: MemberStorage::Partition,
                    value,
                    ..
                }) => Some((index, value, add)),
                _ => None,
            })
            .collect();
        let store = attempt.writer.store();
        let read = futures::future::join_all(changes.iter().map(|(index, value, _)| {
            read_partition_pages(store, &source.table, &source.partition_key, index, value)
        }))
        .await;
        for ((index, value, add), pages) in changes.into_iter().zip(read) {
            let pages = pages?;
            let mut ops = plan_partition_change(
                &pages,
                &source.partition_key,
                index,
                value,
                &source.row_key,
                add,
            )?;
            if add && ops.is_empty() {
                ops.extend(pin_partition_page(
                    &pages,
                    &source.partition_key,
                    index,
                    value,
                    &source.row_key,
                )?);
            }
            for op in ops {
                attempt.plan.push(op, Role::of(ATTRIBUTE));
            }
        }
        Ok(())
    }
}

impl<S: TableStore + Clone + 'static> WriteSteps<S> for Lists {
    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        Box::pin(Lists::plan_lists(attempt))
    }
}
