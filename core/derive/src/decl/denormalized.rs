//! A field's `denormalized(...)`: a copy of a property of another entity, found at the keys
//! the templates make from this entity's fields.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::LitStr;
use syn::meta::ParseNestedMeta;

use crate::internals::attr::{
    SpanOf, index_span, key_name, record, required, set_once, string, unknown,
};
use crate::internals::ctxt::Ctxt;
use crate::internals::field::FieldModel;
use crate::internals::names::{check_property_name, check_table};
use crate::internals::template::{CheckedTemplate, checked_template, template_tokens};
use crate::internals::tokens::option_str;

/// The `denormalized(...)` keys.
pub(crate) const DENORMALIZED_KEYS: &[&str] =
    &["from", "table", "partition_key", "row_key", "property"];

/// `denormalized(from = …, partition_key = …, row_key = …, property = …, table = …)`.
pub(crate) struct DenormalizedAttr {
    pub(crate) span: Span,
    pub(crate) from: Option<LitStr>,
    pub(crate) table: Option<LitStr>,
    pub(crate) partition_key: Option<LitStr>,
    pub(crate) row_key: Option<LitStr>,
    pub(crate) property: Option<LitStr>,
}

/// Parses the `denormalized(...)` key of a field's `#[entity(...)]`.
pub(crate) fn parse(cx: &Ctxt, meta: &ParseNestedMeta<'_>) -> syn::Result<DenormalizedAttr> {
    let mut d = DenormalizedAttr {
        span: meta.path.span_of(),
        from: None,
        table: None,
        partition_key: None,
        row_key: None,
        property: None,
    };
    let inner = meta.parse_nested_meta(|meta| {
        let parsed = match key_name(&meta).as_str() {
            "from" => string(&meta).map(|v| set_once(cx, &meta, "denormalized", &mut d.from, v)),
            "table" => string(&meta).map(|v| set_once(cx, &meta, "denormalized", &mut d.table, v)),
            "partition_key" => {
                string(&meta).map(|v| set_once(cx, &meta, "denormalized", &mut d.partition_key, v))
            }
            "row_key" => {
                string(&meta).map(|v| set_once(cx, &meta, "denormalized", &mut d.row_key, v))
            }
            "property" => {
                string(&meta).map(|v| set_once(cx, &meta, "denormalized", &mut d.property, v))
            }
            _ => return unknown(cx, &meta, "denormalized", DENORMALIZED_KEYS),
        };
        record(cx, parsed)
    });
    record(cx, inner)?;
    Ok(d)
}

pub(crate) struct CheckedDenormalized<'a> {
    field: &'a FieldModel,
    from: String,
    table: Option<&'a LitStr>,
    partition_key: CheckedTemplate,
    row_key: CheckedTemplate,
    property: String,
}

/// Checks each denormalised field: the kind it copies from, the keys it finds it at, the
/// property it copies and the table it lives in.
pub(crate) fn check<'a>(
    cx: &Ctxt,
    fields: &'a [FieldModel],
    declared: impl IntoIterator<Item = (&'a FieldModel, &'a DenormalizedAttr)>,
) -> Vec<CheckedDenormalized<'a>> {
    let mut denormalized = Vec::new();
    for (field, d) in declared {
        let example = "#[entity(denormalized(from = \"Employee\", partition_key = \"{department}\", row_key = \"empid_{manager_id:06}\", property = \"email\"))]";
        let span = index_span(d.span);
        let from = required(cx, d.from.as_ref(), &span, "from", example);
        let dpk = required(
            cx,
            d.partition_key.as_ref(),
            &span,
            "partition_key",
            example,
        )
        .and_then(|lit| checked_template(cx, lit, fields));
        let drk = required(cx, d.row_key.as_ref(), &span, "row_key", example)
            .and_then(|lit| checked_template(cx, lit, fields));
        let property = required(cx, d.property.as_ref(), &span, "property", example);
        if let Some(lit) = property {
            check_property_name(cx, lit, &lit.value());
        }
        if let Some(table) = &d.table {
            check_table(cx, table);
        }
        if let (Some(from), Some(dpk), Some(drk), Some(property)) = (from, dpk, drk, property) {
            denormalized.push(CheckedDenormalized {
                field,
                from: from.value(),
                table: d.table.as_ref(),
                partition_key: dpk,
                row_key: drk,
                property: property.value(),
            });
        }
    }
    denormalized
}

/// The schema's declaration of each denormalised field, with its templates added to
/// `templates`: a `DeclaredMeta` of attribute `denormalized` named after the property
/// holding the copy, with the source's `partition_key` and `row_key` templates, its
/// `table`, and the settings `field` (the Rust field), `from` (the source's kind) and
/// `property` (the source's property).
pub(crate) fn metas<'a>(
    denormalized: &'a [CheckedDenormalized<'_>],
    templates: &mut Vec<&'a CheckedTemplate>,
) -> Vec<TokenStream> {
    denormalized
        .iter()
        .map(|d| {
            templates.push(&d.partition_key);
            templates.push(&d.row_key);
            let field = &d.field.name;
            let property = &d.field.property;
            let from = &d.from;
            let table = option_str(d.table);
            let pk = template_tokens(&d.partition_key);
            let rk = template_tokens(&d.row_key);
            let source = &d.property;
            quote! {
                __tk::DeclaredMeta {
                    attribute: "denormalized",
                    name: #property,
                    key: __tk::None,
                    templates: &[("partition_key", #pk), ("row_key", #rk)],
                    table: #table,
                    settings: &[("field", #field), ("from", #from), ("property", #source)],
                }
            }
        })
        .collect()
}
