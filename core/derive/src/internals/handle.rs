//! The typed handles of an index or id list: an associated constant named after the
//! declaration (`by_email` → `BY_EMAIL`) whose type carries its key fields' types, in
//! the order a look-up takes them.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::LitStr;

use crate::internals::field::FieldModel;
use crate::internals::template::CheckedTemplate;

/// The constant's name: the declared name in upper snake case (`byEmail` → `BY_EMAIL`),
/// with a leading `_` when it starts with a digit.
pub(crate) fn const_name(name: &str) -> String {
    let mut out = String::new();
    let mut previous: Option<char> = None;
    for c in name.chars() {
        if c.is_ascii_uppercase()
            && previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit())
        {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
        previous = Some(c);
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// The key's type: a `Partition<T, …>` per field of `partition` (if any), then a
/// `Row<T, …>` per field of `row`, ending in `End`.
pub(crate) fn key_type(
    partition: Option<&CheckedTemplate>,
    row: &CheckedTemplate,
    models: &[FieldModel],
) -> TokenStream {
    let field_type = |name: &str| {
        models
            .iter()
            .find(|f| f.name == name)
            .map(|f| {
                let ty = &f.ty;
                quote!(#ty)
            })
            .unwrap_or_else(|| quote!(()))
    };
    let mut key = quote!(__tk::End);
    for name in row.template.fields().into_iter().rev() {
        let ty = field_type(name);
        key = quote!(__tk::Row<#ty, #key>);
    }
    if let Some(partition) = partition {
        for name in partition.template.fields().into_iter().rev() {
            let ty = field_type(name);
            key = quote!(__tk::Partition<#ty, #key>);
        }
    }
    key
}

/// `<vis> const NAME: __tk::<handle><Self, K> = __tk::<handle>::new("name");` with its doc,
/// as visible as the type.
pub(crate) fn constant(
    vis: &syn::Visibility,
    handle: &str,
    name: &str,
    at: &LitStr,
    key: TokenStream,
    doc: &str,
) -> TokenStream {
    constant_with(vis, handle, name, at, key, doc, quote!(#name))
}

/// As [`constant`], with the handle made by `__tk::<handle>::new(<args>)`.
pub(crate) fn constant_with(
    vis: &syn::Visibility,
    handle: &str,
    name: &str,
    at: &LitStr,
    key: TokenStream,
    doc: &str,
    args: TokenStream,
) -> TokenStream {
    let span: Span = at.span();
    let ident = format_ident!("{}", const_name(name), span = span);
    let handle = format_ident!("{}", handle);
    quote_spanned! {span=>
        #[doc = #doc]
        #[allow(dead_code)]
        #vis const #ident: __tk::#handle<Self, #key> = __tk::#handle::new(#args);
    }
}

#[cfg(test)]
mod tests {
    use super::const_name;

    #[test]
    fn names_become_upper_snake_case_constants() {
        assert_eq!(const_name("email"), "EMAIL");
        assert_eq!(const_name("by_email"), "BY_EMAIL");
        assert_eq!(const_name("byEmail"), "BY_EMAIL");
        assert_eq!(const_name("last_name2"), "LAST_NAME2");
        assert_eq!(const_name("v2Tags"), "V2_TAGS");
        assert_eq!(const_name("2fa"), "_2FA");
    }
}
