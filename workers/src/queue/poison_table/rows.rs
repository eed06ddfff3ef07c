//! The poison table's keys and rows: how a poison message is written to entities and read
//! back.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use tablekit_core::{ETag, Entity, IfMatch, Value, WriteOp};

use crate::queue::PoisonMessage;
use crate::queue::poison::operation_of;

/// The row of a message, oldest first: `t.<time key>`.
pub(super) const OLDEST: &str = "t.";
/// The copy of a message's row, newest first: `n.<inverted time key>`.
pub(super) const NEWEST: &str = "n.";
/// A message id's marker, what makes recording a message again harmless: `i.<id key>`.
pub(super) const IDS: &str = "i.";
/// A share of the queue's count: `c.<shard>`.
pub(super) const COUNTS: &str = "c.";
/// A share of a reason group's count: `g.<group hash>.<shard>`.
pub(super) const GROUPS: &str = "g.";
/// A share of an operation kind's count: `k.<kind hash>.<shard>`.
pub(super) const KINDS: &str = "k.";
/// A share of the count of one kind and reason group together:
/// `p.<kind hash>.<group hash>.<shard>` (what a view filtered by kind or group counts).
pub(super) const PAIRS: &str = "p.";
/// A piece of a body too large for the message's rows: `b.<time key>.<piece>`.
pub(super) const PIECES: &str = "b.";
/// What the trims of the queue did: `r.<time key>`.
pub(super) const TRIMS: &str = "r.";

/// How many shares a count is kept in (so that workers poisoning at once rarely write the
/// same row).
pub(super) const SHARDS: u8 = 16;

/// The bytes of a body a row holds in each of its binary properties.
const PROPERTY_BYTES: usize = 64 * 1024;
/// The binary properties a row holds its body in (`Body`, `Body1`, …): 768 KiB, room
/// under the entity's 1 MiB for the rest. A larger body is kept in pieces of this size.
const BODY_PROPERTIES: usize = 12;
/// The most bytes of a body a row holds whole.
pub(super) const INLINE_BODY: usize = PROPERTY_BYTES * BODY_PROPERTIES;
/// The first bytes of a body each row keeps for pages.
pub(super) const PREVIEW: usize = 1024;
/// The most bytes of a reason or of the headers kept (a string property holds 32 Ki
/// UTF-16 code units): longer ones are cut, and say so.
const TEXT_BYTES: usize = 16 * 1024;

// Property names.
pub(super) const AT: &str = "At";
pub(super) const ID: &str = "Id";
pub(super) const ID_KEY: &str = "IdKey";
pub(super) const BODY_HASH: &str = "BodyHash";
pub(super) const PREVIEW_BYTES: &str = "Preview";
pub(super) const SIZE: &str = "Size";
pub(super) const PIECE_COUNT: &str = "Pieces";
pub(super) const KIND: &str = "Kind";
pub(super) const VERSION: &str = "Version";
pub(super) const REASON: &str = "Reason";
pub(super) const GROUP: &str = "Group";
pub(super) const UNDECODABLE: &str = "ReasonUndecodable";
pub(super) const DELIVERIES: &str = "Deliveries";
pub(super) const POISONED_AT: &str = "PoisonedAt";
pub(super) const SENT_AT: &str = "SentAt";
pub(super) const HEADERS: &str = "Headers";
/// The exact bytes of the texts that were not UTF-8 ([`RawText`](crate::queue::RawText),
/// as JSON); absent for nearly every message.
pub(super) const RAW: &str = "Raw";
pub(super) const ORIGIN: &str = "Origin";
pub(super) const REDRIVING: &str = "Redriving";
pub(super) const COUNT: &str = "Count";
pub(super) const EXAMPLE: &str = "Example";
pub(super) const TRIMMED: &str = "Trimmed";

/// The properties a page reads: everything but the body and the headers.
pub(super) const PAGE_PROPERTIES: &[&str] = &[
    AT,
    ID,
    PREVIEW_BYTES,
    SIZE,
    KIND,
    VERSION,
    REASON,
    UNDECODABLE,
    DELIVERIES,
    POISONED_AT,
    SENT_AT,
    ORIGIN,
    REDRIVING,
];

/// The properties a removal reads of a message's row (what its counts and pieces need).
pub(super) const REMOVAL_PROPERTIES: &[&str] =
    &[AT, ID_KEY, GROUP, REASON, KIND, PIECE_COUNT, POISONED_AT];

