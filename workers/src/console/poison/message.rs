//! One poison message's page (`/poison/<queue>/message/<handle>`): its body whole — pretty
//! when it is JSON, with its keys in their own order, and raw — its headers as the backend
//! records them, and its failure: the reason, the deliveries, and when it was poisoned in
//! UTC beside how long ago. Replay and discard it from there.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use maud::{Markup, html};

use super::super::view::{IssueNonce, ago, thousands, urlencode};
use super::super::{Console, Shared, failure, html as page_of, view as frame};
use super::place::checked_queue;
use super::view::{clip, fit, one_action, one_target, pretty_json};
use crate::display::{neutral, neutral_lines};
use crate::queue::{PoisonMessage, Queue};

/// The most bytes of a body the page carries once escaped, pretty and raw each (the whole
/// body is one link away): with the reason, the id and the headers, a page stays under
/// 1 MB whatever the message holds.
const SHOWN_BYTES: usize = 300 * 1024;
/// The most bytes of the reason the page carries, escaped.
const REASON_BYTES: usize = 100 * 1024;
/// The most bytes of the id, and of each header, the page carries, escaped.
const FIELD_BYTES: usize = 4 * 1024;
/// The most headers shown.
const HEADERS_SHOWN: usize = 64;

/// The headers a backend records beside a message's body.
pub(super) fn headers_of(message: &PoisonMessage) -> Vec<(&str, &str)> {
    message
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect()
}

/// `text` with its lines kept, made visible and cut to `bytes` of the page once escaped,
/// and whether it was cut.
fn cut(text: &str, bytes: usize) -> (String, bool) {
    let head: String = text.chars().take(bytes + 1).collect();
    let shown = fit(&neutral_lines(&head), bytes);
    let was_cut = shown.len() < text.len() && (shown.ends_with('…') || head.len() < text.len());
    (shown, was_cut)
}

pub(crate) async fn message(
    State(console): State<Shared>,
    Path((queue, handle)): Path<(String, String)>,
) -> Response {
    if let Err(e) = checked_queue(&queue) {
        return failure(&e);
    }
    match console.broker.poison_body(&queue, &handle).await {
        Ok(Some(message)) => page_of(
            StatusCode::OK,
            frame::page("Poison message", None, view(&console, &queue, &message)),
        ),
        Ok(None) => gone(),
        Err(e) => failure(&e),
    }
}

/// The page of a message no longer in the poison queue.
pub(super) fn gone() -> Response {
    page_of(
        StatusCode::NOT_FOUND,
        frame::page(
            "Gone",
            None,
            frame::problem("This message is no longer in the poison queue."),
        ),
    )
}

fn view(console: &Console, queue: &str, m: &PoisonMessage) -> Markup {
    view_of_message(queue, m, console.access.csrf(), &console.nonces)
}

