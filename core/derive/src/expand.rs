//! `#[derive(Entity)]` and `#[derive(Projection)]`: check the declaration, then generate the
//! trait impls and the static schema.

use std::collections::{BTreeMap, HashMap};

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Fields, Ident, LitStr, Path, Type};
use tablekit_core::limits;
use tablekit_core::typed::{KeyFormat, KeyTemplate, TemplatePart};

use crate::attr::{self, Container, DefaultAttr, FieldAttr, RENAME_RULES, STORAGES};
use crate::ctxt::{Ctxt, one_of};

/// How a field is stored.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Storage {
    Property,
    Json,
    Blob,
    Skipped,
}

struct FieldModel {
    ident: Ident,
    name: String,
    ty: Type,
    property: String,
    storage: Storage,
    attr: FieldAttr,
}

/// A key template checked against the fields.
struct CheckedTemplate {
    lit: LitStr,
    template: KeyTemplate,
}

pub(crate) fn default_crate() -> Path {
    syn::parse_quote!(::tablekit)
}

/// Gives every token the span of `span`, so that errors about generated code point at the
/// attribute that asked for it.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|token| match token {
            TokenTree::Group(group) => {
                let mut new = Group::new(group.delimiter(), respan(group.stream(), span));
                new.set_span(span);
                TokenTree::Group(new)
            }
            mut other => {
                other.set_span(span);
                other
            }
        })
        .collect()
}

fn named_fields<'a>(
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

fn check_property_name(cx: &Ctxt, at: impl ToTokens, name: &str) {
    if let Err(violation) = limits::check_property_name(name) {
        cx.error_spanned(at, violation);
    }
}

/// The fields, their properties and storage, with the conflicts between field attributes
/// reported.
fn field_models(
    cx: &Ctxt,
    fields: &syn::FieldsNamed,
    rename_all: Option<&LitStr>,
    allowed: &[&str],
) -> Vec<FieldModel> {
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
    for field in &fields.named {
        let Some(ident) = field.ident.clone() else {
            continue;
        };
        let attr = attr::field(cx, &field.attrs, allowed);
        let name = ident.unraw().to_string();
        let property = match (&attr.rename, &rule) {
            (Some(rename), _) => rename.value(),
            (None, Some(rule)) => attr::apply_rename(rule, &name),
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
            attr,
        });
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
    models
}

/// Parses a template and checks its fields against the struct's.
fn checked_template(cx: &Ctxt, lit: &LitStr, fields: &[FieldModel]) -> Option<CheckedTemplate> {
    let template = match KeyTemplate::parse(&lit.value()) {
        Ok(t) => t,
        Err(e) => {
            cx.error_spanned(
                lit,
                format!("invalid key template: {} (at byte {})", e.message, e.offset),
            );
            return None;
        }
    };
    let mut ok = true;
    for name in template.fields() {
        match fields.iter().find(|f| f.name == name) {
            None => {
                let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                cx.error_spanned(
                    lit,
                    format!(
                        "unknown field `{name}` in key template, expected one of {}",
                        one_of(&names)
                    ),
                );
                ok = false;
            }
            Some(field) if field.storage != Storage::Property => {
                let why = match field.storage {
                    Storage::Skipped => "is skipped (not stored)",
                    Storage::Json => "is stored as json",
                    _ => "is a blob field",
                };
                cx.error_spanned(
                    lit,
                    format!("field `{name}` cannot be part of a key: it {why}"),
                );
                ok = false;
            }
            Some(_) => {}
        }
    }
    ok.then(|| CheckedTemplate {
        lit: lit.clone(),
        template,
    })
}

fn required<'a>(
    cx: &Ctxt,
    value: Option<&'a LitStr>,
    at: impl ToTokens,
    what: &str,
    example: &str,
) -> Option<&'a LitStr> {
    if value.is_none() {
        cx.error_spanned(at, format!("missing `{what}`: {example}"));
    }
    value
}

