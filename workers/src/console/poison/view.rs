//! The poison page's templates. Every id, reason, body and queue name goes through
//! [`neutral`] (bidi controls and line breaks made visible) and maud's escaping; ids and
//! reasons are clipped and bodies cut, so a page stays small whatever the queue holds.

use chrono::Utc;
use maud::{Markup, html};

use super::super::view::{Outcome, ago, banner, thousands, urlencode};
use super::{PREVIEW, PoisonView};
use crate::display::{neutral, neutral_lines};
use crate::queue::{PoisonAction, PoisonFilter, PoisonMessage};

// Each piece of a page is cut to a budget of bytes *as the page carries it*, escapes
// counted (a `"` is six bytes there): a page of `MAX_PAGE` messages stays under 1 MB
// whatever their ids, reasons and bodies hold.

/// The most bytes of an id (or an operation's kind) a page carries.
const ID_BYTES: usize = 480;
/// The most bytes of a reason a page carries.
const REASON_BYTES: usize = 1200;
/// The most bytes of a body's preview a page carries.
const BODY_BYTES: usize = 3000;
/// The most bytes of a folded preview's first lines.
const HEAD_BYTES: usize = 600;
/// The most characters of a reason a filter link carries (a reason filter finds text in
/// the reason: its start is enough).
const REASON_LINK_CHARS: usize = 100;
/// The reasons listed with their counts.
const REASONS_SHOWN: usize = 20;
/// The longest handle a page carries in its forms, escaped (a backend whose handle is
/// the message id may hold longer ones: such a message is acted on through a filter).
const MAX_HANDLE: usize = 128;
/// A preview with more lines than this is folded.
const FOLD_LINES: usize = 12;

/// The bytes `c` takes in a page, escaped.
fn escaped_len(c: char) -> usize {
    match c {
        '&' => 5,
        '<' | '>' => 4,
        '"' => 6,
        c => c.len_utf8(),
    }
}

fn escaped_size(text: &str) -> usize {
    text.chars().map(escaped_len).sum()
}

/// `text` cut to what fits in `budget` bytes of a page once escaped (with `…` when cut).
fn fit(text: &str, budget: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        used += escaped_len(c);
        if used > budget {
            out.push('…');
            return out;
        }
        out.push(c);
    }
    out
}

/// `text` made visible and cut to `budget` bytes of a page: cut first (a character is at
/// least one byte, so no more than `budget` of them can show), then neutralised, then cut
/// again to fit its escapes.
fn clip(text: &str, budget: usize) -> String {
    let head: String = text.chars().take(budget + 1).collect();
    fit(&neutral(&head), budget)
}

/// Whether a handle is short enough to travel in the page's forms.
fn actionable(handle: &str) -> bool {
    escaped_size(handle) <= MAX_HANDLE
}

/// A body's preview as text: a whole JSON body pretty-printed, anything else as UTF-8
/// (bytes that are not shown as U+FFFD).
fn body_text(message: &PoisonMessage) -> String {
    if message.is_whole()
        && let Ok(value) = serde_json::from_slice::<serde_json::Value>(&message.body)
        && let Ok(pretty) = serde_json::to_string_pretty(&value)
        && pretty.len() <= PREVIEW * 2
    {
        return pretty;
    }
    String::from_utf8_lossy(&message.body).into_owned()
}

fn body(queue: &str, message: &PoisonMessage) -> Markup {
    let whole = body_text(message);
    let head: String = whole.chars().take(BODY_BYTES + 1).collect();
    let text = fit(&neutral_lines(&head), BODY_BYTES);
    let raw = format!(
        "/poison/{}/body/{}",
        urlencode(queue),
        urlencode(&message.handle)
    );
    html! {
        @if text.lines().count() > FOLD_LINES {
            @let first: String = text.lines().take(4).collect::<Vec<_>>().join("\n");
            details.body {
                summary { pre { (fit(&first, HEAD_BYTES)) "…" } span.muted { " (" (thousands(message.size as u64)) " bytes: unfold)" } }
                pre { (text) }
            }
        } @else {
            pre.body { (text) }
        }
        @if !message.is_whole() && actionable(&message.handle) {
            p.cut.muted {
                "The first " (thousands(message.body.len() as u64)) " of "
                (thousands(message.size as u64)) " bytes. "
                a href=(raw) target="_blank" rel="noopener" { "The whole body" }
            }
        }
    }
}

