//! Generating a `FieldEnum`'s impls: the field mapping (`FieldValue`), the key traits
//! (`KeyPart`, `KeyText`, and `PaddedKeyPart` for a non-negative integer enum), the
//! stored value (`From<_> for Value`), `FromStr`, and for a string enum `as_str` and
//! `Display`.

use proc_macro2::{Literal, TokenStream};
use quote::quote;
use syn::DeriveInput;
use syn::ext::IdentExt;

use super::check::{CheckedEnum, Repr};
use super::parse::EnumAttr;
use crate::internals::tokens::krate;

pub(crate) fn field_enum(input: &DeriveInput, attr: &EnumAttr, e: &CheckedEnum<'_>) -> TokenStream {
    let ident = &input.ident;
    let krate = krate(attr.krate.as_ref());
    let type_name = ident.unraw().to_string();
    let variants: Vec<_> = e.variants.iter().map(|v| v.ident).collect();
    let floor = e.floor();
    let unknown = |value: TokenStream| match e.other {
        Some(at) => {
            let other = variants[at];
            quote!(::core::result::Result::Ok(#ident::#other))
        }
        None => quote!(::core::result::Result::Err(__tk::FieldProblem::UnknownVariant {
            type_name: #type_name,
            value: #value,
            expected: EXPECTED,
        })),
    };
    let shared = quote! {
        #[automatically_derived]
        impl ::core::convert::From<&#ident> for __tk::Value {
            fn from(value: &#ident) -> Self {
                stored(value)
            }
        }

        #[automatically_derived]
        impl ::core::convert::From<#ident> for __tk::Value {
            fn from(value: #ident) -> Self {
                stored(&value)
            }
        }

        #[automatically_derived]
        impl __tk::KeyText for #ident {
            const FLOOR: char = #floor;
        }
    };
    let body = match e.repr {
        Repr::Name => {
            let names: Vec<&str> = e.variants.iter().map(|v| v.name.as_str()).collect();
            let unknown = unknown(quote!(__tk::String::from(text)));
            quote! {
                // Unused when an `other` variant takes the unknown values.
                #[allow(dead_code)]
                const EXPECTED: &[&str] = &[#(#names),*];

                fn name(value: &#ident) -> &'static str {
                    match value {
                        #(#ident::#variants => #names,)*
                    }
                }

                fn stored(value: &#ident) -> __tk::Value {
                    __tk::Value::String(__tk::String::from(name(value)))
                }

                #[automatically_derived]
                impl #ident {
                    /// The name this variant is stored as, which is also its key text.
                    #[allow(dead_code)]
                    pub fn as_str(&self) -> &'static str {
                        name(self)
                    }
                }

                #[automatically_derived]
                impl ::core::fmt::Display for #ident {
                    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                        f.write_str(name(self))
                    }
                }

                #[automatically_derived]
                impl ::core::str::FromStr for #ident {
                    type Err = __tk::FieldProblem;

                    fn from_str(text: &str) -> ::core::result::Result<Self, __tk::FieldProblem> {
                        match text {
                            #(#names => ::core::result::Result::Ok(#ident::#variants),)*
                            _ => #unknown,
                        }
                    }
                }

                #[automatically_derived]
                impl __tk::FieldValue for #ident {
                    const EDM: __tk::EdmType = __tk::EdmType::String;

                    fn to_value(&self) -> ::core::result::Result<__tk::Option<__tk::Value>, __tk::FieldProblem> {
                        ::core::result::Result::Ok(__tk::Some(stored(self)))
                    }

                    fn from_value(value: __tk::Option<__tk::Value>) -> ::core::result::Result<Self, __tk::FieldProblem> {
                        let text = <__tk::String as __tk::FieldValue>::from_value(value)?;
                        ::core::str::FromStr::from_str(&text)
                    }
                }

                #[automatically_derived]
                impl __tk::KeyPart for #ident {
                    fn write_key(&self, format: __tk::KeyFormat, out: &mut __tk::String) -> ::core::result::Result<(), __tk::KeyError> {
                        <str as __tk::KeyPart>::write_key(name(self), format, out)
                    }

                    fn stored_type(&self) -> __tk::Option<__tk::EdmType> {
                        __tk::Some(__tk::EdmType::String)
                    }

                    fn type_name(&self) -> &'static str {
                        #type_name
                    }
                }
            }
        }
        Repr::Int => {
            let expected: Vec<String> = e
                .variants
                .iter()
                .map(|v| format!("{} = {}", v.name, v.discriminant))
                .collect();
            let numbers: Vec<TokenStream> =
                e.variants.iter().map(|v| signed(v.discriminant)).collect();
            let unknown_number = unknown(quote!(::std::string::ToString::to_string(&number)));
            let unknown_text = unknown(quote!(__tk::String::from(text)));
            let padded = (!e.has_negative()).then(|| {
                quote! {
                    #[automatically_derived]
                    impl __tk::PaddedKeyPart for #ident {}
                }
            });
            quote! {
                // Unused when an `other` variant takes the unknown values.
                #[allow(dead_code)]
                const EXPECTED: &[&str] = &[#(#expected),*];

                fn discriminant(value: &#ident) -> i32 {
                    match value {
                        #(#ident::#variants => #numbers,)*
                    }
                }

                fn stored(value: &#ident) -> __tk::Value {
                    __tk::Value::Int32(discriminant(value))
                }

                fn from_number(number: i64) -> ::core::result::Result<#ident, __tk::FieldProblem> {
                    match number {
                        #(#numbers => ::core::result::Result::Ok(#ident::#variants),)*
                        _ => #unknown_number,
                    }
                }

                #[automatically_derived]
                impl ::core::str::FromStr for #ident {
                    type Err = __tk::FieldProblem;

                    /// Reads a discriminant's decimal text, zero padded or not (a key's text).
                    fn from_str(text: &str) -> ::core::result::Result<Self, __tk::FieldProblem> {
                        match text.parse::<i64>() {
                            ::core::result::Result::Ok(number) => from_number(number),
                            ::core::result::Result::Err(_) => #unknown_text,
                        }
                    }
                }

                #[automatically_derived]
                impl __tk::FieldValue for #ident {
                    const EDM: __tk::EdmType = __tk::EdmType::Int32;

                    fn to_value(&self) -> ::core::result::Result<__tk::Option<__tk::Value>, __tk::FieldProblem> {
                        ::core::result::Result::Ok(__tk::Some(stored(self)))
                    }

                    fn from_value(value: __tk::Option<__tk::Value>) -> ::core::result::Result<Self, __tk::FieldProblem> {
                        from_number(__tk::enum_discriminant(value)?)
                    }
                }

                #[automatically_derived]
                impl __tk::KeyPart for #ident {
                    fn write_key(&self, format: __tk::KeyFormat, out: &mut __tk::String) -> ::core::result::Result<(), __tk::KeyError> {
                        <i32 as __tk::KeyPart>::write_key(&discriminant(self), format, out)
                    }

                    fn is_numeric(&self) -> bool {
                        true
                    }

                    fn stored_type(&self) -> __tk::Option<__tk::EdmType> {
                        __tk::Some(__tk::EdmType::Int32)
                    }

                    fn type_name(&self) -> &'static str {
                        #type_name
                    }
                }

                #padded
            }
        }
    };
    quote! {
        #[automatically_derived]
        #[allow(clippy::all, clippy::pedantic, unused_qualifications, deprecated)]
        const _: () = {
            use #krate::typed::__private as __tk;

            #body
            #shared
        };
    }
}

/// A discriminant as a literal, negated when negative (a negative literal is two tokens).
fn signed(value: i32) -> TokenStream {
    let magnitude = Literal::u32_unsuffixed(value.unsigned_abs());
    if value < 0 {
        quote!(-#magnitude)
    } else {
        quote!(#magnitude)
    }
}
