//! `#[entity(changes = "…")]`: the queue an `IndexedTable` publishes the type's committed
//! inserts, updates and deletes to, as change events.

use proc_macro2::TokenStream;
use quote::quote;
use syn::LitStr;

use crate::internals::ctxt::Ctxt;

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

/// The schema's declaration of change events, if the type publishes them: a
/// `DeclaredMeta` of attribute and name `changes` with its queue as a setting.
pub(crate) fn meta(changes: Option<&LitStr>) -> Option<TokenStream> {
    let queue = changes?;
    Some(quote! {
        __tk::DeclaredMeta {
            attribute: "changes",
            name: "changes",
            key: __tk::None,
            templates: &[],
            table: __tk::None,
            settings: &[("queue", #queue)],
        }
    })
}
