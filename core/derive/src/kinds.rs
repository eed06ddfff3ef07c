//! `#[derive(EntityKind)]`: an enum whose variants are the entity types sharing a table.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Ident, Type};

use crate::internals::ctxt::Ctxt;
use crate::internals::tokens::default_crate;
use crate::parse;

pub(crate) fn entity_kind(input: &DeriveInput) -> Result<TokenStream, TokenStream> {
    let cx = Ctxt::default();
    let (krate, _) = parse::crate_only(&cx, &input.attrs, &["crate"]);
    let krate = krate.unwrap_or_else(default_crate);
    if !input.generics.params.is_empty() {
        cx.error_spanned(
            &input.generics,
            "#[derive(EntityKind)] does not support generic types",
        );
    }
    let mut variants: Vec<(&Ident, &Type)> = Vec::new();
    match &input.data {
        Data::Enum(data) => {
            if data.variants.is_empty() {
                cx.error_spanned(
                    &input.ident,
                    "#[derive(EntityKind)] needs at least one variant",
                );
            }
            for variant in &data.variants {
                match &variant.fields {
                    Fields::Unnamed(fields) if fields.unnamed.len() == 1 => {
                        if let Some(field) = fields.unnamed.first() {
                            variants.push((&variant.ident, &field.ty));
                        }
                    }
                    _ => cx.error_spanned(
                        variant,
                        format!(
                            "each variant of an EntityKind enum holds one entity type: `{}(Employee)`",
                            variant.ident
                        ),
                    ),
                }
            }
        }
        _ => cx.error_spanned(
            &input.ident,
            "#[derive(EntityKind)] needs an enum whose variants hold entity types",
        ),
    }
    cx.check()?;
    let ident = &input.ident;
    let type_name = ident.unraw().to_string();
    let Some((_, first)) = variants.first().copied() else {
        return Err(quote!(::core::compile_error!(
            "#[derive(EntityKind)] needs variants"
        )));
    };

    let assertions = variants
        .iter()
        .map(|(_, ty)| quote_spanned!(ty.span()=> __tk::assert_entity_type::<#ty>();));
    let mut same = Vec::new();
    for (_, ty) in variants.iter().skip(1) {
        same.push(quote_spanned! {ty.span()=>
            assert!(
                __tk::const_str_eq(<#first as __tk::Record>::TABLE, <#ty as __tk::Record>::TABLE),
                "every variant of an EntityKind enum lives in the same table"
            );
            assert!(
                __tk::const_str_eq(<#first as __tk::EntityType>::KIND_PROPERTY, <#ty as __tk::EntityType>::KIND_PROPERTY),
                "every variant of an EntityKind enum records its kind in the same property"
            );
        });
    }
    for (i, (_, a)) in variants.iter().enumerate() {
        for (_, b) in variants.iter().skip(i + 1) {
            same.push(quote_spanned! {b.span()=>
                assert!(
                    !__tk::const_str_eq(<#a as __tk::EntityType>::KIND, <#b as __tk::EntityType>::KIND),
                    "two variants of an EntityKind enum have the same kind"
                );
            });
        }
    }
    let names: Vec<&Ident> = variants.iter().map(|(v, _)| *v).collect();
    let types: Vec<&Type> = variants.iter().map(|(_, t)| *t).collect();
    let positions = 0..variants.len();

    Ok(quote! {
        #[automatically_derived]
        #[allow(clippy::all, clippy::pedantic, unused_qualifications)]
        const _: () = {
            use #krate::typed::__private as __tk;

            const _: () = {
                #(#assertions)*
                #(#same)*
            };

            const KINDS: &[&str] = &[#(<#types as __tk::EntityType>::KIND),*];

            // Plain to write when every variant is. The bounds are higher-ranked so that
            // they are checked where the enum is written, not here: an enum over declared
            // types still reads through a plain `Table`.
            #[automatically_derived]
            impl __tk::PlainWrite for #ident
            where
                #(for<'__tk> #types: __tk::PlainWrite,)*
            {
            }

            #[automatically_derived]
            impl __tk::Record for #ident {
                const TABLE: &'static str = <#first as __tk::Record>::TABLE;

                fn partition_key(&self) -> __tk::Result<__tk::String> {
                    match self {
                        #(#ident::#names(value) => __tk::Record::partition_key(value),)*
                    }
                }

                fn row_key(&self) -> __tk::Result<__tk::String> {
                    match self {
                        #(#ident::#names(value) => __tk::Record::row_key(value),)*
                    }
                }

                fn to_entity(&self) -> __tk::Result<__tk::Entity> {
                    match self {
                        #(#ident::#names(value) => __tk::Record::to_entity(value),)*
                    }
                }

                fn from_entity(entity: __tk::Entity) -> __tk::Result<__tk::Stored<Self>> {
                    let which = {
                        let kind = __tk::stored_kind(
                            &entity,
                            <#first as __tk::EntityType>::KIND_PROPERTY,
                            #type_name,
                        )?;
                        match KINDS.iter().position(|k| *k == kind) {
                            __tk::Some(which) => which,
                            __tk::None => {
                                return __tk::Err(__tk::unknown_kind(
                                    &entity,
                                    <#first as __tk::EntityType>::KIND_PROPERTY,
                                    #type_name,
                                    KINDS,
                                    kind,
                                ));
                            }
                        }
                    };
                    match which {
                        #(#positions => <#types as __tk::Record>::from_entity(entity)
                            .map(|stored| stored.map(#ident::#names)),)*
                        _ => __tk::Err(__tk::unknown_kind(
                            &entity,
                            <#first as __tk::EntityType>::KIND_PROPERTY,
                            #type_name,
                            KINDS,
                            "",
                        )),
                    }
                }

                fn kind_filter() -> __tk::Option<__tk::Filter> {
                    __tk::None
                }

                fn expires() -> bool {
                    false #(|| <#types as __tk::Record>::expires())*
                }
            }

            #[automatically_derived]
            impl __tk::EntityKinds for #ident {
                fn kinds() -> &'static [&'static str] {
                    KINDS
                }
            }

            #(
                #[automatically_derived]
                impl ::core::convert::From<#types> for #ident {
                    fn from(value: #types) -> Self {
                        #ident::#names(value)
                    }
                }
            )*
        };
    })
}
