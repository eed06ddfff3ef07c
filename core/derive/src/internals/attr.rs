//! Reading attribute values: the keys of `#[entity(...)]`, `#[index(...)]` and the other
//! attributes, each read once. Unknown or repeated keys are recorded and reading carries on.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote_spanned};
use syn::meta::ParseNestedMeta;
use syn::{Expr, ExprArray, ExprLit, Lit, LitInt, LitStr, Path};

use crate::internals::ctxt::{Ctxt, one_of};

pub(crate) fn key_name(meta: &ParseNestedMeta<'_>) -> String {
    meta.path.to_token_stream().to_string().replace(' ', "")
}

/// Records an unknown key and skips its value, so parsing carries on.
pub(crate) fn unknown(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    attribute: &str,
    expected: &[&str],
) -> syn::Result<()> {
    let name = key_name(meta);
    cx.syn_error(meta.error(format!(
        "unknown `{attribute}` attribute `{name}`, expected one of {}",
        one_of(expected)
    )));
    skip_value(meta)
}

fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.parse_nested_meta(|inner| skip_value(&inner))?;
    }
    Ok(())
}

/// Stores a value once; a second one is an error on the key.
pub(crate) fn set_once<T>(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    attribute: &str,
    slot: &mut Option<T>,
    value: T,
) {
    if slot.is_some() {
        cx.syn_error(meta.error(format!(
            "duplicate `{attribute}` attribute `{}`",
            key_name(meta)
        )));
    } else {
        *slot = Some(value);
    }
}

pub(crate) fn string(meta: &ParseNestedMeta<'_>) -> syn::Result<LitStr> {
    let name = key_name(meta);
    let value = meta.value()?;
    let expr: Expr = value.parse()?;
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s),
        other => Err(syn::Error::new_spanned(
            other,
            format!("expected a string literal: `{name} = \"…\"`"),
        )),
    }
}

/// A path, written as a path or as a string holding one.
pub(crate) fn path(meta: &ParseNestedMeta<'_>) -> syn::Result<Path> {
    let name = key_name(meta);
    let expr: Expr = meta.value()?.parse()?;
    match expr {
        Expr::Path(p) => Ok(p.path),
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => s.parse(),
        other => Err(syn::Error::new_spanned(
            other,
            format!("expected a path: `{name} = path::to::item` or `{name} = \"path::to::item\"`"),
        )),
    }
}

pub(crate) fn integer(meta: &ParseNestedMeta<'_>) -> syn::Result<LitInt> {
    let name = key_name(meta);
    let expr: Expr = meta.value()?.parse()?;
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => Ok(i),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => Err(syn::Error::new_spanned(
            u,
            format!("`{name}` is a positive integer, not a negative number"),
        )),
        other => Err(syn::Error::new_spanned(
            other,
            format!("expected an integer: `{name} = 1`"),
        )),
    }
}

pub(crate) fn string_list(meta: &ParseNestedMeta<'_>) -> syn::Result<Vec<LitStr>> {
    let name = key_name(meta);
    let array: ExprArray = meta.value()?.parse()?;
    array
        .elems
        .into_iter()
        .map(|elem| match elem {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => Ok(s),
            Expr::Path(p) if p.path.get_ident().is_some() => {
                let ident = p
                    .path
                    .get_ident()
                    .map(|i| i.to_string())
                    .unwrap_or_default();
                Ok(LitStr::new(&ident, p.path.span_of()))
            }
            other => Err(syn::Error::new_spanned(
                other,
                format!("expected field names: `{name} = [\"first_name\", \"last_name\"]`"),
            )),
        })
        .collect()
}

/// Where the value of one key of an attribute is read to, by the form it takes.
pub(crate) enum Slot<'a> {
    /// `key = "…"`.
    Str(&'a mut Option<LitStr>),
    /// `key = ["…", …]`.
    StrList(&'a mut Option<Vec<LitStr>>),
    /// `key = path` or `key = "path"`.
    Path(&'a mut Option<Path>),
}

/// Reads `#[attribute(key = value, …)]` into the slot of each key, each set once. A value
/// of the wrong form, a repeated key or a key without a slot (unknown: the error names the
/// slots' keys in their order) is recorded and reading carries on.
pub(crate) fn read_keys(
    cx: &Ctxt,
    attr: &syn::Attribute,
    attribute: &str,
    slots: &mut [(&str, Slot<'_>)],
) {
    let keys: Vec<&str> = slots.iter().map(|(key, _)| *key).collect();
    let result = attr.parse_nested_meta(|meta| {
        let key = key_name(&meta);
        let Some((_, slot)) = slots.iter_mut().find(|(known, _)| *known == key) else {
            return unknown(cx, &meta, attribute, &keys);
        };
        let parsed = match slot {
            Slot::Str(slot) => string(&meta).map(|v| set_once(cx, &meta, attribute, *slot, v)),
            Slot::StrList(slot) => {
                string_list(&meta).map(|v| set_once(cx, &meta, attribute, *slot, v))
            }
            Slot::Path(slot) => path(&meta).map(|v| set_once(cx, &meta, attribute, *slot, v)),
        };
        record(cx, parsed)
    });
    record(cx, result).ok();
}

pub(crate) trait SpanOf {
    fn span_of(&self) -> Span;
}

impl SpanOf for Path {
    fn span_of(&self) -> Span {
        self.segments
            .first()
            .map_or_else(Span::call_site, |s| s.ident.span())
    }
}

/// Runs a parser on one key, recording its error instead of stopping.
pub(crate) fn record(cx: &Ctxt, result: syn::Result<()>) -> syn::Result<()> {
    if let Err(e) = result {
        cx.syn_error(e);
    }
    Ok(())
}

/// A key the attribute needs; its absence is an error at `at`.
pub(crate) fn required<'a>(
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

/// A token at an attribute's name, for errors about the attribute as a whole.
pub(crate) fn index_span(span: Span) -> TokenStream {
    quote_spanned!(span=> index)
}
