//! Reading rows: one entity by its keys, and the pages of a query, bounded by its key
//! range so SQLite seeks the primary key, its filter read straight from the stored rows.

use chrono::DateTime;
use rusqlite::{Connection, OptionalExtension, params};

use super::codec;
use super::sql::{TableSql, table_error};
use crate::error::{Error, Result};
use crate::model::{ETag, Entity, Value};
use crate::query::{Page, PageCollector, Query, QueryClass};

/// The stored entity at (`pk`, `rk`), its keys moved in from the caller's and its
/// properties decoded straight from the row's BLOB.
pub(super) fn read_stored(
    conn: &Connection,
    sql: &TableSql,
    table: &str,
    pk: String,
    rk: String,
) -> Result<Option<Entity>> {
    let mut stmt = conn
        .prepare_cached(&sql.select_one)
        .map_err(table_error(table))?;
    let found = stmt
        .query_row(params![pk, rk], |row| {
            let ts: i64 = row.get(0)?;
            let etag: String = row.get(1)?;
            let properties = codec::decode(row.get_ref(2)?.as_blob()?);
            Ok((ts, etag, properties))
        })
        .optional()
        .map_err(table_error(table))?;
    found
        .map(|(ts, etag, properties)| {
            Ok(Entity {
                partition_key: pk,
                row_key: rk,
                timestamp: DateTime::from_timestamp_micros(ts),
                etag: Some(ETag::new(etag)),
                properties: properties?,
            })
        })
        .transpose()
}

/// Adds `column op ?` for a bound, with `incl`/`excl` the SQL for each kind of bound.
fn push_bound(
    conds: &mut Vec<&'static str>,
    args: &mut Vec<String>,
    bound: &std::ops::Bound<String>,
    incl: &'static str,
    excl: &'static str,
) {
    use std::ops::Bound;
    match bound {
        Bound::Included(v) => {
            conds.push(incl);
            args.push(v.clone());
        }
        Bound::Excluded(v) => {
            conds.push(excl);
            args.push(v.clone());
        }
        Bound::Unbounded => {}
    }
}

/// The SELECT of one query page and its parameters, bounded by the query's key range and
/// its continuation so SQLite seeks the primary key instead of scanning.
pub(super) fn page_sql(sql: &TableSql, query: &Query) -> (String, Vec<String>) {
    use std::cmp::Ordering;
    let range = query.key_range();
    let mut conds: Vec<&'static str> = Vec::new();
    let mut args: Vec<String> = Vec::new();
    if let Some(pk) = range.partition() {
        conds.push("pk = ?");
        args.push(pk.to_owned());
        if let QueryClass::Point { row_key, .. } = range.class() {
            conds.push("rk = ?");
            args.push(row_key);
        } else {
            push_bound(&mut conds, &mut args, &range.rk_start, "rk >= ?", "rk > ?");
            push_bound(&mut conds, &mut args, &range.rk_end, "rk <= ?", "rk < ?");
        }
        if let Some(token) = &query.continuation {
            match token.next_partition_key().cmp(pk) {
                Ordering::Greater => conds.push("0"),
                Ordering::Equal => {
                    conds.push("rk >= ?");
                    args.push(token.next_row_key().to_owned());
                }
                Ordering::Less => {}
            }
        }
    } else {
        push_bound(&mut conds, &mut args, &range.pk_start, "pk >= ?", "pk > ?");
        push_bound(&mut conds, &mut args, &range.pk_end, "pk <= ?", "pk < ?");
        if let Some(token) = &query.continuation {
            conds.push("(pk, rk) >= (?, ?)");
            args.push(token.next_partition_key().to_owned());
            args.push(token.next_row_key().to_owned());
        }
    }
    let mut text = format!("SELECT pk, rk, ts, etag, props FROM {}", sql.name);
    if !conds.is_empty() {
        text.push_str(" WHERE ");
        text.push_str(&conds.join(" AND "));
    }
    text.push_str(" ORDER BY pk, rk");
    (text, args)
}

/// A stored row as SQLite hands it over, borrowed: the filter reads its keys and the
/// properties it names from here, and the entity is built only for a row the page takes.
struct StoredRow<'a> {
    pk: &'a str,
    rk: &'a str,
    ts: i64,
    etag: &'a str,
    props: &'a [u8],
    /// The first error met reading a property for the filter.
    error: std::cell::RefCell<Option<Error>>,
}

impl crate::filter::Fields for StoredRow<'_> {
    fn partition_key(&self) -> &str {
        self.pk
    }

    fn row_key(&self) -> &str {
        self.rk
    }

    fn timestamp(&self) -> Option<DateTime<chrono::Utc>> {
        DateTime::from_timestamp_micros(self.ts)
    }

    fn property_is(&self, name: &str, test: impl FnOnce(&Value) -> bool) -> bool {
        match codec::find(self.props, name) {
            Ok(value) => value.as_ref().is_some_and(test),
            Err(e) => {
                self.error.borrow_mut().get_or_insert(e);
                false
            }
        }
    }
}

impl StoredRow<'_> {
    fn entity(&self) -> Result<Entity> {
        Ok(Entity {
            partition_key: self.pk.to_owned(),
            row_key: self.rk.to_owned(),
            timestamp: DateTime::from_timestamp_micros(self.ts),
            etag: Some(ETag::new(self.etag)),
            properties: codec::decode(self.props)?,
        })
    }
}

pub(super) fn query_page(
    conn: &Connection,
    sql: &TableSql,
    table: &str,
    query: &Query,
) -> Result<Page> {
    let (text, args) = page_sql(sql, query);
    let mut stmt = conn.prepare_cached(&text).map_err(table_error(table))?;
    let mut rows = stmt
        .query(rusqlite::params_from_iter(args.iter()))
        .map_err(table_error(table))?;
    let mut collector = PageCollector::new(query);
    while let Some(row) = rows.next().map_err(table_error(table))? {
        let text = |i| -> Result<&str> {
            row.get_ref(i)
                .and_then(|v| v.as_str().map_err(Into::into))
                .map_err(table_error(table))
        };
        let stored = StoredRow {
            pk: text(0)?,
            rk: text(1)?,
            ts: row.get(2).map_err(table_error(table))?,
            etag: text(3)?,
            props: row
                .get_ref(4)
                .and_then(|v| v.as_blob().map_err(Into::into))
                .map_err(table_error(table))?,
            error: std::cell::RefCell::new(None),
        };
        let offered = collector.offer_fields(&stored, || stored.entity())?;
        // A row the filter could not read is an error, not a row left out.
        if let Some(e) = stored.error.into_inner() {
            return Err(e);
        }
        if offered.is_break() {
            break;
        }
    }
    Ok(collector.finish())
}
