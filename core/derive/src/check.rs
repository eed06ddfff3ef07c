//! Checking: the shape of the input, its fields, and the entity's own declaration (table,
//! kind, version and keys), then each declaration in `decl` against them. Every mistake is
//! recorded on the attribute or field at fault.

use std::collections::HashMap;

use proc_macro2::Span;
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Fields, Ident, LitStr};

use crate::decl::changes;
use crate::decl::denormalized::{self, CheckedDenormalized};
use crate::decl::expiry::{self, Expiry};
use crate::decl::index::{self, CheckedIndex};
use crate::decl::index_entity::{self, CheckedIndexEntity};
use crate::decl::series::{self, CheckedSeries};
use crate::decl::wide::{self, CheckedWide};
use crate::internals::attr::required;
use crate::internals::ctxt::{Ctxt, one_of};
use crate::internals::field::{FieldModel, Storage};
use crate::internals::names::{check_property_name, check_table};
use crate::internals::scope::Scope;
use crate::internals::template::{CheckedTemplate, checked_template};
use crate::parse::{self, Container, FieldAttr, RENAME_RULES};

pub(crate) fn named_fields<'a>(
    cx: &Ctxt,
    input: &'a DeriveInput,
    derive: &str,
) -> Option<&'a syn::FieldsNamed> {
    if !input.generics.params.is_empty() {
        cx.error_spanned(
            &input.generics,
            format!(
                "#[derive({derive})] does not support generic types; declare a concrete struct"
            ),
        );
    }
    match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(fields) => Some(fields),
            _ => {
                cx.error_spanned(
                    &input.ident,
                    format!("#[derive({derive})] needs a struct with named fields"),
                );
                None
            }
        },
        Data::Enum(_) => {
            cx.error_spanned(
                &input.ident,
                format!(
                    "#[derive({derive})] needs a struct with named fields; for an enum of entity types use #[derive(EntityKind)]"
                ),
            );
            None
        }
        Data::Union(_) => {
            cx.error_spanned(
                &input.ident,
                format!("#[derive({derive})] needs a struct with named fields"),
            );
            None
        }
    }
}

/// The fields, their properties and storage, with the conflicts between field attributes
/// reported; beside them, each field's attribute for the declarations it makes.
pub(crate) fn field_models(
    cx: &Ctxt,
    fields: &syn::FieldsNamed,
    rename_all: Option<&LitStr>,
    allowed: &[&str],
) -> (Vec<FieldModel>, Vec<FieldAttr>) {
    let rule = rename_all.map(LitStr::value);
    if let (Some(rule), Some(lit)) = (&rule, rename_all)
        && !RENAME_RULES.contains(&rule.as_str())
    {
        cx.error_spanned(
            lit,
            format!(
                "unknown `rename_all` rule `{rule}`, expected one of {}",
                one_of(RENAME_RULES)
            ),
        );
    }
    let mut models = Vec::new();
    let mut attrs = Vec::new();
    for field in &fields.named {
        let Some(ident) = field.ident.clone() else {
            continue;
        };
        let attr = parse::field(cx, &field.attrs, allowed);
        let name = ident.unraw().to_string();
        let property = match (&attr.rename, &rule) {
            (Some(rename), _) => rename.value(),
            (None, Some(rule)) => parse::apply_rename(rule, &name),
            (None, None) => name.clone(),
        };
        let storage = if attr.skip.is_some() {
            Storage::Skipped
        } else if attr.json.is_some() {
            Storage::Json
        } else if attr.blob.is_some() {
            Storage::Blob
        } else {
            Storage::Property
        };
        if let Some(skip) = attr.skip {
            let others = [
                ("rename", attr.rename.is_some()),
                ("default", attr.default.is_some()),
                ("blob", attr.blob.is_some()),
                ("json", attr.json.is_some()),
                ("denormalized", attr.denormalized.is_some()),
                ("expires", attr.expires.is_some()),
            ];
            for (other, set) in others {
                if set {
                    cx.syn_error(syn::Error::new(
                        skip,
                        format!(
                            "`skip` and `{other}` exclude each other: a skipped field is not stored"
                        ),
                    ));
                }
            }
        }
        if let Some(expires) = attr.expires
            && (attr.blob.is_some() || attr.json.is_some())
        {
            cx.syn_error(syn::Error::new(
                expires,
                "an `expires` field is a plain `DateTime<Utc>` property, not `blob` or `json`",
            ));
        }
        if let (Some(blob), Some(_)) = (attr.blob, attr.json) {
            cx.syn_error(syn::Error::new(
                blob,
                "`blob` and `json` exclude each other: a blob field holds bytes or text",
            ));
        }
        if storage != Storage::Skipped {
            match &attr.rename {
                Some(lit) => check_property_name(cx, lit, &property),
                None => check_property_name(cx, &ident, &property),
            }
        }
        models.push(FieldModel {
            ident,
            name,
            ty: field.ty.clone(),
            property,
            storage,
            default: attr.default.clone(),
        });
        attrs.push(attr);
    }
    let mut seen: HashMap<&str, &Ident> = HashMap::new();
    for model in models.iter().filter(|m| m.storage != Storage::Skipped) {
        if let Some(first) = seen.insert(&model.property, &model.ident) {
            cx.error_spanned(
                &model.ident,
                format!(
                    "fields `{first}` and `{}` are both stored as property `{}`; rename one",
                    model.ident, model.property
                ),
            );
        }
    }
    (models, attrs)
}

