//! `#[index(...)]`: a secondary index, a copy of the entity under other keys, in the
//! entity's partition, another partition or another table, sparse when `when` says so.

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::LitStr;

use crate::internals::attr::{Slot, SpanOf, read_keys};
use crate::internals::ctxt::Ctxt;
use crate::internals::field::{FieldModel, Storage, named};
use crate::internals::handle;
use crate::internals::keyed::Keyed;
use crate::internals::scope::Scope;
use crate::internals::template::{CheckedTemplate, may_collide, template_tokens};
use crate::internals::tokens::option_str;

/// One `#[index(...)]`.
pub(crate) struct IndexAttr {
    pub(crate) span: Span,
    pub(crate) name: Option<LitStr>,
    pub(crate) partition_key: Option<LitStr>,
    pub(crate) row_key: Option<LitStr>,
    pub(crate) table: Option<LitStr>,
    pub(crate) properties: Option<Vec<LitStr>>,
    pub(crate) when: Option<syn::Path>,
}

/// Parses one `#[index(...)]`.
pub(crate) fn parse(cx: &Ctxt, attr: &syn::Attribute) -> IndexAttr {
    let mut index = IndexAttr {
        span: attr.path().span_of(),
        name: None,
        partition_key: None,
        row_key: None,
        table: None,
        properties: None,
        when: None,
    };
    read_keys(
        cx,
        attr,
        "index",
        &mut [
            ("name", Slot::Str(&mut index.name)),
            ("partition_key", Slot::Str(&mut index.partition_key)),
            ("row_key", Slot::Str(&mut index.row_key)),
            ("table", Slot::Str(&mut index.table)),
            ("properties", Slot::StrList(&mut index.properties)),
            ("when", Slot::Path(&mut index.when)),
        ],
    );
    index
}

pub(crate) struct CheckedIndex<'a> {
    attr: &'a IndexAttr,
    name: String,
    partition_key: CheckedTemplate,
    row_key: CheckedTemplate,
    properties: Option<Vec<String>>,
    placement: &'static str,
}

/// Checks the indexes: their names, templates, tables and properties, and where their copies
/// live.
pub(crate) fn check<'a>(
    cx: &Ctxt,
    scope: &Scope<'_>,
    names: &mut HashMap<String, Span>,
    declared: &'a [IndexAttr],
) -> Vec<CheckedIndex<'a>> {
    let fields = scope.fields;
    let mut indexes = Vec::new();
    for index in declared {
        let keyed = Keyed::new(cx, fields, "index", index.span);
        let name = keyed.name(index.name.as_ref(), "email", "index", names);
        let ipk = keyed.template(
            "partition_key",
            index.partition_key.as_ref(),
            "{department}",
        );
        let irk = keyed.template("row_key", index.row_key.as_ref(), "email_{email}");
        keyed.table(index.table.as_ref());
        let properties = index.properties.as_ref().map(|list| {
            list.iter()
                .filter_map(|lit| {
                    let wanted = lit.value();
                    let field = named(cx, fields, &wanted, lit, "`properties`")?;
                    if field.storage == Storage::Skipped {
                        cx.error_spanned(
                            lit,
                            format!(
                                "field `{wanted}` is skipped, so an index copy cannot carry it"
                            ),
                        );
                        return None;
                    }
                    Some(field.property.clone())
                })
                .collect::<Vec<_>>()
        });
        if let (Some(name), Some(ipk), Some(irk)) = (name, ipk, irk) {
            let same_table = index
                .table
                .as_ref()
                .is_none_or(|t| Some(t.value()) == scope.table.map(LitStr::value));
            let same_partition = same_table
                && scope
                    .partition_key
                    .is_some_and(|pk| pk.template.parts() == ipk.template.parts());
            let placement = if same_partition {
                "SamePartition"
            } else if same_table {
                "OtherPartition"
            } else {
                "OtherTable"
            };
            indexes.push(CheckedIndex {
                attr: index,
                name: name.value(),
                partition_key: ipk,
                row_key: irk,
                properties,
                placement,
            });
        }
    }
    // Copies in the primary's partition must not be able to take a primary's RowKey, nor
    // each other's.
    let mut rows: Vec<(&str, &CheckedTemplate)> = Vec::new();
    if let Some(rk) = scope.row_key {
        rows.push(("the entity", rk));
    }
    for index in indexes.iter().filter(|i| i.placement == "SamePartition") {
        for (owner, other) in &rows {
            if may_collide(&index.row_key.template, &other.template) {
                cx.error_spanned(
                    &index.row_key.lit,
                    format!(
                        "the RowKeys of index `{}` may collide with those of {owner} (`{}`) in the same partition: start them with distinct literal prefixes, e.g. `email_{{email}}` next to `empid_{{id:06}}`",
                        index.name,
                        other.template.source()
                    ),
                );
            }
        }
        rows.push(("another index", &index.row_key));
    }
    indexes
}

/// The schema's declaration of each index, with its templates added to `templates`: a
/// `DeclaredMeta` of attribute `index` with the templates `partition_key` and `row_key`,
/// its copies' `table` only when they live in another table than the entity's, and the
/// settings `properties` (the properties a copy carries, comma-separated, when given) and
/// `sparse` (when `when` is given).
pub(crate) fn metas<'a>(
    indexes: &'a [CheckedIndex<'_>],
    templates: &mut Vec<&'a CheckedTemplate>,
) -> Vec<TokenStream> {
    indexes
        .iter()
        .map(|index| {
            templates.push(&index.partition_key);
            templates.push(&index.row_key);
            let name = &index.name;
            let table = match index.placement {
                "OtherTable" => option_str(index.attr.table.as_ref()),
                _ => quote!(__tk::None),
            };
            let pk = template_tokens(&index.partition_key);
            let rk = template_tokens(&index.row_key);
            let mut settings = Vec::new();
            if let Some(list) = &index.properties {
                let properties = list.join(",");
                settings.push(quote!(("properties", #properties)));
            }
            if index.attr.when.is_some() {
                settings.push(quote!(("sparse", "true")));
            }
            quote! {
                __tk::DeclaredMeta {
                    attribute: "index",
                    name: #name,
                    key: __tk::None,
                    templates: &[("partition_key", #pk), ("row_key", #rk)],
                    table: #table,
                    settings: &[#(#settings),*],
                }
            }
        })
        .collect()
}

/// The arms of `EntityType::in_index`: a sparse index holds the entities its `when` takes.
pub(crate) fn when_arms(indexes: &[CheckedIndex<'_>]) -> Vec<TokenStream> {
    indexes
        .iter()
        .filter_map(|index| {
            let when = index.attr.when.as_ref()?;
            let name = &index.name;
            Some(quote!(#name => #when(self)))
        })
        .collect()
}

/// The typed handle of each index: `pub const BY_EMAIL: Index<Self, K>`.
pub(crate) fn handles(
    vis: &syn::Visibility,
    indexes: &[CheckedIndex<'_>],
    models: &[FieldModel],
) -> Vec<TokenStream> {
    indexes
        .iter()
        .map(|index| {
            let key = handle::key_type(Some(&index.partition_key), &index.row_key, models);
            let doc = format!(
                "The index `{}` (PartitionKey `{}`, RowKey `{}`): look it up with `IndexedTable::lookup`, giving its fields in this order.",
                index.name,
                index.partition_key.template.source(),
                index.row_key.template.source()
            );
            let at = index.attr.name.as_ref().unwrap_or(&index.row_key.lit);
            handle::constant(vis, "Index", &index.name, at, key, &doc)
        })
        .collect()
}
