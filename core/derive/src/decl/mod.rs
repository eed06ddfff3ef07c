//! The declarations an entity type makes beyond its own table, kind, version and keys:
//! secondary indexes, index entities, unique values, denormalised fields, change events,
//! expiry, wide storage, data series and counts. Each module holds its attribute's model and
//! reads it (`parse`), checks it against the entity (`check`) and generates its part of the
//! schema (`metas`, `meta` or `generate`: each declaration a `DeclaredMeta` of its attribute
//! in the schema's `declared`, and the handles and impls it adds); an open declaration's module (`count`) holds its
//! description instead (`OPEN`), and `internals::open` reads and generates it. The modules
//! build on `internals` alone, never on each other nor on the derive that runs them.
//!
//! A declaration takes part in each step where that step runs, so the order of the errors
//! and of the generated code is the one written there: its attribute is handed to it in
//! `parse::container` (or `parse::field`, for a field's key), its `check` is called in
//! `check::check_entity` and kept in `CheckedEntity`, and its part is placed in the schema
//! in `generate::entity`. An open declaration, described by its attribute alone
//! (`crate::internals::open`), takes part through `OPEN` instead: it is registered by one
//! line in `open_declarations!` below, which declares its module and lists it. A new
//! attribute of either kind is also named in the derive's `attributes(…)` in `lib.rs`.

pub(crate) mod changes;
pub(crate) mod denormalized;
pub(crate) mod expiry;
pub(crate) mod index;
pub(crate) mod index_entity;
pub(crate) mod series;
pub(crate) mod wide;

/// Declares the module of each open declaration named and lists its description (the
/// module's `OPEN`) in `OPEN`: registering one is one line here.
macro_rules! open_declarations {
    ($($module:ident),* $(,)?) => {
        $(pub(crate) mod $module;)*

        /// The declarations described by their attribute alone (`crate::internals::open`):
        /// the derive's parse, check and generate steps reach them only through this list.
        pub(crate) static OPEN: &[&crate::internals::open::Open] = &[$(&$module::OPEN),*];
    };
}

open_declarations! {
    unique,
    count,
    feed,
}
