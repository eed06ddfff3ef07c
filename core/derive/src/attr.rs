//! Parsing: the `#[entity]`, `#[index]`, `#[index_entity]` and `#[unique]` attributes into a model of
//! the declaration. Unknown or repeated attributes are recorded and parsing carries on.

use proc_macro2::Span;
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::{Expr, ExprArray, ExprLit, Lit, LitInt, LitStr, Path};

use crate::ctxt::{Ctxt, one_of};

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
/// The `#[index(...)]` keys.
pub(crate) const INDEX_KEYS: &[&str] = &[
    "name",
    "partition_key",
    "row_key",
    "table",
    "properties",
    "when",
];
/// The `#[index_entity(...)]` keys.
pub(crate) const INDEX_ENTITY_KEYS: &[&str] = &["name", "key", "table", "storage"];
/// The `#[unique(...)]` keys.
pub(crate) const UNIQUE_KEYS: &[&str] = &["name", "key", "table"];
/// The `denormalized(...)` keys.
pub(crate) const DENORMALIZED_KEYS: &[&str] =
    &["from", "table", "partition_key", "row_key", "property"];
/// The `rename_all` rules.
pub(crate) const RENAME_RULES: &[&str] = &[
    "PascalCase",
    "camelCase",
    "snake_case",
    "lowercase",
    "UPPERCASE",
];
/// The index entity storages.
pub(crate) const STORAGES: &[&str] = &["partition", "table", "blob"];

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
    pub(crate) uniques: Vec<UniqueAttr>,
}

/// One `#[index(...)]`.
pub(crate) struct IndexAttr {
    pub(crate) span: Span,
    pub(crate) name: Option<LitStr>,
    pub(crate) partition_key: Option<LitStr>,
    pub(crate) row_key: Option<LitStr>,
    pub(crate) table: Option<LitStr>,
    pub(crate) properties: Option<Vec<LitStr>>,
    pub(crate) when: Option<Path>,
}

/// One `#[index_entity(...)]`.
pub(crate) struct IndexEntityAttr {
    pub(crate) span: Span,
    pub(crate) name: Option<LitStr>,
    pub(crate) key: Option<LitStr>,
    pub(crate) table: Option<LitStr>,
    pub(crate) storage: Option<LitStr>,
}

/// One `#[unique(...)]`.
pub(crate) struct UniqueAttr {
    pub(crate) span: Span,
    pub(crate) name: Option<LitStr>,
    pub(crate) key: Option<LitStr>,
    pub(crate) table: Option<LitStr>,
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

/// `default` or `default = "path"`.
pub(crate) enum DefaultAttr {
    Trait,
    Path(Path),
}

/// `denormalized(from = …, partition_key = …, row_key = …, property = …, table = …)`.
pub(crate) struct DenormalizedAttr {
    pub(crate) span: Span,
    pub(crate) from: Option<LitStr>,
    pub(crate) table: Option<LitStr>,
    pub(crate) partition_key: Option<LitStr>,
    pub(crate) row_key: Option<LitStr>,
    pub(crate) property: Option<LitStr>,
}

fn key_name(meta: &ParseNestedMeta<'_>) -> String {
    meta.path.to_token_stream().to_string().replace(' ', "")
}

/// Records an unknown key and skips its value, so parsing carries on.
fn unknown(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    attribute: &str,
    expected: &[&str],
) -> syn::Result<()> {
    let name = key_name(meta);
    cx.syn_error(meta.error(format!(
        "unknown `{attribute}` attribute `{name}`, expected one of {}",
        one_of(expected)
    )));
    skip_value(meta)
}

fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.parse_nested_meta(|inner| skip_value(&inner))?;
    }
    Ok(())
}

/// Stores a value once; a second one is an error on the key.
fn set_once<T>(
    cx: &Ctxt,
    meta: &ParseNestedMeta<'_>,
    attribute: &str,
    slot: &mut Option<T>,
    value: T,
) {
    if slot.is_some() {
        cx.syn_error(meta.error(format!(
            "duplicate `{attribute}` attribute `{}`",
            key_name(meta)
        )));
    } else {
        *slot = Some(value);
    }
}

fn string(meta: &ParseNestedMeta<'_>) -> syn::Result<LitStr> {
    let name = key_name(meta);
    let value = meta.value()?;
    let expr: Expr = value.parse()?;
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s),
        other => Err(syn::Error::new_spanned(
            other,
            format!("expected a string literal: `{name} = \"…\"`"),
        )),
    }
}

