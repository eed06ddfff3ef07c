//! `#[entity(changes = "…")]`: the queue an `IndexedTable` publishes the type's committed
//! inserts, updates and deletes to, as change events.

use proc_macro2::TokenStream;
use syn::LitStr;

use crate::internals::ctxt::Ctxt;
use crate::internals::tokens::option_str;

/// A queue name as every queue backend takes it (the workers' `check_queue_name`).
pub(crate) fn check(cx: &Ctxt, changes: Option<&LitStr>) {
    let Some(lit) = changes else {
        return;
    };
    let name = lit.value();
    let reason = if name.is_empty() {
        Some("a queue name cannot be empty")
    } else if name.len() > 200 {
        Some("a queue name has at most 200 bytes")
    } else if name.starts_with("amq.") {
        Some("names starting with `amq.` are reserved by AMQP")
    } else if name.chars().any(char::is_control) {
        Some("a queue name cannot hold control characters")
    } else {
        None
    };
    if let Some(reason) = reason {
        cx.error_spanned(lit, format!("invalid `changes` queue `{name}`: {reason}"));
    }
}

/// The schema's `changes`: the queue, if any.
pub(crate) fn meta(changes: Option<&LitStr>) -> TokenStream {
    option_str(changes)
}
