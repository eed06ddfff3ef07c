//! Parsing: the `#[entity]` attribute on a struct and on its fields into a model of the
//! declaration, with the `#[index]`, `#[index_entity]` and `#[unique]` attributes and a
//! field's `denormalized(...)` handed to their declarations. Unknown or repeated attributes
//! are recorded and parsing carries on.

use proc_macro2::Span;
use syn::{LitInt, LitStr, Path};

use crate::decl::denormalized::{self, DenormalizedAttr};
use crate::decl::index::{self, IndexAttr};
use crate::decl::index_entity::{self, IndexEntityAttr};
use crate::decl::series::{self, SeriesAttr};
use crate::decl::wide::{self, WideAttr};
use crate::internals::attr::{SpanOf, integer, key_name, path, record, set_once, string, unknown};
use crate::internals::case::RenameRule;
use crate::internals::ctxt::Ctxt;
use crate::internals::field::DefaultAttr;

/// The `#[entity(...)]` keys on a struct.
pub(crate) const CONTAINER_KEYS: &[&str] = &[
    "table",
    "kind",
    "version",
    "partition_key",
    "row_key",
    "crate",
    "kind_property",
    "version_property",
    "rename_all",
    "upcast",
    "changes",
    "ttl",
];
/// The `#[entity(...)]` keys on a field.
pub(crate) const FIELD_KEYS: &[&str] = &[
    "rename",
    "skip",
    "default",
    "blob",
    "json",
    "denormalized",
    "expires",
];
/// The `rename_all` rules.
pub(crate) const RENAME_RULES: &[&str] = &[
    "PascalCase",
    "camelCase",
    "snake_case",
    "lowercase",
    "UPPERCASE",
];

/// A struct-level `#[entity]` declaration with its indexes.
#[derive(Default)]
pub(crate) struct Container {
    pub(crate) table: Option<LitStr>,
    pub(crate) kind: Option<LitStr>,
    pub(crate) version: Option<LitInt>,
    pub(crate) partition_key: Option<LitStr>,
    pub(crate) row_key: Option<LitStr>,
    pub(crate) krate: Option<Path>,
    pub(crate) kind_property: Option<LitStr>,
    pub(crate) version_property: Option<LitStr>,
    pub(crate) rename_all: Option<LitStr>,
    pub(crate) upcast: Option<Path>,
    pub(crate) changes: Option<LitStr>,
    pub(crate) ttl: Option<LitStr>,
    pub(crate) indexes: Vec<IndexAttr>,
    pub(crate) index_entities: Vec<IndexEntityAttr>,
    /// The declarations described by their attribute alone (`decl::OPEN`).
    pub(crate) open: Vec<crate::internals::open::OpenAttr>,
    pub(crate) wide: Option<WideAttr>,
    pub(crate) series: Option<SeriesAttr>,
}

/// A field's `#[entity(...)]`.
#[derive(Default)]
pub(crate) struct FieldAttr {
    pub(crate) rename: Option<LitStr>,
    pub(crate) skip: Option<Span>,
    pub(crate) default: Option<DefaultAttr>,
    pub(crate) blob: Option<Span>,
    pub(crate) json: Option<Span>,
    pub(crate) denormalized: Option<DenormalizedAttr>,
    pub(crate) expires: Option<Span>,
}

/// Parses the struct-level attributes.
pub(crate) fn container(cx: &Ctxt, attrs: &[syn::Attribute]) -> Container {
    let mut c = Container::default();
    for attr in attrs {
        if attr.path().is_ident("entity") {
            let result = attr.parse_nested_meta(|meta| {
                let key = key_name(&meta);
                let parsed = match key.as_str() {
                    "table" => {
                        string(&meta).map(|v| set_once(cx, &meta, "entity", &mut c.table, v))
                    }
                    "kind" => string(&meta).map(|v| set_once(cx, &meta, "entity", &mut c.kind, v)),
                    "version" => {
                        integer(&meta).map(|v| set_once(cx, &meta, "entity", &mut c.version, v))
                    }
                    "partition_key" => string(&meta)
                        .map(|v| set_once(cx, &meta, "entity", &mut c.partition_key, v)),
                    "row_key" => {
                        string(&meta).map(|v| set_once(cx, &meta, "entity", &mut c.row_key, v))
                    }
                    "crate" => path(&meta).map(|v| set_once(cx, &meta, "entity", &mut c.krate, v)),
                    "kind_property" => string(&meta)
                        .map(|v| set_once(cx, &meta, "entity", &mut c.kind_property, v)),
                    "version_property" => string(&meta)
                        .map(|v| set_once(cx, &meta, "entity", &mut c.version_property, v)),
                    "rename_all" => {
                        string(&meta).map(|v| set_once(cx, &meta, "entity", &mut c.rename_all, v))
                    }
                    "upcast" => {
                        path(&meta).map(|v| set_once(cx, &meta, "entity", &mut c.upcast, v))
                    }
                    "changes" => {
                        string(&meta).map(|v| set_once(cx, &meta, "entity", &mut c.changes, v))
                    }
                    "ttl" => string(&meta).map(|v| set_once(cx, &meta, "entity", &mut c.ttl, v)),
                    _ => return unknown(cx, &meta, "entity", CONTAINER_KEYS),
                };
                record(cx, parsed)
            });
            record(cx, result).ok();
        } else if attr.path().is_ident("index") {
            c.indexes.push(index::parse(cx, attr));
        } else if attr.path().is_ident("index_entity") {
            c.index_entities.push(index_entity::parse(cx, attr));
        } else if attr.path().is_ident("wide") {
            wide::parse(cx, attr, &mut c.wide);
        } else if attr.path().is_ident("series") {
            series::parse(cx, attr, &mut c.series);
        } else if let Some(open) = crate::decl::OPEN
            .iter()
            .find(|o| attr.path().is_ident(o.attribute))
        {
            c.open.push(crate::internals::open::parse(cx, attr, open));
        }
    }
    c
}