/// A path, written as a path or as a string holding one.
fn path(meta: &ParseNestedMeta<'_>) -> syn::Result<Path> {
    let name = key_name(meta);
    let expr: Expr = meta.value()?.parse()?;
    match expr {
        Expr::Path(p) => Ok(p.path),
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => s.parse(),
        other => Err(syn::Error::new_spanned(
            other,
            format!("expected a path: `{name} = path::to::item` or `{name} = \"path::to::item\"`"),
        )),
    }
}

fn integer(meta: &ParseNestedMeta<'_>) -> syn::Result<LitInt> {
    let name = key_name(meta);
    let expr: Expr = meta.value()?.parse()?;
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => Ok(i),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => Err(syn::Error::new_spanned(
            u,
            format!("`{name}` is a positive integer, not a negative number"),
        )),
        other => Err(syn::Error::new_spanned(
            other,
            format!("expected an integer: `{name} = 1`"),
        )),
    }
}

fn string_list(meta: &ParseNestedMeta<'_>) -> syn::Result<Vec<LitStr>> {
    let name = key_name(meta);
    let array: ExprArray = meta.value()?.parse()?;
    array
        .elems
        .into_iter()
        .map(|elem| match elem {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => Ok(s),
            Expr::Path(p) if p.path.get_ident().is_some() => {
                let ident = p
                    .path
                    .get_ident()
                    .map(|i| i.to_string())
                    .unwrap_or_default();
                Ok(LitStr::new(&ident, p.path.span_of()))
            }
            other => Err(syn::Error::new_spanned(
                other,
                format!("expected field names: `{name} = [\"first_name\", \"last_name\"]`"),
            )),
        })
        .collect()
}

trait SpanOf {
    fn span_of(&self) -> Span;
}

impl SpanOf for Path {
    fn span_of(&self) -> Span {
        self.segments
            .first()
            .map_or_else(Span::call_site, |s| s.ident.span())
    }
}