/// The page of one message, its buttons' nonces issued by `nonces`.
fn view_of_message(queue: &str, m: &PoisonMessage, csrf: &str, nonces: &dyn IssueNonce) -> Markup {
    let now = Utc::now();
    let raw_text = String::from_utf8_lossy(&m.body);
    let (raw, raw_cut) = cut(&raw_text, SHOWN_BYTES);
    let pretty = pretty_json(&m.body);
    // A handle too long to travel in a form or a link (a backend whose handle is the id)
    // gets no buttons: the message is acted on through a filter, as on the list.
    let actionable = super::view::actionable(&m.handle);
    let whole = if actionable {
        format!("/poison/{}/body/{}", urlencode(queue), urlencode(&m.handle))
    } else {
        String::new()
    };
    let back = format!("/poison/{}", urlencode(queue));
    html! {
        section.card.message {
            h2 { "Poison message of " code { (neutral(queue)) } }
            p { a href=(back) { "← All poison messages of " (neutral(queue)) } }
            table.grid.facts {
                tbody {
                    tr { th { "id" } td.ident { @if m.id.is_empty() { span.muted { "no id" } } @else { code { (clip(&m.id, FIELD_BYTES)) } } } }
                    tr { th { "operation" } td { @match &m.operation { Some((kind, version)) => { code { (clip(kind, FIELD_BYTES)) } " v" (version) }, None => span.kind.bad { "not an operation" } } } }
                    tr { th { "handle" } td { code { (clip(&m.handle, FIELD_BYTES)) } } }
                    tr { th { "size" } td { (thousands(m.size as u64)) " bytes" } }
                    tr { th { "sent (UTC)" } td { @match m.sent_at { Some(at) => { (at.format("%Y-%m-%d %H:%M:%S UTC")) " · " span.muted { (ago(at, now)) } }, None => span.muted { "not recorded" } } } }
                }
            }
            h3 { "Failure" }
            table.grid.failures {
                thead { tr { th { "poisoned (UTC)" } th { "" } th.num { "deliveries" } th { "reason" } } }
                tbody {
                    tr {
                        td.nowrap { @match m.poisoned_at { Some(at) => (at.format("%Y-%m-%d %H:%M:%S UTC")), None => span.muted { "not recorded" } } }
                        td.nowrap.muted { @if let Some(at) = m.poisoned_at { (ago(at, now)) } }
                        td.num { (m.delivery_count) }
                        td.reason { (clip(&m.reason, REASON_BYTES)) @if m.reason_undecodable { " " span.badge.bad { "not UTF-8" } } }
                    }
                }
            }
            @let headers = headers_of(m);
            h3 { "Headers" }
            @if headers.is_empty() {
                p.muted { "The backend records no headers beside this message's body." }
            } @else {
                table.grid.headers {
                    tbody {
                        @for (name, value) in headers.iter().take(HEADERS_SHOWN) {
                            tr { th { (clip(name, FIELD_BYTES)) } td.reason { (clip(value, FIELD_BYTES)) } }
                        }
                    }
                }
            }
            @if super::super::view::may_act() && actionable {
            form.actions method="post" action=(back) {
                input type="hidden" name="csrf" value=(csrf);
                button name="one" value=(format!("replay:{}:{}", nonces.issue(&one_action("replay"), &one_target(queue, &m.handle)), m.handle)) { "Replay" }
                " "
                button.danger name="one" value=(format!("discard:{}:{}", nonces.issue(&one_action("discard"), &one_target(queue, &m.handle)), m.handle)) { "Discard…" }
            }
            }
            @if let Some(pretty) = &pretty {
                @let (shown, _) = cut(pretty, SHOWN_BYTES);
                h3 { "Body (JSON, keys in their order)" }
                pre.body.whole { (shown) }
            }
            h3 { "Body as sent" }
            pre.body.whole.raw { (raw) }
            p.muted {
                @if raw_cut { "The first " (thousands(SHOWN_BYTES as u64)) " bytes. " }
                @if actionable {
                    a href=(whole) target="_blank" rel="noopener" { "The whole body, as the queue holds it" }
                } @else {
                    "Its handle is too long to name alone: act on it, and read its whole body, through the JSON API or a filter."
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::forms::Nonces;
    use super::*;

    #[test]
    fn a_cut_keeps_whole_characters_and_counts_escapes() {
        assert_eq!(cut("abc", 3), ("abc".to_owned(), false));
        let (shown, was_cut) = cut(&"<".repeat(100), 40);
        assert!(was_cut);
        assert!(shown.chars().count() <= 11, "{shown}");
    }

    #[test]
    fn the_page_of_the_largest_message_stays_under_a_megabyte() {
        let worst = "\"<\u{202E}\n".repeat(400_000);
        let mut m = PoisonMessage::new(
            worst.clone(),
            worst.clone().into_bytes(),
            worst.clone(),
            9,
            None,
        );
        m.headers = (0..500)
            .map(|i| (format!("h{i}{worst}"), worst.clone()))
            .collect();
        let console_free = view_of_message("q", &m, "c", &Nonces::default());
        let html = console_free.into_string();
        assert!(html.len() < 1_000_000, "{} bytes", html.len());
    }
}
