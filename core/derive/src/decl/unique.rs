//! `#[unique(...)]`: a value no two entities of the type may hold at once, across
//! partitions, reserved in a table of its own before the entity is written.

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::LitStr;

use crate::internals::attr::{
    SpanOf, index_span, key_name, record, required, set_once, string, unknown,
};
use crate::internals::ctxt::Ctxt;
use crate::internals::names::{check_name, check_table};
use crate::internals::scope::Scope;
use crate::internals::template::{CheckedTemplate, checked_template, template_tokens};
use crate::internals::tokens::option_str;

/// The `#[unique(...)]` keys.
pub(crate) const UNIQUE_KEYS: &[&str] = &["name", "key", "table"];

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
    let result = attr.parse_nested_meta(|meta| {
        let parsed = match key_name(&meta).as_str() {
            "name" => string(&meta).map(|v| set_once(cx, &meta, "unique", &mut unique.name, v)),
            "key" => string(&meta).map(|v| set_once(cx, &meta, "unique", &mut unique.key, v)),
            "table" => string(&meta).map(|v| set_once(cx, &meta, "unique", &mut unique.table, v)),
            _ => return unknown(cx, &meta, "unique", UNIQUE_KEYS),
        };
        record(cx, parsed)
    });
    record(cx, result).ok();
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
        let name = required(
            cx,
            unique.name.as_ref(),
            index_span(unique.span),
            "name",
            "#[unique(name = \"email\", …)]",
        );
        if let Some(name) = name {
            check_name(cx, name, names, "unique value");
        }
        let key = required(
            cx,
            unique.key.as_ref(),
            index_span(unique.span),
            "key",
            "#[unique(key = \"{email}\", …)]",
        )
        .and_then(|lit| checked_template(cx, lit, scope.fields));
        if let Some(table) = &unique.table {
            check_table(cx, table);
        }
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