/// A poison message as a worker or a sweep records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoisonRecord {
    /// The message id (empty when the message had none).
    pub id: String,
    /// The body.
    pub body: Vec<u8>,
    /// Why it was poisoned.
    pub reason: String,
    /// Whether the reason arrived as bytes that are not UTF-8 (shown lossily).
    pub reason_undecodable: bool,
    /// How many times it was delivered.
    pub delivery_count: u32,
    /// When it was poisoned.
    pub poisoned_at: DateTime<Utc>,
    /// When it was first sent, if known.
    pub sent_at: Option<DateTime<Utc>>,
    /// What the backend recorded beside the body, as name and value.
    pub headers: Vec<(String, String)>,
    /// Who gave up on it: `worker` (a handler failed or the delivery limit was reached)
    /// or `broker` (dead-lettered by the broker itself, swept in from its poison queue).
    pub origin: &'static str,
    /// The exact bytes of its id, reason and header values that were not UTF-8.
    pub raw: crate::queue::RawText,
}

/// A stable hash as hexadecimal digits: the first `digits` of SHA-256 over the parts, each
/// preceded by its length.
pub(super) fn hash(parts: &[&[u8]], digits: usize) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    let digest = hasher.finalize();
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out.truncate(digits);
    out
}

/// The shard of a message: from its id key.
pub(super) fn shard_of(id_key: &str) -> u8 {
    let first = u8::from_str_radix(id_key.get(..2).unwrap_or("00"), 16).unwrap_or(0);
    first % SHARDS
}

/// The largest time a key holds, in microseconds (year 5138): the newest-first rows count
/// down from it.
pub(super) const LATEST: i64 = 99_999_999_999_999_999;

/// The time key of a message poisoned at `at` with id key `id_key`: microseconds since the
/// epoch, zero-padded, then the id key's first digits, so two messages of one
/// microsecond have two keys. Its order is the time's.
pub(super) fn time_key(at: DateTime<Utc>, id_key: &str) -> String {
    let micros = at.timestamp_micros().clamp(0, LATEST);
    format!("{micros:017}.{}", id_key.get(..16).unwrap_or(id_key))
}

/// The newest-first key of a time key: its microseconds counted down from [`LATEST`].
pub(super) fn inverted(time_key: &str) -> Option<String> {
    let (micros, rest) = time_key.split_once('.')?;
    let micros: i64 = micros.parse().ok()?;
    Some(format!("{:017}.{rest}", LATEST - micros))
}

