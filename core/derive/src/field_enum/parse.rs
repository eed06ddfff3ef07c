//! Parsing `#[field_enum(...)]` on the enum and on its variants. Unknown or repeated keys
//! are recorded and parsing carries on.

use proc_macro2::Span;
use syn::{LitStr, Path};

use crate::internals::attr::{SpanOf, key_name, path, record, set_once, string, unknown};
use crate::internals::ctxt::Ctxt;

/// The `#[field_enum(...)]` keys on the enum.
pub(crate) const ENUM_KEYS: &[&str] = &["repr", "rename_all", "crate"];
/// The `#[field_enum(...)]` keys on a variant.
pub(crate) const VARIANT_KEYS: &[&str] = &["rename", "other"];

/// The enum's `#[field_enum(...)]`.
#[derive(Default)]
pub(crate) struct EnumAttr {
    pub(crate) repr: Option<LitStr>,
    pub(crate) rename_all: Option<LitStr>,
    pub(crate) krate: Option<Path>,
}

/// A variant's `#[field_enum(...)]`.
#[derive(Default)]
pub(crate) struct VariantAttr {
    pub(crate) rename: Option<LitStr>,
    pub(crate) other: Option<Span>,
}

/// Parses the enum's attributes.
pub(crate) fn enum_attr(cx: &Ctxt, attrs: &[syn::Attribute]) -> EnumAttr {
    let mut e = EnumAttr::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("field_enum")) {
        let result = attr.parse_nested_meta(|meta| {
            let parsed = match key_name(&meta).as_str() {
                "repr" => string(&meta).map(|v| set_once(cx, &meta, "field_enum", &mut e.repr, v)),
                "rename_all" => {
                    string(&meta).map(|v| set_once(cx, &meta, "field_enum", &mut e.rename_all, v))
                }
                "crate" => path(&meta).map(|v| set_once(cx, &meta, "field_enum", &mut e.krate, v)),
                _ => return unknown(cx, &meta, "field_enum", ENUM_KEYS),
            };
            record(cx, parsed)
        });
        record(cx, result).ok();
    }
    e
}

/// Parses a variant's attributes.
pub(crate) fn variant_attr(cx: &Ctxt, attrs: &[syn::Attribute]) -> VariantAttr {
    let mut v = VariantAttr::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("field_enum")) {
        let result = attr.parse_nested_meta(|meta| {
            let parsed = match key_name(&meta).as_str() {
                "rename" => {
                    string(&meta).map(|s| set_once(cx, &meta, "field_enum", &mut v.rename, s))
                }
                "other" => {
                    set_once(cx, &meta, "field_enum", &mut v.other, meta.path.span_of());
                    Ok(())
                }
                _ => return unknown(cx, &meta, "field_enum", VARIANT_KEYS),
            };
            record(cx, parsed)
        });
        record(cx, result).ok();
    }
    v
}
