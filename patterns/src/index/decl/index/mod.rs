//! Secondary indexes (`#[index]`): a copy of the primary per index, under keys of the
//! index's templates, in the primary's partition or elsewhere. The expiry index's
//! entries are copies too. On the write path (`write`) a same-partition copy changes in
//! the primary's transaction and any other by follow-up work, which the worker applies
//! (`apply`); look-ups read copies back as primaries (`crate::index::IndexedTable::find`); the
//! audit checks each copy against its primary.

mod apply;
mod audit;
pub(crate) mod record;
pub(crate) mod write;

/// What `index` stores: its targets and operations, by tag.
pub(crate) static STORED: crate::index::registry::StoredTypes =
    crate::index::registry::StoredTypes {
        attribute: "index",
        targets: &[crate::index::registry::target::<record::CopyTarget>()],
        lays_out: None,
        operations: &[
            crate::index::registry::operation::<record::PutCopy>(),
            crate::index::registry::operation::<record::DeleteCopy>(),
        ],
    };

impl<S: tablekit_core::TableStore + Clone + 'static> crate::index::registry::Declaration<S>
    for write::Copies
{
    fn attribute(&self) -> &'static str {
        write::ATTRIBUTE
    }

    fn write(&self) -> Option<&dyn crate::index::write::declaration::WriteSteps<S>> {
        Some(self)
    }

    fn upkeep(&self) -> Option<&dyn crate::index::upkeep::Upkeep<S>> {
        Some(self)
    }

    fn applies<'a>(
        &self,
        operation: &'a crate::index::IndexOperation,
    ) -> Option<&'a dyn crate::index::upkeep::Applies<S>> {
        let put = operation.get::<record::PutCopy>();
        put.map(|o| o as &dyn crate::index::upkeep::Applies<S>)
            .or_else(|| operation.get::<record::DeleteCopy>().map(|o| o as _))
    }

    fn kept<'a>(
        &self,
        target: &'a crate::index::Target,
    ) -> Option<&'a dyn crate::index::upkeep::Kept<S>> {
        target.get::<record::CopyTarget>().map(|t| t as _)
    }
}