/// Whether `handle` has a time key's shape (what a page names a message by).
pub(super) fn is_time_key(handle: &str) -> bool {
    handle.split_once('.').is_some_and(|(micros, rest)| {
        micros.len() == 17
            && micros.bytes().all(|b| b.is_ascii_digit())
            && !rest.is_empty()
            && rest.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// Text cut to at most [`TEXT_BYTES`], saying so when cut.
fn kept_text(text: &str) -> String {
    if text.len() <= TEXT_BYTES {
        return text.to_owned();
    }
    let mut end = TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… ({} bytes in all, cut to {TEXT_BYTES} in the poison table)",
        &text[..end],
        text.len()
    )
}

/// The message's rows: the oldest-first row and its newest-first copy (both whole), and
/// the pieces of a body too large for a row.
pub(super) struct MessageRows {
    pub(super) oldest: Entity,
    pub(super) newest: Entity,
    pub(super) pieces: Vec<Entity>,
}

/// Builds a message's rows.
pub(super) fn message_rows(
    partition: &str,
    record: &PoisonRecord,
    id_key: &str,
    body_hash: &str,
    time_key: &str,
) -> MessageRows {
    let group = if record.reason_undecodable {
        crate::queue::UNDECODABLE_REASON_GROUP.to_owned()
    } else {
        crate::queue::reason_group(&record.reason)
    };
    let headers = serde_json::to_string(&record.headers).unwrap_or_else(|_| "[]".into());
    let mut row = Entity::new(partition, format!("{OLDEST}{time_key}"))
        .with(AT, time_key)
        .with(ID, record.id.clone())
        .with(ID_KEY, id_key)
        .with(BODY_HASH, body_hash)
        .with(
            PREVIEW_BYTES,
            Value::Binary(record.body[..record.body.len().min(PREVIEW)].to_vec()),
        )
        .with(SIZE, i64::try_from(record.body.len()).unwrap_or(i64::MAX))
        .with(REASON, kept_text(&record.reason))
        .with(GROUP, kept_text(&group))
        .with(UNDECODABLE, record.reason_undecodable)
        .with(DELIVERIES, i64::from(record.delivery_count))
        .with(POISONED_AT, record.poisoned_at)
        .with(HEADERS, kept_text(&headers))
        .with(ORIGIN, record.origin);
    if !record.raw.is_empty() {
        row.set(
            RAW,
            serde_json::to_string(&record.raw).unwrap_or_else(|_| "{}".into()),
        );
    }
    if let Some((kind, version)) = operation_of(&record.body) {
        row.set(KIND, kind);
        row.set(VERSION, i64::from(version));
    }
    if let Some(sent) = record.sent_at {
        row.set(SENT_AT, sent);
    }
    let mut pieces = Vec::new();
    if record.body.len() <= INLINE_BODY {
        for (n, part) in record.body.chunks(PROPERTY_BYTES).enumerate() {
            row.set(body_property(n), Value::Binary(part.to_vec()));
        }
    } else {
        for (n, piece) in record.body.chunks(INLINE_BODY).enumerate() {
            let mut entity = Entity::new(partition, piece_key(time_key, n));
            for (p, part) in piece.chunks(PROPERTY_BYTES).enumerate() {
                entity.set(body_property(p), Value::Binary(part.to_vec()));
            }
            pieces.push(entity);
        }
        row.set(PIECE_COUNT, i64::try_from(pieces.len()).unwrap_or(i64::MAX));
    }
    let mut newest = row.clone();
    newest.row_key = format!("{NEWEST}{}", inverted(time_key).unwrap_or_default());
    MessageRows {
        oldest: row,
        newest,
        pieces,
    }
}

fn body_property(n: usize) -> String {
    if n == 0 {
        "Body".to_owned()
    } else {
        format!("Body{n}")
    }
}

/// The row key of the `n`th piece of the body of the message with time key `time_key`
/// (not its id key: a message redriven and poisoned again before the redrive ends has
/// two rows of one id key, and each keeps its own pieces).
pub(super) fn piece_key(time_key: &str, n: usize) -> String {
    format!("{PIECES}{time_key}.{n:04}")
}

/// The body bytes a row (or a piece) holds.
pub(super) fn body_of(entity: &Entity) -> Vec<u8> {
    let mut body = Vec::new();
    for n in 0..BODY_PROPERTIES {
        match entity.get(&body_property(n)).and_then(Value::as_binary) {
            Some(part) => body.extend_from_slice(part),
            None => break,
        }
    }
    body
}

/// How many pieces a row's body is kept in (0: the row holds it).
pub(super) fn pieces_of(entity: &Entity) -> usize {
    entity
        .get(PIECE_COUNT)
        .and_then(Value::as_i64)
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0)
}

/// A string property of a row (empty when absent).
pub(super) fn str_of<'e>(entity: &'e Entity, name: &str) -> &'e str {
    entity.get(name).and_then(Value::as_str).unwrap_or_default()
}

fn text(entity: &Entity, name: &str) -> String {
    str_of(entity, name).to_owned()
}

pub(super) fn int(entity: &Entity, name: &str) -> i64 {
    entity.get(name).and_then(Value::as_i64).unwrap_or(0)
}

