//! A poison queue as an operator works through it: messages read a page at a time (oldest
//! or newest first) with their bodies cut to a preview, filtered by operation kind, id,
//! reason or body text, grouped by reason (exactly, or by [`reason_group`], which masks the
//! numbers and ids a reason names), and taken off by handle — replayed to their queue or
//! another one, or discarded.
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
    /// Whether the reason arrived as bytes that are not UTF-8 (a RabbitMQ header, a SQLite
    /// column another program wrote): [`reason`](Self::reason) shows them lossily, and
    /// its [group](Self::reason_group) is [`UNDECODABLE_REASON_GROUP`].
    pub reason_undecodable: bool,
    /// When the message was first sent, if the queue knows.
    pub sent_at: Option<DateTime<Utc>>,
    /// What the backend records beside the body, as name and value, in the backend's
    /// order: on RabbitMQ the message's properties (message id, timestamp, …) and AMQP
    /// headers, each `x-death` entry on a line of its own (`x-death[0]`, …); on SQLite
    /// when it was sent and poisoned and its delivery count; on Azure the service's
    /// message id, insertion time and dequeue count (never a pop receipt). Times are RFC
    /// 3339, in UTC.
    pub headers: Vec<(String, String)>,
    /// The exact bytes of its id, reason and header values that were not UTF-8 (the
    /// fields above show them lossily): what an export writes byte for byte.
    pub raw: RawText,
}

/// The exact bytes of a message's texts that were not UTF-8 — its id, its reason, a
/// header's value — which its text fields show with U+FFFD: an export writes them byte
/// for byte (in base64), and the poison table keeps them. Empty for texts that were
/// UTF-8 (nearly every message).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RawText {
    /// The id's bytes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "base64_bytes"
    )]
    pub id: Option<Vec<u8>>,
    /// The reason's bytes.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "base64_bytes"
    )]
    pub reason: Option<Vec<u8>>,
    /// Header values' bytes, by the header's place in the message's headers.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "base64_headers"
    )]
    pub headers: Vec<(usize, Vec<u8>)>,
}

impl RawText {
    /// Whether every text was UTF-8.
    pub fn is_empty(&self) -> bool {
        self.id.is_none() && self.reason.is_none() && self.headers.is_empty()
    }

    /// `bytes` as text (lossily), and the bytes themselves when they are not UTF-8.
    pub fn text_of(bytes: &[u8]) -> (String, Option<Vec<u8>>) {
        match std::str::from_utf8(bytes) {
            Ok(text) => (text.to_owned(), None),
            Err(_) => (
                String::from_utf8_lossy(bytes).into_owned(),
                Some(bytes.to_vec()),
            ),
        }
    }
}

