//! Change subscriptions: a change feed for table stores that have none.
//!
//! A type declared with `#[entity(changes = "queue")]` and written through an
//! [`IndexedTable`](crate::index::IndexedTable) publishes every committed insert, update
//! and delete as a [`ChangeEvent`] to that queue. The event is follow-up work of the write
//! (kind [`ChangeEvent::KIND`]): recorded in the write's own entity group transaction by
//! the consistency engine and handed to the sink after the commit, so a crash can delay an
//! event (the relay publishes it) but never lose one. Delivery is at least once: a
//! consumer may see an event twice, or late. Each event carries the primary's version
//! (it grows with every write of the primary), so a consumer keeps the newest per
//! primary and drops an older or repeated one.
//!
//! The queue sink of `tablekit-workers` publishes change events to the queue they name
//! (and other work to its own queue); `tablekit_workers::changes::Changes` consumes them
//! typed. An `InlineSink` has no handler for them: with `inline_apply()`, events wait
//! in the outbox for a relay that publishes to a queue (`tablekit-worker run --queue
//! index`).

use serde::{Deserialize, Serialize};
use tablekit_core::Entity;

use crate::consistency::{Envelope, Operation};
use crate::error::Result;
use crate::index::record::is_hidden;

/// What a write did to an entity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChangeKind {
    /// The entity was written where none was.
    Insert,
    /// A stored entity was written again (replaced, merged or upserted).
    Update,
    /// The entity was deleted.
    Delete,
    /// The entity as stored when a change feed's snapshot read it: a group that starts
    /// from the beginning after retention trimmed the log reads the table first
    /// (`crate::feed`); never published to a change queue.
    Snapshot,
}

/// One committed change of an entity, as published to its type's change queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChangeEvent {
    /// The queue the event goes to (the type's `changes` declaration).
    pub queue: String,
    /// The entity's kind.
    pub kind: String,
    /// The entity's table.
    pub table: String,
    /// The entity's PartitionKey.
    pub partition_key: String,
    /// The entity's RowKey.
    pub row_key: String,
    /// The version of the write (it grows with every write of the entity).
    pub version: i64,
    /// What the write did.
    pub change: ChangeKind,
    /// The entity as written, or for a delete as it was last stored; tablekit's own
    /// properties left out. Blob fields of tables with a blob store hold their addresses.
    pub entity: Entity,
}

impl Operation for ChangeEvent {
    const KIND: &'static str = "change";
    const VERSION: u32 = 1;
}

impl ChangeEvent {
    /// The event of a write: `written` is the entity the write stores (`None` for a
    /// delete), `previous` the one it replaces (`None` for an insert); `None` when the
    /// write changes nothing (a delete of nothing).
    pub fn of_write(
        queue: &str,
        kind: &str,
        table: &str,
        version: i64,
        written: Option<&Entity>,
        previous: Option<&Entity>,
    ) -> Option<Self> {
        let (change, entity) = match (written, previous) {
            (Some(e), None) => (ChangeKind::Insert, e),
            (Some(e), Some(_)) => (ChangeKind::Update, e),
            (None, Some(e)) => (ChangeKind::Delete, e),
            (None, None) => return None,
        };
        let mut entity = entity.clone();
        entity.properties.retain(|name, _| !is_hidden(name));
        entity.etag = None;
        entity.timestamp = None;
        Some(ChangeEvent {
            queue: queue.to_owned(),
            kind: kind.to_owned(),
            table: table.to_owned(),
            partition_key: entity.partition_key.clone(),
            row_key: entity.row_key.clone(),
            version,
            change,
            entity,
        })
    }

    /// The event's envelope.
    ///
    /// # Errors
    /// [`Error::Encode`](crate::Error::Encode) when the event does not serialise.
    pub fn envelope(&self) -> Result<Envelope> {
        Envelope::new(self)
    }

    /// The queue a change envelope goes to: `Some` for an envelope of kind
    /// [`ChangeEvent::KIND`] that names one.
    pub fn queue_of(envelope: &Envelope) -> Option<&str> {
        if envelope.kind != Self::KIND {
            return None;
        }
        envelope.payload.get("queue").and_then(|q| q.as_str())
    }
}
