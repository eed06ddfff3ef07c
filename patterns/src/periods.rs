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
use futures::TryStreamExt;
use tablekit_core::blob::BlobStore;
use tablekit_core::limits;
use tablekit_core::typed::{Record, Stored, Table};
use tablekit_core::{ErrorKind, Query, TableStore};

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
        let table = Table::<R, S>::new(store.clone()).with_name(self.table_for(at));
        table.create().await?;
        Ok(table)
    }

    /// Runs a query on the tables of every period from `from` to `to` and returns the
    /// results period by period, oldest first (missing tables count as empty).
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
        let mut out = Vec::new();
        for name in self.tables_between(from, to) {
            let table = Table::<R, S>::new(store.clone()).with_name(name);
            match table.query(query.clone()).await {
                Ok(rows) => out.extend(rows),
                Err(e) if e.kind() == ErrorKind::TableNotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
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
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(dropped)
    }

    /// Hot/cold: writes every entity of a period's table to the blob store as JSON lines
    /// (`cold/<table>.jsonl`), checks the blob, then deletes the table. Returns the blob
    /// name and the number of entities.
    ///
    /// # Errors
    /// The store's and blob store's errors; [`Error::Malformed`] when the blob does not
    /// read back whole (the table is then kept).
    pub async fn export_to_blobs<S: TableStore>(
        &self,
        store: &S,
        table: &str,
        blobs: &BlobStore,
    ) -> Result<(String, usize)> {
        let rows: Vec<tablekit_core::Entity> = store
            .query_stream(table, Query::new())
            .try_collect()
            .await?;
        let mut body = Vec::new();
        for row in &rows {
            serde_json::to_writer(&mut body, row)
                .map_err(|e| Error::malformed(format!("entity of {table}"), e))?;
            body.push(b'\n');
        }
        // Export a period no longer written: writes after the read below are not in it.
        let name = format!(
            "cold/{table}-{}.jsonl",
            Utc::now().format("%Y%m%dT%H%M%S%.6f")
        );
        blobs.put(&name, body.clone()).await?;
        if blobs.get(&name).await?.as_deref() != Some(body.as_slice()) {
            return Err(Error::malformed(
                format!("blob {name}"),
                "it does not read back as written; the table is kept",
            ));
        }
        store.delete_table(table).await?;
        Ok((name, rows.len()))
    }
}
