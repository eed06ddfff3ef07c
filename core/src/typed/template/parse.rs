//! Parsing a key template's text into its parts, and the error that names where and why
//! a text is not a template.

use std::borrow::Cow;

use super::part::{KeyFormat, TemplatePart};
use crate::limits::forbidden_in_key;

/// Why a key template could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid key template `{template}` at byte {offset}: {message}")]
pub struct TemplateError {
    /// The template.
    pub template: String,
    /// The byte offset of the problem.
    pub offset: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

pub(super) fn parse_parts(source: &str) -> Result<Vec<TemplatePart>, TemplateError> {
    let error = |offset: usize, message: String| TemplateError {
        template: source.to_owned(),
        offset,
        message,
    };
    if source.is_empty() {
        return Err(error(0, "a key template cannot be empty".to_owned()));
    }
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut chars = source.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '{' if matches!(chars.peek(), Some((_, '{'))) => {
                chars.next();
                literal.push('{');
            }
            '}' if matches!(chars.peek(), Some((_, '}'))) => {
                chars.next();
                literal.push('}');
            }
            '}' => {
                return Err(error(
                    at,
                    "unmatched `}`; write `}}` for a literal brace".to_owned(),
                ));
            }
            '{' => {
                let close = source[at..]
                    .find('}')
                    .map(|i| at + i)
                    .ok_or_else(|| error(at, "unclosed `{`, expected `{field}`".to_owned()))?;
                let inner = &source[at + 1..close];
                let (name, format_text) = match inner.split_once(':') {
                    Some((name, format)) => (name, Some(format)),
                    None => (inner, None),
                };
                if name.is_empty() {
                    return Err(error(at, "empty field name, expected `{field}`".to_owned()));
                }
                if !is_identifier(name) {
                    return Err(error(
                        at + 1,
                        format!("`{name}` is not a field name, expected an identifier"),
                    ));
                }
                let format = match format_text {
                    None => KeyFormat::Plain,
                    Some(text) => parse_format(text)
                        .map_err(|message| error(at + 1 + name.len() + 1, message))?,
                };
                if !literal.is_empty() {
                    parts.push(TemplatePart::Literal(Cow::Owned(std::mem::take(
                        &mut literal,
                    ))));
                }
                if let Some(TemplatePart::Field {
                    name: previous,
                    format: previous_format,
                }) = parts.last()
                    && previous_format.fixed_width().is_none()
                {
                    return Err(error(
                        at,
                        format!(
                            "field `{name}` follows field `{previous}` with no separator; put a separator between them or give `{previous}` a fixed width (`{{{previous}:06}}`)"
                        ),
                    ));
                }
                parts.push(TemplatePart::Field {
                    name: Cow::Owned(name.to_owned()),
                    format,
                });
                while chars.peek().is_some_and(|(i, _)| *i <= close) {
                    chars.next();
                }
            }
            c if forbidden_in_key(c) => {
                return Err(error(
                    at,
                    format!(
                        "{c:?} may not appear in a key (keys forbid `/ \\ # ?` and control characters)"
                    ),
                ));
            }
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        parts.push(TemplatePart::Literal(Cow::Owned(literal)));
    }
    Ok(parts)
}

fn parse_format(text: &str) -> Result<KeyFormat, String> {
    let expected = "expected `0N` (zero padding to N digits, e.g. `06`), `hashN` (e.g. `hash4`) or `ticks_desc`";
    if text == "ticks_desc" {
        return Ok(KeyFormat::TicksDesc);
    }
    if let Some(width) = text.strip_prefix("hash") {
        return match width.parse::<u8>() {
            Ok(n @ 1..=32) => Ok(KeyFormat::Hash(n)),
            _ => Err(format!(
                "`{text}`: a hash prefix has 1 to 32 hex characters (`hash1` ..= `hash32`)"
            )),
        };
    }
    if text.starts_with('-') {
        return Err(format!(
            "`{text}`: a padding width cannot be negative; {expected}"
        ));
    }
    if let Some(width) = text.strip_prefix('0') {
        return match width.parse::<u8>() {
            Ok(n @ 1..=20) if width.bytes().all(|b| b.is_ascii_digit()) => Ok(KeyFormat::Pad(n)),
            _ => Err(format!(
                "`{text}`: a padding width is 1 to 20 digits (`01` ..= `020`)"
            )),
        };
    }
    if text.bytes().all(|b| b.is_ascii_digit()) && !text.is_empty() {
        return Err(format!(
            "`{text}`: padding is written with a leading zero (`0{text}`)"
        ));
    }
    Err(format!("unknown key format `{text}`, {expected}"))
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typed::template::KeyTemplate;

    fn parse(source: &str) -> KeyTemplate {
        KeyTemplate::parse(source).expect("a valid template")
    }

    fn parse_error(source: &str) -> String {
        KeyTemplate::parse(source)
            .expect_err("an invalid template")
            .message
    }

    #[test]
    fn parses_fields_formats_literals_and_escaped_braces() {
        let template = parse("e{{x}}_{id:06}-{name:hash4}{name}|{at:ticks_desc}");
        assert_eq!(
            template.parts(),
            &[
                TemplatePart::literal("e{x}_"),
                TemplatePart::field("id", KeyFormat::Pad(6)),
                TemplatePart::literal("-"),
                TemplatePart::field("name", KeyFormat::Hash(4)),
                TemplatePart::field("name", KeyFormat::Plain),
                TemplatePart::literal("|"),
                TemplatePart::field("at", KeyFormat::TicksDesc),
            ]
        );
        assert_eq!(template.fields(), ["id", "name", "at"]);
        assert_eq!(template.literal_prefix(), "e{x}_");
    }

    #[test]
    fn rejects_malformed_templates_with_what_was_expected() {
        assert!(parse_error("").contains("empty"));
        assert!(parse_error("a{id").contains("unclosed"));
        assert!(parse_error("a}").contains("unmatched"));
        assert!(parse_error("{}").contains("empty field name"));
        assert!(parse_error("{1x}").contains("not a field name"));
        assert!(parse_error("{id:6}").contains("leading zero"));
        assert!(parse_error("{id:-6}").contains("negative"));
        assert!(parse_error("{id:00}").contains("1 to 20"));
        assert!(parse_error("{id:021}").contains("1 to 20"));
        assert!(parse_error("{id:hash0}").contains("1 to 32"));
        assert!(parse_error("{id:upper}").contains("unknown key format"));
        assert!(parse_error("a/{id}").contains("may not appear in a key"));
        assert!(parse_error("{a}{b}").contains("no separator"));
        assert!(KeyTemplate::parse("{a:04}{b}").is_ok());
        assert_eq!(
            KeyTemplate::parse("ab{x:zz}").expect_err("bad").offset,
            5,
            "the offset points at the format"
        );
    }
}
