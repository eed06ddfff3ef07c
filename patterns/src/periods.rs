//! Tables per period: the high-volume delete pattern (a table per day or month, so old
//! data goes by deleting whole tables) and the hot/cold tables of the Tablestore guide
//! (the current period's table takes the writes, reads span periods, old periods can be
//! exported to the blob store before they are dropped).
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use tablekit_patterns::periods::{Period, PeriodTables};
//!
//! let logs = PeriodTables::new("Logs", Period::Day).unwrap();
//! let at = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
//! assert_eq!(logs.table_for(at), "Logs20261122");
//! ```

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};
use futures::{Stream, TryStreamExt};
use tablekit_core::blob::BlobStore;
use tablekit_core::limits;
use tablekit_core::typed::{Record, Stored, Table};
use tablekit_core::{ErrorKind, Query, TableStore};

use sha2::{Digest, Sha256};

use crate::cursor::{Cursor, CursorPage, Position};
use crate::error::{Error, Result};

/// The length of a period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    /// One table per UTC day (`<base>YYYYMMDD`).
    Day,
    /// One table per UTC month (`<base>YYYYMM`).
    Month,
}

/// The tables of one logical table, one per period.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeriodTables {
    base: String,
    period: Period,
}

impl PeriodTables {
    /// Tables named `base` followed by the period.
    ///
    /// # Errors
    /// [`Error::Unsupported`] when `base` plus a period is not a valid table name.
    pub fn new(base: &str, period: Period) -> Result<Self> {
        limits::check_table_name(&format!("{base}20000101")).map_err(tablekit_core::Error::from)?;
        if base.ends_with(|c: char| c.is_ascii_digit()) {
            return Err(Error::Unsupported(format!(
                "`{base}` ends with a digit: its period tables could not be told apart"
            )));
        }
        Ok(PeriodTables {
            base: base.to_owned(),
            period,
        })
    }

    /// The table of the period holding `at`.
    pub fn table_for(&self, at: DateTime<Utc>) -> String {
        match self.period {
            Period::Day => format!("{}{}", self.base, at.format("%Y%m%d")),
            Period::Month => format!("{}{}", self.base, at.format("%Y%m")),
        }
    }

    /// The start of the period a table holds, if it is one of these tables.
    pub fn period_of(&self, table: &str) -> Option<NaiveDate> {
        let digits = table.strip_prefix(&self.base)?;
        match (self.period, digits.len()) {
            (Period::Day, 8) => NaiveDate::parse_from_str(digits, "%Y%m%d").ok(),
            (Period::Month, 6) => NaiveDate::parse_from_str(&format!("{digits}01"), "%Y%m%d").ok(),
            _ => None,
        }
    }

    fn next(&self, start: NaiveDate) -> Option<NaiveDate> {
        match self.period {
            Period::Day => start.succ_opt(),
            Period::Month => {
                let (y, m) = if start.month() == 12 {
                    (start.year() + 1, 1)
                } else {
                    (start.year(), start.month() + 1)
                };
                NaiveDate::from_ymd_opt(y, m, 1)
            }
        }
    }

    /// The tables of every period from `from` to `to`, oldest first (whether they exist
    /// or not).
    pub fn tables_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<String> {
        let first = match self.period {
            Period::Day => from.date_naive(),
            Period::Month => from.date_naive().with_day(1).unwrap_or(from.date_naive()),
        };
        let mut tables = Vec::new();
        let mut at = Some(first);
        while let Some(start) = at.filter(|s| *s <= to.date_naive()) {
            tables.push(format!(
                "{}{}",
                self.base,
                match self.period {
                    Period::Day => start.format("%Y%m%d").to_string(),
                    Period::Month => start.format("%Y%m").to_string(),
                }
            ));
            at = self.next(start);
        }
        tables
    }

