//! Generating: the fields' reading and writing code, and for an entity the `Record` and
//! `EntityType` impls with the static schema, each declaration adding its part.

use std::collections::BTreeMap;

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::DeriveInput;
use syn::ext::IdentExt;

use crate::check::CheckedEntity;
use crate::decl::expiry::{self, ExpiryCode};
use crate::decl::{changes, denormalized, index, index_entity, series, wide};
use crate::internals::field::{DefaultAttr, FieldModel, Storage, is_option};
use crate::internals::handle;
use crate::internals::template::{CheckedTemplate, template_assertions, template_tokens};
use crate::internals::tokens::{SpanOfTokens, krate};
use crate::parse::Container;

/// Field metadata, field assertions, and the writer and reader statements.
pub(crate) struct FieldCode {
    pub(crate) metas: Vec<TokenStream>,
    pub(crate) assertions: TokenStream,
    pub(crate) writes: Vec<TokenStream>,
    pub(crate) reads: Vec<TokenStream>,
}

pub(crate) fn field_code(models: &[FieldModel]) -> FieldCode {
    let mut code = FieldCode {
        metas: Vec::new(),
        assertions: TokenStream::new(),
        writes: Vec::new(),
        reads: Vec::new(),
    };
    for field in models {
        let ident = &field.ident;
        let name = &field.name;
        let property = &field.property;
        let ty = &field.ty;
        let span = field.ty.span_of_tokens();
        let optional = is_option(ty);
        let (storage, edm) = match field.storage {
            Storage::Property => (
                quote!(__tk::FieldStorage::Property),
                quote!(__tk::Some(<#ty as __tk::FieldValue>::EDM)),
            ),
            Storage::Blob => (
                quote!(__tk::FieldStorage::Blob),
                quote!(__tk::Some(<#ty as __tk::FieldValue>::EDM)),
            ),
            Storage::Json => (
                quote!(__tk::FieldStorage::Json),
                quote!(__tk::Some(__tk::EdmType::String)),
            ),
            Storage::Spread => (quote!(__tk::FieldStorage::Spread), quote!(__tk::None)),
            Storage::Skipped => (quote!(__tk::FieldStorage::Skipped), quote!(__tk::None)),
        };
        let has_default = field.default.is_some() || field.storage == Storage::Skipped;
        code.metas.push(quote! {
            __tk::FieldMeta {
                name: #name,
                property: #property,
                edm: #edm,
                storage: #storage,
                optional: #optional,
                has_default: #has_default,
            }
        });
        let assertion = match field.storage {
            Storage::Property => quote_spanned!(span=> __tk::assert_field::<#ty>();),
            Storage::Blob => quote_spanned!(span=> __tk::assert_blob::<#ty>();),
            Storage::Json => quote_spanned!(span=> __tk::assert_json::<#ty>();),
            Storage::Spread => wide::assertion(field),
            Storage::Skipped => quote_spanned!(span=> __tk::assert_default::<#ty>();),
        };
        code.assertions.extend(assertion);
        let default = match &field.default {
            Some(DefaultAttr::Path(path)) => quote!(#path),
            _ => quote!(::core::default::Default::default),
        };
        // Spanned on the field's type, so a type without a mapping is reported there only.
        match field.storage {
            Storage::Property | Storage::Blob => {
                code.writes
                    .push(quote_spanned!(span=> writer.field(#property, &self.#ident)?;));
                code.reads.push(match field.default {
                    Some(_) => quote_spanned!(span=> #ident: reader.field_or(#property, #default)?),
                    None => quote_spanned!(span=> #ident: reader.field(#property)?),
                });
            }
            Storage::Json => {
                code.writes
                    .push(quote_spanned!(span=> writer.json(#property, &self.#ident)?;));
                code.reads.push(match field.default {
                    Some(_) => quote_spanned!(span=> #ident: reader.json_or(#property, #default)?),
                    None => quote_spanned!(span=> #ident: reader.json(#property)?),
                });
            }
            Storage::Spread => {
                code.writes
                    .push(quote_spanned!(span=> writer.spread(#property, &self.#ident)?;));
                code.reads
                    .push(quote_spanned!(span=> #ident: reader.spread(#property)?));
            }
            Storage::Skipped => {
                code.reads
                    .push(quote!(#ident: ::core::default::Default::default()));
            }
        }
    }
    code
}

/// The impls and the schema of a checked entity.
pub(crate) fn entity(
    input: &DeriveInput,
    c: &Container,
    models: &[FieldModel],
    e: &CheckedEntity<'_>,
) -> TokenStream {
    let ident = &input.ident;
    let krate = krate(c.krate.as_ref());
    let type_name = ident.unraw().to_string();
    let CheckedEntity {
        table,
        kind,
        version,
        kind_property,
        version_property,
        ..
    } = e;
    let code = field_code(models);
    let metas = &code.metas;
    let writes = &code.writes;
    let reads = &code.reads;
    let field_count = models.len();

    let mut templates: Vec<&CheckedTemplate> = vec![&e.partition_key, &e.row_key];
    let index_metas = index::metas(&e.indexes, &mut templates);
    let index_entity_metas = index_entity::metas(&e.index_entities, &mut templates);
    let denormalized_metas = denormalized::metas(&e.denormalized, &mut templates);
    let ExpiryCode {
        meta: expiry,
        expires,
        write: expiry_write,
    } = expiry::generate(e.expiry.as_ref());
    // What the type declares, in order: indexes, index entities, denormalised fields,
    // expiry, change events, wideness, the open declarations, then the series.
    let mut declared_metas: Vec<TokenStream> = index_metas;
    declared_metas.extend(index_entity_metas);
    declared_metas.extend(denormalized_metas);
    declared_metas.extend(expiry);
    declared_metas.extend(changes::meta(c.changes.as_ref()));
    declared_metas.extend(wide::meta(e.wide.as_ref()));
    declared_metas.extend(crate::internals::open::metas(&e.open, &mut templates));
    declared_metas.extend(series::meta(e.series.as_ref()));
    // A type with work that follows its writes is written through the patterns' one write
    // path alone: a plain `Table` writes only a type without any (`PlainWrite`). A data
    // series is plain data; its spill to chunks is `wide`.
    let follows_up = !e.indexes.is_empty()
        || !e.index_entities.is_empty()
        || !e.denormalized.is_empty()
        || e.expiry.is_some()
        || c.changes.is_some()
        || e.wide.is_some()
        || !e.open.is_empty();
    let plain_write = (!follows_up).then(|| {
        quote! {
            #[automatically_derived]
            impl __tk::PlainWrite for #ident {}
        }
    });

    let mut assertions = code.assertions.clone();
    let mut key_fields: BTreeMap<String, &FieldModel> = BTreeMap::new();
    for template in &templates {
        assertions.extend(template_assertions(&type_name, template, models));
        for name in template.template.fields() {
            if let Some(field) = models.iter().find(|f| f.name == name) {
                key_fields.insert(name.to_owned(), field);
            }
        }
    }
    let key_arms = key_fields.iter().map(|(name, field)| {
        let ident = &field.ident;
        let span = field.ty.span_of_tokens();
        quote_spanned!(span=> #name => __tk::Some(&self.#ident as &dyn __tk::KeyPart))
    });
    let when_arms = index::when_arms(&e.indexes);
    let (fields_struct, fields_fn) = typed_fields(&input.vis, ident, e, models);
    let mut handles = index::handles(&input.vis, &e.indexes, models);
    handles.extend(index_entity::handles(&input.vis, &e.index_entities, models));
    handles.extend(crate::internals::open::handles(&input.vis, &e.open, models));
    let primary_key = handle::key_type(Some(&e.partition_key), &e.row_key, models);
    let pk = template_tokens(&e.partition_key);
    let rk = template_tokens(&e.row_key);
    let series_impl = series::generate(ident, e.series.as_ref());
    let upcast = match &c.upcast {
        Some(path) => quote! {
            __tk::Some(|entity: &mut __tk::Entity, version: u32| {
                __tk::upcast_with(entity, version, #path)
            })
        },
        None => quote!(__tk::None),
    };

    quote! {
        #[automatically_derived]
        #[allow(clippy::all, clippy::pedantic, unused_qualifications)]
        const _: () = {
            use #krate::typed::__private as __tk;

            const _: () = {
                #assertions
            };

            static SCHEMA: __tk::Schema = __tk::Schema {
                type_name: #type_name,
                table: #table,
                kind: #kind,
                version: #version,
                kind_property: #kind_property,
                version_property: #version_property,
                partition_key: #pk,
                row_key: #rk,
                fields: &[#(#metas),*],
                declared: &[#(#declared_metas),*],
            };

            #series_impl

            #fields_struct

            #[automatically_derived]
            impl #ident {
                #(#handles)*
                #fields_fn
            }

            #[automatically_derived]
            impl __tk::Record for #ident {
                const TABLE: &'static str = #table;

                fn partition_key(&self) -> __tk::Result<__tk::String> {
                    __tk::render_key(self, &SCHEMA.partition_key, __tk::KeyKind::PartitionKey)
                }

                fn row_key(&self) -> __tk::Result<__tk::String> {
                    __tk::render_key(self, &SCHEMA.row_key, __tk::KeyKind::RowKey)
                }

                fn to_entity(&self) -> __tk::Result<__tk::Entity> {
                    let mut writer = __tk::EntityWriter::new::<Self>(
                        __tk::Record::partition_key(self)?,
                        __tk::Record::row_key(self)?,
                        #field_count,
                    );
                    #(#writes)*
                    #expiry_write
                    __tk::Ok(writer.finish())
                }

                fn from_entity(entity: __tk::Entity) -> __tk::Result<__tk::Stored<Self>> {
                    let mut reader = __tk::EntityReader::new::<Self>(entity, #upcast)?;
                    let value = #ident {
                        #(#reads,)*
                    };
                    __tk::Ok(reader.finish(value))
                }

                fn kind_filter() -> __tk::Option<__tk::Filter> {
                    __tk::Some(__tk::kind_filter(#kind_property, #kind))
                }

                fn expires() -> bool {
                    #expires
                }
            }

            #plain_write

            #[automatically_derived]
            impl __tk::EntityType for #ident {
                const KIND: &'static str = #kind;
                const VERSION: u32 = #version;
                const KIND_PROPERTY: &'static str = #kind_property;
                const VERSION_PROPERTY: &'static str = #version_property;

                type Key = #primary_key;

                fn schema() -> &'static __tk::Schema {
                    &SCHEMA
                }

                fn key_part(&self, field: &str) -> __tk::Option<&dyn __tk::KeyPart> {
                    match field {
                        #(#key_arms,)*
                        _ => __tk::None,
                    }
                }

                fn in_index(&self, index: &str) -> bool {
                    match index {
                        #(#when_arms,)*
                        _ => true,
                    }
                }
            }
        };
    }
}

/// The typed properties of the stored fields: a struct with one `Property` per field
/// (key fields marked `KeyField`: compared and selected, never set) and
/// `fn fields()` returning it.
fn typed_fields(
    vis: &syn::Visibility,
    ident: &syn::Ident,
    e: &CheckedEntity<'_>,
    models: &[FieldModel],
) -> (TokenStream, TokenStream) {
    let keys: Vec<&str> = e
        .partition_key
        .template
        .fields()
        .into_iter()
        .chain(e.row_key.template.fields())
        .collect();
    let struct_ident = quote::format_ident!("{}Fields", ident.unraw());
    let stored = models
        .iter()
        .filter(|f| matches!(f.storage, Storage::Property | Storage::Blob));
    let mut members = Vec::new();
    let mut values = Vec::new();
    for field in stored {
        let name = &field.ident;
        let ty = &field.ty;
        let (field_name, property) = (&field.name, &field.property);
        let marker = if keys.contains(&field.name.as_str()) {
            quote!(__tk::KeyField)
        } else if field.storage == Storage::Blob {
            quote!(__tk::BlobProperty)
        } else {
            quote!(__tk::Settable)
        };
        let doc = format!("The field `{field_name}` (property `{property}`).");
        members.push(quote! {
            #[doc = #doc]
            pub #name: __tk::Property<#ident, #ty, #marker>
        });
        values.push(quote!(#name: __tk::Property::new(#field_name, #property)));
    }
    let doc = format!(
        "The typed properties of `{}`: filters (`{}::fields().field.ge(…)`), partial updates and projections.",
        ident.unraw(),
        ident.unraw()
    );
    let structure = quote! {
        #[doc = #doc]
        #[derive(Clone, Copy, Debug)]
        #[allow(non_camel_case_types, missing_docs)]
        pub struct #struct_ident {
            #(#members,)*
        }
    };
    let function = quote! {
        #[doc = #doc]
        #[allow(dead_code)]
        #vis const fn fields() -> #struct_ident {
            #struct_ident {
                #(#values,)*
            }
        }
    };
    (structure, function)
}
