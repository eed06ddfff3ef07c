//! `#[derive(Entity)]`: parse the attributes, check the declaration, then generate the
//! trait impls and the static schema.

use proc_macro2::TokenStream;
use quote::quote;
use syn::DeriveInput;

use crate::decl::{series, wide};
use crate::internals::ctxt::Ctxt;
use crate::{check, generate, parse};

/// `#[derive(Entity)]`.
pub(crate) fn expand(input: &DeriveInput) -> Result<TokenStream, TokenStream> {
    let cx = Ctxt::default();
    let container = parse::container(&cx, &input.attrs);
    let Some(fields) = check::named_fields(&cx, input, "Entity") else {
        cx.check()?;
        return Err(
            quote!(::core::compile_error!("#[derive(Entity)] needs a struct with named fields");),
        );
    };
    let (mut models, attrs) = check::field_models(
        &cx,
        fields,
        container.rename_all.as_ref(),
        parse::FIELD_KEYS,
    );
    wide::spread_fields(&cx, fields, &mut models);
    series::points_storage(&cx, container.series.as_ref(), &mut models);
    let checked = check::check_entity(&cx, input, &container, &models, &attrs);
    cx.check()?;
    let Some(checked) = checked else {
        return Err(quote!(::core::compile_error!(
            "#[derive(Entity)]: invalid declaration"
        )));
    };
    Ok(generate::entity(input, &container, &models, &checked))
}
#[cfg(test)]
mod tests {
    use super::*;

    fn expand(input: TokenStream) -> Result<String, String> {
        let input: DeriveInput = syn::parse2(input).expect("a derive input");
        super::expand(&input)
            .map(|t| t.to_string())
            .map_err(|t| t.to_string())
    }

    #[test]
    fn expansion_carries_the_schema_and_the_key_templates() {
        let out = expand(quote! {
            #[entity(table = "Employees", version = 2, partition_key = "{department}", row_key = "empid_{id:06}")]
            #[index(name = "email", partition_key = "{department}", row_key = "email_{email}")]
            #[index(name = "by_email", table = "EmployeesByEmail", partition_key = "email_{department}", row_key = "{email}")]
            #[index_entity(name = "last_name", key = "{last_name}")]
            struct Employee {
                department: String,
                id: u32,
                last_name: String,
                email: String,
                #[entity(blob)] photo: Option<Vec<u8>>,
            }
        })
        .expect("expands");
        assert!(out.contains("impl __tk :: Record for Employee"), "{out}");
        assert!(out.contains("const VERSION : u32 = 2u32"), "{out}");
        assert!(out.contains("__tk :: KeyFormat :: Pad (6u8)"), "{out}");
        assert!(out.contains("attribute : \"index\""), "{out}");
        assert!(
            out.contains("table : __tk :: Some (\"EmployeesByEmail\")"),
            "{out}"
        );
        assert!(out.contains("attribute : \"index_entity\""), "{out}");
        assert!(out.contains("(\"storage\" , \"partition\")"), "{out}");
        assert!(out.contains("FieldStorage :: Blob"), "{out}");
        assert!(
            out.contains("use :: tablekit :: typed :: __private as __tk"),
            "{out}"
        );
    }

    #[test]
    fn crate_attribute_changes_the_path_of_generated_code() {
        let out = expand(quote! {
            #[entity(table = "Things", partition_key = "p", row_key = "{id}", crate = "tk")]
            struct Thing { id: String }
        })
        .expect("expands");
        assert!(
            out.contains("use tk :: typed :: __private as __tk"),
            "{out}"
        );
        assert!(
            out.contains("const KIND : & 'static str = \"Thing\""),
            "{out}"
        );
    }

