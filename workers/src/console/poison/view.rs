//! The poison page's templates. Every id, reason, body and queue name goes through
//! [`neutral`] (bidi controls and line breaks made visible) and maud's escaping; ids and
//! reasons are clipped and bodies cut, so a page stays small whatever the queue holds.

use chrono::Utc;
use maud::{Markup, html};

use super::super::view::{IssueNonce, Outcome, ago, banner, may_act, thousands, urlencode};
use super::place::{DEFAULT_PAGE, PREVIEW, Place, PoisonView};
use super::sets::Bound;
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
/// The longest reason group a link filters by exactly (bytes, before encoding).
const GROUP_LINK_BYTES: usize = 300;
/// The most characters of a reason a link filtering by its text carries.
const REASON_LINK_CHARS: usize = 100;
/// The most operation kinds the filter's list offers.
const KINDS_LISTED: usize = 50;
/// The reasons listed with their counts.
const REASONS_SHOWN: usize = 20;
/// The longest handle a page carries in its forms, escaped (a backend whose handle is
/// the message id may hold longer ones: such a message is acted on through a filter).
const MAX_HANDLE: usize = 128;
/// How many reason groups the page of reasons lists at a time.
const REASON_PAGE: usize = 200;
/// How many ids a confirmation names (the rest counted).
const NAMED: usize = 100;
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
pub(super) fn fit(text: &str, budget: usize) -> String {
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
pub(super) fn clip(text: &str, budget: usize) -> String {
    let head: String = text.chars().take(budget + 1).collect();
    fit(&neutral(&head), budget)
}

// What each button's nonce is bound to: the pages render their buttons with these, and
// the actions check them.

/// The action a nonce of a single message's button is issued for.
pub(super) fn one_action(verb: &str) -> String {
    format!("{verb}-one")
}

/// The target a nonce of a single message's button is bound to.
pub(super) fn one_target(queue: &str, handle: &str) -> String {
    format!("{queue}\n{handle}")
}

/// The target a nonce of a page's "selected" buttons is bound to: the handles it listed.
pub(super) fn listed_target(queue: &str, listed: &str) -> String {
    format!("{queue}\n{listed}")
}

/// The action and target a confirmation's nonce is bound to.
pub(super) fn confirm_binding(queue: &str, token: &str) -> (String, String) {
    ("confirm".to_owned(), format!("{queue}\n{token}"))
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

/// Whether a handle is short enough to travel in the page's forms.
pub(super) fn actionable(handle: &str) -> bool {
    escaped_size(handle) <= MAX_HANDLE
}

/// A body's preview as text: a whole JSON body pretty-printed (its keys in their order),
/// anything else as UTF-8
/// (bytes that are not shown as U+FFFD).
fn body_text(message: &PoisonMessage) -> String {
    if message.is_whole()
        && let Some(pretty) = pretty_json(&message.body)
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

/// The link to the page of this queue at `place`, with the result of an action to show.
pub(super) fn link(queue: &str, place: &Place, result: Option<&str>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    let filter = &place.filter;
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
    if let Some(group) = &filter.reason_group {
        query.append_pair("group", group);
    }
    if filter.undecodable_reason {
        query.append_pair("undecodable", "1");
    }
    if place.limit != DEFAULT_PAGE && place.limit != 0 {
        query.append_pair("limit", &place.limit.to_string());
    }
    if place.newest_first {
        query.append_pair("order", "newest");
    }
    if place.backwards {
        query.append_pair("back", "1");
    }
    if let Some(after) = &place.after {
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

/// A reason group's cell: the group, a link to its messages, and an example reason. A
/// group too long to travel in a link is linked by its start, as text in the reason.
fn group_cell(queue: &str, place: &Place, g: &crate::queue::ReasonGroup) -> Markup {
    let filter = if g.group.len() <= GROUP_LINK_BYTES {
        PoisonFilter {
            reason_group: Some(g.group.clone()),
            ..place.filter.clone()
        }
    } else {
        PoisonFilter {
            reason: Some(g.example.chars().take(REASON_LINK_CHARS).collect()),
            ..place.filter.clone()
        }
    };
    html! {
        a href=(link(queue, &refiltered(place, filter), None)) { (clip(&g.group, REASON_BYTES)) }
        @if g.example != g.group { br; span.muted { "e.g. " (clip(&g.example, REASON_BYTES / 2)) } }
    }
}

/// The link to the page of all the reason groups of a place's filter.
pub(super) fn reasons_link(queue: &str, place: &Place, skip: usize) -> String {
    let page = link(queue, &refiltered(place, place.filter.clone()), None);
    let page = page.replacen(
        &format!("/poison/{}", urlencode(queue)),
        &format!("/poison/{}/reasons", urlencode(queue)),
        1,
    );
    if skip == 0 {
        page
    } else if page.contains('?') {
        format!("{page}&skip={skip}")
    } else {
        format!("{page}?skip={skip}")
    }
}

/// A place with another filter, from its first page.
fn refiltered(place: &Place, filter: PoisonFilter) -> Place {
    Place {
        filter,
        after: None,
        backwards: false,
        ..place.clone()
    }
}

/// The hidden fields that carry the operator's place: an action returns to it.
fn place_fields(place: &Place) -> Markup {
    let filter = &place.filter;
    html! {
        input type="hidden" name="kind" value=(filter.kind.as_deref().unwrap_or_default());
        input type="hidden" name="fid" value=(filter.id.as_deref().unwrap_or_default());
        input type="hidden" name="reason" value=(filter.reason.as_deref().unwrap_or_default());
        input type="hidden" name="body" value=(filter.body.as_deref().unwrap_or_default());
        input type="hidden" name="group" value=(filter.reason_group.as_deref().unwrap_or_default());
        @if filter.undecodable_reason { input type="hidden" name="undecodable" value="1"; }
        input type="hidden" name="after" value=(place.after.as_deref().unwrap_or_default());
        input type="hidden" name="limit" value=(place.limit);
        @if place.newest_first { input type="hidden" name="order" value="newest"; }
        @if place.backwards { input type="hidden" name="back" value="1"; }
    }
}

/// A time as UTC, with how long ago beside it.
fn when(at: chrono::DateTime<Utc>, now: chrono::DateTime<Utc>) -> Markup {
    html! {
        time datetime=(at.to_rfc3339()) title=(at.format("%Y-%m-%d %H:%M:%S UTC")) {
            (at.format("%Y-%m-%d %H:%M:%S")) br; span.muted { (ago(at, now)) }
        }
    }
}

/// The poison page of one queue. Each button carries its own nonce, bound to its action
/// and its target ([`super::super::forms`]).
pub(super) fn poison(
    v: &PoisonView,
    csrf: &str,
    nonces: &dyn IssueNonce,
    result: Option<&Outcome>,
) -> Markup {
    let now = Utc::now();
    let place = &v.place;
    let f = &place.filter;
    let filtered = !f.is_empty();
    let listed: Vec<&str> = v
        .page
        .messages
        .iter()
        .map(|m| m.handle.as_str())
        .filter(|h| actionable(h))
        .collect();
    let listed = serde_json::to_string(&listed).unwrap_or_default();
    let selected_nonce = |verb: &str| {
        nonces.issue(
            &format!("{verb}-selected"),
            &listed_target(&v.queue, &listed),
        )
    };
    html! {
        (banner(result))
        section.card {
            h2 { "Poison messages of " code { (neutral(&v.queue)) } }
            p.muted {
                (thousands(v.total)) " in the poison queue"
                @if filtered && v.partial {
                    "; of the oldest " (thousands(crate::queue::poison_table::SCAN_BUDGET as u64)) ", "
                    (thousands(v.matching)) " pass the filter (the reasons and kinds below count those; the list searches on through every message)"
                } @else if filtered { ", " (thousands(v.matching)) " pass the filter" }
                "."
                @if v.paused { " " span.badge.bad { "consumers paused" } }
            }
            @if let Some(trims) = &v.trims {
                p.muted.trims {
                    "The workers keep each queue's poison messages to a cap (by default 10,000 messages and 180 days; "
                    code { "tablekit-worker run --poison-keep" } "), the oldest trimmed first. "
                    @if trims.is_empty() {
                        "None of this queue's has been trimmed."
                    } @else {
                        "Last trimmed: "
                        @for (i, trim) in trims.iter().enumerate() {
                            @if i > 0 { "; " }
                            (ago(trim.at, now)) ", " (thousands(trim.trimmed)) " (" (neutral(&trim.retention)) ")"
                        }
                        "."
                    }
                }
            }
            form.filter method="get" action=(format!("/poison/{}", urlencode(&v.queue))) {
                label { "kind "
                    select name="kind" {
                        option value="" { "any kind" }
                        @for (kind, n) in v.kinds.iter().take(KINDS_LISTED) {
                            @match kind {
                                Some(kind) => option value=(kind) selected[f.kind.as_deref().is_some_and(|k| k.eq_ignore_ascii_case(kind))] {
                                    (clip(kind, ID_BYTES)) " (" (thousands(*n)) ")"
                                },
                                None => option value="" disabled { "not an operation (" (thousands(*n)) ")" },
                            }
                        }
                        @if let Some(kind) = &f.kind {
                            @if !v.kinds.iter().any(|(k, _)| k.as_deref().is_some_and(|k| k.eq_ignore_ascii_case(kind))) {
                                option value=(kind) selected { (clip(kind, ID_BYTES)) " (none)" }
                            }
                        }
                    }
                }
                label { "id " input type="text" name="id" value=(f.id.as_deref().unwrap_or_default()) placeholder="text in the id"; }
                label { "reason " input type="text" name="reason" value=(f.reason.as_deref().unwrap_or_default()) placeholder="text in the reason"; }
                label { "body " input type="text" name="body" value=(f.body.as_deref().unwrap_or_default()) placeholder="text in the body"; }
                label { "per page "
                    select name="limit" {
                        @for n in [25, 50, 100] {
                            option value=(n) selected[n == place.limit] { (n) }
                        }
                    }
                }
                label { "order "
                    select name="order" {
                        option value="oldest" selected[!place.newest_first] { "oldest first" }
                        option value="newest" selected[place.newest_first] { "newest first" }
                    }
                }
                @if let Some(group) = &f.reason_group { input type="hidden" name="group" value=(group); }
                @if f.undecodable_reason { input type="hidden" name="undecodable" value="1"; }
                button { "Filter" }
                @if filtered { a href=(format!("/poison/{}", urlencode(&v.queue))) { "Clear the filter" } }
            }
            @if let Some(group) = &f.reason_group {
                p.filtered { "Reason group: " code { (clip(group, REASON_BYTES)) } " "
                    a href=(link(&v.queue, &refiltered(place, PoisonFilter { reason_group: None, ..f.clone() }), None)) { "(all reasons)" } }
            }
            @if !v.groups.is_empty() {
                details.reasons {
                    summary { (thousands(v.groups.len() as u64)) @if v.groups.len() == 1 { " reason group" } @else { " reason groups" } " (digits and ids masked as #)" }
                    table.grid {
                        thead { tr { th { "reason" } th.num { "messages" } } }
                        tbody {
                            @for g in v.groups.iter().take(REASONS_SHOWN) {
                                tr {
                                    td.reason { (group_cell(&v.queue, place, g)) }
                                    td.num { (thousands(g.count)) }
                                }
                            }
                        }
                    }
                    @if v.groups.len() > REASONS_SHOWN {
                        p { a href=(reasons_link(&v.queue, place, 0)) { "All " (thousands(v.groups.len() as u64)) " reason groups →" } }
                    }
                }
            }
            @if v.page.messages.is_empty() {
                @if filtered || place.after.is_some() {
                    p.ok { "No message passes this filter on this page." }
                } @else {
                    p.ok { "The poison queue is empty." }
                }
            } @else {
                form #poison method="post" action=(format!("/poison/{}", urlencode(&v.queue))) {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="listed" value=(listed);
                    (place_fields(place))
                    @if may_act() {
                    div.actions {
                        button name="action" value=(format!("replay-selected:{}", selected_nonce("replay"))) { "Replay selected" }
                        button name="action" value=(format!("discard-selected:{}", selected_nonce("discard"))) .danger { "Discard selected…" }
                        label.to { "to queue " input type="text" name="to" placeholder="another queue" size="14" value=(v.typed_to); }
                        button name="action" value=(format!("moveto-selected:{}", selected_nonce("moveto"))) { "Replay selected there" }
                        span.spacer {}
                        @let all = if v.partial { "that pass".to_owned() } else { thousands(v.matching) };
                        button name="action" value="replay-all" { "Replay all " (all) "…" }
                        button name="action" value="discard-all" .danger { "Discard all " (all) "…" }
                        button name="action" value="moveto-all" { "Replay all there…" }
                    }
                    }
                    div.scroll {
                        table.grid.messages {
                            thead { tr {
                                th { input type="checkbox" #all title="select all on this page"; }
                                th { "message" } th { "reason" } th.num { "deliveries" } th { "poisoned (UTC)" } th { "" }
                            } }
                            tbody {
                                @for m in &v.page.messages {
                                    @let actionable = actionable(&m.handle);
                                    tr.message data-handle=[actionable.then_some(&m.handle)] {
                                        td { @if actionable && may_act() { input type="checkbox" name="h" value=(m.handle) checked[v.selected.contains(&m.handle)]; } }
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
                                            @if actionable {
                                                br;
                                                a.open href=(format!("/poison/{}/message/{}", urlencode(&v.queue), urlencode(&m.handle))) { "open" }
                                            }
                                        }
                                        td.reason { (clip(&m.reason, REASON_BYTES)) }
                                        td.num { (m.delivery_count) }
                                        td.nowrap { @match m.poisoned_at { Some(at) => (when(at, now)), None => span.muted { "–" } } }
                                        td.buttons {
                                            @if !may_act() {
                                            } @else if actionable {
                                                button name="one" value=(format!("replay:{}:{}", nonces.issue(&one_action("replay"), &one_target(&v.queue, &m.handle)), m.handle)) { "Replay" }
                                                button name="one" value=(format!("discard:{}:{}", nonces.issue(&one_action("discard"), &one_target(&v.queue, &m.handle)), m.handle)) .danger { "Discard…" }
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
                @let first = refiltered(place, f.clone());
                @let last = Place { backwards: true, ..first.clone() };
                @if place.after.is_some() || place.backwards {
                    a href=(link(&v.queue, &first, None)) { "⇤ First page" }
                }
                @if place.backwards {
                    @if let Some(next) = &v.page.next {
                        a href=(link(&v.queue, &Place { after: Some(next.clone()), ..place.clone() }, None)) { "← Previous page" }
                    }
                } @else if let Some(next) = &v.page.next {
                    a.next href=(link(&v.queue, &Place { after: Some(next.clone()), ..place.clone() }, None)) { "Next page →" }
                }
                @if !(place.backwards && place.after.is_none()) && (v.page.next.is_some() || place.backwards) {
                    a href=(link(&v.queue, &last, None)) { "Last page ⇥" }
                }
            }
        }
    }
}

/// The page of every reason group of a queue's poison messages (those the filter passes),
/// [`REASON_PAGE`] at a time.
pub(super) fn reasons(
    queue: &str,
    place: &Place,
    groups: &[crate::queue::ReasonGroup],
    skip: usize,
) -> Markup {
    let shown = groups.iter().skip(skip).take(REASON_PAGE);
    html! {
        section.card {
            h2 { "Reasons of " code { (neutral(queue)) } }
            p.muted {
                (thousands(groups.len() as u64)) " groups, digits and ids masked as #; each a link to its messages. "
                a href=(link(queue, place, None)) { "← Back to the messages" }
            }
            table.grid {
                thead { tr { th { "reason" } th.num { "messages" } } }
                tbody {
                    @for g in shown {
                        tr {
                            td.reason { (group_cell(queue, place, g)) }
                            td.num { (thousands(g.count)) }
                        }
                    }
                }
            }
            nav.pager {
                @if skip > 0 {
                    a href=(reasons_link(queue, place, skip.saturating_sub(REASON_PAGE))) { "← Previous" }
                }
                @if skip + REASON_PAGE < groups.len() {
                    a.next href=(reasons_link(queue, place, skip + REASON_PAGE)) { "Next →" }
                }
            }
        }
    }
}

/// The page of a confirmation already used, expired or unknown.
pub(super) fn confirmation_gone(queue: &str) -> Markup {
    html! {
        section.card.confirm {
            h2 { "Nothing to confirm" }
            p { "This confirmation was already used, has expired (15 minutes), or is unknown: nothing was done from this page. The poison page shows what the queue holds now." }
            p { a href=(format!("/poison/{}", urlencode(queue))) { "Back to the poison page" } }
        }
    }
}

/// What a confirmation would touch — a dry run of "all", or the messages named — and the
/// confirmation bound to exactly that set.
pub(super) fn confirm(bound: &Bound, token: &str, csrf: &str, nonce: &str) -> Markup {
    let (title, effect) = match &bound.action {
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
    // "Confirming deletes it", not "them", for one message.
    let effect = if bound.handles.len() == 1 {
        effect
            .replace("sends them", "sends it")
            .replace("deletes them", "deletes it")
            .replace(", each with", " with")
    } else {
        effect
    };
    let queue = bound.queue.as_str();
    let count = bound.handles.len();
    let messages = if count == 1 { "message" } else { "messages" };
    let back = link(queue, &bound.back, None);
    let named = bound.ids.len().min(NAMED);
    let export = format!("/poison/{}/confirm/{token}/export", urlencode(queue));
    html! {
        section.card.confirm {
            h2 { @if bound.scope == "all" { "Dry run: " } (title) " · " code { (neutral(queue)) } }
            @if count == 0 {
                p { "No message passes this filter: nothing would be touched." }
                p { a href=(back) { "Back to the poison page" } }
            } @else {
                p {
                    @if count == 1 {
                        @if bound.scope == "all" { "One " strong { "message" } " passes the filter now. " }
                        "Confirming " (effect) " — this one and no other"
                    } @else {
                        @if bound.scope == "all" { "These " } @else { "The " }
                        strong { (thousands(count as u64)) " " (messages) }
                        @if bound.scope == "all" { " pass the filter now" } ". Confirming "
                        (effect) " — these and no others"
                    }
                    @if bound.scope == "all" { ": messages poisoned from now on are left alone" }
                    "."
                }
                @if !bound.reasons.is_empty() {
                    table.grid {
                        thead { tr { th { "reason (digits and ids masked as #)" } th.num { "messages" } } }
                        tbody {
                            @for (reason, n) in bound.reasons.iter().take(REASONS_SHOWN) {
                                tr { td.reason { (clip(reason, REASON_BYTES)) } td.num { (thousands(*n)) } }
                            }
                            @if bound.reasons.len() > REASONS_SHOWN {
                                @let rest = &bound.reasons[REASONS_SHOWN..];
                                tr.more { td.reason.muted { "… and " (thousands(rest.len() as u64)) " more reasons" }
                                    td.num { (thousands(rest.iter().map(|(_, n)| n).sum::<u64>())) } }
                            }
                        }
                    }
                }
                ol.ids {
                    @for id in &bound.ids[..named] {
                        li { @if id.is_empty() { span.muted { "no id, or already gone" } } @else { code { (clip(id, ID_BYTES)) } } }
                    }
                }
                @if count > named {
                    p.muted { "… and " (thousands((count - named) as u64)) " more." }
                }
                p {
                    a.export href=(export) download { "Export these " (thousands(count as u64)) " " (messages) " (JSON lines, whole bodies)" }
                    span.muted { " — keep them before they go." }
                }
                @if may_act() {
                form method="post" action=(format!("/poison/{}/confirm/{token}", urlencode(queue))) {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="nonce" value=(nonce);
                    (place_fields(&bound.back))
                    button name="confirm" value="yes" class=(if matches!(bound.action, PoisonAction::Discard) { "danger" } else { "" }) {
                        (title) " " @if bound.scope == "all" { "these " } (thousands(count as u64)) " " (messages)
                    }
                    " "
                    a href=(back) { "Cancel" }
                }
                } @else {
                    p.muted { "Signed in as a viewer: only an operator confirms." }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::forms::Nonces;
    use super::super::place::MAX_PAGE;
    use super::*;
    use crate::queue::PoisonPage;

    fn view_of(messages: Vec<PoisonMessage>, reasons: Vec<(String, u64)>) -> PoisonView {
        PoisonView {
            queue: "q<script>".into(),
            partial: false,
            typed_to: "q\"><script>".into(),
            trims: Some(Vec::new()),
            selected: Vec::new(),
            total: messages.len() as u64,
            matching: messages.len() as u64,
            place: Place {
                limit: DEFAULT_PAGE,
                ..Place::default()
            },
            kinds: vec![(Some("kind<b>".into()), 1), (None, 2)],
            groups: reasons
                .into_iter()
                .map(|(reason, count)| crate::queue::ReasonGroup {
                    group: reason.clone(),
                    count,
                    example: reason,
                })
                .collect(),
            page: PoisonPage {
                messages,
                next: Some("9".into()),
            },
            paused: false,
        }
    }

    fn render(v: &PoisonView) -> String {
        super::super::super::view::page(
            "t",
            None,
            poison(
                v,
                "c",
                &Nonces::default(),
                Some(&Outcome::done("<i>done</i>")),
            ),
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
        let messages: Vec<_> = (0..MAX_PAGE)
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