/// A queue name as every queue backend takes it (the workers' `check_queue_name`).
fn check_queue_name(cx: &Ctxt, lit: &LitStr) {
    let name = lit.value();
    let reason = if name.is_empty() {
        Some("a queue name cannot be empty")
    } else if name.len() > 200 {
        Some("a queue name has at most 200 bytes")
    } else if name.starts_with("amq.") {
        Some("names starting with `amq.` are reserved by AMQP")
    } else if name.chars().any(char::is_control) {
        Some("a queue name cannot hold control characters")
    } else {
        None
    };
    if let Some(reason) = reason {
        cx.error_spanned(lit, format!("invalid `changes` queue `{name}`: {reason}"));
    }
}

fn check_table(cx: &Ctxt, lit: &LitStr) {
    if let Err(violation) = limits::check_table_name(&lit.value()) {
        cx.error_spanned(lit, violation);
    }
}

fn check_name(cx: &Ctxt, lit: &LitStr, names: &mut HashMap<String, Span>, what: &str) {
    let name = lit.value();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        cx.error_spanned(
            lit,
            format!("{what} names are letters, digits and `_`, got `{name}`"),
        );
    }
    if names.insert(name.clone(), lit.span()).is_some() {
        cx.error_spanned(lit, format!("duplicate index name `{name}`: index, index entity and unique value names are unique within a type"));
    }
}

/// Two RowKey templates in one partition whose literal prefixes do not keep them apart.
fn may_collide(a: &KeyTemplate, b: &KeyTemplate) -> bool {
    let (pa, pb) = (a.literal_prefix(), b.literal_prefix());
    pa.starts_with(pb) || pb.starts_with(pa)
}

