//! Text from queues shown to people: bidi controls, line breaks and other invisible
//! characters made visible, so that an id cannot reorder what a page shows or forge a
//! line in a log.

use std::borrow::Cow;

/// Whether `c` would be invisible or rearrange the text around it.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// `text` with each hidden character written as an escape (`\n`, `\u{202e}`).
pub(crate) fn neutral(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_characters_are_shown_as_escapes() {
        assert_eq!(neutral("plain ünïcode 名前 🙂"), "plain ünïcode 名前 🙂");
        assert_eq!(neutral("exe.\u{202E}gnp"), "exe.\\u{202e}gnp");
        assert_eq!(neutral("a\nb\r\tc"), "a\\nb\\r\\tc");
    }
}