/// Parses a field's `#[entity(...)]` attributes.
pub(crate) fn field(cx: &Ctxt, attrs: &[syn::Attribute], allowed: &[&str]) -> FieldAttr {
    let mut f = FieldAttr::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("entity")) {
        let result = attr.parse_nested_meta(|meta| {
            let key = key_name(&meta);
            if !allowed.contains(&key.as_str()) {
                return unknown(cx, &meta, "entity", allowed);
            }
            let span = meta.path.span_of();
            let parsed = match key.as_str() {
                "rename" => string(&meta).map(|v| set_once(cx, &meta, "entity", &mut f.rename, v)),
                "skip" => {
                    set_once(cx, &meta, "entity", &mut f.skip, span);
                    Ok(())
                }
                "blob" => {
                    set_once(cx, &meta, "entity", &mut f.blob, span);
                    Ok(())
                }
                "json" => {
                    set_once(cx, &meta, "entity", &mut f.json, span);
                    Ok(())
                }
                "expires" => {
                    set_once(cx, &meta, "entity", &mut f.expires, span);
                    Ok(())
                }
                "default" => {
                    let value = if meta.input.peek(syn::Token![=]) {
                        path(&meta).map(DefaultAttr::Path)
                    } else {
                        Ok(DefaultAttr::Trait)
                    };
                    value.map(|v| set_once(cx, &meta, "entity", &mut f.default, v))
                }
                "denormalized" => denormalized::parse(cx, &meta)
                    .map(|d| set_once(cx, &meta, "entity", &mut f.denormalized, d)),
                _ => unknown(cx, &meta, "entity", allowed),
            };
            record(cx, parsed)
        });
        record(cx, result).ok();
    }
    f
}

/// The `crate = "…"` path of an `#[entity]` attribute on an enum or projection, with the
/// keys such a type accepts.
pub(crate) fn crate_only(
    cx: &Ctxt,
    attrs: &[syn::Attribute],
    allowed: &[&str],
) -> (Option<Path>, Option<LitStr>) {
    let mut krate = None;
    let mut rename_all = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("entity")) {
        let result = attr.parse_nested_meta(|meta| {
            let key = key_name(&meta);
            if !allowed.contains(&key.as_str()) {
                return unknown(cx, &meta, "entity", allowed);
            }
            let parsed = match key.as_str() {
                "crate" => path(&meta).map(|v| set_once(cx, &meta, "entity", &mut krate, v)),
                "rename_all" => {
                    string(&meta).map(|v| set_once(cx, &meta, "entity", &mut rename_all, v))
                }
                _ => unknown(cx, &meta, "entity", allowed),
            };
            record(cx, parsed)
        });
        record(cx, result).ok();
    }
    (krate, rename_all)
}

/// Applies a `rename_all` rule to a field name (a name that is no rule leaves it as it is;
/// the rule was reported).
pub(crate) fn apply_rename(rule: &str, field: &str) -> String {
    RenameRule::from_name(rule).map_or_else(|| field.to_owned(), |rule| rule.apply_to_field(field))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_rules_spell_field_names() {
        assert_eq!(apply_rename("PascalCase", "first_name"), "FirstName");
        assert_eq!(apply_rename("camelCase", "first_name"), "firstName");
        assert_eq!(apply_rename("snake_case", "first_name"), "first_name");
        assert_eq!(apply_rename("UPPERCASE", "id"), "ID");
    }
}
