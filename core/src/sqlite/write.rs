//! Writing rows: one checked operation, or a checked batch in one transaction, on the
//! writer's connection, each written entity stamped with a fresh version.

use rusqlite::{Connection, TransactionBehavior, params};

use super::codec;
use super::query::read_stored;
use super::sql::{TableSql, is_constraint, sqlite_error, table_error};
use crate::apply::{self, Change};
use crate::error::{Error, Result};
use crate::model::{ETag, Entity};
use crate::store::{Batch, WriteOp};

fn write_entity(conn: &Connection, statement: &str, table: &str, entity: Entity) -> Result<ETag> {
    let mut stmt = conn.prepare_cached(statement).map_err(table_error(table))?;
    let mut buffer = Vec::with_capacity(1 + entity.properties.len() * 24);
    write_with(&mut stmt, table, &entity, &mut buffer)
}

/// The statement `text`, prepared once into `slot` and reused from there: a batch
/// looks its statements up once, not once per operation.
fn prepared<'c, 's>(
    conn: &'c Connection,
    slot: &'s mut Option<rusqlite::CachedStatement<'c>>,
    text: &str,
    table: &str,
) -> Result<&'s mut rusqlite::CachedStatement<'c>> {
    let stmt = match slot.take() {
        Some(stmt) => stmt,
        None => conn.prepare_cached(text).map_err(table_error(table))?,
    };
    Ok(slot.insert(stmt))
}

/// Writes `entity` with a fresh version through `stmt`, the table's insert or upsert,
/// its properties encoded in `buffer`.
fn write_with(
    stmt: &mut rusqlite::Statement<'_>,
    table: &str,
    entity: &Entity,
    buffer: &mut Vec<u8>,
) -> Result<ETag> {
    // The version goes to SQL, not onto the entity.
    let (ts, etag) = apply::new_version();
    codec::encode_into(&entity.properties, buffer);
    stmt.execute(params![
        entity.partition_key,
        entity.row_key,
        ts.timestamp_micros(),
        etag.as_str(),
        buffer.as_slice(),
    ])
    .map_err(|e| {
        if is_constraint(&e) {
            Error::already_exists(table, &entity.partition_key, &entity.row_key)
        } else {
            table_error(table)(e)
        }
    })?;
    Ok(etag)
}

/// Applies one checked write on `conn`, which is inside a write transaction unless the
/// operation is a single statement (insert, insert-or-replace).
pub(super) fn apply_op(
    conn: &Connection,
    sql: &TableSql,
    table: &str,
    op: WriteOp,
) -> Result<Option<ETag>> {
    match op {
        WriteOp::Insert(e) => write_entity(conn, &sql.insert, table, e).map(Some),
        WriteOp::InsertOrReplace(e) => write_entity(conn, &sql.upsert, table, e).map(Some),
        op => {
            let (pk, rk) = (op.key().0.to_owned(), op.key().1.to_owned());
            let current = read_stored(conn, sql, table, pk.clone(), rk.clone())?;
            match apply::plan(table, op, current.as_ref())? {
                Change::Put(e) => write_entity(conn, &sql.upsert, table, e).map(Some),
                Change::Remove => {
                    let mut stmt = conn
                        .prepare_cached(&sql.delete)
                        .map_err(table_error(table))?;
                    stmt.execute(params![pk, rk]).map_err(table_error(table))?;
                    Ok(None)
                }
            }
        }
    }
}

/// Applies a checked batch in one `BEGIN IMMEDIATE` transaction: all its operations or,
/// on the first that fails, none (an error other than a missing table names its index).
/// Returns each operation's new ETag (`None` for a delete) and the entities written,
/// which the caller frees.
pub(super) fn write_batch(
    conn: &mut Connection,
    sql: &TableSql,
    table: &str,
    batch: Batch,
) -> Result<(Vec<Option<ETag>>, Vec<Entity>)> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite_error)?;
    let mut etags = Vec::with_capacity(batch.len());
    let mut written = Vec::with_capacity(batch.len());
    {
        let (mut insert, mut upsert) = (None, None);
        let mut buffer = Vec::new();
        for (index, op) in batch.into_operations().into_iter().enumerate() {
            let applied = match op {
                WriteOp::Insert(e) => {
                    let etag = prepared(&tx, &mut insert, &sql.insert, table)
                        .and_then(|stmt| write_with(stmt, table, &e, &mut buffer));
                    written.push(e);
                    etag.map(Some)
                }
                WriteOp::InsertOrReplace(e) => {
                    let etag = prepared(&tx, &mut upsert, &sql.upsert, table)
                        .and_then(|stmt| write_with(stmt, table, &e, &mut buffer));
                    written.push(e);
                    etag.map(Some)
                }
                op => apply_op(&tx, sql, table, op),
            };
            match applied {
                Ok(etag) => etags.push(etag),
                // Dropping the transaction rolls back every earlier operation.
                Err(e) if e.kind() == crate::ErrorKind::TableNotFound => return Err(e),
                Err(e) => return Err(e.in_batch(index)),
            }
        }
    }
    tx.commit().map_err(sqlite_error)?;
    Ok((etags, written))
}
