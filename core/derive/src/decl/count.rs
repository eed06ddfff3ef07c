//! `#[count(name = "by_status", key = "{status}", shards = 4, table = "OrderCounts")]`:
//! for each value of its key, the number of entities of the type that have it, kept
//! without a scan (the patterns' `index::decl::count`). An open declaration: the schema
//! carries it as a `DeclaredMeta`, its handle is a `Declared`.

use std::collections::HashMap;

use proc_macro2::Span;
use syn::Lit;

use crate::internals::attr::index_span;
use crate::internals::ctxt::Ctxt;
use crate::internals::names::{check_name, check_table};
use crate::internals::open::{CheckedOpen, Open, OpenAttr};
use crate::internals::scope::Scope;
use crate::internals::template::checked_template;

/// The most shards a count spreads one key over.
const MAX_SHARDS: u32 = 64;

/// `#[count]`, for the derive.
pub(crate) const OPEN: Open = Open {
    attribute: "count",
    keys: &["name", "key", "shards", "table"],
    check,
    handle: true,
};

fn check(
    cx: &Ctxt,
    scope: &Scope<'_>,
    names: &mut HashMap<String, Span>,
    attr: &OpenAttr,
) -> Option<CheckedOpen> {
    let example = "#[count(name = \"by_status\", key = \"{status}\")]";
    let name = attr.string(cx, "name");
    if name.is_none() && attr.value("name").is_none() {
        cx.error_spanned(index_span(attr.span), format!("missing `name`: {example}"));
    }
    if let Some(name) = &name {
        check_name(cx, name, names, "count");
    }
    let key = attr.string(cx, "key");
    if key.is_none() && attr.value("key").is_none() {
        cx.error_spanned(index_span(attr.span), format!("missing `key`: {example}"));
    }
    let key = key.and_then(|lit| checked_template(cx, &lit, scope.fields));
    let table = attr.string(cx, "table");
    if let Some(table) = &table {
        check_table(cx, table);
    }
    let mut settings = Vec::new();
    match attr.value("shards") {
        Some(Lit::Int(shards)) => match shards.base10_parse::<u32>() {
            Ok(n) if (1..=MAX_SHARDS).contains(&n) => {
                settings.push(("shards".to_owned(), n.to_string()));
            }
            _ => cx.error_spanned(
                shards,
                format!("`shards` is a number of shards from 1 to {MAX_SHARDS}"),
            ),
        },
        Some(other) => cx.error_spanned(other, "expected an integer: `shards = 4`"),
        None => {}
    }
    let name_at = name?;
    Some(CheckedOpen::new(
        &OPEN,
        name_at,
        Some(key?),
        table,
        settings,
    ))
}
