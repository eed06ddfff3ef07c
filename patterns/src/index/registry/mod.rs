//! The registry of declarations: every declaration an entity type can make (`#[index]`,
//! `#[index_entity]`, `denormalized`, `#[unique]`, expiry, change events, blob fields,
//! `#[wide]`) described once, by its own folder, and reached by the write path, the
//! worker, the audit, the reclaim and the backfill only through this registry.
//!
//! A declaration's folder exports two things:
//! - its stored types ([`StoredTypes`]): the tag and decoder of each target a primary's
//!   record lists for it and each operation of follow-up work it hands the worker, so a
//!   stored [`Target`] or [`IndexOperation`] is read back as the declaration's own type;
//! - its roles ([`Declaration`]): the write steps it takes, what it does on the read
//!   path, the upkeep of what it keeps outside a write's transaction, and how its
//!   operations apply and its targets are checked.
//!
//! Adding a declaration is one line in [`STORED`] and one in [`declarations`] (and the
//! derive's attribute). The schema registry — what each entity type of a table
//! declares, stored in `TablekitSchemas` — is [`schema`].

pub(crate) mod open;
pub(crate) mod schema;

use serde_json::Value;
use tablekit_core::TableStore;

use crate::error::{Error, Result};

use super::decl::{blob, changes, count, denormalized, expiry, index, index_entity, unique, wide};
use super::operation::{IndexOperation, OperationType};
use super::record;
use super::record::{DeclaredLayout, EntityRef, Target, TargetType};
use super::upkeep::{Applies, Kept, Upkeep};
use super::write::declaration::{ReadSteps, WriteSteps};
use open::Codec;
pub(crate) use schema::SchemaRecord;
use tablekit_core::limits::KeyKind;
use tablekit_core::typed::KeyTemplate;

/// What a declaration stores: the decoders of its targets and its operations.
pub(crate) struct StoredTypes {
    /// The attribute that declares it.
    pub attribute: &'static str,
    /// Its targets in a primary's record.
    pub targets: &'static [Codec<Target>],
    /// Its operations of follow-up work.
    pub operations: &'static [Codec<IndexOperation>],
    /// How a declaration described by its attribute alone (`DeclaredLayout`) lays out;
    /// `None` for the declarations the layout names field by field.
    pub lays_out: Option<&'static dyn LaysOut>,
}

/// How a declaration described by its attribute alone lays out from the type's layout:
/// the targets a primary has under it, the tables it keeps, and its follow-up work.
pub(crate) trait LaysOut: Sync {
    /// The targets of the primary at `source` under `declared`; `render` renders a key
    /// template from the primary's fields.
    ///
    /// # Errors
    /// The rendering's errors; a setting the declaration cannot read.
    fn targets(
        &self,
        declared: &DeclaredLayout,
        source: &EntityRef,
        render: &dyn Fn(&KeyTemplate, KeyKind) -> Result<String>,
    ) -> Result<Vec<Target>>;

    /// The tables it keeps its entities in, for primaries in `table`.
    fn tables(&self, declared: &DeclaredLayout, table: &str) -> Vec<String>;

    /// Its follow-up work outside a write's transaction, described as
    /// [`Layout::follow_up`](super::Layout::follow_up) lists it.
    fn follow_up(&self, declared: &DeclaredLayout, table: &str) -> Option<String>;
}

/// How the declaration `attribute` lays out.
///
/// # Errors
/// [`Error::Malformed`] when no registered declaration has that attribute.
pub(crate) fn lays_out(attribute: &str) -> Result<&'static dyn LaysOut> {
    STORED
        .iter()
        .find(|s| s.attribute == attribute)
        .and_then(|s| s.lays_out)
        .ok_or_else(|| {
            Error::malformed(
                format!("declaration `#[{attribute}]`"),
                "no registered declaration has that attribute",
            )
        })
}

/// Every declaration's stored types, and the planner's own (a tombstone's burial).
pub(crate) static STORED: [&StoredTypes; 6] = [
    &index::STORED,
    &denormalized::STORED,
    &index_entity::STORED,
    &unique::STORED,
    &record::STORED,
    &count::STORED,
];

/// A stored target, decoded as its declaration's type.
///
/// # Errors
/// An unknown tag, or fields its type does not read.
pub(crate) fn decode_target(tag: &str, fields: Value) -> Result<Target, String> {
    open::decode_by_tag(
        "target",
        tag,
        fields,
        STORED
            .iter()
            .flat_map(|s| s.targets.iter().map(|c| (s.attribute, c))),
    )
}

/// A stored operation, decoded as its declaration's type.
///
/// # Errors
/// An unknown tag, or fields its type does not read.
pub(crate) fn decode_operation(tag: &str, fields: Value) -> Result<IndexOperation, String> {
    open::decode_by_tag(
        "operation",
        tag,
        fields,
        STORED
            .iter()
            .flat_map(|s| s.operations.iter().map(|c| (s.attribute, c))),
    )
}

/// A declaration's roles. Each hook has nothing by default.
pub(crate) trait Declaration<S: TableStore + Clone + 'static>: Sync {
    /// The attribute that declares it (`index`, `index_entity`, …): how a role of a
    /// write's batch names the declaration that reads its refusal.
    fn attribute(&self) -> &'static str;

    /// Its steps on the write path.
    fn write(&self) -> Option<&dyn WriteSteps<S>> {
        None
    }

    /// What it does to an entity on its way to the reader.
    fn read(&self) -> Option<&dyn ReadSteps<S>> {
        None
    }

    /// The upkeep of what it keeps that no target names.
    fn upkeep(&self) -> Option<&dyn Upkeep<S>> {
        None
    }

    /// `operation`, if it is one of its own, as it applies.
    fn applies<'a>(&self, _operation: &'a IndexOperation) -> Option<&'a dyn Applies<S>> {
        None
    }

    /// `target`, if it is one of its own, as the audit and a backfill keep it.
    fn kept<'a>(&self, _target: &'a Target) -> Option<&'a dyn Kept<S>> {
        None
    }
}

/// Every declaration, in the write path's order: the expiry time first (it adds a
/// target), the blobs before the links (a blob field is offloaded before the links are
/// put), unique values reserved before a denormalised source is read, copies and id
/// lists before the dependents (which take the room the transaction has left), the
/// change event and the blob deletions, then a wide primary cut into chunks (every
/// other step sees it whole). The read path takes them in the reverse order: a wide
/// primary put back together before the blobs restore what any chunk offloaded.
pub(crate) fn declarations<S: TableStore + Clone + 'static>() -> [&'static dyn Declaration<S>; 9] {
    [
        &expiry::write::Expiry,
        &blob::Blobs,
        &unique::write::Unique,
        &index::write::Copies,
        &index_entity::write::Lists,
        &denormalized::write::Denormalized,
        &count::write::Counts,
        &changes::Changes,
        &wide::write::Wide,
    ]
}

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

/// The codec of a declaration's target type.
pub(crate) const fn target<T: TargetType>() -> Codec<Target>
where
    Target: From<T>,
{
    Codec {
        tag: T::TAG,
        decode: open::decode::<T, Target>,
    }
}

/// The codec of a declaration's operation type.
pub(crate) const fn operation<T: OperationType>() -> Codec<IndexOperation>
where
    IndexOperation: From<T>,
{
    Codec {
        tag: T::TAG,
        decode: open::decode::<T, IndexOperation>,
    }
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
