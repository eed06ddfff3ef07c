//! The registry of declarations: every declaration an entity type can make (`#[index]`,
//! `#[index_entity]`, `denormalized`, `#[unique]`, expiry, change events, blob fields,
//! `#[wide]`) described once, by its own folder, and reached by the write path, the
//! worker, the audit, the reclaim and the backfill only through this registry.
//!
//! A declaration's folder describes itself in two ways:
//! - its stored types: it submits (`inventory::submit!`) the codec of each target a
//!   primary's record lists for it ([`Target::codec`]) and of each operation of
//!   follow-up work it hands the worker ([`IndexOperation::codec`]), so a stored
//!   [`Target`] or [`IndexOperation`] is read back as the declaration's own type, and,
//!   for a declaration described by its attribute alone, how it lays out
//!   (`record::LaidOut`);
//! - its roles ([`Declaration`]): the write steps it takes, what it does on the read
//!   path, the upkeep of what it keeps outside a write's transaction, and how its
//!   operations apply and its targets are checked. The folders are listed, with their
//!   roles, in the write path's order by one line each in `decl/mod.rs`
//!   ([`super::decl::declarations`]).
//!
//! The schema registry — what each entity type of a table declares, stored in
//! `TablekitSchemas` — is [`schema`].

pub(crate) mod open;
pub(crate) mod roles;
pub(crate) mod schema;

use tablekit_core::TableStore;

use crate::error::{Error, Result};

use super::decl::declarations;
use super::operation::IndexOperation;
use super::record;
use super::record::Target;
use super::upkeep::{Applies, Kept, Upkeep};
use super::write::declaration::{ReadSteps, WriteSteps};
pub(crate) use roles::Declaration;

/// The declaration an attribute names.
pub(crate) fn declaration<S: TableStore + Clone + 'static>(
    attribute: &str,
) -> Option<&'static dyn Declaration<S>> {
    declarations::<S>()
        .into_iter()
        .find(|d| d.attribute() == attribute)
}

/// Every declaration's write steps, in order.
pub(crate) fn write_steps<S: TableStore + Clone + 'static>()
-> impl Iterator<Item = &'static dyn WriteSteps<S>> {
    declarations::<S>().into_iter().filter_map(|d| d.write())
}

/// Every declaration's read steps, in the read path's order (the write path's reversed).
pub(crate) fn read_steps<S: TableStore + Clone + 'static>()
-> impl Iterator<Item = &'static dyn ReadSteps<S>> {
    declarations::<S>()
        .into_iter()
        .rev()
        .filter_map(|d| d.read())
}

/// Every declaration's upkeep.
pub(crate) fn upkeep<S: TableStore + Clone + 'static>()
-> impl Iterator<Item = &'static dyn Upkeep<S>> {
    declarations::<S>().into_iter().filter_map(|d| d.upkeep())
}

/// `operation` as its declaration applies it (or the planner, a burial).
///
/// # Errors
/// [`Error::Malformed`] for an operation no declaration applies (none is decoded so).
pub(crate) fn applies<S: TableStore + Clone + 'static>(
    operation: &IndexOperation,
) -> Result<&dyn Applies<S>> {
    declarations::<S>()
        .into_iter()
        .find_map(|d| d.applies(operation))
        .or_else(|| operation.get::<record::Bury>().map(|o| o as _))
        .ok_or_else(|| no_declaration("operation", operation.tag()))
}

/// `target` as its declaration keeps it.
///
/// # Errors
/// [`Error::Malformed`] for a target no declaration keeps (none is decoded so).
pub(crate) fn kept<S: TableStore + Clone + 'static>(target: &Target) -> Result<&dyn Kept<S>> {
    declarations::<S>()
        .into_iter()
        .find_map(|d| d.kept(target))
        .ok_or_else(|| no_declaration("target", target.tag()))
}

fn no_declaration(what: &str, tag: &str) -> Error {
    Error::malformed(
        format!("{what} `{tag}`"),
        "no registered declaration takes it",
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use tablekit_core::MemoryStore;

    use super::open::Codec;
    use super::*;
    use crate::index::record::LaidOut;

    #[test]
    fn every_stored_tag_and_attribute_is_registered_once() {
        let targets: Vec<&str> = inventory::iter::<Codec<Target>>
            .into_iter()
            .map(|c| c.tag)
            .collect();
        let operations: Vec<&str> = inventory::iter::<Codec<IndexOperation>>
            .into_iter()
            .map(|c| c.tag)
            .collect();
        let laid_out: Vec<&str> = inventory::iter::<LaidOut>
            .into_iter()
            .map(|l| l.attribute)
            .collect();
        let attributes: Vec<&str> = declarations::<MemoryStore>()
            .iter()
            .map(|d| d.attribute())
            .collect();
        for (what, tags, at_least) in [
            ("target", &targets, 5),
            ("operation", &operations, 11),
            ("lays out", &laid_out, 1),
            ("declaration", &attributes, 9),
        ] {
            let unique: BTreeSet<&&str> = tags.iter().collect();
            assert_eq!(
                unique.len(),
                tags.len(),
                "a {what} registered twice: {tags:?}"
            );
            assert!(tags.len() >= at_least, "{what}s missing: {tags:?}");
        }
        assert!(laid_out.iter().all(|a| attributes.contains(a)));
    }
}