/// Runs a parser on one key, recording its error instead of stopping.
fn record(cx: &Ctxt, result: syn::Result<()>) -> syn::Result<()> {
    if let Err(e) = result {
        cx.syn_error(e);
    }
    Ok(())
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
            let mut index = IndexAttr {
                span: attr.path().span_of(),
                name: None,
                partition_key: None,
                row_key: None,
                table: None,
                properties: None,
                when: None,
            };
            let result = attr.parse_nested_meta(|meta| {
                let parsed = match key_name(&meta).as_str() {
                    "name" => {
                        string(&meta).map(|v| set_once(cx, &meta, "index", &mut index.name, v))
                    }
                    "partition_key" => string(&meta)
                        .map(|v| set_once(cx, &meta, "index", &mut index.partition_key, v)),
                    "row_key" => {
                        string(&meta).map(|v| set_once(cx, &meta, "index", &mut index.row_key, v))
                    }
                    "table" => {
                        string(&meta).map(|v| set_once(cx, &meta, "index", &mut index.table, v))
                    }
                    "properties" => string_list(&meta)
                        .map(|v| set_once(cx, &meta, "index", &mut index.properties, v)),
                    "when" => path(&meta).map(|v| set_once(cx, &meta, "index", &mut index.when, v)),
                    _ => return unknown(cx, &meta, "index", INDEX_KEYS),
                };
                record(cx, parsed)
            });
            record(cx, result).ok();
            c.indexes.push(index);
        } else if attr.path().is_ident("index_entity") {
            let mut index = IndexEntityAttr {
                span: attr.path().span_of(),
                name: None,
                key: None,
                table: None,
                storage: None,
            };
            let result = attr.parse_nested_meta(|meta| {
                let parsed = match key_name(&meta).as_str() {
                    "name" => string(&meta)
                        .map(|v| set_once(cx, &meta, "index_entity", &mut index.name, v)),
                    "key" => string(&meta)
                        .map(|v| set_once(cx, &meta, "index_entity", &mut index.key, v)),
                    "table" => string(&meta)
                        .map(|v| set_once(cx, &meta, "index_entity", &mut index.table, v)),
                    "storage" => string(&meta)
                        .map(|v| set_once(cx, &meta, "index_entity", &mut index.storage, v)),
                    _ => return unknown(cx, &meta, "index_entity", INDEX_ENTITY_KEYS),
                };
                record(cx, parsed)
            });
            record(cx, result).ok();
            c.index_entities.push(index);
        } else if attr.path().is_ident("unique") {
            let mut unique = UniqueAttr {
                span: attr.path().span_of(),
                name: None,
                key: None,
                table: None,
            };
            let result = attr.parse_nested_meta(|meta| {
                let parsed =
                    match key_name(&meta).as_str() {
                        "name" => string(&meta)
                            .map(|v| set_once(cx, &meta, "unique", &mut unique.name, v)),
                        "key" => {
                            string(&meta).map(|v| set_once(cx, &meta, "unique", &mut unique.key, v))
                        }
                        "table" => string(&meta)
                            .map(|v| set_once(cx, &meta, "unique", &mut unique.table, v)),
                        _ => return unknown(cx, &meta, "unique", UNIQUE_KEYS),
                    };
                record(cx, parsed)
            });
            record(cx, result).ok();
            c.uniques.push(unique);
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
                "denormalized" => {
                    let mut d = DenormalizedAttr {
                        span,
                        from: None,
                        table: None,
                        partition_key: None,
                        row_key: None,
                        property: None,
                    };
                    let inner = meta.parse_nested_meta(|meta| {
                        let parsed = match key_name(&meta).as_str() {
                            "from" => string(&meta)
                                .map(|v| set_once(cx, &meta, "denormalized", &mut d.from, v)),
                            "table" => string(&meta)
                                .map(|v| set_once(cx, &meta, "denormalized", &mut d.table, v)),
                            "partition_key" => string(&meta).map(|v| {
                                set_once(cx, &meta, "denormalized", &mut d.partition_key, v)
                            }),
                            "row_key" => string(&meta)
                                .map(|v| set_once(cx, &meta, "denormalized", &mut d.row_key, v)),
                            "property" => string(&meta)
                                .map(|v| set_once(cx, &meta, "denormalized", &mut d.property, v)),
                            _ => return unknown(cx, &meta, "denormalized", DENORMALIZED_KEYS),
                        };
                        record(cx, parsed)
                    });
                    record(cx, inner)?;
                    set_once(cx, &meta, "entity", &mut f.denormalized, d);
                    Ok(())
                }
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

/// Applies a `rename_all` rule to a field name.
pub(crate) fn apply_rename(rule: &str, field: &str) -> String {
    let words: Vec<&str> = field.split('_').filter(|w| !w.is_empty()).collect();
    let capitalise = |w: &str| {
        let mut chars = w.chars();
        chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect::<String>())
            .unwrap_or_default()
    };
    match rule {
        "PascalCase" => words.iter().map(|w| capitalise(w)).collect(),
        "camelCase" => words
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    (*w).to_owned()
                } else {
                    capitalise(w)
                }
            })
            .collect(),
        "lowercase" => field.to_lowercase(),
        "UPPERCASE" => field.to_uppercase(),
        _ => field.to_owned(),
    }
}

/// Reads a time to live: whole numbers each followed by a unit, `d`, `h`, `m` or `s`
/// (`"30d"`, `"1d12h"`, `"90s"`), in seconds.
/// The longest time to live: a hundred years.
const MAX_TTL_SECONDS: u64 = 36_500 * 86_400;

pub(crate) fn parse_ttl(text: &str) -> Result<u64, String> {
    let mut total: u64 = 0;
    let mut number: Option<u64> = None;
    for c in text.chars() {
        if let Some(digit) = c.to_digit(10) {
            let n = number.unwrap_or(0);
            number = Some(
                n.checked_mul(10)
                    .and_then(|n| n.checked_add(u64::from(digit)))
                    .ok_or("it is too long")?,
            );
            continue;
        }
        let unit = match c {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            other => return Err(format!("`{other}` is not a unit (d, h, m, s)")),
        };
        let n = number.take().ok_or("each unit needs a number before it")?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or("it is too long")?;
    }
    if number.is_some() {
        return Err("a number needs a unit (d, h, m, s)".to_owned());
    }
    if total == 0 {
        return Err("a time to live is at least one second".to_owned());
    }
    if total > MAX_TTL_SECONDS {
        return Err("a time to live is at most 36500d (a hundred years)".to_owned());
    }
    Ok(total)
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
