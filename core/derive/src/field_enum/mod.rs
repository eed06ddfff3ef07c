//! `#[derive(FieldEnum)]`: a unit enum stored as one property (its variant's name, or its
//! discriminant) and usable as a key part.

mod check;
mod generate;
mod parse;

use proc_macro2::TokenStream;
use quote::quote;
use syn::DeriveInput;

use crate::internals::ctxt::Ctxt;

/// `#[derive(FieldEnum)]`.
pub(crate) fn expand(input: &DeriveInput) -> Result<TokenStream, TokenStream> {
    let cx = Ctxt::default();
    let attr = parse::enum_attr(&cx, &input.attrs);
    let checked = check::check(&cx, input, &attr);
    cx.check()?;
    let Some(checked) = checked else {
        return Err(quote!(::core::compile_error!(
            "#[derive(FieldEnum)]: invalid declaration"
        )));
    };
    Ok(generate::field_enum(input, &attr, &checked))
}

#[cfg(test)]
mod tests {
    use proc_macro2::TokenStream;
    use quote::quote;
    use syn::DeriveInput;

    fn expand(input: TokenStream) -> Result<String, String> {
        let input: DeriveInput = syn::parse2(input).expect("a derive input");
        super::expand(&input)
            .map(|t| t.to_string())
            .map_err(|t| t.to_string())
    }

    #[test]
    fn a_name_enum_floors_separators_at_its_lowest_character() {
        let out = expand(quote! {
            #[field_enum(rename_all = "kebab-case")]
            enum Status { Placed, OnHold }
        })
        .expect("expands");
        assert!(out.contains("const FLOOR : char = '-'"), "{out}");
        assert!(out.contains("EdmType :: String"), "{out}");
        assert!(out.contains("\"on-hold\""), "{out}");
        assert!(!out.contains("PaddedKeyPart"), "{out}");
        assert!(
            out.contains("use :: tablekit :: typed :: __private as __tk"),
            "{out}"
        );
    }

    #[test]
    fn an_int_enum_pads_only_without_negative_discriminants() {
        let out = expand(quote! {
            #[field_enum(repr = "int", crate = "tk")]
            enum Priority { Low = 1, High }
        })
        .expect("expands");
        assert!(
            out.contains("impl __tk :: PaddedKeyPart for Priority"),
            "{out}"
        );
        assert!(out.contains("const FLOOR : char = '0'"), "{out}");
        assert!(out.contains("\"High = 2\""), "{out}");
        assert!(
            out.contains("use tk :: typed :: __private as __tk"),
            "{out}"
        );

        let out = expand(quote! {
            #[field_enum(repr = "int")]
            enum Delta { Down = -1, Up = 1 }
        })
        .expect("expands");
        assert!(!out.contains("PaddedKeyPart"), "{out}");
        assert!(out.contains("const FLOOR : char = '-'"), "{out}");
    }

    #[test]
    fn every_mistake_is_reported_in_one_expansion() {
        let err = expand(quote! {
            #[field_enum(repr = "int", colour = "red")]
            enum Status<T> {
                A(T),
                #[field_enum(other)] B = 1 << 40,
                #[field_enum(other)] C,
            }
        })
        .expect_err("invalid");
        for part in [
            "unknown `field_enum` attribute `colour`",
            "does not support generic types",
            "takes unit variants only",
            "integer literals",
            "only one variant can be `other`",
        ] {
            assert!(err.contains(part), "{part} in {err}");
        }
    }
}
