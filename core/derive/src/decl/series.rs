//! `#[series(...)]`: a data series — one entity per span (`span = "1d"`) holding a point
//! per step (`every = "1h"`): `start` names the `DateTime<Utc>` field holding the span's
//! start (part of the RowKey, so spans sort by time), `points` the `Points<V>` field.
//! Where the points do not fit one entity, `spill = "chunks"` spreads them over chunks of
//! the partition and `spill = "blob"` keeps them as one value in the blob store.
//!
//! The compile-time budget: a span with more points than one entity (or its chunks, or
//! one entity group transaction) holds is refused with the numbers.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{GenericArgument, Ident, LitStr, PathArguments, Type};

use crate::internals::attr::{SpanOf, key_name, record, set_once, string, unknown};
use crate::internals::budget::chunks_for;
use crate::internals::ctxt::Ctxt;
use crate::internals::duration::parse_duration;
use crate::internals::field::{FieldModel, Storage};
use crate::internals::template::CheckedTemplate;
use tablekit_core::typed::{FIELDS_PER_ENTITY, MAX_CHUNKS};

/// The `#[series(...)]` keys.
pub(crate) const SERIES_KEYS: &[&str] = &["start", "points", "every", "span", "spill"];

/// The most points one span may have.
const MAX_POINTS: u64 = 100_000;

/// One entity's bytes: 1 MiB.
const ENTITY_BYTES: u64 = 1024 * 1024;

/// What the chunks of one entity may take of a transaction's 4 MiB.
const CHUNK_BYTES: u64 = 4 * 1024 * 1024 - 256 * 1024;

/// A struct's `#[series(...)]`.
pub(crate) struct SeriesAttr {
    span: Span,
    start: Option<LitStr>,
    points: Option<LitStr>,
    every: Option<LitStr>,
    span_of: Option<LitStr>,
    spill: Option<LitStr>,
    /// Where the points spill, read from `spill` (an unknown one reported as it is read).
    spill_to: Spill,
}

/// Parses a struct's `#[series(...)]`.
pub(crate) fn parse(cx: &Ctxt, attr: &syn::Attribute, into: &mut Option<SeriesAttr>) {
    let mut s = SeriesAttr {
        span: attr.path().span_of(),
        start: None,
        points: None,
        every: None,
        span_of: None,
        spill: None,
        spill_to: Spill::None,
    };
    let result = attr.parse_nested_meta(|meta| {
        let parsed = match key_name(&meta).as_str() {
            "start" => string(&meta).map(|v| set_once(cx, &meta, "series", &mut s.start, v)),
            "points" => string(&meta).map(|v| set_once(cx, &meta, "series", &mut s.points, v)),
            "every" => string(&meta).map(|v| set_once(cx, &meta, "series", &mut s.every, v)),
            "span" => string(&meta).map(|v| set_once(cx, &meta, "series", &mut s.span_of, v)),
            "spill" => string(&meta).map(|v| set_once(cx, &meta, "series", &mut s.spill, v)),
            _ => return unknown(cx, &meta, "series", SERIES_KEYS),
        };
        record(cx, parsed)
    });
    record(cx, result).ok();
    s.spill_to = spill_of(cx, s.spill.as_ref());
    if into.is_some() {
        cx.syn_error(syn::Error::new(s.span, "`#[series]` is declared twice"));
    }
    *into = Some(s);
}

/// Where points that do not fit one entity go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spill {
    None,
    Chunks,
    Blob,
}

fn spill_of(cx: &Ctxt, spill: Option<&LitStr>) -> Spill {
    let Some(lit) = spill else {
        return Spill::None;
    };
    match lit.value().as_str() {
        "chunks" => Spill::Chunks,
        "blob" => Spill::Blob,
        other => {
            cx.error_spanned(
                lit,
                format!("unknown `spill` `{other}`, expected \"chunks\" or \"blob\""),
            );
            Spill::None
        }
    }
}

/// The name of the points field, if the type declares a series that names one.
pub(crate) fn points_name(series: Option<&SeriesAttr>) -> Option<String> {
    series.and_then(|s| s.points.as_ref()).map(LitStr::value)
}

/// Sets the storage of the points field: spread over properties, or one blob value.
pub(crate) fn points_storage(cx: &Ctxt, series: Option<&SeriesAttr>, models: &mut [FieldModel]) {
    let Some(s) = series else {
        return;
    };
    let spill = s.spill_to;
    let Some(name) = &s.points else {
        return;
    };
    if let Some(model) = models.iter_mut().find(|m| m.name == name.value()) {
        if model.storage != Storage::Property {
            cx.error_spanned(
                name,
                "the points field is stored by the series; it cannot be `skip`, `json`, `blob` or `#[wide]`",
            );
            return;
        }
        model.storage = if spill == Spill::Blob {
            Storage::Blob
        } else {
            Storage::Spread
        };
    }
}

