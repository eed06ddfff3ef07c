//! `#[unique(name = "email", key = "{email}", table = "UserEmails")]`: a value no two
//! entities of the type may hold at once, across partitions, reserved in a table of its
//! own before the entity is written (the patterns' `index::decl::unique`). An open
//! declaration: the schema carries it as a `DeclaredMeta`; it has no handle (a unique
//! value is read through the entity's `unique_key`).

use std::collections::HashMap;

use proc_macro2::Span;

use crate::internals::ctxt::Ctxt;
use crate::internals::keyed::Keyed;
use crate::internals::open::{CheckedOpen, Open, OpenAttr};
use crate::internals::scope::Scope;

/// `#[unique]`, for the derive.
pub(crate) const OPEN: Open = Open {
    attribute: "unique",
    keys: &["name", "key", "table"],
    check,
    handle: false,
};

/// Checks one unique value: its name, key and table.
fn check(
    cx: &Ctxt,
    scope: &Scope<'_>,
    names: &mut HashMap<String, Span>,
    attr: &OpenAttr,
) -> Option<CheckedOpen> {
    let (name, key, table) = (
        attr.string(cx, "name"),
        attr.string(cx, "key"),
        attr.string(cx, "table"),
    );
    let keyed = Keyed::new(cx, scope.fields, "unique", attr.span);
    let name = keyed.name(name.as_ref(), "email", "unique value", names);
    let key = keyed.template("key", key.as_ref(), "{email}");
    keyed.table(table.as_ref());
    let name_at = name?.clone();
    Some(CheckedOpen::new(
        &OPEN,
        name_at,
        Some(key?),
        table,
        Vec::new(),
    ))
}
