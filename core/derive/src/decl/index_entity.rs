//! `#[index_entity(...)]`: for each value of a key template, the list of ids of the
//! entities that have it, kept in the entity's partition, in a table or in a blob.

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::LitStr;

use crate::internals::attr::{
    SpanOf, index_span, key_name, record, required, set_once, string, unknown,
};
use crate::internals::ctxt::{Ctxt, one_of};
use crate::internals::field::FieldModel;
use crate::internals::handle;
use crate::internals::names::{check_name, check_table};
use crate::internals::scope::Scope;
use crate::internals::template::{CheckedTemplate, checked_template, template_tokens};
use crate::internals::tokens::option_str;

/// The `#[index_entity(...)]` keys.
pub(crate) const INDEX_ENTITY_KEYS: &[&str] = &["name", "key", "table", "storage"];
/// The index entity storages.
pub(crate) const STORAGES: &[&str] = &["partition", "table", "blob"];

/// One `#[index_entity(...)]`.
pub(crate) struct IndexEntityAttr {
    pub(crate) span: Span,
    pub(crate) name: Option<LitStr>,
    pub(crate) key: Option<LitStr>,
    pub(crate) table: Option<LitStr>,
    pub(crate) storage: Option<LitStr>,
}

/// Parses one `#[index_entity(...)]`.
pub(crate) fn parse(cx: &Ctxt, attr: &syn::Attribute) -> IndexEntityAttr {
    let mut index = IndexEntityAttr {
        span: attr.path().span_of(),
        name: None,
        key: None,
        table: None,
        storage: None,
    };
    let result = attr.parse_nested_meta(|meta| {
        let parsed = match key_name(&meta).as_str() {
            "name" => {
                string(&meta).map(|v| set_once(cx, &meta, "index_entity", &mut index.name, v))
            }
            "key" => string(&meta).map(|v| set_once(cx, &meta, "index_entity", &mut index.key, v)),
            "table" => {
                string(&meta).map(|v| set_once(cx, &meta, "index_entity", &mut index.table, v))
            }
            "storage" => {
                string(&meta).map(|v| set_once(cx, &meta, "index_entity", &mut index.storage, v))
            }
            _ => return unknown(cx, &meta, "index_entity", INDEX_ENTITY_KEYS),
        };
        record(cx, parsed)
    });
    record(cx, result).ok();
    index
}

pub(crate) struct CheckedIndexEntity<'a> {
    name: String,
    key: CheckedTemplate,
    table: Option<&'a LitStr>,
    storage: &'static str,
}

/// Checks the index entities: their names, keys, storages and tables.
pub(crate) fn check<'a>(
    cx: &Ctxt,
    scope: &Scope<'_>,
    names: &mut HashMap<String, Span>,
    declared: &'a [IndexEntityAttr],
) -> Vec<CheckedIndexEntity<'a>> {
    let mut index_entities = Vec::new();
    for index in declared {
        let name = required(
            cx,
            index.name.as_ref(),
            index_span(index.span),
            "name",
            "#[index_entity(name = \"last_name\", …)]",
        );
        if let Some(name) = name {
            check_name(cx, name, names, "index entity");
        }
        let key = required(
            cx,
            index.key.as_ref(),
            index_span(index.span),
            "key",
            "#[index_entity(key = \"{last_name}\", …)]",
        )
        .and_then(|lit| checked_template(cx, lit, scope.fields));
        if let Some(table) = &index.table {
            check_table(cx, table);
        }
        let storage = match &index.storage {
            None => Some("partition"),
            Some(lit) => match STORAGES.iter().find(|s| **s == lit.value()) {
                Some(s) => Some(*s),
                None => {
                    cx.error_spanned(
                        lit,
                        format!(
                            "unknown index entity storage `{}`, expected one of {}",
                            lit.value(),
                            one_of(STORAGES)
                        ),
                    );
                    None
                }
            },
        };
        if let (Some(storage @ ("partition" | "blob")), Some(table)) = (storage, &index.table) {
            cx.error_spanned(
                table,
                format!("`table` applies to `storage = \"table\"`; index entities with `storage = \"{storage}\"` do not live in a table of their own"),
            );
        }
        if let (Some(name), Some(key), Some(storage)) = (name, key, storage) {
            index_entities.push(CheckedIndexEntity {
                name: name.value(),
                key,
                table: index.table.as_ref(),
                storage,
            });
        }
    }
    index_entities
}

/// The `IndexEntityMeta` of each index entity, with its key added to `templates`.
pub(crate) fn metas<'a>(
    index_entities: &'a [CheckedIndexEntity<'_>],
    templates: &mut Vec<&'a CheckedTemplate>,
) -> Vec<TokenStream> {
    index_entities
        .iter()
        .map(|index| {
            templates.push(&index.key);
            let name = &index.name;
            let key = template_tokens(&index.key);
            let table = option_str(index.table);
            let storage = format_ident!(
                "{}",
                match index.storage {
                    "table" => "Table",
                    "blob" => "Blob",
                    _ => "Partition",
                }
            );
            quote! {
                __tk::IndexEntityMeta {
                    name: #name,
                    key: #key,
                    table: #table,
                    storage: __tk::IndexEntityStorage::#storage,
                }
            }
        })
        .collect()
}

/// The typed handle of each id list: `pub const LAST_NAME: IdList<Self, K>`.
pub(crate) fn handles(
    vis: &syn::Visibility,
    index_entities: &[CheckedIndexEntity<'_>],
    models: &[FieldModel],
) -> Vec<TokenStream> {
    index_entities
        .iter()
        .map(|index| {
            let key = handle::key_type(None, &index.key, models);
            let doc = format!(
                "The id list `{}` (key `{}`): read it with `IndexedTable::list`, giving its fields in this order.",
                index.name,
                index.key.template.source()
            );
            handle::constant(vis, "IdList", &index.name, &index.key.lit, key, &doc)
        })
        .collect()
}