/// The link to a page of this queue with `filter`, `limit`, `after`, and the result of
/// an action to show.
pub(super) fn link(
    queue: &str,
    filter: &PoisonFilter,
    limit: usize,
    after: Option<&str>,
    result: Option<&str>,
) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (name, value) in [
        ("kind", &filter.kind),
        ("id", &filter.id),
        ("reason", &filter.reason),
        ("body", &filter.body),
    ] {
        if let Some(value) = value {
            query.append_pair(name, value);
        }
    }
    if limit != super::DEFAULT_PAGE {
        query.append_pair("limit", &limit.to_string());
    }
    if let Some(after) = after {
        query.append_pair("after", after);
    }
    if let Some(result) = result {
        query.append_pair("result", result);
    }
    let query = query.finish();
    if query.is_empty() {
        format!("/poison/{}", urlencode(queue))
    } else {
        format!("/poison/{}?{query}", urlencode(queue))
    }
}

fn filter_fields(filter: &PoisonFilter) -> Markup {
    html! {
        input type="hidden" name="kind" value=(filter.kind.as_deref().unwrap_or_default());
        input type="hidden" name="fid" value=(filter.id.as_deref().unwrap_or_default());
        input type="hidden" name="reason" value=(filter.reason.as_deref().unwrap_or_default());
        input type="hidden" name="body" value=(filter.body.as_deref().unwrap_or_default());
    }
}

/// The poison page of one queue.
pub(super) fn poison(v: &PoisonView, csrf: &str, nonce: &str, result: Option<&Outcome>) -> Markup {
    let now = Utc::now();
    let f = &v.filter;
    let filtered = !f.is_empty();
    html! {
        (banner(result))
        section.card {
            h2 { "Poison messages of " code { (neutral(&v.queue)) } }
            p.muted {
                (thousands(v.total)) " in the poison queue"
                @if filtered { ", " (thousands(v.matching)) " pass the filter" }
                "."
                @if v.paused { " " span.badge.bad { "consumers paused" } }
            }
            form.filter method="get" action=(format!("/poison/{}", urlencode(&v.queue))) {
                label { "kind " input type="text" name="kind" value=(f.kind.as_deref().unwrap_or_default()) placeholder="operation kind"; }
                label { "id " input type="text" name="id" value=(f.id.as_deref().unwrap_or_default()) placeholder="text in the id"; }
                label { "reason " input type="text" name="reason" value=(f.reason.as_deref().unwrap_or_default()) placeholder="text in the reason"; }
                label { "body " input type="text" name="body" value=(f.body.as_deref().unwrap_or_default()) placeholder="text in the body"; }
                label { "per page "
                    select name="limit" {
                        @for n in [25, 50, 100] {
                            option value=(n) selected[n == v.limit] { (n) }
                        }
                    }
                }
                button { "Filter" }
                @if filtered { a href=(format!("/poison/{}", urlencode(&v.queue))) { "Clear the filter" } }
            }
            @if !v.reasons.is_empty() {
                details.reasons open[v.reasons.len() > 1] {
                    summary { (v.reasons.len()) @if v.reasons.len() == 1 { " reason" } @else { " reasons" } }
                    table.grid {
                        thead { tr { th { "reason" } th.num { "messages" } } }
                        tbody {
                            @for (reason, n) in v.reasons.iter().take(REASONS_SHOWN) {
                                // A reason filter finds text in the reason: its start is enough.
                                @let by_reason = PoisonFilter { reason: Some(reason.chars().take(REASON_LINK_CHARS).collect()), ..f.clone() };
                                tr {
                                    td.reason { a href=(link(&v.queue, &by_reason, v.limit, None, None)) { (clip(reason, REASON_BYTES)) } }
                                    td.num { (thousands(*n)) }
                                }
                            }
                        }
                    }
                    @if v.reasons.len() > REASONS_SHOWN {
                        p.muted { (v.reasons.len() - REASONS_SHOWN) " other reasons." }
                    }
                }
            }
            @if v.page.messages.is_empty() {
                @if filtered || v.after.is_some() {
                    p.ok { "No message passes this filter on this page." }
                } @else {
                    p.ok { "The poison queue is empty." }
                }
            } @else {
                form #poison method="post" action=(format!("/poison/{}", urlencode(&v.queue))) {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="nonce" value=(nonce);
                    (filter_fields(f))
                    div.actions {
                        button name="action" value="replay-selected" { "Replay selected" }
                        button name="action" value="discard-selected" .danger { "Discard selected" }
                        label.to { "to queue " input type="text" name="to" placeholder="another queue" size="14"; }
                        button name="action" value="moveto-selected" { "Replay selected there" }
                        span.spacer {}
                        button name="action" value="replay-all" { "Replay all " (thousands(v.matching)) "…" }
                        button name="action" value="discard-all" .danger { "Discard all " (thousands(v.matching)) "…" }
                        button name="action" value="moveto-all" { "Replay all there…" }
                    }
                    div.scroll {
                        table.grid.messages {
                            thead { tr {
                                th { input type="checkbox" #all title="select all on this page"; }
                                th { "message" } th { "reason" } th.num { "deliveries" } th { "poisoned" } th { "" }
                            } }
                            tbody {
                                @for m in &v.page.messages {
                                    @let actionable = actionable(&m.handle);
                                    tr.message data-handle=[actionable.then_some(&m.handle)] {
                                        td { @if actionable { input type="checkbox" name="h" value=(m.handle); } }
                                        td.ident {
                                            @if let Some((kind, version)) = &m.operation {
                                                span.kind { (clip(kind, ID_BYTES)) " v" (version) }
                                                br;
                                            } @else {
                                                span.kind.bad { "not an operation" } br;
                                            }
                                            @if m.id.is_empty() {
                                                span.muted { "no id" }
                                            } @else {
                                                code { (clip(&m.id, ID_BYTES)) }
                                            }
                                        }
                                        td.reason { (clip(&m.reason, REASON_BYTES)) }
                                        td.num { (m.delivery_count) }
                                        td.nowrap { @match m.poisoned_at { Some(at) => (ago(at, now)), None => span.muted { "–" } } }
                                        td.buttons {
                                            @if actionable {
                                                button name="one" value=(format!("replay:{}", m.handle)) { "Replay" }
                                                button name="one" value=(format!("discard:{}", m.handle)) .danger { "Discard" }
                                            } @else {
                                                span.muted title="its id is too long to name alone: act on it through a filter" { "filter to act" }
                                            }
                                        }
                                    }
                                    tr.bodyrow { td {} td colspan="5" { (body(&v.queue, m)) } }
                                }
                            }
                        }
                    }
                }
            }
            nav.pager {
                @if v.after.is_some() {
                    a href=(link(&v.queue, f, v.limit, None, None)) { "← First page" }
                }
                @if let Some(next) = &v.page.next {
                    a.next href=(link(&v.queue, f, v.limit, Some(next), None)) { "Next page →" }
                }
            }
        }
    }
}

