//! `#[index_entity(...)]`: for each value of a key template, the list of ids of the
//! entities that have it, kept in the entity's partition, in a table or in a blob.

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::LitStr;

use crate::internals::attr::{Slot, SpanOf, read_keys};
use crate::internals::ctxt::{Ctxt, one_of};
use crate::internals::field::FieldModel;
use crate::internals::handle;
use crate::internals::keyed::Keyed;
use crate::internals::scope::Scope;
use crate::internals::template::{CheckedTemplate, template_tokens};
use crate::internals::tokens::option_str;

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
    read_keys(
        cx,
        attr,
        "index_entity",
        &mut [
            ("name", Slot::Str(&mut index.name)),
            ("key", Slot::Str(&mut index.key)),
            ("table", Slot::Str(&mut index.table)),
            ("storage", Slot::Str(&mut index.storage)),
        ],
    );
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
        let keyed = Keyed::new(cx, scope.fields, "index_entity", index.span);
        let name = keyed.name(index.name.as_ref(), "last_name", "index entity", names);
        let key = keyed.template("key", index.key.as_ref(), "{last_name}");
        keyed.table(index.table.as_ref());
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

/// The schema's declaration of each index entity, with its key added to `templates`: a
/// `DeclaredMeta` of attribute `index_entity` with its `key` template, its `table` and the
/// setting `storage` (`partition`, `table` or `blob`).
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
            let storage = index.storage;
            quote! {
                __tk::DeclaredMeta {
                    attribute: "index_entity",
                    name: #name,
                    key: __tk::Some(#key),
                    templates: &[],
                    table: #table,
                    settings: &[("storage", #storage)],
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
