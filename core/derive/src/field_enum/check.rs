//! Checking a `FieldEnum`: a concrete enum of unit variants, each with one stored value
//! (a distinct name, or a discriminant that fits `Int32`), at most one `other` variant.
//! Every mistake is recorded on the token at fault.

use std::collections::HashMap;

use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Expr, ExprLit, ExprUnary, Fields, Ident, Lit, LitStr, UnOp};

use super::parse::{self, EnumAttr};
use crate::internals::case::{RenameRule, VARIANT_RULES};
use crate::internals::ctxt::{Ctxt, one_of};

/// How the enum is stored.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repr {
    /// `Edm.String`, the variant's stored name.
    Name,
    /// `Edm.Int32`, the variant's discriminant.
    Int,
}

/// A variant and what it stores.
pub(crate) struct CheckedVariant<'a> {
    pub(crate) ident: &'a Ident,
    /// The stored name (`Name`), or the variant's name (`Int`).
    pub(crate) name: String,
    /// The discriminant (`Int`).
    pub(crate) discriminant: i32,
}

/// A checked enum.
pub(crate) struct CheckedEnum<'a> {
    pub(crate) repr: Repr,
    pub(crate) variants: Vec<CheckedVariant<'a>>,
    /// The position of the `#[field_enum(other)]` variant.
    pub(crate) other: Option<usize>,
}

impl CheckedEnum<'_> {
    /// Whether a discriminant is negative (so its key text holds `-` and cannot be padded).
    pub(crate) fn has_negative(&self) -> bool {
        self.variants.iter().any(|v| v.discriminant < 0)
    }

    /// The lowest character of the enum's key text: what a separator after it must sort
    /// below.
    pub(crate) fn floor(&self) -> char {
        match self.repr {
            Repr::Int if self.has_negative() => '-',
            Repr::Int => '0',
            Repr::Name => self
                .variants
                .iter()
                .flat_map(|v| v.name.chars())
                .min()
                .unwrap_or(char::MAX),
        }
    }
}

/// Checks the enum and its attributes.
pub(crate) fn check<'a>(
    cx: &Ctxt,
    input: &'a DeriveInput,
    attr: &EnumAttr,
) -> Option<CheckedEnum<'a>> {
    if !input.generics.params.is_empty() {
        cx.error_spanned(
            &input.generics,
            "#[derive(FieldEnum)] does not support generic types; declare a concrete enum",
        );
    }
    let repr = repr(cx, attr);
    let rule = rename_rule(cx, attr, repr);
    let Data::Enum(data) = &input.data else {
        cx.error_spanned(
            &input.ident,
            "#[derive(FieldEnum)] needs an enum of unit variants (`enum Status { Placed, Shipped }`)",
        );
        return None;
    };
    if data.variants.is_empty() {
        cx.error_spanned(
            &input.ident,
            "#[derive(FieldEnum)] needs at least one variant: an enum without variants has no value to store",
        );
    }
    let mut variants = Vec::new();
    let mut other: Option<(usize, &Ident)> = None;
    let mut stored: HashMap<String, &Ident> = HashMap::new();
    let mut next = Some(0_i128);
    for variant in &data.variants {
        let ident = &variant.ident;
        if !matches!(variant.fields, Fields::Unit) {
            cx.error_spanned(
                &variant.fields,
                format!(
                    "#[derive(FieldEnum)] takes unit variants only: write `{ident}`; an enum whose variants hold data is stored with `#[entity(json)]`"
                ),
            );
        }
        let vattr = parse::variant_attr(cx, &variant.attrs);
        if let Some(span) = vattr.other {
            match other {
                Some((_, first)) => cx.syn_error(syn::Error::new(
                    span,
                    format!(
                        "only one variant can be `other`: `{first}` already takes the stored values no variant names"
                    ),
                )),
                None => other = Some((variants.len(), ident)),
            }
        }
        let discriminant = match repr {
            Repr::Int => discriminant(cx, variant, &mut next),
            Repr::Name => 0,
        };
        let name = match (repr, &vattr.rename) {
            (Repr::Int, Some(lit)) => {
                cx.error_spanned(
                    lit,
                    "`rename` names a stored string; a `repr = \"int\"` enum stores its discriminant",
                );
                ident.unraw().to_string()
            }
            (Repr::Name, Some(lit)) => lit.value(),
            (_, None) => {
                let name = ident.unraw().to_string();
                rule.map_or(name.clone(), |rule| rule.apply_to_variant(&name))
            }
        };
        if repr == Repr::Name {
            check_name(cx, &mut stored, ident, vattr.rename.as_ref(), &name);
        }
        variants.push(CheckedVariant {
            ident,
            name,
            discriminant,
        });
    }
    Some(CheckedEnum {
        repr,
        variants,
        other: other.map(|(at, _)| at),
    })
}

