//! Key templates in a declaration: parsed with the core's parser, checked against the
//! fields, and generated as static templates with compile-time checks of the field types.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::LitStr;
use tablekit_core::typed::{KeyFormat, KeyTemplate, TemplatePart};

use crate::internals::ctxt::Ctxt;
use crate::internals::field::{FieldModel, Storage, named};

/// A key template checked against the fields.
pub(crate) struct CheckedTemplate {
    pub(crate) lit: LitStr,
    pub(crate) template: KeyTemplate,
}

/// Gives every token the span of `span`, so that errors about generated code point at the
/// attribute that asked for it.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|token| match token {
            TokenTree::Group(group) => {
                let mut new = Group::new(group.delimiter(), respan(group.stream(), span));
                new.set_span(span);
                TokenTree::Group(new)
            }
            mut other => {
                other.set_span(span);
                other
            }
        })
        .collect()
}

/// Parses a template and checks its fields against the struct's.
pub(crate) fn checked_template(
    cx: &Ctxt,
    lit: &LitStr,
    fields: &[FieldModel],
) -> Option<CheckedTemplate> {
    let template = match KeyTemplate::parse(&lit.value()) {
        Ok(t) => t,
        Err(e) => {
            cx.error_spanned(
                lit,
                format!("invalid key template: {} (at byte {})", e.message, e.offset),
            );
            return None;
        }
    };
    let mut ok = true;
    for name in template.fields() {
        match named(cx, fields, name, lit, "key template") {
            None => ok = false,
            Some(field) if field.storage != Storage::Property => {
                let why = match field.storage {
                    Storage::Skipped => "is skipped (not stored)",
                    Storage::Json => "is stored as json",
                    _ => "is a blob field",
                };
                cx.error_spanned(
                    lit,
                    format!("field `{name}` cannot be part of a key: it {why}"),
                );
                ok = false;
            }
            Some(_) => {}
        }
    }
    ok.then(|| CheckedTemplate {
        lit: lit.clone(),
        template,
    })
}

/// Two RowKey templates in one partition whose literal prefixes do not keep them apart.
pub(crate) fn may_collide(a: &KeyTemplate, b: &KeyTemplate) -> bool {
    let (pa, pb) = (a.literal_prefix(), b.literal_prefix());
    pa.starts_with(pb) || pb.starts_with(pa)
}

/// The static tokens of a checked template.
pub(crate) fn template_tokens(t: &CheckedTemplate) -> TokenStream {
    let source = t.template.source();
    let parts = t.template.parts().iter().map(|part| match part {
        TemplatePart::Literal(text) => {
            let text = text.as_ref();
            quote!(__tk::TemplatePart::literal(#text))
        }
        TemplatePart::Field { name, format } => {
            let name = name.as_ref();
            let format = match format {
                KeyFormat::Plain => quote!(__tk::KeyFormat::Plain),
                KeyFormat::Pad(n) => quote!(__tk::KeyFormat::Pad(#n)),
                KeyFormat::Hash(n) => quote!(__tk::KeyFormat::Hash(#n)),
                KeyFormat::TicksDesc => quote!(__tk::KeyFormat::TicksDesc),
            };
            quote!(__tk::TemplatePart::field(#name, #format))
        }
    });
    quote!({
        const PARTS: &[__tk::TemplatePart] = &[#(#parts),*];
        __tk::KeyTemplate::from_static(#source, PARTS)
    })
}

/// Compile-time checks that each field a template uses has a type its format accepts; the
/// errors point at the template.
///
/// A field whose text has no fixed width and is followed by a literal gets a const check
/// that the literal's first character (the separator) sorts below every character the
/// field's type can write ([`KeyText`]): `{customer}_{id:08}` does not compile, since `_`
/// sorts above letters and digits and `bob_x` would render into `bob`'s keys.
///
/// [`KeyText`]: tablekit_core::typed::KeyText
pub(crate) fn template_assertions(
    type_name: &str,
    t: &CheckedTemplate,
    fields: &[FieldModel],
) -> TokenStream {
    let span = t.lit.span();
    let mut checks = TokenStream::new();
    let parts = t.template.parts();
    for (index, part) in parts.iter().enumerate() {
        let TemplatePart::Field { name, format } = part else {
            continue;
        };
        if format.fixed_width().is_none()
            && let Some(TemplatePart::Literal(text)) = parts.get(index + 1)
            && let Some(separator) = text.chars().next()
            && let Some(field) = fields.iter().find(|f| f.name == name.as_ref())
        {
            let ty = respan(field.ty.to_token_stream(), span);
            let type_text = field.ty.to_token_stream().to_string().replace(' ', "");
            let integer = [
                "u8", "u16", "u32", "u64", "usize", "i8", "i16", "i32", "i64", "isize",
            ]
            .contains(&type_text.as_str());
            let (clash, fix) = if integer {
                (
                    format!(
                        "the keys of `1` and `10` would interleave (`1{separator}…` sorts after `10{separator}…`)"
                    ),
                    format!("pad it (`{{{name}:08}}`) or use `,` as the separator"),
                )
            } else {
                (
                    format!("two values could render one key (`bob{separator}x` and `bob`) or keys could sort out of order"),
                    "use `,` or a character below it as the separator (a value holding it, or a lower character such as a space, is then refused when written)".to_owned(),
                )
            };
            let message = format!(
                "key template `{}` of `{type_name}`: the separator {separator:?} after `{name}` does not sort below every character a `{type_text}` can hold: {clash}; {fix}",
                t.template.source(),
            )
            // `assert!` reads its message as a format string.
            .replace('{', "{{")
            .replace('}', "}}");
            checks.extend(quote_spanned!(span=>
                ::core::assert!(__tk::separator_fits::<#ty>(#separator), #message);
            ));
        }
        let Some(field) = fields.iter().find(|f| f.name == name.as_ref()) else {
            continue;
        };
        let ty = respan(field.ty.to_token_stream(), span);
        let check = match format {
            KeyFormat::Pad(_) => quote_spanned!(span=> __tk::assert_padded::<#ty>();),
            KeyFormat::TicksDesc => quote_spanned!(span=> __tk::assert_ticks::<#ty>();),
            KeyFormat::Plain | KeyFormat::Hash(_) => {
                quote_spanned!(span=> __tk::assert_key_part::<#ty>();)
            }
        };
        checks.extend(check);
    }
    checks
}
