//! A poison queue as an operator works through it: messages read a page at a time with
//! their bodies cut to a preview, filtered by operation kind, id, reason or body text,
//! grouped by reason, and taken off by handle — replayed to their queue or another one, or
//! discarded.
//!
//! A message's [`handle`](PoisonMessage::handle) names it for the backend that listed it
//! (the SQLite queue's row number; the message id elsewhere): a message whose id is empty,
//! repeated or not valid UTF-8 can still be acted on alone.

use chrono::{DateTime, Utc};

/// A message in a poison queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoisonMessage {
    /// The message id (bytes that are not UTF-8 shown as U+FFFD).
    pub id: String,
    /// What names this message for [`Queue::poison_take`](super::Queue::poison_take) and
    /// [`Queue::poison_body`](super::Queue::poison_body) on the backend that listed it.
    pub handle: String,
    /// The body, or its first bytes when listed with a preview
    /// ([`PoisonQuery::preview`]).
    pub body: Vec<u8>,
    /// The whole body's length in bytes.
    pub size: usize,
    /// The operation's kind and version, when the body is an operation's envelope.
    pub operation: Option<(String, u32)>,
    /// Why it was poisoned (bytes that are not UTF-8 shown as U+FFFD).
    pub reason: String,
    /// How many times it was delivered.
    pub delivery_count: u32,
    /// When it was poisoned, if the queue knows (messages poisoned by an older tablekit,
    /// or dead-lettered by the broker itself, may not say).
    pub poisoned_at: Option<DateTime<Utc>>,
}

impl PoisonMessage {
    /// A message listed whole: its handle is its id, its operation read from its body.
    pub fn new(
        id: impl Into<String>,
        body: Vec<u8>,
        reason: impl Into<String>,
        delivery_count: u32,
        poisoned_at: Option<DateTime<Utc>>,
    ) -> Self {
        let id = id.into();
        PoisonMessage {
            handle: id.clone(),
            size: body.len(),
            operation: operation_of(&body),
            id,
            body,
            reason: reason.into(),
            delivery_count,
            poisoned_at,
        }
    }

    /// Whether the body shown is the whole body.
    pub fn is_whole(&self) -> bool {
        self.body.len() >= self.size
    }

    /// Keeps the first `preview` bytes of the body.
    pub fn cut(mut self, preview: usize) -> Self {
        self.body.truncate(preview);
        self
    }
}

/// The kind and version an operation's envelope names, read without decoding its payload.
pub fn operation_of(body: &[u8]) -> Option<(String, u32)> {
    #[derive(serde::Deserialize)]
    struct Head {
        kind: String,
        version: u32,
    }
    serde_json::from_slice::<Head>(body)
        .ok()
        .map(|h| (h.kind, h.version))
}

/// Which poison messages a page or a bulk action covers. Each given part must match:
/// `kind` the operation's kind exactly; `id`, `reason` and `body` as text found anywhere in
/// them. Letters match in either case (ASCII).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoisonFilter {
    /// The operation's kind.
    pub kind: Option<String>,
    /// Text in the message id.
    pub id: Option<String>,
    /// Text in the reason.
    pub reason: Option<String>,
    /// Text in the body.
    pub body: Option<String>,
}

impl PoisonFilter {
    /// A filter that takes every message.
    pub fn new() -> Self {
        PoisonFilter::default()
    }

    /// Only messages of this operation kind.
    #[must_use]
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = non_empty(kind.into());
        self
    }

    /// Only messages whose id holds this text.
    #[must_use]
    pub fn id(mut self, text: impl Into<String>) -> Self {
        self.id = non_empty(text.into());
        self
    }

    /// Only messages whose reason holds this text.
    #[must_use]
    pub fn reason(mut self, text: impl Into<String>) -> Self {
        self.reason = non_empty(text.into());
        self
    }

    /// Only messages whose body holds this text.
    #[must_use]
    pub fn body(mut self, text: impl Into<String>) -> Self {
        self.body = non_empty(text.into());
        self
    }

    /// Whether it takes every message.
    pub fn is_empty(&self) -> bool {
        self.kind.is_none() && self.id.is_none() && self.reason.is_none() && self.body.is_none()
    }

    /// Whether `message` (listed whole) passes.
    pub fn matches(&self, message: &PoisonMessage) -> bool {
        let holds = |haystack: &[u8], needle: &Option<String>| {
            needle
                .as_deref()
                .is_none_or(|needle| contains_ignoring_case(haystack, needle.as_bytes()))
        };
        self.kind.as_deref().is_none_or(|kind| {
            message
                .operation
                .as_ref()
                .is_some_and(|(k, _)| k.eq_ignore_ascii_case(kind))
        }) && holds(message.id.as_bytes(), &self.id)
            && holds(message.reason.as_bytes(), &self.reason)
            && holds(&message.body, &self.body)
    }
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

