//! Reading the SQLite queue's poison queues: pages (oldest or newest first, along the index
//! on (queue, seq), each body cut in SQL), the reasons and their groups (grouped and
//! filtered in SQL by the connection's `tablekit_reason_group` function), and one message
//! whole, each with the headers the queue records.

use chrono::DateTime;
use rusqlite::types::ValueRef;
use rusqlite::{OptionalExtension, params};

use super::super::poison::{Groups, RawText, shown_time, tally};
use super::super::{
    PoisonFilter, PoisonMessage, PoisonPage, PoisonQuery, ReasonGroup, UNDECODABLE_REASON_GROUP,
    operation_of, poison_queue,
};
use super::sql::{
    POISON_KINDS, POISON_KINDS_INDEXED, POISON_LIST, POISON_ONE, POISON_PAGE, POISON_PAGE_NEWEST,
    POISON_REASON_GROUPS, POISON_REASON_GROUPS_INDEXED, POISON_REASONS,
};
use super::{SqliteQueue, bytes, lossy};
use crate::error::Result;

/// The filter's parts as the statements' parameters: kind, id, reason, body, reason group,
/// the group of reasons that are not UTF-8.
fn filter_params(filter: &PoisonFilter) -> [Option<String>; 6] {
    [
        filter.kind.clone(),
        filter.id.clone(),
        filter.reason.clone(),
        filter.body.clone(),
        filter.reason_group.clone(),
        filter
            .undecodable_reason
            .then(|| UNDECODABLE_REASON_GROUP.to_owned()),
    ]
}

/// Whether a column holds text that is not UTF-8.
fn undecodable(value: ValueRef<'_>) -> bool {
    matches!(value, ValueRef::Text(b) | ValueRef::Blob(b) if std::str::from_utf8(b).is_err())
}

/// A poison row: seq, id, body (or its first bytes), whole size, reason, dequeue count,
/// visibility time (when it was poisoned), sending time, and — on a page — the operation's
/// kind and version read in SQL (else read from the body here).
fn poison_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<PoisonMessage> {
    let body = bytes(row.get_ref(2)?);
    let size: i64 = row.get(3)?;
    let count: i64 = row.get(5)?;
    let delivery_count = u32::try_from(count).unwrap_or(u32::MAX);
    // A poisoned row's visibility time is when it was poisoned.
    let poisoned_at = DateTime::from_timestamp_micros(row.get(6)?);
    let sent_at = DateTime::from_timestamp_micros(row.get(7)?);
    let operation = if row.as_ref().column_count() > 8 {
        match (row.get_ref(8)?, row.get_ref(9)?) {
            (kind @ (ValueRef::Text(_) | ValueRef::Blob(_)), ValueRef::Integer(version)) => {
                u32::try_from(version).ok().map(|v| (lossy(kind), v))
            }
            _ => None,
        }
    } else {
        operation_of(&body)
    };
    let mut headers = Vec::with_capacity(3);
    if let Some(at) = sent_at {
        headers.push(("sent-at".to_owned(), shown_time(at)));
    }
    if let Some(at) = poisoned_at {
        headers.push(("poisoned-at".to_owned(), shown_time(at)));
    }
    headers.push(("delivery-count".to_owned(), delivery_count.to_string()));
    let reason = row.get_ref(4)?;
    // A column another program wrote may hold bytes that are not UTF-8: kept exactly.
    let exact = |value: ValueRef<'_>| match value {
        ValueRef::Text(b) | ValueRef::Blob(b) => RawText::text_of(b).1,
        _ => None,
    };
    let raw = RawText {
        id: exact(row.get_ref(1)?),
        reason: exact(reason),
        headers: Vec::new(),
    };
    Ok(PoisonMessage {
        raw,
        id: lossy(row.get_ref(1)?),
        handle: row.get::<_, i64>(0)?.to_string(),
        body,
        size: usize::try_from(size).unwrap_or(0),
        operation,
        reason: lossy(reason),
        delivery_count,
        poisoned_at,
        reason_undecodable: undecodable(reason),
        sent_at,
        headers,
    })
}

impl SqliteQueue {
    /// Up to `limit` messages of the queue's poison queue, whole, oldest first.
    pub(super) async fn poison_rows(
        &self,
        queue: &str,
        limit: usize,
    ) -> Result<Vec<PoisonMessage>> {
        let poison = poison_queue(queue);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(move |c| {
            let mut statement = c.prepare_cached(POISON_LIST)?;
            let rows = statement.query_map(params![poison, limit], poison_row)?;
            rows.collect()
        })
        .await
    }