/// A checked series.
pub(crate) struct CheckedSeries<'a> {
    start: &'a FieldModel,
    points: &'a FieldModel,
    value: Type,
    every: u64,
    span: u64,
    count: u64,
    /// The chunks the points need (`spill = "chunks"`).
    pub(crate) chunks: Option<usize>,
}

/// The `V` of a `Points<V>` field.
fn point_type(ty: &Type) -> Option<Type> {
    let Type::Path(p) = ty else {
        return None;
    };
    let last = p.path.segments.last()?;
    if last.ident != "Points" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first()? {
        GenericArgument::Type(t) => Some(t.clone()),
        _ => None,
    }
}

/// The bytes one point's value takes, as the table service counts them.
fn value_bytes(ty: &Type) -> u64 {
    let name = match ty {
        Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default(),
        _ => String::new(),
    };
    match name.as_str() {
        "i32" | "u32" | "f32" => 4,
        _ => 8,
    }
}

fn duration(cx: &Ctxt, lit: &LitStr, what: &str) -> Option<u64> {
    match parse_duration(&lit.value()) {
        Ok(0) => {
            cx.error_spanned(lit, format!("a series' `{what}` is at least one second"));
            None
        }
        Ok(seconds) => Some(seconds),
        Err(reason) => {
            cx.error_spanned(
                lit,
                format!(
                    "invalid `{what}` `{}`: {reason}; write it like \"1h\", \"1d\" or \"15m\"",
                    lit.value()
                ),
            );
            None
        }
    }
}

/// Checks the series: its fields, step and span, and its budget against one entity, its
/// chunks and one transaction.
pub(crate) fn check<'a>(
    cx: &Ctxt,
    at: &Ident,
    series: Option<&SeriesAttr>,
    models: &'a [FieldModel],
    row_key: Option<&CheckedTemplate>,
) -> Option<CheckedSeries<'a>> {
    let s = series?;
    let field = |key: &Option<LitStr>, what: &str, example: &str| -> Option<&'a FieldModel> {
        let Some(lit) = key else {
            cx.syn_error(syn::Error::new(
                s.span,
                format!("missing `{what}`: #[series({example}, …)]"),
            ));
            return None;
        };
        let found = models.iter().find(|m| m.name == lit.value());
        if found.is_none() {
            cx.error_spanned(lit, format!("unknown field `{}`", lit.value()));
        }
        found
    };
    let start = field(&s.start, "start", "start = \"day\"");
    let points = field(&s.points, "points", "points = \"views\"");
    let every = match &s.every {
        Some(lit) => duration(cx, lit, "every"),
        None => {
            cx.syn_error(syn::Error::new(
                s.span,
                "missing `every`: #[series(every = \"1h\", …)]",
            ));
            None
        }
    };
    let span = match &s.span_of {
        Some(lit) => duration(cx, lit, "span"),
        None => {
            cx.syn_error(syn::Error::new(
                s.span,
                "missing `span`: #[series(span = \"1d\", …)]",
            ));
            None
        }
    };
    let spill = s.spill_to;
    if let (Some(start), Some(rk), Some(lit)) = (start, row_key, &s.start)
        && !rk.template.fields().contains(&start.name.as_str())
    {
        cx.error_spanned(
            lit,
            format!(
                "the span's start `{}` is part of the RowKey, so that spans sort by time: row_key = \"{{{}}}\"",
                start.name, start.name
            ),
        );
    }
    let value = points.and_then(|p| {
        let v = point_type(&p.ty);
        if v.is_none() {
            cx.error_spanned(
                &p.ty,
                "the points field of a series is a `Points<V>` (V: i64, i32 or f64)",
            );
        }
        v
    });
    let (every, span, start, points, value) = (every?, span?, start?, points?, value?);
    if span % every != 0 {
        cx.syn_error(syn::Error::new(
            s.span,
            format!(
                "a span of {} is not a whole number of steps of {}",
                s.span_of.as_ref().map(LitStr::value).unwrap_or_default(),
                s.every.as_ref().map(LitStr::value).unwrap_or_default()
            ),
        ));
        return None;
    }
    let count = span / every;
    let what = format!(
        "a span of {} every {} has {count} points",
        s.span_of.as_ref().map(LitStr::value).unwrap_or_default(),
        s.every.as_ref().map(LitStr::value).unwrap_or_default()
    );
    if count > MAX_POINTS {
        cx.syn_error(syn::Error::new(
            s.span,
            format!("{what}, more than the {MAX_POINTS} a span may have"),
        ));
        return None;
    }
    let others = models
        .iter()
        .filter(|m| !std::ptr::eq(*m, points) && !matches!(m.storage, Storage::Skipped))
        .count();
    let properties = usize::try_from(count).unwrap_or(usize::MAX) + others;
    // `views_0042`: the property's name and the point's part, in UTF-16 units.
    let point_bytes = 2 * (points.property.len() as u64 + 5) + value_bytes(&value) + 4;
    let bytes = count * point_bytes;
    let mut chunks = None;
    match spill {
        Spill::None if properties > FIELDS_PER_ENTITY => {
            cx.syn_error(syn::Error::new(
                s.span,
                format!(
                    "{what}; with {others} other properties that is {properties}, more than the {FIELDS_PER_ENTITY} one entity of `{at}` holds: declare `spill = \"chunks\"` ({} chunks) or `spill = \"blob\"`, or a shorter span",
                    chunks_for(properties)
                ),
            ));
        }
        Spill::None if bytes > ENTITY_BYTES => {
            cx.syn_error(syn::Error::new(
                s.span,
                format!(
                    "{what} of about {point_bytes} bytes each, {bytes} bytes: more than the {ENTITY_BYTES} (1 MiB) one entity holds; declare `spill = \"chunks\"` or `spill = \"blob\"`"
                ),
            ));
        }
        Spill::Chunks => {
            let need = chunks_for(properties);
            if need > MAX_CHUNKS {
                cx.syn_error(syn::Error::new(
                    s.span,
                    format!(
                        "{what}: {need} chunks, more than the {MAX_CHUNKS} one entity group transaction takes; declare `spill = \"blob\"` or a shorter span"
                    ),
                ));
            } else if bytes > CHUNK_BYTES {
                cx.syn_error(syn::Error::new(
                    s.span,
                    format!(
                        "{what} of about {point_bytes} bytes each, {bytes} bytes: more than the {CHUNK_BYTES} one entity group transaction (4 MiB) leaves its chunks; declare `spill = \"blob\"` or a shorter span"
                    ),
                ));
            }
            chunks = Some(need.min(MAX_CHUNKS));
        }
        _ => {}
    }
    Some(CheckedSeries {
        start,
        points,
        value,
        every,
        span,
        count,
        chunks,
    })
}

