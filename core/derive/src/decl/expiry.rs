//! When a type's entities expire: `#[entity(ttl = "…")]`, a time to live from every write,
//! or one `#[entity(expires)]` field holding the instant. Reads leave expired entities out
//! and the expiry sweeper deletes them.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::LitStr;

use crate::internals::ctxt::Ctxt;
use crate::internals::duration::parse_duration;
use crate::internals::field::FieldModel;
use crate::internals::tokens::SpanOfTokens;

/// The longest time to live: a hundred years.
const MAX_TTL_SECONDS: u64 = 36_500 * 86_400;

/// Reads a time to live (see [`parse_duration`]), from one second to a hundred years.
fn parse_ttl(text: &str) -> Result<u64, String> {
    let total = parse_duration(text)?;
    if total == 0 {
        return Err("a time to live is at least one second".to_owned());
    }
    if total > MAX_TTL_SECONDS {
        return Err("a time to live is at most 36500d (a hundred years)".to_owned());
    }
    Ok(total)
}

/// How a type's entities expire.
pub(crate) enum Expiry<'a> {
    /// `#[entity(ttl = "…")]`, in seconds.
    Ttl(u64),
    /// An `#[entity(expires)]` field.
    Field(&'a FieldModel),
}

/// The type's expiry declaration, checked: a valid `ttl`, at most one `expires` field, not
/// both. `marked` are the fields marked `expires`.
pub(crate) fn check<'a>(
    cx: &Ctxt,
    ttl: Option<&LitStr>,
    marked: impl IntoIterator<Item = &'a FieldModel>,
) -> Option<Expiry<'a>> {
    let seconds = ttl.and_then(|lit| match parse_ttl(&lit.value()) {
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
    let mut marked = marked.into_iter();
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
    match (seconds, field, ttl) {
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

/// What expiry adds to the generated code.
pub(crate) struct ExpiryCode {
    /// The schema's declaration `expiry`, if the type's entities expire.
    pub(crate) meta: Option<TokenStream>,
    /// What `Record::expires` answers.
    pub(crate) expires: bool,
    /// The writer's statement for an `expires` field, after the fields are written.
    pub(crate) write: TokenStream,
}

/// The schema's declaration `expiry`: a `DeclaredMeta` with one setting, `ttl` (seconds)
/// or `field` (the field's name).
fn declared_meta(setting: &str, value: &str) -> TokenStream {
    quote! {
        __tk::DeclaredMeta {
            attribute: "expiry",
            name: "expiry",
            key: __tk::None,
            templates: &[],
            table: __tk::None,
            settings: &[(#setting, #value)],
        }
    }
}

pub(crate) fn generate(expiry: Option<&Expiry<'_>>) -> ExpiryCode {
    let (meta, expires, write) = match expiry {
        None => (None, false, quote!()),
        Some(Expiry::Ttl(seconds)) => (
            Some(declared_meta("ttl", &seconds.to_string())),
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
                Some(declared_meta("field", name)),
                true,
                quote_spanned!(span=> writer.expires(&self.#ident);),
            )
        }
    };
    ExpiryCode {
        meta,
        expires,
        write,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_is_numbers_with_units() {
        assert_eq!(parse_ttl("30d"), Ok(30 * 86_400));
        assert_eq!(parse_ttl("1d12h"), Ok(86_400 + 12 * 3_600));
        assert_eq!(parse_ttl("90s"), Ok(90));
        assert_eq!(parse_ttl("5m"), Ok(300));
        assert_eq!(parse_ttl("36500d"), Ok(36_500 * 86_400));
        for bad in [
            "",
            "0s",
            "30",
            "d",
            "1w",
            "30 d",
            "99999999999999999999d",
            "36501d",
        ] {
            assert!(parse_ttl(bad).is_err(), "{bad}");
        }
    }
}
