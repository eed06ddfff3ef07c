//! Declarations described by their attribute alone (`#[count(..)]`): read with the keys
//! their module lists, checked by their module, and generated the same way for all — a
//! `DeclaredMeta` in the schema and a typed `Declared` handle named after the
//! declaration. A declaration of this kind is its module and one line in
//! `open_declarations!` (`decl/mod.rs`), which lists it in `decl::OPEN`; the derive's
//! parse, check and generate steps reach it only through that list.

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Expr, ExprLit, Lit, LitStr};

use crate::internals::attr::{SpanOf, key_name, record, set_once, unknown};
use crate::internals::ctxt::Ctxt;
use crate::internals::field::FieldModel;
use crate::internals::handle;
use crate::internals::scope::Scope;
use crate::internals::template::{CheckedTemplate, template_tokens};
use crate::internals::tokens::option_str;

/// What a declaration of this kind tells the derive about itself.
pub(crate) struct Open {
    /// Its attribute (`count`).
    pub(crate) attribute: &'static str,
    /// The keys its attribute takes.
    pub(crate) keys: &'static [&'static str],
    /// Checks one of its attributes against the entity.
    pub(crate) check:
        fn(&Ctxt, &Scope<'_>, &mut HashMap<String, Span>, &OpenAttr) -> Option<CheckedOpen>,
    /// Whether each declaration gets a typed `Declared` handle named after it (`#[count]`
    /// is read through one; a unique value is not read by name).
    pub(crate) handle: bool,
}

/// One attribute of an open declaration, as written: each key's value as a string or
/// integer literal.
pub(crate) struct OpenAttr {
    pub(crate) declaration: &'static Open,
    pub(crate) span: Span,
    pub(crate) values: Vec<(String, Lit)>,
}

impl OpenAttr {
    /// A key's value, if given.
    pub(crate) fn value(&self, key: &str) -> Option<&Lit> {
        self.values.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// A key's string value, if given (another literal is an error on it).
    pub(crate) fn string(&self, cx: &Ctxt, key: &str) -> Option<LitStr> {
        match self.value(key)? {
            Lit::Str(s) => Some(s.clone()),
            other => {
                cx.error_spanned(other, format!("expected a string: `{key} = \"…\"`"));
                None
            }
        }
    }
}

/// A checked open declaration, ready to generate.
pub(crate) struct CheckedOpen {
    pub(crate) declaration: &'static Open,
    pub(crate) name: String,
    pub(crate) name_at: LitStr,
    pub(crate) key: Option<CheckedTemplate>,
    pub(crate) table: Option<LitStr>,
    pub(crate) settings: Vec<(String, String)>,
}

impl CheckedOpen {
    /// A checked declaration of `declaration` named by `name_at`.
    pub(crate) fn new(
        declaration: &'static Open,
        name_at: LitStr,
        key: Option<CheckedTemplate>,
        table: Option<LitStr>,
        settings: Vec<(String, String)>,
    ) -> Self {
        CheckedOpen {
            declaration,
            name: name_at.value(),
            name_at,
            key,
            table,
            settings,
        }
    }
}

/// Reads one attribute of the open declaration `declaration`.
pub(crate) fn parse(cx: &Ctxt, attr: &syn::Attribute, declaration: &'static Open) -> OpenAttr {
    let mut open = OpenAttr {
        declaration,
        span: attr.path().span_of(),
        values: Vec::new(),
    };
    let name = declaration.attribute;
    // A bare attribute (`#[feed]`) takes every default.
    if matches!(attr.meta, syn::Meta::Path(_)) {
        return open;
    }
    let result = attr.parse_nested_meta(|meta| {
        let key = key_name(&meta);
        let Some(&known) = declaration.keys.iter().find(|k| **k == key) else {
            return unknown(cx, &meta, name, declaration.keys);
        };
        let parsed = meta
            .value()
            .and_then(|v| v.parse::<Expr>())
            .and_then(|expr| match expr {
                Expr::Lit(ExprLit { lit, .. }) => Ok(lit),
                other => Err(syn::Error::new_spanned(
                    other,
                    format!("expected a literal: `{key} = \"…\"` or `{key} = 4`"),
                )),
            });
        let parsed = parsed.map(|lit| {
            let mut slot = open.value(known).cloned();
            let was = slot.is_some();
            set_once(cx, &meta, name, &mut slot, lit.clone());
            if !was {
                open.values.push((known.to_owned(), lit));
            }
        });
        record(cx, parsed)
    });
    record(cx, result).ok();
    open
}

/// Checks every open declaration the entity makes, in the order written.
pub(crate) fn check(
    cx: &Ctxt,
    scope: &Scope<'_>,
    names: &mut HashMap<String, Span>,
    declared: &[OpenAttr],
) -> Vec<CheckedOpen> {
    declared
        .iter()
        .filter_map(|attr| (attr.declaration.check)(cx, scope, names, attr))
        .collect()
}

/// The `DeclaredMeta` of each open declaration, with its key added to `templates`.
pub(crate) fn metas<'a>(
    declared: &'a [CheckedOpen],
    templates: &mut Vec<&'a CheckedTemplate>,
) -> Vec<TokenStream> {
    declared
        .iter()
        .map(|d| {
            let (attribute, name) = (d.declaration.attribute, &d.name);
            let key = match &d.key {
                Some(key) => {
                    templates.push(key);
                    let key = template_tokens(key);
                    quote!(__tk::Some(#key))
                }
                None => quote!(__tk::None),
            };
            let table = option_str(d.table.as_ref());
            let settings = d.settings.iter().map(|(k, v)| quote!((#k, #v)));
            quote! {
                __tk::DeclaredMeta {
                    attribute: #attribute,
                    name: #name,
                    key: #key,
                    templates: &[],
                    table: #table,
                    settings: &[#(#settings),*],
                }
            }
        })
        .collect()
}

/// The typed handle of each open declaration: `pub const BY_STATUS: Declared<Self, K>`.
pub(crate) fn handles(
    vis: &syn::Visibility,
    declared: &[CheckedOpen],
    models: &[FieldModel],
) -> Vec<TokenStream> {
    declared
        .iter()
        .filter(|d| d.declaration.handle)
        .map(|d| {
            let key = match &d.key {
                Some(key) => handle::key_type(None, key, models),
                None => quote!(__tk::End),
            };
            let doc = format!(
                "The `#[{}]` declaration `{}`: read it through the table's `{}` handle.",
                d.declaration.attribute, d.name, d.declaration.attribute
            );
            let (attribute, name) = (d.declaration.attribute, &d.name);
            handle::constant_with(
                vis,
                "Declared",
                name,
                &d.name_at,
                key,
                &doc,
                quote!(#attribute, #name),
            )
        })
        .collect()
}