/// The schema's declaration `series`, if the type declares one: a `DeclaredMeta` of
/// attribute and name `series` with the settings `start` and `points` (the fields' names),
/// `every` and `span` (in seconds).
pub(crate) fn meta(series: Option<&CheckedSeries<'_>>) -> Option<TokenStream> {
    let s = series?;
    let (start, points) = (&s.start.name, &s.points.name);
    let (every, span) = (s.every.to_string(), s.span.to_string());
    Some(quote! {
        __tk::DeclaredMeta {
            attribute: "series",
            name: "series",
            key: __tk::None,
            templates: &[],
            table: __tk::None,
            settings: &[
                ("start", #start),
                ("points", #points),
                ("every", #every),
                ("span", #span),
            ],
        }
    })
}

/// The `SeriesType` impl.
pub(crate) fn generate(ident: &Ident, series: Option<&CheckedSeries<'_>>) -> TokenStream {
    let Some(s) = series else {
        return TokenStream::new();
    };
    let (start, points, value) = (&s.start.ident, &s.points.ident, &s.value);
    // The start field's own type: a field that is not a `DateTime<Utc>` fails there.
    let start_ty = &s.start.ty;
    let (every, span) = (s.every as i64, s.span as i64);
    let count = usize::try_from(s.count).unwrap_or(usize::MAX);
    quote! {
        #[automatically_derived]
        impl __tk::SeriesType for #ident {
            type Value = #value;
            const EVERY_SECONDS: i64 = #every;
            const SPAN_SECONDS: i64 = #span;
            const POINTS: usize = #count;

            fn start(&self) -> #start_ty {
                self.#start
            }

            fn set_start(&mut self, start: #start_ty) {
                self.#start = start;
            }

            fn points(&self) -> &__tk::Points<Self::Value> {
                &self.#points
            }

            fn points_mut(&mut self) -> &mut __tk::Points<Self::Value> {
                &mut self.#points
            }
        }
    }
}
