//! The names a declaration gives: tables, properties and index names, held to the table
//! service's rules and to each other.

use std::collections::HashMap;

use proc_macro2::Span;
use quote::ToTokens;
use syn::LitStr;
use tablekit_core::limits;

use crate::internals::ctxt::Ctxt;

pub(crate) fn check_property_name(cx: &Ctxt, at: impl ToTokens, name: &str) {
    if let Err(violation) = limits::check_property_name(name) {
        cx.error_spanned(at, violation);
    }
}

pub(crate) fn check_table(cx: &Ctxt, lit: &LitStr) {
    if let Err(violation) = limits::check_table_name(&lit.value()) {
        cx.error_spanned(lit, violation);
    }
}

/// An index, index entity or unique value name: its spelling, and no other of the type's
/// names the same.
pub(crate) fn check_name(cx: &Ctxt, lit: &LitStr, names: &mut HashMap<String, Span>, what: &str) {
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
