//! `#[feed]` / `#[feed(retention = "7d", shares = 16)]`: every committed write of the type
//! records its change in a log kept for `retention`, read again by named groups of
//! consumers from the beginning, a time or a checkpoint (the patterns' `feed`). An open
//! declaration named `feed`, without a key or a handle.

use std::collections::HashMap;

use proc_macro2::Span;
use syn::{Lit, LitStr};

use crate::internals::ctxt::Ctxt;
use crate::internals::duration::parse_duration;
use crate::internals::open::{CheckedOpen, Open, OpenAttr};
use crate::internals::scope::Scope;

/// The most shares a feed divides its partitions into.
const MAX_SHARES: u32 = 1024;
/// How long changes are kept unless said (seven days, in seconds).
const DEFAULT_RETENTION: u64 = 7 * 86_400;
/// Shares unless said.
const DEFAULT_SHARES: u32 = 16;

/// `#[feed]`, for the derive.
pub(crate) const OPEN: Open = Open {
    attribute: "feed",
    keys: &["retention", "shares"],
    check,
    handle: false,
};

fn check(
    cx: &Ctxt,
    _scope: &Scope<'_>,
    names: &mut HashMap<String, Span>,
    attr: &OpenAttr,
) -> Option<CheckedOpen> {
    if let Some(first) = names.get("feed") {
        let _ = first;
        cx.error_spanned(
            crate::internals::attr::index_span(attr.span),
            "the type declares `#[feed]` twice: one feed per type",
        );
        return None;
    }
    names.insert("feed".to_owned(), attr.span);
    let retention = match attr.string(cx, "retention") {
        Some(lit) => match parse_duration(&lit.value()) {
            Ok(0) => {
                cx.error_spanned(&lit, "a feed's `retention` is longer than nothing");
                None
            }
            Ok(seconds) => Some(seconds),
            Err(why) => {
                cx.error_spanned(
                    &lit,
                    format!("invalid `retention` `{}`: {why} (e.g. \"7d\", \"12h\")", lit.value()),
                );
                None
            }
        },
        None => Some(DEFAULT_RETENTION),
    };
    let shares = match attr.value("shares") {
        Some(Lit::Int(shares)) => match shares.base10_parse::<u32>() {
            Ok(n) if (1..=MAX_SHARES).contains(&n) => Some(n),
            _ => {
                cx.error_spanned(
                    shares,
                    format!("`shares` is a number of shares from 1 to {MAX_SHARES}"),
                );
                None
            }
        },
        Some(other) => {
            cx.error_spanned(other, "expected an integer: `shares = 16`");
            None
        }
        None => Some(DEFAULT_SHARES),
    };
    let settings = vec![
        ("retention".to_owned(), retention?.to_string()),
        ("shares".to_owned(), shares?.to_string()),
    ];
    Some(CheckedOpen::new(
        &OPEN,
        LitStr::new("feed", attr.span),
        None,
        None,
        settings,
    ))
}
