//! Outbox entries: a write whose follow-up work lies outside its partition records each
//! operation ([`Envelope`]) as an entry in its own partition, in the same entity group
//! transaction. After the commit the entry goes to the sink and is deleted; what a crash
//! or a failed publish leaves, the [`Relay`](super::Relay) finds through the partition's
//! pending marker ([`super::pending`]).

use std::time::Duration;
use tracing::Instrument;

use chrono::Utc;
use futures::TryStreamExt;
use tablekit_core::{ETag, Entity, ErrorKind, IfMatch, Query, TableStore, Value, filter};

use super::operation::Envelope;
use super::sink::OutboxSink;
use crate::error::{Error, Result};

/// The RowKey prefix of outbox entries.
pub const OUTBOX_PREFIX: &str = "~outbox~";
/// A RowKey above every outbox entry's (ids are lowercase hex; `~` sorts after them).
const OUTBOX_END: &str = "~outbox~~";
/// The property marking tablekit's own entities (outbox entries, id-list pages).
pub const MARKER_PROPERTY: &str = tablekit_core::typed::DEFAULT_KIND_PROPERTY;
/// The marker of an outbox entry.
pub const OUTBOX_KIND: &str = "TablekitOutbox";
const ENVELOPE_PROPERTY: &str = "Envelope";
/// How many further parts an envelope longer than one property holds
/// (`Envelope1`, `Envelope2` …; absent when it fits `Envelope` alone).
const ENVELOPE_PARTS_PROPERTY: &str = "EnvelopeParts";
/// The UTF-16 units one part of an envelope holds (a string property holds 32 Ki).
const ENVELOPE_PART_UNITS: usize = 32_000;
/// The most parts an envelope may take (an entity holds 1 MiB).
const MAX_ENVELOPE_PARTS: usize = 14;
/// Entries written before envelopes: the index work alone.
const LEGACY_OPERATIONS_PROPERTY: &str = "Operations";
const CREATED_PROPERTY: &str = "CreatedAt";
/// When delayed work may be published (see [`Envelope::not_before`]).
const NOT_BEFORE_PROPERTY: &str = "NotBefore";

/// The RowKey of an operation's outbox entry.
pub fn entry_row_key(envelope: &Envelope) -> String {
    format!("{OUTBOX_PREFIX}{}", envelope.id.simple())
}

/// The outbox entry of an operation, in the writer's partition.
///
/// # Errors
/// [`Error::Encode`] when the operation does not serialise (before any I/O).
pub fn entry(partition_key: &str, envelope: &Envelope) -> Result<Entity> {
    let json = crate::error::json(&format!("operation `{}`", envelope.kind), envelope)?;
    let mut entity = Entity::new(partition_key, entry_row_key(envelope));
    entity.properties.insert(
        MARKER_PROPERTY.to_owned(),
        Value::String(OUTBOX_KIND.to_owned()),
    );
    let parts = envelope_parts(&json);
    if parts.len() > MAX_ENVELOPE_PARTS {
        // Refused as the entry it would make: larger than an entity may be.
        let violation = tablekit_core::limits::Violation::EntityTooLarge {
            partition_key: partition_key.to_owned(),
            row_key: entry_row_key(envelope),
            size: json.encode_utf16().count() * 2,
            max: tablekit_core::limits::MAX_ENTITY_BYTES,
        };
        return Err(tablekit_core::Error::from(violation));
    }
    if parts.len() > 1 {
        entity.properties.insert(
            ENVELOPE_PARTS_PROPERTY.to_owned(),
            Value::Int32(i32::try_from(parts.len() - 1).unwrap_or(i32::MAX)),
        );
    }
    for (i, part) in parts.into_iter().enumerate() {
        let name = if i == 0 {
            ENVELOPE_PROPERTY.to_owned()
        } else {
            format!("{ENVELOPE_PROPERTY}{i}")
        };
        entity.properties.insert(name, Value::String(part));
    }
    entity.properties.insert(
        CREATED_PROPERTY.to_owned(),
        Value::DateTime(tablekit_core::clock::now()),
    );
    if let Some(at) = envelope.not_before {
        entity
            .properties
            .insert(NOT_BEFORE_PROPERTY.to_owned(), Value::DateTime(at));
    }
    Ok(entity)
}

/// An envelope's JSON cut into parts of at most [`ENVELOPE_PART_UNITS`] UTF-16 units
/// (one part, the JSON itself, when it fits).
fn envelope_parts(json: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut units = 0;
    for c in json.chars() {
        if units + c.len_utf16() > ENVELOPE_PART_UNITS {
            parts.push(String::new());
            units = 0;
        }
        units += c.len_utf16();
        if let Some(part) = parts.last_mut() {
            part.push(c);
        }
    }
    parts
}

