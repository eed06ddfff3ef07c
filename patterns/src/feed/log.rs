//! How the feed is stored.
//!
//! - **Changes waiting to be sequenced**, in the written entity's own partition, inserted
//!   by the write's own entity group transaction: RowKey
//!   `~outbox~~feed~<version:020>~<hash of the RowKey:016x>` — inside the outbox's key
//!   range, so the relay's one range query per pending partition reads them with the
//!   outbox entries, and in version order. They hold the change as an outbox envelope
//!   (kind `change`) and the feed's `Shares`.
//! - **The log of each share**, in [`FEED_TABLE`], PartitionKey `<table>~<share:05>`:
//!   one row per change, RowKey its sequence number (`<seq:020>`, from 1, no gap), and
//!   the head (RowKey [`HEAD_ROW`]): `Next`, the next number, and `Oldest`, the lowest
//!   one still kept.
//! - **The groups**, in [`FEED_TABLE`], PartitionKey `group~<table>~<group>`: per share
//!   its lease and checkpoint (RowKey `share~<share:05>`), per member its heartbeat
//!   (RowKey `member~<id>`) — see `super::group`.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use tablekit_core::{Entity, Value};

use crate::changes::ChangeEvent;
use crate::consistency::{Envelope, outbox};
use crate::error::{Error, Result};

pub(crate) use crate::consistency::outbox::WAITING_KIND;
pub use crate::consistency::outbox::{WAITING_PREFIX, is_waiting, waiting_range};
pub(crate) use crate::consistency::relay::feed_log::{
    AT, SHARES, appended, seq_of, waiting_row_key,
};
pub use crate::consistency::relay::feed_log::{
    FEED_TABLE, HEAD_ROW, Head, head, log_partition, rows_from, seq_row_key, share_of,
};

/// The entry recording a write's change in its partition (inserted by the write's own
/// transaction).
///
/// # Errors
/// [`Error::Encode`] when the change does not serialise; a limit violation when it is
/// larger than an entity may be.
pub(crate) fn waiting_entry(event: &ChangeEvent, shares: u32) -> Result<Entity> {
    // The change's envelope keeps a stable id: the waiting entry's key, hashed.
    let row_key = waiting_row_key(&event.row_key, event.version);
    let id = uuid::Uuid::from_slice(
        &Sha256::digest(format!("{}\u{0}{}", event.partition_key, row_key).as_bytes())[..16],
    )
    .unwrap_or_default();
    let envelope = Envelope::with_id(id, event)?;
    let mut entry = outbox::entry(&event.partition_key, &envelope)?;
    entry.row_key = row_key;
    entry.set(outbox::MARKER_PROPERTY, WAITING_KIND);
    entry.set(SHARES, Value::Int32(shares as i32));
    Ok(entry)
}

/// Reads a log row as its change.
///
/// # Errors
/// [`Error::Malformed`] when it does not read.
pub(crate) fn read_row(row: &Entity) -> Result<(u64, DateTime<Utc>, ChangeEvent)> {
    let what = || format!("feed log row {}/{}", row.partition_key, row.row_key);
    let seq = seq_of(row).ok_or_else(|| Error::malformed(what(), "no Seq"))?;
    let at = row
        .get(AT)
        .and_then(Value::as_datetime)
        .ok_or_else(|| Error::malformed(what(), "no At"))?;
    let envelope = outbox::read_entry(row)?;
    let event: ChangeEvent =
        serde_json::from_value(envelope.payload).map_err(|e| Error::malformed(what(), e))?;
    Ok((seq, at, event))
}