/// What a dry run shows.
pub(super) struct Confirm<'a> {
    pub(super) queue: &'a str,
    pub(super) action: &'a PoisonAction,
    pub(super) verb: &'a str,
    pub(super) filter: &'a PoisonFilter,
    pub(super) count: usize,
    pub(super) ids: &'a [String],
    pub(super) reasons: &'a [(String, u64)],
    pub(super) token: &'a str,
    pub(super) csrf: &'a str,
    pub(super) nonce: &'a str,
}

/// The dry run of a bulk action: what it would touch, and the confirmation bound to
/// exactly that.
pub(super) fn confirm(c: &Confirm<'_>) -> Markup {
    let (title, effect) = match c.action {
        PoisonAction::Replay => (
            "Replay".to_owned(),
            "sends them back to their queue, each with a fresh delivery count".to_owned(),
        ),
        PoisonAction::ReplayTo(to) => (
            format!("Replay to {}", neutral(to)),
            format!(
                "sends them to the queue {}, each with a fresh delivery count",
                neutral(to)
            ),
        ),
        _ => ("Discard".to_owned(), "deletes them for good".to_owned()),
    };
    let back = link(c.queue, c.filter, super::DEFAULT_PAGE, None, None);
    html! {
        section.card.confirm {
            h2 { "Dry run: " (title) " · " code { (neutral(c.queue)) } }
            @if c.count == 0 {
                p { "No message passes this filter: nothing would be touched." }
                p { a href=(back) { "Back to the poison page" } }
            } @else {
                p {
                    "These " strong { (thousands(c.count as u64)) " messages" } " pass the filter now. Confirming "
                    (effect) " — these and no others: messages poisoned from now on are left alone."
                }
                @if !c.reasons.is_empty() {
                    table.grid {
                        thead { tr { th { "reason" } th.num { "messages" } } }
                        tbody {
                            @for (reason, n) in c.reasons.iter().take(REASONS_SHOWN) {
                                tr { td.reason { (clip(reason, REASON_BYTES)) } td.num { (thousands(*n)) } }
                            }
                        }
                    }
                }
                ol.ids {
                    @for id in c.ids {
                        li { @if id.is_empty() { span.muted { "no id" } } @else { code { (clip(id, ID_BYTES)) } } }
                    }
                }
                @if c.count > c.ids.len() {
                    p.muted { "… and " (thousands((c.count - c.ids.len()) as u64)) " more." }
                }
                form method="post" action=(format!("/poison/{}", urlencode(c.queue))) {
                    input type="hidden" name="csrf" value=(c.csrf);
                    input type="hidden" name="nonce" value=(c.nonce);
                    input type="hidden" name="set" value=(c.token);
                    (filter_fields(c.filter))
                    @if let PoisonAction::ReplayTo(to) = c.action {
                        input type="hidden" name="to" value=(to);
                    }
                    button name="action" value=(format!("{}-all", c.verb)) class=(if matches!(c.action, PoisonAction::Discard) { "danger" } else { "" }) {
                        (title) " these " (thousands(c.count as u64)) " messages"
                    }
                    " "
                    a href=(back) { "Cancel" }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::PoisonPage;

    fn view_of(messages: Vec<PoisonMessage>, reasons: Vec<(String, u64)>) -> PoisonView {
        PoisonView {
            queue: "q<script>".into(),
            total: messages.len() as u64,
            matching: messages.len() as u64,
            filter: PoisonFilter::new(),
            reasons,
            page: PoisonPage {
                messages,
                next: Some("9".into()),
            },
            after: None,
            limit: super::super::DEFAULT_PAGE,
            paused: false,
        }
    }

    fn render(v: &PoisonView) -> String {
        super::super::super::view::page(
            "t",
            None,
            poison(v, "c", "n", Some(&Outcome::done("<i>done</i>"))),
        )
        .into_string()
    }

    #[test]
    fn hostile_text_is_escaped_and_made_visible_everywhere_it_is_shown() {
        let hostile = PoisonMessage::new(
            "\"><img src=x onerror=alert(1)>\nINFO forged line \u{202E}gnp.exe",
            b"<script>alert(document.cookie)</script>".to_vec(),
            "<b>bold</b>\u{2066}",
            5,
            None,
        );
        let html = render(&view_of(
            vec![hostile.with_handle(7)],
            vec![("<b>bold</b>".into(), 1)],
        ));
        for raw in [
            "<script>alert",
            "<img src=x",
            "<b>bold",
            "<i>done",
            "q<script>",
            "\u{202E}",
            "\u{2066}",
            "\nINFO forged",
        ] {
            assert!(!html.contains(raw), "{raw:?} was not neutralised:\n{html}");
        }
        assert!(html.contains("&lt;script&gt;alert(document.cookie)&lt;/script&gt;"));
        assert!(html.contains("\\u{202E}gnp.exe"));
    }

    #[test]
    fn a_page_of_the_largest_messages_stays_under_a_megabyte() {
        // The worst a page can hold: the most messages, each with a preview of lines of
        // characters that escape to six bytes (folded: its first lines shown twice), an
        // id, kind, reason and handle as long as they come and made of the same, and the
        // most reasons.
        let worst: String = "\"\"\"\u{202E}\n".repeat(20_000);
        let messages: Vec<_> = (0..super::super::MAX_PAGE)
            .map(|i| {
                let mut m = PoisonMessage::new(
                    worst.clone(),
                    worst.clone().into_bytes(),
                    worst.clone(),
                    u32::MAX,
                    None,
                )
                .cut(PREVIEW);
                m.operation = Some((worst.clone(), u32::MAX));
                // The longest handle that still travels in the forms.
                m.handle = format!("{i:0>3}{}", "\"".repeat(20));
                assert!(actionable(&m.handle));
                m
            })
            .collect();
        let reasons = (0..1000)
            .map(|i| (format!("{i}{worst}"), u64::MAX))
            .collect();
        let html = render(&view_of(messages, reasons));
        eprintln!("the worst page: {} bytes", html.len());
        assert!(html.len() < 1_000_000, "{} bytes", html.len());
        assert!(html.contains("The whole body"));
        assert!(html.contains("<details"), "the previews are folded");
    }

    #[test]
    fn json_bodies_are_pretty_printed_and_long_ones_folded() {
        let small = PoisonMessage::new("a", br#"{"a":1}"#.to_vec(), "", 1, None);
        assert_eq!(body_text(&small), "{\n  \"a\": 1\n}");
        let invalid = PoisonMessage::new("b", b"plain \xff".to_vec(), "", 1, None);
        assert_eq!(body_text(&invalid), "plain \u{fffd}");
        let long = PoisonMessage::new("l", "x\n".repeat(50).into_bytes(), "", 1, None);
        assert!(body("q", &long).into_string().contains("<details"));
    }

    trait WithHandle {
        fn with_handle(self, i: usize) -> Self;
    }

    impl WithHandle for PoisonMessage {
        fn with_handle(mut self, i: usize) -> Self {
            self.handle = i.to_string();
            self
        }
    }
}
