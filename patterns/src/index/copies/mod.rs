//! Secondary indexes (`#[index]`): a copy of the primary per index, under keys of the
//! index's templates, in the primary's partition or elsewhere. The expiry index's
//! entries are copies too. On the write path (`write`) a same-partition copy changes in
//! the primary's transaction and any other by follow-up work, which the worker applies
//! (`apply`); look-ups read copies back as primaries (`super::IndexedTable::find`); the
//! audit checks each copy against its primary.

mod apply;
mod audit;
pub(crate) mod record;
pub(crate) mod write;

/// What `index` stores: its targets and operations, by tag.
pub(crate) static STORED: super::registry::StoredTypes = super::registry::StoredTypes {
    attribute: "index",
    targets: &[super::registry::target::<record::CopyTarget>()],
    operations: &[
        super::registry::operation::<record::PutCopy>(),
        super::registry::operation::<record::DeleteCopy>(),
    ],
};

impl<S: tablekit_core::TableStore + Clone + 'static> super::registry::Declaration<S>
    for write::Copies
{
    fn attribute(&self) -> &'static str {
        write::ATTRIBUTE
    }

    fn write(&self) -> Option<&dyn super::write::declaration::WriteSteps<S>> {
        Some(self)
    }

    fn upkeep(&self) -> Option<&dyn super::upkeep::Upkeep<S>> {
        Some(self)
    }

    fn applies<'a>(
        &self,
        operation: &'a super::IndexOperation,
    ) -> Option<&'a dyn super::upkeep::Applies<S>> {
        let put = operation.get::<record::PutCopy>();
        put.map(|o| o as &dyn super::upkeep::Applies<S>)
            .or_else(|| operation.get::<record::DeleteCopy>().map(|o| o as _))
    }

    fn kept<'a>(&self, target: &'a super::Target) -> Option<&'a dyn super::upkeep::Kept<S>> {
        target.get::<record::CopyTarget>().map(|t| t as _)
    }
}
