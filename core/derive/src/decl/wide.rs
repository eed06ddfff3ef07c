//! `#[wide]`: a type stored as several entities ("chunks") of one partition when its
//! properties exceed what one entity holds — on the type (`#[wide]`,
//! `#[wide(chunks = 8)]`, the most chunks one entity may take), and on a map field
//! spread over one property per entry (`#[wide] readings: BTreeMap<String, f64>`).
//!
//! The compile-time budget: a type that is not wide and stores more properties than one
//! entity holds for its fields is refused, naming the numbers; a wide type whose fixed
//! fields need more chunks than it allows is refused the same way.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::{Ident, LitInt};

use crate::internals::attr::{SpanOf, integer, key_name, record, set_once, unknown};
use crate::internals::budget::chunks_for;
use crate::internals::ctxt::Ctxt;
use crate::internals::field::{FieldModel, Storage};
use crate::internals::tokens::SpanOfTokens;
use tablekit_core::typed::{FIELDS_PER_CHUNK, FIELDS_PER_ENTITY, MAX_CHUNKS};

/// The `#[wide(...)]` keys on a struct.
pub(crate) const WIDE_KEYS: &[&str] = &["chunks"];

/// A struct's `#[wide]`.
pub(crate) struct WideAttr {
    pub(crate) span: Span,
    pub(crate) chunks: Option<LitInt>,
}

/// Parses a struct's `#[wide]` or `#[wide(chunks = N)]`.
pub(crate) fn parse(cx: &Ctxt, attr: &syn::Attribute, into: &mut Option<WideAttr>) {
    let mut wide = WideAttr {
        span: attr.path().span_of(),
        chunks: None,
    };
    if !matches!(attr.meta, syn::Meta::Path(_)) {
        let result = attr.parse_nested_meta(|meta| {
            let parsed = match key_name(&meta).as_str() {
                "chunks" => {
                    integer(&meta).map(|v| set_once(cx, &meta, "wide", &mut wide.chunks, v))
                }
                _ => return unknown(cx, &meta, "wide", WIDE_KEYS),
            };
            record(cx, parsed)
        });
        record(cx, result).ok();
    }
    if into.is_some() {
        cx.syn_error(syn::Error::new(wide.span, "`#[wide]` is declared twice"));
    }
    *into = Some(wide);
}

/// Marks the fields carrying `#[wide]` as spread, one property per entry; returns
/// whether any does.
pub(crate) fn spread_fields(
    cx: &Ctxt,
    fields: &syn::FieldsNamed,
    models: &mut [FieldModel],
) -> bool {
    let mut any = false;
    for (field, model) in fields.named.iter().zip(models.iter_mut()) {
        let Some(attr) = field.attrs.iter().find(|a| a.path().is_ident("wide")) else {
            continue;
        };
        if !matches!(attr.meta, syn::Meta::Path(_)) {
            cx.error_spanned(
                attr,
                "a field's `#[wide]` takes no arguments: it spreads the field over one property per entry",
            );
        }
        if model.storage != Storage::Property {
            cx.error_spanned(
                attr,
                "a `#[wide]` field is spread over one property per entry; it cannot also be `skip`, `json` or `blob`",
            );
            continue;
        }
        model.storage = Storage::Spread;
        any = true;
    }
    any
}

/// A checked wide declaration: the most chunks an entity may take.
pub(crate) struct CheckedWide {
    chunks: usize,
}

/// Checks the type's budget: stored properties against one entity's, or, for a wide type
/// (`declared`, a spread field, or `implied` chunks a series needs), against its chunks.
pub(crate) fn check(
    cx: &Ctxt,
    at: &Ident,
    declared: Option<&WideAttr>,
    spread: bool,
    implied: Option<usize>,
    models: &[FieldModel],
) -> Option<CheckedWide> {
    let fixed = models
        .iter()
        .filter(|m| !matches!(m.storage, Storage::Skipped | Storage::Spread))
        .count();
    if declared.is_none() && !spread && implied.is_none() {
        if fixed > FIELDS_PER_ENTITY {
            cx.error_spanned(
                at,
                format!(
                    "`{at}` stores {fixed} properties, more than the {FIELDS_PER_ENTITY} one entity holds for its fields (252, less {} tablekit keeps beside them): declare `#[wide]` to store it in chunks of one partition",
                    252 - FIELDS_PER_ENTITY
                ),
            );
        }
        return None;
    }
    let most = match declared.and_then(|w| w.chunks.as_ref()) {
        Some(lit) => match lit.base10_parse::<usize>() {
            Ok(n @ 2..=MAX_CHUNKS) => n,
            _ => {
                cx.error_spanned(
                    lit,
                    format!(
                        "a wide entity takes 2 to {MAX_CHUNKS} chunks: they are written in one entity group transaction of 100 operations, some of them the write's own"
                    ),
                );
                MAX_CHUNKS
            }
        },
        None => MAX_CHUNKS,
    };
    let need = chunks_for(fixed).max(implied.unwrap_or(1));
    if need > most {
        let span = declared.map_or_else(|| at.span(), |w| w.span);
        cx.syn_error(syn::Error::new(
            span,
            format!(
                "`{at}` stores {fixed} properties: {need} chunks ({FIELDS_PER_ENTITY} in the first, {FIELDS_PER_CHUNK} in each further one), more than the {most} it may take"
            ),
        ));
    }
    Some(CheckedWide {
        chunks: most.max(need),
    })
}

/// The schema's declaration `wide`, if the type is wide: a `DeclaredMeta` with the most
/// chunks an entity may take as its setting `chunks`.
pub(crate) fn meta(wide: Option<&CheckedWide>) -> Option<TokenStream> {
    let chunks = wide?.chunks.to_string();
    Some(quote! {
        __tk::DeclaredMeta {
            attribute: "wide",
            name: "wide",
            key: __tk::None,
            templates: &[],
            table: __tk::None,
            settings: &[("chunks", #chunks)],
        }
    })
}

/// The compile-time check that a spread field's type can be spread.
pub(crate) fn assertion(field: &FieldModel) -> TokenStream {
    let ty = &field.ty;
    quote_spanned!(field.ty.span_of_tokens()=> __tk::assert_spread::<#ty>();)
}
