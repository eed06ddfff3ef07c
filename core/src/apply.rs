//! How one write changes one stored entity, as the table service defines it; shared by the
//! backends that store entities themselves (the embedded SQLite and in-memory stores).

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::limits;
use crate::model::{ETag, Entity, IfMatch};
use crate::store::WriteOp;

/// What a write does to the stored entity.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Store this entity (Timestamp and ETag still to be set by the store).
    Put(Entity),
    /// Remove the stored entity.
    Remove,
}

fn check_condition(table: &str, if_match: &IfMatch, current: &Entity) -> Result<()> {
    let matched = match (&current.etag, if_match) {
        (_, IfMatch::Any) => true,
        (Some(stored), condition) => condition.matches(stored),
        (None, IfMatch::ETag(_)) => false,
    };
    if matched {
        Ok(())
    } else {
        Err(Error::precondition_failed(
            table,
            &current.partition_key,
            &current.row_key,
        ))
    }
}

fn merged(current: &Entity, update: Entity) -> Result<Entity> {
    let mut result = current.clone();
    result.properties.extend(update.properties);
    // Two valid entities can merge into one over the property or size limit.
    limits::check_entity(&result)?;
    Ok(result)
}

/// Decides the change `op` makes given the entity stored now (`current`, with its ETag).
///
/// # Errors
/// `NotFound`, `AlreadyExists`, `PreconditionFailed`, or a limit the merged entity breaks;
/// in each case nothing may be written.
pub fn plan(table: &str, op: WriteOp, current: Option<&Entity>) -> Result<Change> {
    match (op, current) {
        (WriteOp::Insert(_), Some(cur)) => Err(Error::already_exists(
            table,
            &cur.partition_key,
            &cur.row_key,
        )),
        (WriteOp::Insert(e) | WriteOp::InsertOrReplace(e) | WriteOp::InsertOrMerge(e), None) => {
            Ok(Change::Put(e))
        }
        (op @ (WriteOp::Replace(..) | WriteOp::Merge(..) | WriteOp::Delete { .. }), None) => {
            let (pk, rk) = op.key();
            Err(Error::not_found(table, pk, rk))
        }
        (WriteOp::Replace(e, if_match), Some(cur)) => {
            check_condition(table, &if_match, cur)?;
            Ok(Change::Put(e))
        }
        (WriteOp::Merge(e, if_match), Some(cur)) => {
            check_condition(table, &if_match, cur)?;
            Ok(Change::Put(merged(cur, e)?))
        }
        (WriteOp::InsertOrReplace(e), Some(_)) => Ok(Change::Put(e)),
        (WriteOp::InsertOrMerge(e), Some(cur)) => Ok(Change::Put(merged(cur, e)?)),
        (WriteOp::Delete { if_match, .. }, Some(cur)) => {
            check_condition(table, &if_match, cur)?;
            Ok(Change::Remove)
        }
    }
}

/// A fresh version for a write: the store's Timestamp (now, to the microsecond) and a new
/// ETag that differs from every earlier one, even for two writes in the same microsecond.
pub fn new_version() -> (DateTime<Utc>, ETag) {
    let now = Utc::now();
    let ts = DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now);
    let unique = uuid::Uuid::new_v4().as_u128() as u64;
    let etag = ETag::new(format!(
        "W/\"datetime'{}'.{unique:016x}\"",
        ts.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    ));
    (ts, etag)
}

/// Stamps an entity with a fresh version and returns its ETag.
pub fn stamp(entity: &mut Entity) -> ETag {
    let (ts, etag) = new_version();
    entity.timestamp = Some(ts);
    entity.etag = Some(etag.clone());
    etag
}