fn contains_ignoring_case(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

/// One page of a poison queue: the filter, where to start, how many, how much of each
/// body.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoisonQuery {
    /// Which messages.
    pub filter: PoisonFilter,
    /// The cursor of the page before ([`PoisonPage::next`]); `None` for the first page.
    pub after: Option<String>,
    /// The most messages the page holds.
    pub limit: usize,
    /// The most bytes of each body the page holds.
    pub preview: usize,
}

impl PoisonQuery {
    /// The first `limit` messages, oldest first, bodies cut to `preview` bytes.
    pub fn new(limit: usize, preview: usize) -> Self {
        PoisonQuery {
            filter: PoisonFilter::default(),
            after: None,
            limit,
            preview,
        }
    }

    /// Only the messages `filter` passes.
    #[must_use]
    pub fn filter(mut self, filter: PoisonFilter) -> Self {
        self.filter = filter;
        self
    }

    /// The page after the one whose [`PoisonPage::next`] was `cursor`.
    #[must_use]
    pub fn after(mut self, cursor: Option<String>) -> Self {
        self.after = cursor;
        self
    }
}

/// A page of poison messages, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoisonPage {
    /// The messages.
    pub messages: Vec<PoisonMessage>,
    /// The cursor of the next page, when there may be one.
    pub next: Option<String>,
}

/// What [`Queue::poison_take`](super::Queue::poison_take) does with each message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoisonAction {
    /// Back to its own queue, with a fresh delivery count.
    Replay,
    /// To another queue (declared beforehand), with a fresh delivery count.
    ReplayTo(String),
    /// Deleted for good.
    Discard,
}

/// The handles asked for that were taken, in the order asked, once each: what
/// [`Queue::poison_take`](super::Queue::poison_take) returns.
#[cfg(any(feature = "azure", feature = "rabbitmq"))]
pub(crate) fn taken_in_order(
    asked: &[String],
    taken: impl IntoIterator<Item = String>,
) -> Vec<String> {
    let taken: std::collections::HashSet<String> = taken.into_iter().collect();
    let mut listed = std::collections::HashSet::new();
    asked
        .iter()
        .filter(|h| taken.contains(h.as_str()) && listed.insert(h.as_str()))
        .cloned()
        .collect()
}

/// One page built from a poison queue's messages offered in order, each with its place:
/// the cursor of the backends that read a poison queue from its start (the default, over
/// a whole listing, and RabbitMQ, one message at a time). Only the page is kept.
pub(crate) struct Paging<'q> {
    query: &'q PoisonQuery,
    skip: usize,
    page: PoisonPage,
}

impl<'q> Paging<'q> {
    pub(crate) fn new(query: &'q PoisonQuery) -> Self {
        Paging {
            query,
            skip: query
                .after
                .as_deref()
                .and_then(|c| c.parse().ok())
                .unwrap_or(0),
            page: PoisonPage::default(),
        }
    }

    /// Offers the message at place `at`; returns whether to offer more.
    pub(crate) fn offer(&mut self, at: usize, message: PoisonMessage) -> bool {
        if at < self.skip || !self.query.filter.matches(&message) {
            return true;
        }
        if self.page.messages.len() == self.query.limit {
            self.page.next = Some(at.to_string());
            return false;
        }
        self.page.messages.push(message.cut(self.query.preview));
        true
    }

    pub(crate) fn finish(self) -> PoisonPage {
        self.page
    }
}