    /// The existing tables, oldest first.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn existing<S: TableStore>(&self, store: &S) -> Result<Vec<String>> {
        let mut tables: Vec<String> = store
            .list_tables(&self.base)
            .await?
            .into_iter()
            .filter(|t| self.period_of(t).is_some())
            .collect();
        tables.sort_by_key(|t| self.period_of(t));
        Ok(tables)
    }

    /// The typed view of the table of the period holding `at`, created if needed: where
    /// writes at `at` go.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn table_at<R: Record, S: TableStore + Clone>(
        &self,
        store: &S,
        at: DateTime<Utc>,
    ) -> Result<Table<R, S>> {
        let table = Table::<R, S>::options()
            .name(self.table_for(at))
            .build(store.clone());
        table.create().await?;
        Ok(table)
    }

    /// Runs a query on the tables of every period from `from` to `to` and returns the
    /// results period by period, oldest first (missing tables count as empty), collected:
    /// for results that fit in memory; [`query_page`](Self::query_page) and
    /// [`query_stream`](Self::query_stream) page through any size.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn query<R: Record, S: TableStore + Clone>(
        &self,
        store: &S,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        query: Query,
    ) -> Result<Vec<Stored<R>>> {
        self.query_stream(store, from, to, query, 1000)
            .try_collect()
            .await
    }

    /// One page of at most `page_size` (1 ..= 1000) results of `query` over the tables of
    /// every period from `from` to `to`, oldest table first, each in key order, and the
    /// cursor that resumes the read after it (`None` at the end).
    ///
    /// # Errors
    /// The store's errors; [`Error::Unsupported`] for a cursor of another read.
    pub async fn query_page<R: Record, S: TableStore + Clone>(
        &self,
        store: &S,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        query: Query,
        page_size: usize,
        cursor: Option<&Cursor>,
    ) -> Result<CursorPage<Stored<R>>> {
        let tables = self.tables_between(from, to);
        let read = format!("periods-{}", self.base);
        let mut positions = match cursor {
            Some(cursor) => cursor.positions_for(&read, tables.len())?.to_vec(),
            None => vec![Position::Start; tables.len()],
        };
        let size = page_size.clamp(1, 1000);
        let mut items: Vec<Stored<R>> = Vec::with_capacity(size);
        for (i, name) in tables.iter().enumerate() {
            let table = Table::<R, S>::options()
                .name(name.clone())
                .build(store.clone());
            let mut next = positions[i].resume(query.clone());
            while let Some(page_query) = next.take() {
                let wanted = size - items.len();
                if wanted == 0 {
                    break;
                }
                let (rows, more) = match table.query_page(page_query.clone().top(wanted)).await {
                    Ok(page) => page,
                    Err(e) if e.kind() == ErrorKind::TableNotFound => (Vec::new(), None),
                    Err(e) => return Err(e),
                };
                if let Some(last) = rows.last() {
                    positions[i] =
                        Position::After(last.partition_key.clone(), last.row_key.clone());
                }
                items.extend(rows);
                match more {
                    Some(token) => next = Some(page_query.continue_from(Some(token))),
                    None => positions[i] = Position::Done,
                }
            }
            if items.len() == size {
                break;
            }
        }
        let cursor = positions
            .iter()
            .any(|p| *p != Position::Done)
            .then(|| Cursor::new(read, positions));
        Ok(CursorPage { items, cursor })
    }

    /// Every result of `query` over the tables of every period from `from` to `to`, in
    /// the order of [`query_page`](Self::query_page), read a page of `page_size` at a time.
    pub fn query_stream<'a, R: Record + Send + 'a, S: TableStore + Clone + 'a>(
        &'a self,
        store: &'a S,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        query: Query,
        page_size: usize,
    ) -> impl Stream<Item = Result<Stored<R>>> + Send + 'a {
        crate::cursor::stream_pages(move |cursor| {
            let query = query.clone();
            async move {
                self.query_page(store, from, to, query, page_size, cursor.as_ref())
                    .await
            }
        })
    }

    /// Deletes the tables of every period that ended more than `retention` before `now`
    /// and returns their names: the data goes in one call per table, not per entity.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn drop_older_than<S: TableStore>(
        &self,
        store: &S,
        retention: Duration,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>> {
        if retention < Duration::zero() {
            return Err(Error::Unsupported(
                "a retention cannot be negative".to_owned(),
            ));
        }
        let cutoff = now
            .checked_sub_signed(retention)
            .unwrap_or(DateTime::<Utc>::MIN_UTC)
            .date_naive();
        let mut dropped = Vec::new();
        for table in self.existing(store).await? {
            let Some(start) = self.period_of(&table) else {
                continue;
            };
            let ended = self.next(start).is_some_and(|end| end <= cutoff);
            if ended {
                match store.delete_table(&table).await {
                    Ok(()) => dropped.push(table),
                    Err(e) if e.kind() == ErrorKind::TableNotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(dropped)
    }

    /// Hot/cold: writes every entity of a period's table to the blob store as JSON lines
    /// (`cold/<table>-<time>.jsonl`), page by page into a blob written in parts, checks
    /// the blob by streaming it back (its length, line count and SHA-256), then deletes
    /// the table. Returns the blob name and the number of entities. Memory holds a page
    /// of entities and a few parts, whatever the table's size.
    ///
    /// # Errors
    /// The store's and blob store's errors; [`Error::Malformed`] when the blob does not
    /// read back as written (the table is then kept).
    pub async fn export_to_blobs<S: TableStore>(
        &self,
        store: &S,
        table: &str,
        blobs: &BlobStore,
    ) -> Result<(String, usize)> {
        self.export_to_blobs_with_progress(store, table, blobs, |_| {})
            .await
    }

    /// [`export_to_blobs`](Self::export_to_blobs), calling `progress(entities_written)`
    /// after each page.
    ///
    /// # Errors
    /// As [`export_to_blobs`](Self::export_to_blobs).
    pub async fn export_to_blobs_with_progress<S: TableStore>(
        &self,
        store: &S,
        table: &str,
        blobs: &BlobStore,
        mut progress: impl FnMut(usize),
    ) -> Result<(String, usize)> {
        // Export a period no longer written: writes after the read below are not in it.
        let name = format!(
            "cold/{table}-{}.jsonl",
            Utc::now().format("%Y%m%dT%H%M%S%.6f")
        );
        let mut writer = blobs.writer(&name).await?;
        let written = write_lines(store, table, &mut writer, &mut progress).await;
        let (count, bytes, digest) = match written {
            Ok(summary) => summary,
            Err(e) => {
                let _ = writer.abort().await;
                return Err(e);
            }
        };
        writer.finish().await?;
        let back = blobs.read_stream(&name).await?;
        let mut read = (0usize, 0usize, Sha256::new());
        if let Some(chunks) = back {
            let mut chunks = std::pin::pin!(chunks);
            while let Some(chunk) = chunks.try_next().await? {
                read.0 += chunk.iter().filter(|b| **b == b'\n').count();
                read.1 += chunk.len();
                read.2.update(&chunk);
            }
        }
        if (read.0, read.1, read.2.finalize().to_vec()) != (count, bytes, digest) {
            return Err(Error::malformed(
                format!("blob {name}"),
                "it does not read back as written; the table is kept",
            ));
        }
        store.delete_table(table).await?;
        Ok((name, count))
    }
}

/// Writes a table's entities as JSON lines, page by page: (lines, bytes, SHA-256).
async fn write_lines<S: TableStore>(
    store: &S,
    table: &str,
    writer: &mut tablekit_core::blob::BlobWriter,
    progress: &mut impl FnMut(usize),
) -> Result<(usize, usize, Vec<u8>)> {
    let mut rows = std::pin::pin!(store.query_stream(table, Query::new()));
    let (mut count, mut bytes, mut digest) = (0usize, 0usize, Sha256::new());
    let mut line = Vec::new();
    while let Some(row) = rows.try_next().await? {
        line.clear();
        serde_json::to_writer(&mut line, &row).map_err(|source| Error::Encode {
            what: format!("an entity of {table}"),
            source,
        })?;
        line.push(b'\n');
        digest.update(&line);
        bytes += line.len();
        count += 1;
        writer.write(&line).await?;
        if count % 1000 == 0 {
            progress(count);
        }
    }
    progress(count);
    Ok((count, bytes, digest.finalize().to_vec()))
}
