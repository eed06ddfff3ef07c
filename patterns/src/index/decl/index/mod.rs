//! Secondary indexes (`#[index]`): a copy of the primary per index, under keys of the
//! index's templates, in the primary's partition or elsewhere. The expiry index's
//! entries are copies too. On the write path (`write`) a same-partition copy changes in
//! the primary's transaction and any other by follow-up work, which the worker applies
//! (`apply`); look-ups read copies back as primaries (`crate::index::IndexedTable::find`); the
//! audit checks each copy against its primary.

mod apply;
mod audit;
pub(crate) mod layout;
pub(crate) mod record;
pub(crate) mod write;

crate::index::registry::roles::declaration! {
    write::Copies {
        attribute: write::ATTRIBUTE,
        steps: [write, upkeep],
        targets: [record::CopyTarget],
        operations: [record::PutCopy, record::DeleteCopy],
        lays_out: layout::Copies,
    }
}