/// The reasons of the messages offered that a filter passes, counted.
pub(crate) struct Reasons<'f> {
    filter: &'f PoisonFilter,
    counts: std::collections::HashMap<String, u64>,
}

impl<'f> Reasons<'f> {
    pub(crate) fn new(filter: &'f PoisonFilter) -> Self {
        Reasons {
            filter,
            counts: std::collections::HashMap::new(),
        }
    }

    pub(crate) fn offer(&mut self, message: PoisonMessage) {
        if self.filter.matches(&message) {
            *self.counts.entry(message.reason).or_default() += 1;
        }
    }

    /// The reasons with their counts, most first.
    pub(crate) fn finish(self) -> Vec<(String, u64)> {
        tally(self.counts)
    }
}

/// Counts of reasons added up by reason (two that read the same are one), most first,
/// then by reason.
pub(crate) fn tally(counts: impl IntoIterator<Item = (String, u64)>) -> Vec<(String, u64)> {
    let mut merged: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for (reason, n) in counts {
        *merged.entry(reason).or_default() += n;
    }
    let mut reasons: Vec<(String, u64)> = merged.into_iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    reasons
}

/// A page of `all`, a whole listing: what the backends that cannot read a page use.
pub(crate) fn page_of(all: Vec<PoisonMessage>, query: &PoisonQuery) -> PoisonPage {
    let mut paging = Paging::new(query);
    for (at, message) in all.into_iter().enumerate() {
        if !paging.offer(at, message) {
            break;
        }
    }
    paging.finish()
}

/// The reasons of `all` with their counts, most first.
pub(crate) fn reasons_of(all: Vec<PoisonMessage>, filter: &PoisonFilter) -> Vec<(String, u64)> {
    let mut reasons = Reasons::new(filter);
    for message in all {
        reasons.offer(message);
    }
    reasons.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, body: &str, reason: &str) -> PoisonMessage {
        PoisonMessage::new(id, body.as_bytes().to_vec(), reason, 1, None)
    }

    #[test]
    fn a_filter_matches_kind_exactly_and_text_anywhere_in_either_case() {
        let envelope = r#"{"id":"00000000-0000-0000-0000-000000000000","kind":"archive-employee","version":2,"created_at":"2026-01-01T00:00:00Z","payload":{"name":"Ada"}}"#;
        let m = message("Order-17", envelope, "Handler failed: NotFound");
        assert_eq!(m.operation, Some(("archive-employee".into(), 2)));
        assert!(PoisonFilter::new().matches(&m));
        assert!(PoisonFilter::new().kind("Archive-Employee").matches(&m));
        assert!(!PoisonFilter::new().kind("archive").matches(&m));
        assert!(PoisonFilter::new().id("order").matches(&m));
        assert!(PoisonFilter::new().reason("notfound").matches(&m));
        assert!(PoisonFilter::new().body("ADA").matches(&m));
        assert!(!PoisonFilter::new().body("Bob").matches(&m));
        assert!(PoisonFilter::new().kind("").is_empty());
    }

    #[test]
    fn a_whole_listing_pages_with_its_filter_and_cut_bodies() {
        let all: Vec<_> = (0..10)
            .map(|i| {
                message(
                    &format!("m{i}"),
                    &"x".repeat(100),
                    if i % 2 == 0 { "even" } else { "odd" },
                )
            })
            .collect();
        let query = PoisonQuery::new(3, 10).filter(PoisonFilter::new().reason("even"));
        let first = page_of(all.clone(), &query);
        let ids: Vec<_> = first.messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["m0", "m2", "m4"]);
        assert!(
            first
                .messages
                .iter()
                .all(|m| m.body.len() == 10 && m.size == 100 && !m.is_whole())
        );
        let second = page_of(all.clone(), &query.clone().after(first.next));
        let ids: Vec<_> = second.messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["m6", "m8"]);
        assert_eq!(second.next, None);
        assert_eq!(
            reasons_of(all.clone(), &PoisonFilter::new()),
            vec![("even".to_owned(), 5), ("odd".to_owned(), 5)]
        );
    }
}