/// The envelope's JSON of an entry, its parts joined.
fn envelope_json(entity: &Entity) -> Option<std::borrow::Cow<'_, str>> {
    let Some(Value::String(first)) = entity.properties.get(ENVELOPE_PROPERTY) else {
        return None;
    };
    let parts = match entity.properties.get(ENVELOPE_PARTS_PROPERTY) {
        Some(Value::Int32(n)) => usize::try_from(*n).unwrap_or(0).min(MAX_ENVELOPE_PARTS),
        _ => return Some(std::borrow::Cow::Borrowed(first)),
    };
    let mut json = first.clone();
    for i in 1..=parts {
        if let Some(Value::String(part)) = entity.properties.get(&format!("{ENVELOPE_PROPERTY}{i}"))
        {
            json.push_str(part);
        }
    }
    Some(std::borrow::Cow::Owned(json))
}

/// The property marking an outbox entry as an *intent*: the undoing of what a write did
/// outside its transaction before its commit (reserving unique values, putting links,
/// uploading blobs). The write's commit deletes the intent under its ETag; a write that
/// never commits leaves it, and whoever claims it ([`claim_intent`]: the writer on a
/// failure, the relay after the grace period) turns it into ordinary follow-up work —
/// which also fences the write: its commit can no longer land.
pub const INTENT_PROPERTY: &str = "Intent";

/// The intent entry of an operation (see [`INTENT_PROPERTY`]).
///
/// # Errors
/// As [`entry`].
pub fn intent(partition_key: &str, envelope: &Envelope) -> Result<Entity> {
    let mut entity = entry(partition_key, envelope)?;
    entity
        .properties
        .insert(INTENT_PROPERTY.to_owned(), Value::Boolean(true));
    Ok(entity)
}

/// Whether an outbox entry is an intent not yet claimed.
pub fn is_intent(entity: &Entity) -> bool {
    matches!(
        entity.properties.get(INTENT_PROPERTY),
        Some(Value::Boolean(true))
    )
}

