//! `#[derive(Projection)]`: the subset of an entity's properties a query selects, read from
//! an entity with the fields' own rules.

use proc_macro2::TokenStream;
use quote::quote;
use syn::DeriveInput;

use crate::check::{field_models, named_fields};
use crate::generate::field_code;
use crate::internals::ctxt::Ctxt;
use crate::internals::field::Storage;
use crate::internals::tokens::krate;
use crate::parse;

/// `#[derive(Projection)]`.
pub(crate) fn expand(input: &DeriveInput) -> Result<TokenStream, TokenStream> {
    let cx = Ctxt::default();
    let (krate_path, rename_all) = parse::crate_only(&cx, &input.attrs, &["crate", "rename_all"]);
    let fields = named_fields(&cx, input, "Projection");
    let models = fields
        .map(|f| {
            field_models(
                &cx,
                f,
                rename_all.as_ref(),
                &["rename", "skip", "default", "json"],
            )
            .0
        })
        .unwrap_or_default();
    cx.check()?;
    let ident = &input.ident;
    let krate = krate(krate_path.as_ref());
    let code = field_code(&models);
    let assertions = &code.assertions;
    let reads = &code.reads;
    let properties: Vec<&str> = models
        .iter()
        .filter(|m| m.storage != Storage::Skipped)
        .map(|m| m.property.as_str())
        .collect();
    Ok(quote! {
        #[automatically_derived]
        #[allow(clippy::all, clippy::pedantic, unused_qualifications)]
        const _: () = {
            use #krate::typed::__private as __tk;

            const _: () = {
                #assertions
            };

            #[automatically_derived]
            impl __tk::Projection for #ident {
                const PROPERTIES: &'static [&'static str] = &[#(#properties),*];

                fn from_entity(entity: __tk::Entity) -> __tk::Result<__tk::Stored<Self>> {
                    let mut reader = __tk::EntityReader::projection::<Self>(entity);
                    let value = #ident {
                        #(#reads,)*
                    };
                    __tk::Ok(reader.finish(value))
                }
            }
        };
    })
}