    #[test]
    fn every_mistake_is_reported_in_one_expansion() {
        let err = expand(quote! {
            #[entity(tabel = "X", partition_key = "{nope}", row_key = "a/{id}")]
            struct Thing { id: String }
        })
        .expect_err("invalid");
        assert!(err.contains("unknown `entity` attribute `tabel`"), "{err}");
        assert!(err.contains("missing `table`"), "{err}");
        assert!(err.contains("unknown field `nope`"), "{err}");
        assert!(err.contains("may not appear in a key"), "{err}");
    }

    /// The messages of an expansion that fails, in the order reported.
    fn errors(input: TokenStream) -> Vec<String> {
        let input: DeriveInput = syn::parse2(input).expect("a derive input");
        let err = super::expand(&input).expect_err("invalid");
        err.into_iter()
            .filter_map(|token| match token {
                proc_macro2::TokenTree::Group(group) => syn::parse2::<syn::LitStr>(group.stream())
                    .ok()
                    .map(|lit| lit.value()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn keyed_declarations_report_each_mistake_on_its_key() {
        let errors = errors(quote! {
            #[entity(table = "Things", partition_key = "{p}", row_key = "t_{id}")]
            #[index(name = "by-name", name = "again", tabel = "X", row_key = "{nope}",
                    properties = ["secret", "missing", name], when = 4)]
            #[index(name = "email", partition_key = "{p}", row_key = "e_{name}", properties = 4)]
            #[index_entity(name = "email", kee = "k", table = "Thing", storage = "disk")]
            #[index_entity(key = "{secret}", table = "Ids")]
            #[unique(name = "u", table = "no-such table", stray = 1)]
            struct Thing {
                p: String,
                id: String,
                name: String,
                #[entity(skip)] secret: String,
            }
        });
        let expected = [
            "duplicate `index` attribute `name`",
            "unknown `index` attribute `tabel`, expected one of `name`, `partition_key`, `row_key`, `table`, `properties` or `when`",
            "expected a path: `when = path::to::item` or `when = \"path::to::item\"`",
            "expected square brackets",
            "expected `,`",
            "unknown `index_entity` attribute `kee`, expected one of `name`, `key`, `table` or `storage`",
            "unknown `unique` attribute `stray`, expected one of `name`, `key` or `table`",
            "index names are letters, digits and `_`, got `by-name`",
            "missing `partition_key`: #[index(partition_key = \"{department}\", …)]",
            "unknown field `nope` in key template, expected one of `p`, `id`, `name` or `secret`",
            "field `secret` is skipped, so an index copy cannot carry it",
            "unknown field `missing` in `properties`, expected one of `p`, `id`, `name` or `secret`",
            "duplicate index name `email`: index, index entity and unique value names are unique within a type",
            "missing `key`: #[index_entity(key = \"{last_name}\", …)]",
            "unknown index entity storage `disk`, expected one of `partition`, `table` or `blob`",
            "missing `name`: #[index_entity(name = \"last_name\", …)]",
            "field `secret` cannot be part of a key: it is skipped (not stored)",
            "`table` applies to `storage = \"table\"`; index entities with `storage = \"partition\"` do not live in a table of their own",
            "missing `key`: #[unique(key = \"{email}\", …)]",
            "invalid table name `no-such table`: a table name has only ASCII letters and digits",
        ];
        assert_eq!(errors, expected, "{errors:#?}");
    }

    #[test]
    fn same_partition_indexes_need_their_own_row_key_namespace() {
        let err = expand(quote! {
            #[entity(table = "Things", partition_key = "{p}", row_key = "{id}")]
            #[index(name = "by_name", partition_key = "{p}", row_key = "{name}")]
            struct Thing { p: String, id: String, name: String }
        })
        .expect_err("collides");
        assert!(err.contains("may collide"), "{err}");
        // In another partition the same RowKeys are fine.
        expand(quote! {
            #[entity(table = "Things", partition_key = "{p}", row_key = "{id}")]
            #[index(name = "by_name", partition_key = "names_{p}", row_key = "{name}")]
            struct Thing { p: String, id: String, name: String }
        })
        .expect("another partition");
    }

    #[test]
    fn an_index_in_the_entitys_own_table_declares_no_table() {
        let out = expand(quote! {
            #[entity(table = "Things", partition_key = "{p}", row_key = "t_{id}")]
            #[index(name = "other", partition_key = "x_{name}", row_key = "{id}")]
            #[index(name = "here", table = "Things", partition_key = "{p}", row_key = "n_{name}")]
            struct Thing { p: String, id: String, name: String }
        })
        .expect("expands");
        assert!(!out.contains("Some (\"Things\")"), "{out}");
        // Naming the entity's own table keeps the copies in its partition, where their
        // RowKeys must not collide with the entity's; in another table they may.
        let err = expand(quote! {
            #[entity(table = "Things", partition_key = "{p}", row_key = "t_{id}")]
            #[index(name = "here", table = "Things", partition_key = "{p}", row_key = "{name}")]
            struct Thing { p: String, id: String, name: String }
        })
        .expect_err("collides");
        assert!(err.contains("may collide"), "{err}");
        let out = expand(quote! {
            #[entity(table = "Things", partition_key = "{p}", row_key = "t_{id}")]
            #[index(name = "there", table = "Others", partition_key = "{p}", row_key = "{name}")]
            struct Thing { p: String, id: String, name: String }
        })
        .expect("another table");
        assert!(out.contains("table : __tk :: Some (\"Others\")"), "{out}");
    }

    #[test]
    fn declarations_carry_their_templates_and_settings() {
        let out = expand(quote! {
            #[entity(table = "Things", partition_key = "{p}", row_key = "t_{id}")]
            #[index(name = "named", partition_key = "{p}", row_key = "n_{name}",
                    properties = ["name", "id"], when = keep)]
            #[index(name = "empty", partition_key = "{p}", row_key = "e_{name}", properties = [])]
            #[index_entity(name = "names", key = "{name}", storage = "blob")]
            struct Thing {
                p: String,
                id: String,
                #[entity(rename = "Name")]
                name: String,
                #[entity(denormalized(from = "Owner", partition_key = "{p}", row_key = "o_{id}",
                                      property = "Email", table = "Owners"))]
                owner_email: String,
            }
        })
        .expect("expands");
        for expected in [
            "templates : & [(\"partition_key\" ,",
            "(\"row_key\" ,",
            "settings : & [(\"properties\" , \"Name,id\") , (\"sparse\" , \"true\")]",
            "settings : & [(\"properties\" , \"\")]",
            "(\"storage\" , \"blob\")",
            "attribute : \"denormalized\" , name : \"owner_email\"",
            "table : __tk :: Some (\"Owners\")",
            "settings : & [(\"field\" , \"owner_email\") , (\"from\" , \"Owner\") , (\"property\" , \"Email\")]",
        ] {
            assert!(out.contains(expected), "{expected} in {out}");
        }
    }

    #[test]
    fn a_series_is_declared_last_with_its_step_and_span_in_seconds() {
        let out = expand(quote! {
            #[entity(table = "Views", partition_key = "{page}", row_key = "{day}")]
            #[series(start = "day", points = "views", every = "1h", span = "1d")]
            #[index_entity(name = "pages", key = "{page}")]
            struct Views { page: String, day: DateTime<Utc>, views: Points<i64> }
        })
        .expect("expands");
        let expected = "attribute : \"series\" , name : \"series\" , key : __tk :: None , templates : & [] , table : __tk :: None , settings : & [(\"start\" , \"day\") , (\"points\" , \"views\") , (\"every\" , \"3600\") , (\"span\" , \"86400\")";
        let series = out
            .find(expected)
            .unwrap_or_else(|| panic!("{expected} in {out}"));
        let index_entity = out.find("attribute : \"index_entity\"").expect("declared");
        assert!(index_entity < series, "{out}");
    }
}