/// The static tokens of a checked template.
fn template_tokens(t: &CheckedTemplate) -> TokenStream {
    let source = t.template.source();
    let parts = t.template.parts().iter().map(|part| match part {
        TemplatePart::Literal(text) => {
            let text = text.as_ref();
            quote!(__tk::TemplatePart::literal(#text))
        }
        TemplatePart::Field { name, format } => {
            let name = name.as_ref();
            let format = match format {
                KeyFormat::Plain => quote!(__tk::KeyFormat::Plain),
                KeyFormat::Pad(n) => quote!(__tk::KeyFormat::Pad(#n)),
                KeyFormat::Hash(n) => quote!(__tk::KeyFormat::Hash(#n)),
                KeyFormat::TicksDesc => quote!(__tk::KeyFormat::TicksDesc),
            };
            quote!(__tk::TemplatePart::field(#name, #format))
        }
    });
    quote!({
        const PARTS: &[__tk::TemplatePart] = &[#(#parts),*];
        __tk::KeyTemplate::from_static(#source, PARTS)
    })
}

/// Compile-time checks that each field a template uses has a type its format accepts; the
/// errors point at the template.
fn template_assertions(t: &CheckedTemplate, fields: &[FieldModel]) -> TokenStream {
    let span = t.lit.span();
    let mut checks = TokenStream::new();
    for part in t.template.parts() {
        let TemplatePart::Field { name, format } = part else {
            continue;
        };
        let Some(field) = fields.iter().find(|f| f.name == name.as_ref()) else {
            continue;
        };
        let ty = respan(field.ty.to_token_stream(), span);
        let check = match format {
            KeyFormat::Pad(_) => quote_spanned!(span=> __tk::assert_padded::<#ty>();),
            KeyFormat::TicksDesc => quote_spanned!(span=> __tk::assert_ticks::<#ty>();),
            KeyFormat::Plain | KeyFormat::Hash(_) => {
                quote_spanned!(span=> __tk::assert_key_part::<#ty>();)
            }
        };
        checks.extend(check);
    }
    checks
}

fn option_str(value: Option<&LitStr>) -> TokenStream {
    match value {
        Some(lit) => quote!(__tk::Some(#lit)),
        None => quote!(__tk::None),
    }
}

fn is_option(ty: &Type) -> bool {
    match ty {
        Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Option"),
        _ => false,
    }
}

/// `#[derive(Entity)]`.
pub(crate) fn entity(input: &DeriveInput) -> Result<TokenStream, TokenStream> {
    let cx = Ctxt::default();
    let container = attr::container(&cx, &input.attrs);
    let Some(fields) = named_fields(&cx, input, "Entity") else {
        cx.check()?;
        return Err(
            quote!(::core::compile_error!("#[derive(Entity)] needs a struct with named fields");),
        );
    };
    let models = field_models(&cx, fields, container.rename_all.as_ref(), attr::FIELD_KEYS);
    let checked = check_entity(&cx, input, &container, &models);
    cx.check()?;
    let Some(checked) = checked else {
        return Err(quote!(::core::compile_error!(
            "#[derive(Entity)]: invalid declaration"
        )));
    };
    Ok(generate_entity(input, &container, &models, &checked))
}

struct CheckedIndex<'a> {
    attr: &'a attr::IndexAttr,
    name: String,
    partition_key: CheckedTemplate,
    row_key: CheckedTemplate,
    properties: Option<Vec<String>>,
    placement: &'static str,
}

struct CheckedIndexEntity<'a> {
    name: String,
    key: CheckedTemplate,
    table: Option<&'a LitStr>,
    storage: &'static str,
}

struct CheckedUnique<'a> {
    name: String,
    key: CheckedTemplate,
    table: Option<&'a LitStr>,
}

struct CheckedDenormalized<'a> {
    field: &'a FieldModel,
    from: String,
    table: Option<&'a LitStr>,
    partition_key: CheckedTemplate,
    row_key: CheckedTemplate,
    property: String,
}

struct CheckedEntity<'a> {
    table: String,
    kind: String,
    version: u32,
    kind_property: String,
    version_property: String,
    partition_key: CheckedTemplate,
    row_key: CheckedTemplate,
    indexes: Vec<CheckedIndex<'a>>,
    index_entities: Vec<CheckedIndexEntity<'a>>,
    uniques: Vec<CheckedUnique<'a>>,
    denormalized: Vec<CheckedDenormalized<'a>>,
    expiry: Option<Expiry<'a>>,
}

/// How a type's entities expire.
enum Expiry<'a> {
    /// `#[entity(ttl = "…")]`, in seconds.
    Ttl(u64),
    /// An `#[entity(expires)]` field.
    Field(&'a FieldModel),
}

/// The type's expiry declaration, checked: a valid `ttl`, at most one `expires` field, not
/// both.
fn check_expiry<'a>(cx: &Ctxt, c: &Container, fields: &'a [FieldModel]) -> Option<Expiry<'a>> {
    let ttl = c.ttl.as_ref().and_then(|lit| match attr::parse_ttl(&lit.value()) {
        Ok(seconds) => Some(seconds),
        Err(reason) => {
            cx.error_spanned(
                lit,
                format!(
                    "invalid `ttl` `{}`: {reason}; write it like \"30d\", \"12h\", \"1d12h\" or \"90s\"",
                    lit.value()
                ),
            );
            None
        }
    });
    let mut marked = fields.iter().filter(|f| f.attr.expires.is_some());
    let field = marked.next();
    for extra in marked {
        cx.error_spanned(
            &extra.ident,
            format!(
                "only one field may say when the entity expires; `{}` already does",
                field.map_or("", |f| f.name.as_str())
            ),
        );
    }
    match (ttl, field, &c.ttl) {
        (_, Some(f), Some(lit)) => {
            cx.error_spanned(
                lit,
                format!(
                    "`ttl` and the `expires` field `{}` exclude each other: choose one way to expire",
                    f.name
                ),
            );
            None
        }
        (Some(seconds), None, _) => Some(Expiry::Ttl(seconds)),
        (None, Some(f), _) => Some(Expiry::Field(f)),
        _ => None,
    }
}

fn check_entity<'a>(
    cx: &Ctxt,
    input: &DeriveInput,
    c: &'a Container,
    fields: &'a [FieldModel],
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
    if let Some(lit) = &c.changes {
        check_queue_name(cx, lit);
    }
    let expiry = check_expiry(cx, c, fields);
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

    let mut names: HashMap<String, Span> = HashMap::new();
    let mut indexes = Vec::new();
    for index in &c.indexes {
        let name = required(
            cx,
            index.name.as_ref(),
            index_span(index.span),
            "name",
            "#[index(name = \"email\", …)]",
        );
        if let Some(name) = name {
            check_name(cx, name, &mut names, "index");
        }
        let ipk = required(
            cx,
            index.partition_key.as_ref(),
            index_span(index.span),
            "partition_key",
            "#[index(partition_key = \"{department}\", …)]",
        )
        .and_then(|lit| checked_template(cx, lit, fields));
        let irk = required(
            cx,
            index.row_key.as_ref(),
            index_span(index.span),
            "row_key",
            "#[index(row_key = \"email_{email}\", …)]",
        )
        .and_then(|lit| checked_template(cx, lit, fields));
        if let Some(table) = &index.table {
            check_table(cx, table);
        }
        let properties = index.properties.as_ref().map(|list| {
            list.iter()
                .filter_map(|lit| {
                    let wanted = lit.value();
                    match fields.iter().find(|f| f.name == wanted) {
                        Some(f) if f.storage == Storage::Skipped => {
                            cx.error_spanned(
                                lit,
                                format!(
                                    "field `{wanted}` is skipped, so an index copy cannot carry it"
                                ),
                            );
                            None
                        }
                        Some(f) => Some(f.property.clone()),
                        None => {
                            let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                            cx.error_spanned(
                                lit,
                                format!(
                                    "unknown field `{wanted}` in `properties`, expected one of {}",
                                    one_of(&names)
                                ),
                            );
                            None
                        }
                    }
                })
                .collect::<Vec<_>>()
        });
        if let (Some(name), Some(ipk), Some(irk)) = (name, ipk, irk) {
            let same_table = index
                .table
                .as_ref()
                .is_none_or(|t| Some(t.value()) == c.table.as_ref().map(LitStr::value));
            let same_partition = same_table
                && pk
                    .as_ref()
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
    if let Some(rk) = &rk {
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

    let mut index_entities = Vec::new();
    for index in &c.index_entities {
        let name = required(
            cx,
            index.name.as_ref(),
            index_span(index.span),
            "name",
            "#[index_entity(name = \"last_name\", …)]",
        );
        if let Some(name) = name {
            check_name(cx, name, &mut names, "index entity");
        }
        let key = required(
            cx,
            index.key.as_ref(),
            index_span(index.span),
            "key",
            "#[index_entity(key = \"{last_name}\", …)]",
        )
        .and_then(|lit| checked_template(cx, lit, fields));
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

    let mut uniques = Vec::new();
    for unique in &c.uniques {
        let name = required(
            cx,
            unique.name.as_ref(),
            index_span(unique.span),
            "name",
            "#[unique(name = \"email\", …)]",
        );
        if let Some(name) = name {
            check_name(cx, name, &mut names, "unique value");
        }
        let key = required(
            cx,
            unique.key.as_ref(),
            index_span(unique.span),
            "key",
            "#[unique(key = \"{email}\", …)]",
        )
        .and_then(|lit| checked_template(cx, lit, fields));
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

    let mut denormalized = Vec::new();
    for field in fields {
        let Some(d) = &field.attr.denormalized else {
            continue;
        };
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
        uniques,
        denormalized,
        expiry,
    })
}

fn index_span(span: Span) -> TokenStream {
    quote_spanned!(span=> index)
}

fn krate(c: Option<&Path>) -> Path {
    c.cloned().unwrap_or_else(default_crate)
}

/// Field metadata, field assertions, and the writer and reader statements.
struct FieldCode {
    metas: Vec<TokenStream>,
    assertions: TokenStream,
    writes: Vec<TokenStream>,
    reads: Vec<TokenStream>,
}

fn field_code(models: &[FieldModel]) -> FieldCode {
    let mut code = FieldCode {
        metas: Vec::new(),
        assertions: TokenStream::new(),
        writes: Vec::new(),
        reads: Vec::new(),
    };
    for field in models {
        let ident = &field.ident;
        let name = &field.name;
        let property = &field.property;
        let ty = &field.ty;
        let span = field.ty.span_of_tokens();
        let optional = is_option(ty);
        let (storage, edm) = match field.storage {
            Storage::Property => (
                quote!(__tk::FieldStorage::Property),
                quote!(__tk::Some(<#ty as __tk::FieldValue>::EDM)),
            ),
            Storage::Blob => (
                quote!(__tk::FieldStorage::Blob),
                quote!(__tk::Some(<#ty as __tk::FieldValue>::EDM)),
            ),
            Storage::Json => (
                quote!(__tk::FieldStorage::Json),
                quote!(__tk::Some(__tk::EdmType::String)),
            ),
            Storage::Skipped => (quote!(__tk::FieldStorage::Skipped), quote!(__tk::None)),
        };
        let has_default = field.attr.default.is_some() || field.storage == Storage::Skipped;
        code.metas.push(quote! {
            __tk::FieldMeta {
                name: #name,
                property: #property,
                edm: #edm,
                storage: #storage,
                optional: #optional,
                has_default: #has_default,
            }
        });
        let assertion = match field.storage {
            Storage::Property => quote_spanned!(span=> __tk::assert_field::<#ty>();),
            Storage::Blob => quote_spanned!(span=> __tk::assert_blob::<#ty>();),
            Storage::Json => quote_spanned!(span=> __tk::assert_json::<#ty>();),
            Storage::Skipped => quote_spanned!(span=> __tk::assert_default::<#ty>();),
        };
        code.assertions.extend(assertion);
        let default = match &field.attr.default {
            Some(DefaultAttr::Path(path)) => quote!(#path),
            _ => quote!(::core::default::Default::default),
        };
        // Spanned on the field's type, so a type without a mapping is reported there only.
        match field.storage {
            Storage::Property | Storage::Blob => {
                code.writes
                    .push(quote_spanned!(span=> writer.field(#property, &self.#ident)?;));
                code.reads.push(match field.attr.default {
                    Some(_) => quote_spanned!(span=> #ident: reader.field_or(#property, #default)?),
                    None => quote_spanned!(span=> #ident: reader.field(#property)?),
                });
            }
            Storage::Json => {
                code.writes
                    .push(quote_spanned!(span=> writer.json(#property, &self.#ident)?;));
                code.reads.push(match field.attr.default {
                    Some(_) => quote_spanned!(span=> #ident: reader.json_or(#property, #default)?),
                    None => quote_spanned!(span=> #ident: reader.json(#property)?),
                });
            }
            Storage::Skipped => {
                code.reads
                    .push(quote!(#ident: ::core::default::Default::default()));
            }
        }
    }
    code
}

trait SpanOfTokens {
    fn span_of_tokens(&self) -> Span;
}

impl<T: ToTokens> SpanOfTokens for T {
    fn span_of_tokens(&self) -> Span {
        self.to_token_stream()
            .into_iter()
            .next()
            .map_or_else(Span::call_site, |t| t.span())
    }
}

fn generate_entity(
    input: &DeriveInput,
    c: &Container,
    models: &[FieldModel],
    e: &CheckedEntity<'_>,
) -> TokenStream {
    let ident = &input.ident;
    let krate = krate(c.krate.as_ref());
    let type_name = ident.unraw().to_string();
    let CheckedEntity {
        table,
        kind,
        version,
        kind_property,
        version_property,
        ..
    } = e;
    let code = field_code(models);
    let metas = &code.metas;
    let writes = &code.writes;
    let reads = &code.reads;
    let field_count = models.len();

    let mut templates: Vec<&CheckedTemplate> = vec![&e.partition_key, &e.row_key];
    let index_metas: Vec<TokenStream> = e
        .indexes
        .iter()
        .map(|index| {
            templates.push(&index.partition_key);
            templates.push(&index.row_key);
            let name = &index.name;
            let table = option_str(index.attr.table.as_ref());
            let pk = template_tokens(&index.partition_key);
            let rk = template_tokens(&index.row_key);
            let properties = match &index.properties {
                Some(list) => quote!(__tk::Some(&[#(#list),*])),
                None => quote!(__tk::None),
            };
            let sparse = index.attr.when.is_some();
            let placement = format_ident!("{}", index.placement);
            quote! {
                __tk::IndexMeta {
                    name: #name,
                    table: #table,
                    partition_key: #pk,
                    row_key: #rk,
                    properties: #properties,
                    sparse: #sparse,
                    placement: __tk::IndexPlacement::#placement,
                }
            }
        })
        .collect();
    let index_entity_metas: Vec<TokenStream> = e
        .index_entities
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
        .collect();
    let unique_metas: Vec<TokenStream> = e
        .uniques
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
        .collect();
    let denormalized_metas: Vec<TokenStream> = e
        .denormalized
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
                __tk::DenormalizedMeta {
                    field: #field,
                    property: #property,
                    from_kind: #from,
                    table: #table,
                    partition_key: #pk,
                    row_key: #rk,
                    source_property: #source,
                }
            }
        })
        .collect();

    let mut assertions = code.assertions.clone();
    let mut key_fields: BTreeMap<String, &FieldModel> = BTreeMap::new();
    for template in &templates {
        assertions.extend(template_assertions(template, models));
        for name in template.template.fields() {
            if let Some(field) = models.iter().find(|f| f.name == name) {
                key_fields.insert(name.to_owned(), field);
            }
        }
    }
    let key_arms = key_fields.iter().map(|(name, field)| {
        let ident = &field.ident;
        let span = field.ty.span_of_tokens();
        quote_spanned!(span=> #name => __tk::Some(&self.#ident as &dyn __tk::KeyPart))
    });
    let when_arms = e.indexes.iter().filter_map(|index| {
        let when = index.attr.when.as_ref()?;
        let name = &index.name;
        Some(quote!(#name => #when(self)))
    });
    let pk = template_tokens(&e.partition_key);
    let rk = template_tokens(&e.row_key);
    let changes = option_str(c.changes.as_ref());
    let (expiry, expires, expiry_write) = match &e.expiry {
        None => (quote!(__tk::None), false, quote!()),
        Some(Expiry::Ttl(seconds)) => (
            quote!(__tk::Some(__tk::ExpiryMeta::Ttl(#seconds))),
            true,
            quote!(),
        ),
        Some(Expiry::Field(field)) => {
            let name = &field.name;
            let ident = &field.ident;
            let ty = &field.ty;
            // Spanned on the field's type: a type that cannot say when is reported there.
            let span = ty.span_of_tokens();
            (
                quote!(__tk::Some(__tk::ExpiryMeta::Field(#name))),
                true,
                quote_spanned!(span=> writer.expires(&self.#ident);),
            )
        }
    };
    let upcast = match &c.upcast {
        Some(path) => quote! {
            __tk::Some(|entity: &mut __tk::Entity, version: u32| {
                __tk::upcast_with(entity, version, #path)
            })
        },
        None => quote!(__tk::None),
    };

    quote! {
        #[automatically_derived]
        #[allow(clippy::all, clippy::pedantic, unused_qualifications)]
        const _: () = {
            use #krate::typed::__private as __tk;

            const _: () = {
                #assertions
            };

            static SCHEMA: __tk::Schema = __tk::Schema {
                type_name: #type_name,
                table: #table,
                kind: #kind,
                version: #version,
                kind_property: #kind_property,
                version_property: #version_property,
                partition_key: #pk,
                row_key: #rk,
                fields: &[#(#metas),*],
                indexes: &[#(#index_metas),*],
                index_entities: &[#(#index_entity_metas),*],
                denormalized: &[#(#denormalized_metas),*],
                uniques: &[#(#unique_metas),*],
                changes: #changes,
                expiry: #expiry,
            };

            #[automatically_derived]
            impl __tk::Record for #ident {
                const TABLE: &'static str = #table;

                fn partition_key(&self) -> __tk::Result<__tk::String> {
                    __tk::render_key(self, &SCHEMA.partition_key, __tk::KeyKind::PartitionKey)
                }

                fn row_key(&self) -> __tk::Result<__tk::String> {
                    __tk::render_key(self, &SCHEMA.row_key, __tk::KeyKind::RowKey)
                }

                fn to_entity(&self) -> __tk::Result<__tk::Entity> {
                    let mut writer = __tk::EntityWriter::new::<Self>(
                        __tk::Record::partition_key(self)?,
                        __tk::Record::row_key(self)?,
                        #field_count,
                    );
                    #(#writes)*
                    #expiry_write
                    __tk::Ok(writer.finish())
                }

                fn from_entity(entity: __tk::Entity) -> __tk::Result<__tk::Stored<Self>> {
                    let mut reader = __tk::EntityReader::new::<Self>(entity, #upcast)?;
                    let value = #ident {
                        #(#reads,)*
                    };
                    __tk::Ok(reader.finish(value))
                }

                fn kind_filter() -> __tk::Option<__tk::Filter> {
                    __tk::Some(__tk::kind_filter(#kind_property, #kind))
                }

                fn expires() -> bool {
                    #expires
                }
            }

            #[automatically_derived]
            impl __tk::EntityType for #ident {
                const KIND: &'static str = #kind;
                const VERSION: u32 = #version;
                const KIND_PROPERTY: &'static str = #kind_property;
                const VERSION_PROPERTY: &'static str = #version_property;

                fn schema() -> &'static __tk::Schema {
                    &SCHEMA
                }

                fn key_part(&self, field: &str) -> __tk::Option<&dyn __tk::KeyPart> {
                    match field {
                        #(#key_arms,)*
                        _ => __tk::None,
                    }
                }

                fn in_index(&self, index: &str) -> bool {
                    match index {
                        #(#when_arms,)*
                        _ => true,
                    }
                }
            }
        };
    }
}

/// `#[derive(Projection)]`.
pub(crate) fn projection(input: &DeriveInput) -> Result<TokenStream, TokenStream> {
    let cx = Ctxt::default();
    let (krate_path, rename_all) = attr::crate_only(&cx, &input.attrs, &["crate", "rename_all"]);
    let fields = named_fields(&cx, input, "Projection");
    let models = fields
        .map(|f| {
            field_models(
                &cx,
                f,
                rename_all.as_ref(),
                &["rename", "skip", "default", "json"],
            )
        })
        .unwrap_or_default();
    cx.check()?;
    let ident = &input.ident;
    let krate = krate(krate_path.as_ref());
    let code = field_code(&models);
    let assertions = &code.assertions;
    let reads = &code.reads;
    let properties: Vec<&str> = models
        .iter()
        .filter(|m| m.storage != Storage::Skipped)
        .map(|m| m.property.as_str())
        .collect();
    Ok(quote! {
        #[automatically_derived]
        #[allow(clippy::all, clippy::pedantic, unused_qualifications)]
        const _: () = {
            use #krate::typed::__private as __tk;

            const _: () = {
                #assertions
            };

            #[automatically_derived]
            impl __tk::Projection for #ident {
                const PROPERTIES: &'static [&'static str] = &[#(#properties),*];

                fn from_entity(entity: __tk::Entity) -> __tk::Result<__tk::Stored<Self>> {
                    let mut reader = __tk::EntityReader::projection::<Self>(entity);
                    let value = #ident {
                        #(#reads,)*
                    };
                    __tk::Ok(reader.finish(value))
                }
            }
        };
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(input: TokenStream) -> Result<String, String> {
        let input: DeriveInput = syn::parse2(input).expect("a derive input");
        entity(&input)
            .map(|t| t.to_string())
            .map_err(|t| t.to_string())
    }

    #[test]
    fn expansion_carries_the_schema_and_the_key_templates() {
        let out = expand(quote! {
            #[entity(table = "Employees", version = 2, partition_key = "{department}", row_key = "empid_{id:06}")]
            #[index(name = "email", partition_key = "{department}", row_key = "email_{email}")]
            #[index(name = "by_email", table = "EmployeesByEmail", partition_key = "email_{department}", row_key = "{email}")]
            #[index_entity(name = "last_name", key = "{last_name}")]
            struct Employee {
                department: String,
                id: u32,
                last_name: String,
                email: String,
                #[entity(blob)] photo: Option<Vec<u8>>,
            }
        })
        .expect("expands");
        assert!(out.contains("impl __tk :: Record for Employee"), "{out}");
        assert!(out.contains("const VERSION : u32 = 2u32"), "{out}");
        assert!(out.contains("__tk :: KeyFormat :: Pad (6u8)"), "{out}");
        assert!(out.contains("IndexPlacement :: SamePartition"), "{out}");
        assert!(out.contains("IndexPlacement :: OtherTable"), "{out}");
        assert!(out.contains("IndexEntityStorage :: Partition"), "{out}");
        assert!(out.contains("FieldStorage :: Blob"), "{out}");
        assert!(
            out.contains("use :: tablekit :: typed :: __private as __tk"),
            "{out}"
        );
    }

    #[test]
    fn crate_attribute_changes_the_path_of_generated_code() {
        let out = expand(quote! {
            #[entity(table = "Things", partition_key = "p", row_key = "{id}", crate = "tk")]
            struct Thing { id: String }
        })
        .expect("expands");
        assert!(
            out.contains("use tk :: typed :: __private as __tk"),
            "{out}"
        );
        assert!(
            out.contains("const KIND : & 'static str = \"Thing\""),
            "{out}"
        );
    }

    #[test]
    fn every_mistake_is_reported_in_one_expansion() {
        let err = expand(quote! {
            #[entity(tabel = "X", partition_key = "{nope}", row_key = "a/{id}")]
            struct Thing { id: String }
        })
        .expect_err("invalid");
        assert!(err.contains("unknown `entity` attribute `tabel`"), "{err}");
        assert!(err.contains("missing `table`"), "{err}");
        assert!(err.contains("unknown field `nope`"), "{err}");
        assert!(err.contains("may not appear in a key"), "{err}");
    }

    #[test]
    fn same_partition_indexes_need_their_own_row_key_namespace() {
        let err = expand(quote! {
            #[entity(table = "Things", partition_key = "{p}", row_key = "{id}")]
            #[index(name = "by_name", partition_key = "{p}", row_key = "{name}")]
            struct Thing { p: String, id: String, name: String }
        })
        .expect_err("collides");
        assert!(err.contains("may collide"), "{err}");
        // In another partition the same RowKeys are fine.
        expand(quote! {
            #[entity(table = "Things", partition_key = "{p}", row_key = "{id}")]
            #[index(name = "by_name", partition_key = "names_{p}", row_key = "{name}")]
            struct Thing { p: String, id: String, name: String }
        })
        .expect("another partition");
    }

    #[test]
    fn placement_follows_the_table_and_the_partition_template() {
        let out = expand(quote! {
            #[entity(table = "Things", partition_key = "{p}", row_key = "t_{id}")]
            #[index(name = "other", partition_key = "x_{name}", row_key = "{id}")]
            #[index(name = "here", table = "Things", partition_key = "{p}", row_key = "n_{name}")]
            struct Thing { p: String, id: String, name: String }
        })
        .expect("expands");
        assert!(out.contains("IndexPlacement :: OtherPartition"), "{out}");
        assert!(out.contains("IndexPlacement :: SamePartition"), "{out}");
    }
}