    /// One page of the queue's poison queue, read along the index in the query's order.
    pub(super) async fn read_poison_page(
        &self,
        queue: &str,
        query: &PoisonQuery,
    ) -> Result<PoisonPage> {
        let poison = poison_queue(queue);
        let newest_first = query.newest_first;
        // A cursor this queue did not give starts at the beginning (of either end).
        let after: i64 = query
            .after
            .as_deref()
            .and_then(|c| c.parse().ok())
            .unwrap_or(if newest_first { i64::MAX } else { 0 });
        let [kind, id, reason, body, group, undecodable] = filter_params(&query.filter);
        // One row more than the page holds tells whether a next page exists.
        let limit = i64::try_from(query.limit.saturating_add(1)).unwrap_or(i64::MAX);
        let preview = i64::try_from(query.preview).unwrap_or(i64::MAX);
        let wanted = query.limit;
        self.with(move |c| {
            let sql = if newest_first {
                POISON_PAGE_NEWEST
            } else {
                POISON_PAGE
            };
            let mut statement = c.prepare_cached(sql)?;
            let mut rows = statement.query(params![
                poison,
                after,
                kind,
                id,
                reason,
                body,
                group,
                undecodable,
                limit,
                preview
            ])?;
            let mut messages = Vec::new();
            let mut next = None;
            while let Some(row) = rows.next()? {
                if messages.len() == wanted {
                    next = messages.last().map(|m: &PoisonMessage| m.handle.clone());
                    break;
                }
                messages.push(poison_row(row)?);
            }
            Ok(PoisonPage { messages, next })
        })
        .await
    }

    /// The reasons of the poison messages `filter` passes, counted in SQL.
    pub(super) async fn read_poison_reasons(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<(String, u64)>> {
        let poison = poison_queue(queue);
        let [kind, id, reason, body, group, undecodable] = filter_params(filter);
        let counted = self
            .with(move |c| {
                let mut statement = c.prepare_cached(POISON_REASONS)?;
                let rows = statement.query_map(
                    params![poison, 0i64, kind, id, reason, body, group, undecodable],
                    |row| Ok((lossy(row.get_ref(0)?), row.get::<_, i64>(1)?)),
                )?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        // Reasons whose bytes differ only where they are not UTF-8 read the same: one line.
        Ok(tally(counted.into_iter().map(|(reason, n)| {
            (reason, u64::try_from(n).unwrap_or(0))
        })))
    }

    /// The operation kinds of the poison messages `filter` passes (its kind left out),
    /// counted in SQL.
    pub(super) async fn read_poison_kinds(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<(Option<String>, u64)>> {
        let poison = poison_queue(queue);
        let [_, id, reason, body, group, undecodable] = filter_params(filter);
        let kind: Option<String> = None;
        // Without text to find, the counts read the index alone.
        let indexed = id.is_none() && reason.is_none() && body.is_none();
        let counted = self
            .with(move |c| {
                let read = |row: &rusqlite::Row<'_>| {
                    let kind = match row.get_ref(0)? {
                        ValueRef::Null => None,
                        value => Some(lossy(value)),
                    };
                    Ok((kind, row.get::<_, i64>(1)?))
                };
                if indexed {
                    let mut statement = c.prepare_cached(POISON_KINDS_INDEXED)?;
                    let rows = statement.query_map(params![poison, group, undecodable], read)?;
                    return rows.collect::<rusqlite::Result<Vec<_>>>();
                }
                let mut statement = c.prepare_cached(POISON_KINDS)?;
                let rows = statement.query_map(
                    params![poison, 0i64, kind, id, reason, body, group, undecodable],
                    read,
                )?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        Ok(counted
            .into_iter()
            .map(|(kind, n)| (kind, u64::try_from(n).unwrap_or(0)))
            .collect())
    }

    /// The reason groups of the poison messages `filter` passes, grouped in SQL.
    pub(super) async fn read_poison_reason_groups(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<ReasonGroup>> {
        let poison = poison_queue(queue);
        let [kind, id, reason, body, group, undecodable] = filter_params(filter);
        // Without text to find, the counts read the index alone.
        let indexed = id.is_none() && reason.is_none() && body.is_none();
        let counted = self
            .with(move |c| {
                let read = |row: &rusqlite::Row<'_>| {
                    Ok((
                        lossy(row.get_ref(0)?),
                        row.get::<_, i64>(1)?,
                        lossy(row.get_ref(2)?),
                    ))
                };
                if indexed {
                    let mut statement = c.prepare_cached(POISON_REASON_GROUPS_INDEXED)?;
                    let rows =
                        statement.query_map(params![poison, kind, group, undecodable], read)?;
                    return rows.collect::<rusqlite::Result<Vec<_>>>();
                }
                let mut statement = c.prepare_cached(POISON_REASON_GROUPS)?;
                let rows = statement.query_map(
                    params![poison, 0i64, kind, id, reason, body, group, undecodable],
                    read,
                )?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        let everything = PoisonFilter::new();
        let mut groups = Groups::new(&everything);
        for (group, n, example) in counted {
            groups.add(group, u64::try_from(n).unwrap_or(0), example);
        }
        Ok(groups.finish())
    }

    /// One poison message whole, by its row number.
    pub(super) async fn poison_row_of(
        &self,
        queue: &str,
        handle: &str,
    ) -> Result<Option<PoisonMessage>> {
        let poison = poison_queue(queue);
        let Ok(seq) = handle.parse::<i64>() else {
            return Ok(None);
        };
        self.with(move |c| {
            c.prepare_cached(POISON_ONE)?
                .query_row(params![poison, seq], poison_row)
                .optional()
        })
        .await
    }
}