pub(crate) struct CheckedEntity<'a> {
    pub(crate) table: String,
    pub(crate) kind: String,
    pub(crate) version: u32,
    pub(crate) kind_property: String,
    pub(crate) version_property: String,
    pub(crate) partition_key: CheckedTemplate,
    pub(crate) row_key: CheckedTemplate,
    pub(crate) indexes: Vec<CheckedIndex<'a>>,
    pub(crate) index_entities: Vec<CheckedIndexEntity<'a>>,
    /// The declarations described by their attribute alone.
    pub(crate) open: Vec<crate::internals::open::CheckedOpen>,
    pub(crate) denormalized: Vec<CheckedDenormalized<'a>>,
    pub(crate) expiry: Option<Expiry<'a>>,
    pub(crate) series: Option<CheckedSeries<'a>>,
    pub(crate) wide: Option<CheckedWide>,
}

/// Checks the entity: its table, kind, version and keys, then each declaration it makes.
/// `attrs` are the fields' attributes, beside `fields`.
pub(crate) fn check_entity<'a>(
    cx: &Ctxt,
    input: &DeriveInput,
    c: &'a Container,
    fields: &'a [FieldModel],
    attrs: &'a [FieldAttr],
) -> Option<CheckedEntity<'a>> {
    let at = &input.ident;
    let table = required(
        cx,
        c.table.as_ref(),
        at,
        "table",
        "#[entity(table = \"Employees\", …)]",
    );
    if let Some(table) = table {
        check_table(cx, table);
    }
    let kind = c
        .kind
        .as_ref()
        .map_or_else(|| input.ident.unraw().to_string(), LitStr::value);
    if let Some(lit) = &c.kind
        && kind.is_empty()
    {
        cx.error_spanned(lit, "a kind cannot be empty");
    }
    let version = match &c.version {
        None => Some(1),
        Some(lit) => match lit.base10_parse::<u32>() {
            Ok(v @ 1..) if i32::try_from(v).is_ok() => Some(v),
            _ => {
                cx.error_spanned(lit, "a version is an integer from 1 to 2147483647");
                None
            }
        },
    };
    let kind_property = c.kind_property.as_ref().map_or_else(
        || tablekit_core::typed::DEFAULT_KIND_PROPERTY.to_owned(),
        LitStr::value,
    );
    let version_property = c.version_property.as_ref().map_or_else(
        || tablekit_core::typed::DEFAULT_VERSION_PROPERTY.to_owned(),
        LitStr::value,
    );
    changes::check(cx, c.changes.as_ref());
    let expiry = expiry::check(
        cx,
        c.ttl.as_ref(),
        fields
            .iter()
            .zip(attrs)
            .filter(|(_, attr)| attr.expires.is_some())
            .map(|(field, _)| field),
    );
    if let Some(lit) = &c.kind_property {
        check_property_name(cx, lit, &kind_property);
    }
    if let Some(lit) = &c.version_property {
        check_property_name(cx, lit, &version_property);
    }
    if kind_property == version_property {
        cx.error_spanned(
            c.version_property
                .as_ref()
                .map_or_else(|| at.to_token_stream(), ToTokens::to_token_stream),
            "the kind and version properties need different names",
        );
    }
    for field in fields.iter().filter(|f| f.storage != Storage::Skipped) {
        if field.property == kind_property || field.property == version_property {
            cx.error_spanned(
                &field.ident,
                format!(
                    "field `{}` is stored as `{}`, which holds the entity's {}; rename the field or choose other names with `kind_property` / `version_property`",
                    field.name,
                    field.property,
                    if field.property == kind_property { "kind" } else { "version" }
                ),
            );
        }
    }

    let pk = required(
        cx,
        c.partition_key.as_ref(),
        at,
        "partition_key",
        "#[entity(partition_key = \"{department}\", …)]",
    )
    .and_then(|lit| checked_template(cx, lit, fields));
    let rk = required(
        cx,
        c.row_key.as_ref(),
        at,
        "row_key",
        "#[entity(row_key = \"empid_{id:06}\", …)]",
    )
    .and_then(|lit| checked_template(cx, lit, fields));

    let scope = Scope {
        fields,
        table: c.table.as_ref(),
        partition_key: pk.as_ref(),
        row_key: rk.as_ref(),
    };
    let mut names: HashMap<String, Span> = HashMap::new();
    let indexes = index::check(cx, &scope, &mut names, &c.indexes);
    let index_entities = index_entity::check(cx, &scope, &mut names, &c.index_entities);
    let open = crate::internals::open::check(cx, &scope, &mut names, &c.open);
    let denormalized = denormalized::check(
        cx,
        fields,
        fields
            .iter()
            .zip(attrs)
            .filter_map(|(field, attr)| Some((field, attr.denormalized.as_ref()?))),
    );

    let series = series::check(cx, at, c.series.as_ref(), fields, rk.as_ref());
    let points = series::points_name(c.series.as_ref());
    let spread = fields
        .iter()
        .any(|m| m.storage == Storage::Spread && Some(m.name.as_str()) != points.as_deref());
    let implied = series.as_ref().and_then(|s| s.chunks);
    let wide = wide::check(cx, at, c.wide.as_ref(), spread, implied, fields);

    Some(CheckedEntity {
        table: table?.value(),
        kind,
        version: version?,
        kind_property,
        version_property,
        partition_key: pk?,
        row_key: rk?,
        indexes,
        index_entities,
        open,
        denormalized,
        expiry,
        series,
        wide,
    })
}