/// Claims an intent entry stored with `etag`: it becomes ordinary follow-up work (the
/// write it belongs to can no longer commit). `Some` with the entry's new ETag when
/// claimed; `None` when it is gone or changed (its write committed, or another claimed
/// it).
///
/// # Errors
/// The store's errors.
pub async fn claim_intent<S: TableStore>(
    store: &S,
    table: &str,
    entry: &Entity,
    etag: ETag,
) -> Result<Option<ETag>> {
    let mut work = entry.clone();
    work.etag = None;
    work.timestamp = None;
    work.properties.shift_remove(INTENT_PROPERTY);
    match store.replace(table, work, IfMatch::ETag(etag)).await {
        Ok(etag) => Ok(Some(etag)),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::NotFound | ErrorKind::PreconditionFailed
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Reads an outbox entry.
///
/// # Errors
/// [`Error::Malformed`] when the entry does not read.
pub fn read_entry(entity: &Entity) -> Result<Envelope> {
    let what = || format!("outbox entry {}/{}", entity.partition_key, entity.row_key);
    match (
        envelope_json(entity),
        entity.properties.get(LEGACY_OPERATIONS_PROPERTY),
    ) {
        (Some(json), _) => serde_json::from_str(&json).map_err(|e| Error::malformed(what(), e)),
        (None, Some(Value::String(json))) => {
            // Index work recorded before envelopes: `{"id": …, "operations": […]}`.
            let payload: serde_json::Value =
                serde_json::from_str(json).map_err(|e| Error::malformed(what(), e))?;
            let id = payload
                .get("id")
                .and_then(|id| id.as_str())
                .and_then(|id| uuid::Uuid::parse_str(id).ok())
                .ok_or_else(|| Error::malformed(what(), "no id"))?;
            Ok(Envelope {
                id,
                kind: "index".to_owned(),
                version: 1,
                created_at: created_at(entity).unwrap_or_else(tablekit_core::clock::now),
                payload,
                not_before: None,
            })
        }
        _ => Err(Error::malformed(what(), "no Envelope property")),
    }
}

/// When an entry was written.
pub(crate) fn created_at(entity: &Entity) -> Option<chrono::DateTime<Utc>> {
    match entity.properties.get(CREATED_PROPERTY) {
        Some(Value::DateTime(created)) => Some(*created),
        _ => None,
    }
}

/// When delayed work may be published (`None`: at once).
pub(crate) fn not_before(entity: &Entity) -> Option<chrono::DateTime<Utc>> {
    match entity.properties.get(NOT_BEFORE_PROPERTY) {
        Some(Value::DateTime(at)) => Some(*at),
        _ => None,
    }
}

/// Whether an entry is delayed work whose time has not come (a delete's tombstone
/// burial, see [`Envelope::not_before`]): nobody has anything to do about it yet.
pub fn waiting(entity: &Entity) -> bool {
    not_before(entity).is_some_and(|at| at > tablekit_core::clock::now())
}

/// The query of one partition's outbox entries: a RowKey range, so it reads only them.
pub fn partition_query(partition_key: &str) -> Query {
    Query::with_filter(
        filter::partition_key().eq(partition_key)
            & filter::row_key().ge(OUTBOX_PREFIX)
            & filter::row_key().lt(OUTBOX_END),
    )
}

/// The relay's query of one partition: its outbox entries and the feed's changes waiting
/// to be sequenced (`crate::feed::log`, keyed just above the entries), one RowKey range.
pub(crate) fn relay_query(partition_key: &str) -> Query {
    Query::with_filter(
        filter::partition_key().eq(partition_key)
            & filter::row_key().ge(OUTBOX_PREFIX)
            & filter::row_key().lt(RELAY_END),
    )
}

/// A RowKey above every outbox entry's and every waiting change's.
const RELAY_END: &str = "~outbox~~feed~~";

/// The RowKey prefix of a change feed's changes waiting in their partition to be
/// sequenced (`crate::feed`): just above the outbox entries, inside the relay's range.
pub const WAITING_PREFIX: &str = "~outbox~~feed~";
/// The marker of a change waiting to be sequenced.
pub(crate) const WAITING_KIND: &str = "TablekitFeedChange";

/// Whether an entity of a partition's relay range is a change waiting to be sequenced.
pub fn is_waiting(entity: &Entity) -> bool {
    entity.row_key.starts_with(WAITING_PREFIX)
}

/// The RowKey range of the changes waiting to be sequenced (in every partition; with a
/// PartitionKey condition, in one).
pub fn waiting_range() -> tablekit_core::Filter {
    filter::row_key().ge(WAITING_PREFIX) & filter::row_key().lt(RELAY_END)
}

/// Every outbox entry of a table, by scanning it whole: for tests, tools and
/// [`pending::adopt`](super::pending::adopt); the relay itself never scans.
///
/// # Errors
/// The store's errors.
pub async fn scan<S: TableStore>(store: &S, table: &str) -> Result<Vec<Entity>> {
    let query = Query::with_filter(filter::property_named(MARKER_PROPERTY).eq(OUTBOX_KIND));
    match store.query_stream(table, query).try_collect().await {
        Ok(rows) => Ok(rows),
        Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Deletes a published outbox entry (under its ETag when known; gone already is fine).
///
/// # Errors
/// The store's errors.
pub async fn remove_entry<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    row_key: &str,
    if_match: IfMatch,
) -> Result<()> {
    match store.delete(table, partition_key, row_key, if_match).await {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::NotFound | ErrorKind::PreconditionFailed | ErrorKind::TableNotFound
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Removes published entries of one partition in one entity group transaction (one
/// delete when there is one), each under its condition; an entry that is gone or changed
/// drops out (someone removed it) and the rest go again. Returns how many are gone and
/// how many stay (a store failure, logged: the relay publishes them again later).
pub(crate) async fn remove_entries<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    mut entries: Vec<(String, IfMatch)>,
) -> (usize, usize) {
    let mut gone = 0;
    loop {
        match entries.len() {
            0 => return (gone, 0),
            1 => {
                let (row_key, if_match) = entries.remove(0);
                return match remove_entry(store, table, partition_key, &row_key, if_match).await {
                    Ok(()) => (gone + 1, 0),
                    Err(e) => {
                        tracing::warn!(table, partition_key, error = %e, "removing a published outbox entry failed; the relay will publish it again");
                        (gone, 1)
                    }
                };
            }
            _ => {}
        }
        let batch: tablekit_core::Batch = entries
            .iter()
            .map(|(row_key, if_match)| tablekit_core::WriteOp::Delete {
                partition_key: partition_key.to_owned(),
                row_key: row_key.clone(),
                if_match: if_match.clone(),
            })
            .collect();
        match store.submit_batch(table, batch).await {
            Ok(_) => return (gone + entries.len(), 0),
            Err(e)
                if e.batch_index().is_some_and(|i| i < entries.len())
                    && matches!(
                        e.kind(),
                        ErrorKind::NotFound | ErrorKind::PreconditionFailed
                    ) =>
            {
                if let Some(i) = e.batch_index() {
                    entries.remove(i);
                    gone += 1;
                }
            }
            Err(e) if e.kind() == ErrorKind::TableNotFound => return (gone + entries.len(), 0),
            Err(e) => {
                tracing::warn!(table, partition_key, error = %e, entries = entries.len(), "removing published outbox entries failed; the relay will publish them again");
                return (gone, entries.len());
            }
        }
    }
}

/// Hands a committed entry's operation to the sink, then deletes the entry (under its
/// ETag when known). `true` when both happened; otherwise the entry stays for the relay
/// (the failure is logged, the write stands).
pub async fn publish<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    sink: &dyn OutboxSink,
    envelope: &Envelope,
    etag: Option<ETag>,
) -> bool {
    let span = publish_span(table, partition_key, envelope);
    publish_entry(store, table, partition_key, sink, envelope, etag)
        .instrument(span)
        .await
}

/// The span of one publish (a producer span, linked to the consumer's by the operation
/// id).
pub(crate) fn publish_span(table: &str, partition_key: &str, envelope: &Envelope) -> tracing::Span {
    tracing::debug_span!(
        "tablekit.publish",
        otel.kind = "producer",
        tablekit.operation.id = %envelope.id,
        tablekit.operation.kind = %envelope.kind,
        db.collection.name = table,
        tablekit.partition_key = partition_key,
    )
}

/// Hands a committed entry's operation to the sink (its removal is the caller's):
/// `true` when the sink took it; a failure is logged and the entry stays for the relay.
pub(crate) async fn hand_over(
    table: &str,
    partition_key: &str,
    sink: &dyn OutboxSink,
    envelope: &Envelope,
) -> bool {
    let span = publish_span(table, partition_key, envelope);
    send(table, partition_key, sink, envelope)
        .instrument(span)
        .await
}

/// Hands an operation to the sink: `true` when it took it; a failure is logged.
async fn send(
    table: &str,
    partition_key: &str,
    sink: &dyn OutboxSink,
    envelope: &Envelope,
) -> bool {
    match sink.publish_entry(table, partition_key, envelope).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(table, partition_key, kind = %envelope.kind, error = %e, "publishing follow-up work failed; the relay will retry it");
            false
        }
    }
}

async fn publish_entry<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    sink: &dyn OutboxSink,
    envelope: &Envelope,
    etag: Option<ETag>,
) -> bool {
    if !send(table, partition_key, sink, envelope).await {
        return false;
    }
    let if_match = etag.map_or(IfMatch::Any, IfMatch::ETag);
    match remove_entry(
        store,
        table,
        partition_key,
        &entry_row_key(envelope),
        if_match,
    )
    .await
    {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(table, partition_key, error = %e, "removing a published outbox entry failed; the relay will publish it again");
            false
        }
    }
}

