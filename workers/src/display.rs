//! Untrusted text made safe to show: message ids, reasons and bodies come from whoever
//! wrote to the queue, and are written into log lines, the command line's listings and the
//! console's pages. (And [`span`], a span of time at a glance, for the same places.)
//!
//! [`neutral`] replaces every character that changes how the text around it reads rather
//! than showing itself — line breaks (a forged log line), bidirectional controls (an id
//! shown as `rtl-exe.png`), other control and invisible format characters (two ids that
//! look the same) — with a visible escape (`\n`, `\u{202E}`). Ordinary text of any script,
//! emoji sequences included, is kept as it is. A backslash is kept too: an escape in the
//! output can also have been typed, so the output names characters, it does not encode
//! them.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with its control, bidirectional and invisible format characters written as
/// visible escapes (`\n`, `\r`, `\t`, `\u{202E}`); the text itself when it has none.
pub(crate) fn neutral(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// As [`neutral`], but line breaks and tabs are kept: for a body shown as a block of
/// text, whose lines are its own (a carriage return is still shown).
#[cfg_attr(not(feature = "console"), allow(dead_code))]
pub(crate) fn neutral_lines(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

fn escape(text: &str, keep_lines: bool) -> Cow<'_, str> {
    // Printable ASCII holds none of them: the common id or reason costs one scan and no
    // allocation (the worker runs this on every delivery's id).
    if text.bytes().all(|b| (0x20..0x7F).contains(&b)) {
        return Cow::Borrowed(text);
    }
    let chars: Vec<char> = text.chars().collect();
    let flags = hidden_flags(&chars, keep_lines);
    if !flags.iter().any(|h| *h) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (&c, &escaped) in chars.iter().zip(&flags) {
        if !escaped {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            _ => {
                let _ = write!(out, "\\u{{{:04X}}}", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

/// Which characters of `chars` are written as escapes, in one pass: a run of tag
/// characters is kept when it follows a black flag, judged once per run.
fn hidden_flags(chars: &[char], keep_lines: bool) -> Vec<bool> {
    let mut flags = Vec::with_capacity(chars.len());
    let mut last_untagged: Option<char> = None;
    for i in 0..chars.len() {
        let c = chars[i];
        let flag = if ('\u{E0020}'..='\u{E007F}').contains(&c) {
            // Tag characters stay after a black flag (the flags of England, Scotland,
            // Wales).
            last_untagged != Some('\u{1F3F4}')
        } else {
            last_untagged = Some(c);
            !(keep_lines && matches!(c, '\n' | '\t')) && hidden(chars, i)
        };
        flags.push(flag);
    }
    flags
}

/// Whether the character at `i` (not a tag character) is one [`neutral`] writes as an
/// escape.
fn hidden(chars: &[char], i: usize) -> bool {
    let c = chars[i];
    match c {
        // C0 (line breaks and tabs among them), DEL and C1.
        c if c.is_control() => true,
        // Bidirectional controls: the Arabic letter mark, LRM and RLM, the embeddings and
        // overrides, the isolates.
        '\u{061C}'
        | '\u{200E}'
        | '\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}' => true,
        // The zero-width joiner stays between two emoji (a family, a profession).
        '\u{200D}' => {
            let joins = i > 0 && chars.get(i + 1).is_some_and(|&next| emoji(next));
            !(joins && emoji(chars[i - 1]))
        }
        // Invisible format characters: soft hyphen, Mongolian vowel separator, zero-width
        // space and non-joiner, line and paragraph separators, word joiner and invisible
        // operators, deprecated format controls, byte order mark, interlinear annotation,
        // musical format controls, language tag.
        '\u{00AD}'
        | '\u{180E}'
        | '\u{200B}'
        | '\u{200C}'
        | '\u{2028}'
        | '\u{2029}'
        | '\u{2060}'..='\u{2064}'
        | '\u{206A}'..='\u{206F}'
        | '\u{FEFF}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0001}' => true,
        _ => false,
    }
}

/// Whether `c` can stand on either side of an emoji's zero-width joiner: a pictograph,
/// a symbol of the Miscellaneous Symbols and Dingbats blocks, a skin tone, or the
/// variation selector that asks for emoji presentation.
fn emoji(c: char) -> bool {
    matches!(c, '\u{1F000}'..='\u{1FAFF}' | '\u{2600}'..='\u{27BF}' | '\u{2B00}'..='\u{2BFF}' | '\u{FE0F}')
}

/// The time from `from` to `to` at a glance: `12 s`, `3 min`, `1 h 4 min`, `2 days`
/// (nothing below 0).
pub(crate) fn span(
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
) -> String {
    let secs = (to - from).num_seconds().max(0);
    match secs {
        0..=59 => format!("{secs} s"),
        60..=3599 => format!("{} min", secs / 60),
        3600..=86_399 => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
        _ => format!("{} days", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_text_of_any_script_is_kept_as_it_is() {
        for text in [
            "invoice-2024.pdf",
            "Grüße, Søren",
            "مرحبا بالعالم",
            "שלום",
            "日本語のテキスト",
            "Ελληνικά",
            "path\\to\\file",
            "👍 done 🎉",
            "👨\u{200D}👩\u{200D}👧",
            "🏳\u{FE0F}\u{200D}🌈",
            "🏴\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}",
            "",
        ] {
            assert!(
                matches!(neutral(text), Cow::Borrowed(t) if t == text),
                "{text}"
            );
        }
    }

    #[test]
    fn bidirectional_controls_are_shown_as_escapes() {
        assert_eq!(neutral("rtl\u{202E}gnp.exe"), "rtl\\u{202E}gnp.exe");
        for c in [
            '\u{061C}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}',
            '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
        ] {
            let shown = neutral(&format!("a{c}b")).into_owned();
            assert_eq!(shown, format!("a\\u{{{:04X}}}b", u32::from(c)));
        }
    }

    #[test]
    fn line_breaks_and_control_characters_cannot_start_a_line() {
        assert_eq!(
            neutral("id\n2024-01-01 INFO forged\r\tx"),
            "id\\n2024-01-01 INFO forged\\r\\tx"
        );
        assert_eq!(
            neutral("\u{0}\u{1B}[31m\u{7F}\u{85}"),
            "\\u{0000}\\u{001B}[31m\\u{007F}\\u{0085}"
        );
        assert_eq!(neutral("a\u{2028}b\u{2029}c"), "a\\u{2028}b\\u{2029}c");
    }

    #[test]
    fn invisible_characters_are_shown_so_that_two_ids_never_look_the_same() {
        assert_eq!(neutral("ab\u{200B}c"), "ab\\u{200B}c");
        assert_eq!(neutral("a\u{200C}b"), "a\\u{200C}b");
        assert_eq!(neutral("a\u{200D}b"), "a\\u{200D}b");
        assert_eq!(neutral("\u{FEFF}id"), "\\u{FEFF}id");
        assert_eq!(neutral("soft\u{AD}hyphen"), "soft\\u{00AD}hyphen");
        assert_eq!(neutral("👍\u{200D}"), "👍\\u{200D}");
        assert_eq!(neutral("tag\u{E0067}"), "tag\\u{E0067}");
    }

    #[test]
    fn a_body_keeps_its_lines_and_a_long_run_of_tags_is_judged_once() {
        assert_eq!(
            neutral_lines("{\n\t\"a\": \"\u{202E}x\"\r\n}"),
            "{\n\t\"a\": \"\\u{202E}x\"\\r\n}"
        );
        let tags: String = std::iter::repeat_n('\u{E0067}', 200_000).collect();
        assert_eq!(neutral(&tags).len(), 200_000 * 9);
        let flag = format!("\u{1F3F4}{tags}");
        assert!(matches!(neutral(&flag), Cow::Borrowed(_)));
    }
}