/// Bytes as one base64 string.
mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    pub(super) fn serialize<S: serde::Serializer>(
        bytes: &Option<Vec<u8>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => serializer.serialize_str(&STANDARD.encode(bytes)),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        let text: Option<String> = serde::Deserialize::deserialize(deserializer)?;
        text.map(|t| STANDARD.decode(t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// Header bytes as `[[place, base64], …]`.
mod base64_headers {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    pub(super) fn serialize<S: serde::Serializer>(
        headers: &[(usize, Vec<u8>)],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(
            headers
                .iter()
                .map(|(at, bytes)| (at, STANDARD.encode(bytes))),
        )
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<(usize, Vec<u8>)>, D::Error> {
        let encoded: Vec<(usize, String)> = serde::Deserialize::deserialize(deserializer)?;
        encoded
            .into_iter()
            .map(|(at, text)| {
                STANDARD
                    .decode(text)
                    .map(|bytes| (at, bytes))
                    .map_err(serde::de::Error::custom)
            })
            .collect()
    }
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
            reason_undecodable: false,
            sent_at: None,
            headers: Vec::new(),
            raw: RawText::default(),
        }
    }

    /// The group of its reason: [`reason_group`] of the reason, or
    /// [`UNDECODABLE_REASON_GROUP`] when the reason was not UTF-8.
    pub fn reason_group(&self) -> String {
        if self.reason_undecodable {
            UNDECODABLE_REASON_GROUP.to_owned()
        } else {
            reason_group(&self.reason)
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
/// them (letters in either case, ASCII); `reason_group` the [group](PoisonMessage::reason_group)
/// of the reason exactly; `undecodable_reason` a reason that was not UTF-8.
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
    /// The reason's group ([`reason_group`], or [`UNDECODABLE_REASON_GROUP`]).
    pub reason_group: Option<String>,
    /// Only reasons that were not UTF-8 ([`PoisonMessage::reason_undecodable`]).
    pub undecodable_reason: bool,
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

    /// Only messages whose reason's [group](PoisonMessage::reason_group) is `group` (as
    /// [`Queue::poison_reason_groups`](super::Queue::poison_reason_groups) lists it;
    /// [`UNDECODABLE_REASON_GROUP`] takes the reasons that were not UTF-8).
    #[must_use]
    pub fn reason_group(mut self, group: impl Into<String>) -> Self {
        self.reason_group = non_empty(group.into());
        self
    }

    /// Only messages whose reason was not UTF-8.
    #[must_use]
    pub fn undecodable_reason(mut self) -> Self {
        self.undecodable_reason = true;
        self
    }

    /// Whether it takes every message.
    pub fn is_empty(&self) -> bool {
        self.kind.is_none()
            && self.id.is_none()
            && self.reason.is_none()
            && self.body.is_none()
            && self.reason_group.is_none()
            && !self.undecodable_reason
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
            && (!self.undecodable_reason || message.reason_undecodable)
            && self
                .reason_group
                .as_deref()
                .is_none_or(|group| message.reason_group() == group)
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

/// One page of a poison queue: the filter, the order, where to start, how many, how much
/// of each body.
///
/// Pages run oldest first, or newest first ([`newest_first`](Self::newest_first)); a
/// cursor ([`PoisonPage::next`]) continues the order of the page that gave it, and means
/// nothing in the other order. Reading backwards is reading the other order: the last page
/// oldest first is the first page newest first, reversed
/// ([`Queue::poison_last_page`](super::Queue::poison_last_page)).
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
    /// Newest first rather than oldest first.
    pub newest_first: bool,
}

impl PoisonQuery {
    /// The first `limit` messages, oldest first, bodies cut to `preview` bytes.
    pub fn new(limit: usize, preview: usize) -> Self {
        PoisonQuery {
            filter: PoisonFilter::default(),
            after: None,
            limit,
            preview,
            newest_first: false,
        }
    }

    /// Newest first (`true`) or oldest first (`false`, the default).
    #[must_use]
    pub fn newest_first(mut self, newest_first: bool) -> Self {
        self.newest_first = newest_first;
        self
    }

    /// The first page of the other order: what reads the end of this order.
    #[must_use]
    pub fn reversed(mut self) -> Self {
        self.newest_first = !self.newest_first;
        self.after = None;
        self
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

/// A page of poison messages, in the order its query asked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoisonPage {
    /// The messages.
    pub messages: Vec<PoisonMessage>,
    /// The cursor of the next page, when there may be one.
    pub next: Option<String>,
}

impl PoisonPage {
    /// Its messages in the opposite order; [`next`](Self::next) still continues the order
    /// the page was read in.
    #[must_use]
    pub fn reversed(mut self) -> Self {
        self.messages.reverse();
        self
    }
}

/// The operation kinds of the messages `filter` passes, counted, most first (then by
/// kind; `None` for messages that are not an operation).
pub(crate) fn kinds_of(
    all: Vec<PoisonMessage>,
    filter: &PoisonFilter,
) -> Vec<(Option<String>, u64)> {
    let mut counted: std::collections::BTreeMap<Option<String>, u64> =
        std::collections::BTreeMap::new();
    for message in all.iter().filter(|m| filter.matches(m)) {
        *counted
            .entry(message.operation.as_ref().map(|(k, _)| k.clone()))
            .or_default() += 1;
    }
    let mut kinds: Vec<_> = counted.into_iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    kinds
}

/// The poison messages whose reasons share one [group](PoisonMessage::reason_group).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReasonGroup {
    /// The group ([`reason_group`] of the reasons, or [`UNDECODABLE_REASON_GROUP`]): give it
    /// to [`PoisonFilter::reason_group`] to list its messages.
    pub group: String,
    /// How many messages.
    pub count: u64,
    /// One of the reasons, whole (the least in byte order).
    pub example: String,
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

/// The reason groups of the messages offered that a filter passes, counted.
pub(crate) struct Groups<'f> {
    filter: &'f PoisonFilter,
    /// By group: the count and the least reason.
    groups: std::collections::HashMap<String, (u64, String)>,
}

impl<'f> Groups<'f> {
    pub(crate) fn new(filter: &'f PoisonFilter) -> Self {
        Groups {
            filter,
            groups: std::collections::HashMap::new(),
        }
    }

    pub(crate) fn offer(&mut self, message: PoisonMessage) {
        if self.filter.matches(&message) {
            self.add(message.reason_group(), 1, message.reason);
        }
    }

    /// Adds `count` messages of `group`, one of whose reasons is `example`.
    pub(crate) fn add(&mut self, group: String, count: u64, example: String) {
        let entry = self
            .groups
            .entry(group)
            .or_insert_with(|| (0, example.clone()));
        entry.0 += count;
        if example < entry.1 {
            entry.1 = example;
        }
    }

    /// The groups, most first, then by group.
    pub(crate) fn finish(self) -> Vec<ReasonGroup> {
        let mut groups: Vec<ReasonGroup> = self
            .groups
            .into_iter()
            .map(|(group, (count, example))| ReasonGroup {
                group,
                count,
                example,
            })
            .collect();
        groups.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.group.cmp(&b.group)));
        groups
    }
}

/// A page of `all`, a whole listing oldest first: what the backends that cannot read a
/// page use (newest first, the listing is read from its end).
pub(crate) fn page_of(mut all: Vec<PoisonMessage>, query: &PoisonQuery) -> PoisonPage {
    if query.newest_first {
        all.reverse();
    }
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

/// The reason groups of `all` with their counts, most first.
pub(crate) fn groups_of(all: Vec<PoisonMessage>, filter: &PoisonFilter) -> Vec<ReasonGroup> {
    let mut groups = Groups::new(filter);
    for message in all {
        groups.offer(message);
    }
    groups.finish()
}

/// The group of the reasons that were not UTF-8. It holds a digit, which no
/// [`reason_group`] does: no reason that decodes falls in it.
pub const UNDECODABLE_REASON_GROUP: &str = "(reason not valid UTF-8)";

/// The shortest run of hexadecimal letters (with no digit) taken for an id.
const LONG_HEX: usize = 16;

/// A reason with what varies from one message to the next masked as `#`, so that reasons
/// differing only by the numbers and ids they name fall in one group:
/// `conflict on ord-17` and `conflict on ord-9001` both give `conflict on ord-#`.
///
/// A word is a run of letters and digits (any script); other characters (spaces,
/// punctuation, `-`, `_`) separate words and are kept. Masked as one `#`: a UUID
/// (`8-4-4-4-12` hexadecimal digits); a word holding a digit (`17`, `a1b2`, `x509`); a
/// word of 16 or more hexadecimal letters. Other words are kept. No digit survives, and a
/// group is its own group.
pub fn reason_group(reason: &str) -> String {
    let mut group = String::with_capacity(reason.len());
    let mut rest = reason;
    while let Some(first) = rest.chars().next() {
        if !first.is_alphanumeric() {
            group.push(first);
            rest = &rest[first.len_utf8()..];
            continue;
        }
        // At the start of a word: the previous character, if any, separated.
        if let Some(after) = uuid_at(rest) {
            group.push('#');
            rest = after;
            continue;
        }
        let end = rest
            .char_indices()
            .find(|(_, c)| !c.is_alphanumeric())
            .map_or(rest.len(), |(at, _)| at);
        let (word, after) = rest.split_at(end);
        let id_like = word.chars().any(char::is_numeric)
            || (word.len() >= LONG_HEX && word.bytes().all(|b| b.is_ascii_hexdigit()));
        if id_like {
            group.push('#');
        } else {
            group.push_str(word);
        }
        rest = after;
    }
    group
}

/// The text after a UUID that `text` starts with, when the UUID is a whole word (nothing
/// alphanumeric follows it).
fn uuid_at(text: &str) -> Option<&str> {
    let bytes = text.as_bytes().get(..36)?;
    let shaped = bytes.iter().enumerate().all(|(at, b)| match at {
        8 | 13 | 18 | 23 => *b == b'-',
        _ => b.is_ascii_hexdigit(),
    });
    // 36 ASCII bytes: a character boundary.
    let after = text.get(36..)?;
    (shaped && !after.chars().next().is_some_and(char::is_alphanumeric)).then_some(after)
}

/// A time as the poison messages' headers show it: RFC 3339 in UTC, to the millisecond.
#[cfg(any(feature = "azure", feature = "rabbitmq", feature = "sqlite"))]
pub(crate) fn shown_time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
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

    #[test]
    fn reasons_naming_other_numbers_and_ids_fall_in_one_group() {
        assert_eq!(reason_group("conflict on ord-17"), "conflict on ord-#");
        assert_eq!(
            reason_group("conflict on ord-9001"),
            reason_group("conflict on ord-17")
        );
        assert_eq!(
            reason_group("entity 550e8400-e29b-41d4-a716-446655440000 missing"),
            "entity # missing"
        );
        assert_eq!(
            reason_group("blob deadbeefcafebabe0123 gone, hash abcdefabcdefabcdef"),
            "blob # gone, hash #"
        );
        assert_eq!(reason_group("key a1b2 at x509, row_7"), "key # at #, row_#");
        assert_eq!(
            reason_group("HTTP 503 at 2026-01-01T00:00:00Z"),
            "HTTP # at #-#-#:#:#"
        );
        // Words are kept, in any script, and short hexadecimal words too.
        assert_eq!(
            reason_group("Handler failed: NotFound (café, decade)"),
            "Handler failed: NotFound (café, decade)"
        );
        assert_eq!(
            reason_group("Zähler ٣ überschritten"),
            "Zähler # überschritten"
        );
        assert_eq!(reason_group(""), "");
    }

    #[test]
    fn a_reason_that_was_not_utf8_has_a_group_no_other_reason_has() {
        let mut undecodable = message("u", "x", "oops\u{FFFD}");
        undecodable.reason_undecodable = true;
        let readable = message("r", "x", "oops\u{FFFD}");
        assert_eq!(undecodable.reason_group(), UNDECODABLE_REASON_GROUP);
        assert_eq!(readable.reason_group(), "oops\u{FFFD}");
        assert!(
            PoisonFilter::new()
                .undecodable_reason()
                .matches(&undecodable)
        );
        assert!(!PoisonFilter::new().undecodable_reason().matches(&readable));
        assert!(
            PoisonFilter::new()
                .reason_group(UNDECODABLE_REASON_GROUP)
                .matches(&undecodable)
        );
        assert!(
            !PoisonFilter::new()
                .reason_group(UNDECODABLE_REASON_GROUP)
                .matches(&readable)
        );
        assert_ne!(
            reason_group(UNDECODABLE_REASON_GROUP),
            UNDECODABLE_REASON_GROUP
        );
        assert!(!PoisonFilter::new().undecodable_reason().is_empty());
    }

    #[test]
    fn groups_count_their_messages_most_first_with_an_example() {
        let all = vec![
            message("a", "x", "conflict on ord-17"),
            message("b", "x", "conflict on ord-9001"),
            message("c", "x", "timeout after 30 s"),
            message("d", "x", "conflict on ord-2"),
        ];
        let groups = groups_of(all.clone(), &PoisonFilter::new());
        assert_eq!(
            groups,
            [
                ReasonGroup {
                    group: "conflict on ord-#".into(),
                    count: 3,
                    example: "conflict on ord-17".into()
                },
                ReasonGroup {
                    group: "timeout after # s".into(),
                    count: 1,
                    example: "timeout after 30 s".into()
                },
            ]
        );
        let filter = PoisonFilter::new().reason_group("conflict on ord-#");
        let page = page_of(all.clone(), &PoisonQuery::new(10, 0).filter(filter));
        let ids: Vec<_> = page.messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "d"]);
    }

    #[test]
    fn a_whole_listing_pages_newest_first_and_its_last_page_is_the_first_reversed() {
        let all: Vec<_> = (0..7)
            .map(|i| message(&format!("m{i}"), "x", "r"))
            .collect();
        let query = PoisonQuery::new(3, 10).newest_first(true);
        let first = page_of(all.clone(), &query);
        let ids: Vec<_> = first.messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["m6", "m5", "m4"]);
        let second = page_of(all.clone(), &query.clone().after(first.next.clone()));
        let ids: Vec<_> = second.messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["m3", "m2", "m1"]);
        let last = page_of(all, &PoisonQuery::new(3, 10).reversed()).reversed();
        let ids: Vec<_> = last.messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["m4", "m5", "m6"]);
    }

    proptest::proptest! {
        #[test]
        fn a_group_is_its_own_group_and_holds_no_digit(reason in "\\PC{0,60}") {
            let group = reason_group(&reason);
            proptest::prop_assert_eq!(reason_group(&group), group.clone());
            proptest::prop_assert!(!group.chars().any(char::is_numeric), "{group:?}");
            proptest::prop_assert_ne!(group, UNDECODABLE_REASON_GROUP);
        }

        #[test]
        fn reasons_differing_only_in_their_numbers_share_a_group(
            words in proptest::collection::vec("[a-zA-Z]{1,8}", 1..5),
            a in proptest::collection::vec(0u64..1_000_000, 5),
            b in proptest::collection::vec(0u64..1_000_000, 5),
            separator in "[ :/,_-]",
        ) {
            let with = |numbers: &[u64]| {
                words
                    .iter()
                    .zip(numbers)
                    .map(|(w, n)| format!("{w}{separator}{n}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            proptest::prop_assert_eq!(reason_group(&with(&a)), reason_group(&with(&b)));
        }
    }
}
