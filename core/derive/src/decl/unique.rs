//! `#[unique(...)]`: a value no two entities of the type may hold at once, across
//! partitions, reserved in a table of its own before the entity is written.

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::LitStr;

use crate::internals::attr::{Slot, SpanOf, read_keys};
use crate::internals::ctxt::Ctxt;
use crate::internals::keyed::Keyed;
use crate::internals::scope::Scope;
use crate::internals::template::{CheckedTemplate, template_tokens};
use crate::internals::tokens::option_str;

/// One `#[unique(...)]`.
pub(crate) struct UniqueAttr {
    pub(crate) span: Span,
    pub(crate) name: Option<LitStr>,
    pub(crate) key: Option<LitStr>,
    pub(crate) table: Option<LitStr>,
}

/// Parses one `#[unique(...)]`.
pub(crate) fn parse(cx: &Ctxt, attr: &syn::Attribute) -> UniqueAttr {
    let mut unique = UniqueAttr {
        span: attr.path().span_of(),
        name: None,
        key: None,
        table: None,
    };
    read_keys(
        cx,
        attr,
        "unique",
        &mut [
            ("name", Slot::Str(&mut unique.name)),
            ("key", Slot::Str(&mut unique.key)),
            ("table", Slot::Str(&mut unique.table)),
        ],
    );
    unique
}

pub(crate) struct CheckedUnique<'a> {
    name: String,
    key: CheckedTemplate,
    table: Option<&'a LitStr>,
}

/// Checks the unique values: their names, keys and tables.
pub(crate) fn check<'a>(
    cx: &Ctxt,
    scope: &Scope<'_>,
    names: &mut HashMap<String, Span>,
    declared: &'a [UniqueAttr],
) -> Vec<CheckedUnique<'a>> {
    let mut uniques = Vec::new();
    for unique in declared {
        let keyed = Keyed::new(cx, scope.fields, "unique", unique.span);
        let name = keyed.name(unique.name.as_ref(), "email", "unique value", names);
        let key = keyed.template("key", unique.key.as_ref(), "{email}");
        keyed.table(unique.table.as_ref());
        if let (Some(name), Some(key)) = (name, key) {
            uniques.push(CheckedUnique {
                name: name.value(),
                key,
                table: unique.table.as_ref(),
            });
        }
    }
    uniques
}

/// The `UniqueMeta` of each unique value, with its key added to `templates`.
pub(crate) fn metas<'a>(
    uniques: &'a [CheckedUnique<'_>],
    templates: &mut Vec<&'a CheckedTemplate>,
) -> Vec<TokenStream> {
    uniques
        .iter()
        .map(|unique| {
            templates.push(&unique.key);
            let name = &unique.name;
            let key = template_tokens(&unique.key);
            let table = option_str(unique.table);
            quote! {
                __tk::UniqueMeta {
                    name: #name,
                    key: #key,
                    table: #table,
                }
            }
        })
        .collect()
}
