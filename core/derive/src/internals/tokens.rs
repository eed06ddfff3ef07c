//! Pieces of generated code that every derive uses: the path of tablekit, optional strings,
//! and the span that errors about a type's tokens point at.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::{LitStr, Path};

pub(crate) fn default_crate() -> Path {
    syn::parse_quote!(::tablekit)
}

pub(crate) fn krate(c: Option<&Path>) -> Path {
    c.cloned().unwrap_or_else(default_crate)
}

pub(crate) fn option_str(value: Option<&LitStr>) -> TokenStream {
    match value {
        Some(lit) => quote!(__tk::Some(#lit)),
        None => quote!(__tk::None),
    }
}

pub(crate) trait SpanOfTokens {
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
