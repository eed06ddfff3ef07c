//! One poison message's page (`/poison/<queue>/message/<handle>`): its body whole — pretty
//! when it is JSON, with its keys in their own order, and raw — its headers as the backend
//! records them, and its failure: the reason, the deliveries, and when it was poisoned in
//! UTC beside how long ago. Replay and discard it from there.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use maud::{Markup, html};

use super::super::view::{ago, thousands, urlencode};
use super::super::{Console, Shared, failure, html as page_of, view as frame};
use super::actions::{one_action, one_target};
use super::{checked_queue, gone};
use crate::display::{neutral, neutral_lines};
use crate::queue::{PoisonMessage, Queue};

/// The most bytes of a body the page carries, pretty and raw each (the whole body is one
/// link away).
const SHOWN_BYTES: usize = 256 * 1024;

/// The headers a backend records beside a message's body.
pub(super) fn headers_of(message: &PoisonMessage) -> Vec<(&str, &str)> {
    message
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect()
}

/// A JSON body pretty-printed with its keys in the order it has them; `None` when the
/// body is not one JSON text.
pub(super) fn pretty_json(body: &[u8]) -> Option<String> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let mut out = Vec::with_capacity(body.len() * 2);
    let mut serializer = serde_json::Serializer::pretty(&mut out);
    serde_transcode::transcode(&mut deserializer, &mut serializer).ok()?;
    deserializer.end().ok()?;
    String::from_utf8(out).ok()
}

/// `text` cut to `bytes` at a character boundary, and whether it was cut.
fn cut(text: &str, bytes: usize) -> (&str, bool) {
    if text.len() <= bytes {
        return (text, false);
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
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

fn view(console: &Console, queue: &str, m: &PoisonMessage) -> Markup {
    let now = Utc::now();
    let raw_text = String::from_utf8_lossy(&m.body);
    let (raw, raw_cut) = cut(&raw_text, SHOWN_BYTES);
    let pretty = pretty_json(&m.body);
    let whole = format!("/poison/{}/body/{}", urlencode(queue), urlencode(&m.handle));
    let back = format!("/poison/{}", urlencode(queue));
    let csrf = console.access.csrf();
    html! {
        section.card.message {
            h2 { "Poison message of " code { (neutral(queue)) } }
            p { a href=(back) { "← All poison messages of " (neutral(queue)) } }
            table.grid.facts {
                tbody {
                    tr { th { "id" } td.ident { @if m.id.is_empty() { span.muted { "no id" } } @else { code { (neutral(&m.id)) } } } }
                    tr { th { "operation" } td { @match &m.operation { Some((kind, version)) => { code { (neutral(kind)) } " v" (version) }, None => span.kind.bad { "not an operation" } } } }
                    tr { th { "handle" } td { code { (neutral(&m.handle)) } } }
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
                        td.reason { (neutral(&m.reason)) @if m.reason_undecodable { " " span.badge.bad { "not UTF-8" } } }
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
                        @for (name, value) in &headers {
                            tr { th { (neutral(name)) } td.reason { (neutral(value)) } }
                        }
                    }
                }
            }
            @if super::super::view::may_act() {
            form.actions method="post" action=(back) {
                input type="hidden" name="csrf" value=(csrf);
                button name="one" value=(format!("replay:{}:{}", console.nonces.issue(&one_action("replay"), &one_target(queue, &m.handle)), m.handle)) { "Replay" }
                " "
                button.danger name="one" value=(format!("discard:{}:{}", console.nonces.issue(&one_action("discard"), &one_target(queue, &m.handle)), m.handle)) { "Discard…" }
            }
            }
            @if let Some(pretty) = &pretty {
                @let (shown, was_cut) = cut(pretty, SHOWN_BYTES);
                h3 { "Body (JSON, keys in their order)" }
                pre.body.whole { (neutral_lines(shown)) @if was_cut { "…" } }
            }
            h3 { "Body as sent" }
            pre.body.whole.raw { (neutral_lines(raw)) @if raw_cut { "…" } }
            p.muted {
                @if raw_cut { "The first " (thousands(SHOWN_BYTES as u64)) " bytes. " }
                a href=(whole) target="_blank" rel="noopener" { "The whole body, as the queue holds it" }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_its_key_order() {
        let body = br#"{"zeta":1,"alpha":{"y":[1,2],"b":null},"mid":"x"}"#;
        let pretty = pretty_json(body).expect("JSON");
        let z = pretty.find("zeta").unwrap_or(usize::MAX);
        let a = pretty.find("alpha").unwrap_or(0);
        let y = pretty.find("\"y\"").unwrap_or(usize::MAX);
        let b = pretty.find("\"b\"").unwrap_or(0);
        assert!(z < a && y < b, "{pretty}");
        assert!(pretty.contains("\n  \"alpha\": {"), "{pretty}");
        assert_eq!(pretty_json(b"{\"a\":1} trailing"), None);
        assert_eq!(pretty_json(b"not json"), None);
    }

    #[test]
    fn a_cut_keeps_whole_characters() {
        assert_eq!(cut("ééé", 3), ("é", true));
        assert_eq!(cut("abc", 3), ("abc", false));
    }
}