fn repr(cx: &Ctxt, attr: &EnumAttr) -> Repr {
    match attr.repr.as_ref().map(|lit| (lit, lit.value())) {
        None => Repr::Name,
        Some((_, value)) if value == "string" => Repr::Name,
        Some((_, value)) if value == "int" => Repr::Int,
        Some((lit, value)) => {
            cx.error_spanned(
                lit,
                format!("unknown `repr` `{value}`, expected `\"string\"` (the variant's name) or `\"int\"` (its discriminant)"),
            );
            Repr::Name
        }
    }
}

fn rename_rule(cx: &Ctxt, attr: &EnumAttr, repr: Repr) -> Option<RenameRule> {
    let lit = attr.rename_all.as_ref()?;
    if repr == Repr::Int {
        cx.error_spanned(
            lit,
            "`rename_all` names stored strings; a `repr = \"int\"` enum stores its discriminants",
        );
        return None;
    }
    let value = lit.value();
    let rule = RenameRule::from_name(&value);
    if rule.is_none() {
        cx.error_spanned(
            lit,
            format!(
                "unknown `rename_all` rule `{value}`, expected one of {}",
                one_of(VARIANT_RULES)
            ),
        );
    }
    rule
}

/// A stored name: not empty, and no other variant's.
fn check_name<'a>(
    cx: &Ctxt,
    stored: &mut HashMap<String, &'a Ident>,
    ident: &'a Ident,
    rename: Option<&LitStr>,
    name: &str,
) {
    let at = || {
        rename.map_or_else(
            || quote::ToTokens::to_token_stream(ident),
            quote::ToTokens::to_token_stream,
        )
    };
    if name.is_empty() {
        cx.error_spanned(at(), "a stored name cannot be empty");
    }
    if let Some(first) = stored.get(name) {
        cx.error_spanned(
            at(),
            format!(
                "variants `{first}` and `{ident}` are both stored as `{name}`; rename one with `#[field_enum(rename = \"…\")]`"
            ),
        );
    } else {
        stored.insert(name.to_owned(), ident);
    }
}

/// The discriminant of an int-repr variant: its literal, or one more than the previous
/// variant's (the first is 0), as Rust numbers them; it must fit `Int32`.
fn discriminant(cx: &Ctxt, variant: &syn::Variant, next: &mut Option<i128>) -> i32 {
    const RANGE: &str = "-2147483648 ..= 2147483647";
    let value = match &variant.discriminant {
        Some((_, expr)) => match literal(expr) {
            Some(Ok(value)) => Some(value),
            Some(Err(e)) => {
                cx.syn_error(e);
                None
            }
            None => {
                cx.error_spanned(
                    expr,
                    "a `repr = \"int\"` enum's discriminants are integer literals (`Placed = 1`): the derive reads them to check that they fit the stored Int32",
                );
                None
            }
        },
        None => *next,
    };
    let fits = value.and_then(|v| i32::try_from(v).ok().map(|n| (v, n)));
    match (value, fits, &variant.discriminant) {
        (Some(_), Some((v, n)), _) => {
            *next = Some(v + 1);
            n
        }
        (Some(v), None, Some((_, expr))) => {
            cx.error_spanned(
                expr,
                format!(
                    "`{v}` does not fit the Int32 a `repr = \"int\"` enum is stored as ({RANGE})"
                ),
            );
            *next = None;
            0
        }
        (Some(v), None, None) => {
            cx.error_spanned(
                &variant.ident,
                format!(
                    "`{}` follows the previous variant and so is {v}, which does not fit the Int32 a `repr = \"int\"` enum is stored as ({RANGE}); give it a discriminant",
                    variant.ident
                ),
            );
            *next = None;
            0
        }
        // The previous discriminant was reported.
        (None, _, _) => {
            *next = None;
            0
        }
    }
}

/// An integer literal, negated or not.
fn literal(expr: &Expr) -> Option<syn::Result<i128>> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(lit), ..
        }) => Some(lit.base10_parse::<i128>()),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => literal(expr).map(|value| value.map(|v| -v)),
        Expr::Group(group) => literal(&group.expr),
        Expr::Paren(paren) => literal(&paren.expr),
        _ => None,
    }
}