/// Whether the row is being redriven (its first step done, not its last).
pub(super) fn is_redriving(entity: &Entity) -> bool {
    entity
        .get(REDRIVING)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The message a row holds; `body` is the body shown (a preview or the whole body).
pub(super) fn message_of(entity: &Entity, body: Vec<u8>) -> PoisonMessage {
    let handle = text(entity, AT);
    let size = usize::try_from(int(entity, SIZE)).unwrap_or(usize::MAX);
    let kind = entity.get(KIND).and_then(Value::as_str).map(str::to_owned);
    let version = u32::try_from(int(entity, VERSION)).unwrap_or(0);
    let mut headers: Vec<(String, String)> = entity
        .get(HEADERS)
        .and_then(Value::as_str)
        .and_then(|h| serde_json::from_str(h).ok())
        .unwrap_or_default();
    let origin = text(entity, ORIGIN);
    if !origin.is_empty() {
        headers.push(("poisoned by".to_owned(), origin));
    }
    if is_redriving(entity) {
        headers.push((
            "redrive".to_owned(),
            "started and not finished: redrive or discard it again".to_owned(),
        ));
    }
    PoisonMessage {
        id: text(entity, ID),
        handle,
        body,
        size,
        operation: kind.map(|k| (k, version)),
        reason: text(entity, REASON),
        delivery_count: u32::try_from(int(entity, DELIVERIES)).unwrap_or(0),
        poisoned_at: entity.get(POISONED_AT).and_then(Value::as_datetime),
        reason_undecodable: entity
            .get(UNDECODABLE)
            .and_then(Value::as_bool)
            .unwrap_or(false),
        sent_at: entity.get(SENT_AT).and_then(Value::as_datetime),
        headers,
        raw: entity
            .get(RAW)
            .and_then(Value::as_str)
            .and_then(|raw| serde_json::from_str(raw).ok())
            .unwrap_or_default(),
    }
}

/// The preview a page row holds.
pub(super) fn preview_of(entity: &Entity) -> Vec<u8> {
    entity
        .get(PREVIEW_BYTES)
        .and_then(Value::as_binary)
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

/// The row key of a share of the count of a kind and a reason group together.
pub(super) fn pair_key(kind: &str, group: &str, shard: u8) -> String {
    format!(
        "{PAIRS}{}.{}.{shard:02}",
        hash(&[kind.as_bytes()], 16),
        hash(&[group.as_bytes()], 16)
    )
}

/// The row key of a share of a count: `<prefix><name hash>.<shard>` (the queue's count
/// has no name).
pub(super) fn count_key(prefix: &str, name: Option<&str>, shard: u8) -> String {
    match name {
        Some(name) => format!("{prefix}{}.{shard:02}", hash(&[name.as_bytes()], 16)),
        None => format!("{prefix}{shard:02}"),
    }
}

/// The write that adds `delta` to a share of a count read as `current` (absent: 0): a
/// replace bound to its ETag, an insert, or a delete bound to its ETag when it reaches 0.
/// `None` when there is nothing to write (taking from a count that is not there).
pub(super) fn count_write(
    partition: &str,
    key: String,
    current: Option<&Entity>,
    delta: i64,
    extra: &[(&str, Value)],
) -> Option<WriteOp> {
    match current {
        Some(row) => {
            let etag = row.etag.clone().unwrap_or_else(|| ETag::new("*"));
            let count = int(row, COUNT) + delta;
            if count <= 0 {
                Some(WriteOp::Delete {
                    partition_key: partition.to_owned(),
                    row_key: key,
                    if_match: IfMatch::ETag(etag),
                })
            } else {
                let mut row = row.clone();
                row.etag = None;
                row.set(COUNT, count);
                Some(WriteOp::Replace(row, IfMatch::ETag(etag)))
            }
        }
        None if delta > 0 => {
            let mut row = Entity::new(partition, key).with(COUNT, delta);
            for (name, value) in extra {
                row.set(*name, value.clone());
            }
            Some(WriteOp::Insert(row))
        }
        None => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn time_keys_sort_as_their_times_and_their_inverses_the_other_way() {
        let early = time_key(DateTime::from_timestamp(1_000, 0).unwrap(), "ab12");
        let late = time_key(DateTime::from_timestamp(2_000, 0).unwrap(), "0012");
        assert!(early < late);
        assert!(inverted(&early).unwrap() > inverted(&late).unwrap());
        assert!(is_time_key(&early));
        assert!(!is_time_key("17"));
        assert!(!is_time_key("00000000000000001.zz"));
        assert_eq!(shard_of("ff"), 15);
        assert_eq!(shard_of("10"), 0);
    }

    #[test]
    fn a_large_body_goes_to_pieces_and_a_small_one_stays_in_its_rows() {
        let record = PoisonRecord {
            id: "m".into(),
            body: vec![7; INLINE_BODY + 10],
            reason: "r".repeat(TEXT_BYTES + 1),
            reason_undecodable: false,
            delivery_count: 3,
            poisoned_at: Utc::now(),
            sent_at: None,
            headers: vec![],
            origin: "worker",
            raw: crate::queue::RawText::default(),
        };
        let rows = message_rows("q", &record, "abcd", "h", "00000000000000001.abcd");
        assert_eq!(rows.pieces.len(), 2);
        assert_eq!(pieces_of(&rows.oldest), 2);
        let whole: Vec<u8> = rows.pieces.iter().flat_map(body_of).collect();
        assert_eq!(whole, record.body);
        assert!(text(&rows.oldest, REASON).contains("cut to"));
        let small = PoisonRecord {
            body: b"{}".to_vec(),
            ..record
        };
        let rows = message_rows("q", &small, "abcd", "h", "00000000000000001.abcd");
        assert!(rows.pieces.is_empty());
        assert_eq!(body_of(&rows.newest), b"{}");
        assert!(rows.newest.row_key.starts_with(NEWEST));
    }
}