/// The instant `grace` before now (the earliest instant when that is out of range).
pub fn ago(grace: Duration) -> chrono::DateTime<Utc> {
    chrono::Duration::from_std(grace)
        .ok()
        .and_then(|grace| tablekit_core::clock::now().checked_sub_signed(grace))
        .unwrap_or(chrono::DateTime::<Utc>::MIN_UTC)
}

/// The instant `span` after `at` (the latest instant when that is out of range).
pub(crate) fn after(at: chrono::DateTime<Utc>, span: Duration) -> chrono::DateTime<Utc> {
    chrono::Duration::from_std(span)
        .ok()
        .and_then(|span| at.checked_add_signed(span))
        .unwrap_or(chrono::DateTime::<Utc>::MAX_UTC)
}

#[cfg(test)]
mod parts_tests {
    use super::*;

    fn envelope(payload: serde_json::Value) -> Envelope {
        Envelope {
            id: uuid::Uuid::nil(),
            kind: "change".to_owned(),
            version: 1,
            created_at: chrono::DateTime::from_timestamp(0, 0).unwrap_or_default(),
            payload,
            not_before: None,
        }
    }

    #[test]
    fn an_envelope_longer_than_one_property_is_spread_over_parts_and_read_back() {
        // Characters of two UTF-16 units each: the parts are cut by units, not bytes.
        let text = "\u{1F600}".repeat(40_000);
        let long = envelope(serde_json::json!({ "text": text }));
        let written = entry("p", &long).expect("entry");
        assert_eq!(
            written.properties.get(ENVELOPE_PARTS_PROPERTY),
            Some(&Value::Int32(2))
        );
        for (name, value) in &written.properties {
            if let Value::String(s) = value {
                assert!(s.encode_utf16().count() <= 32_768, "{name}");
            }
        }
        assert_eq!(read_entry(&written).expect("reads").payload, long.payload);
        // One that fits stays as it always was: one property.
        let short = entry("p", &envelope(serde_json::json!({ "a": 1 }))).expect("entry");
        assert!(!short.properties.contains_key(ENVELOPE_PARTS_PROPERTY));
        assert!(!short.properties.contains_key("Envelope1"));
        // Past one entity: refused before any I/O.
        let huge = envelope(serde_json::json!({ "text": "x".repeat(600_000) }));
        let refused = entry("p", &huge).expect_err("too large");
        assert_eq!(
            refused.kind(),
            tablekit_core::ErrorKind::TooLarge,
            "{refused}"
        );
    }
}
