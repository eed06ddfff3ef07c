//! Log data in blobs (the design guide's answer to the log-data anti-pattern): a buffered
//! writer stores newline-delimited records in blobs named
//! `<prefix>/yyyy/MM/dd/HHmm/000001.log`, flushed when the buffer reaches a size or an
//! age, each with a `.meta` companion holding its first and last timestamps and record
//! count; a reader returns the records of a time range from the blobs whose span meets
//! it, found by listing the days' prefixes.
//!
//! A record is a UTC timestamp and one line of text (`2026-11-22T10:00:00.000000Z\t…`);
//! text holding a newline is refused.
//!
//! ```
//! use chrono::{Duration, TimeZone, Utc};
//! use tablekit_core::blob::BlobStore;
//! use tablekit_patterns::log_blobs::{LogWriter, read_range};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let blobs = BlobStore::memory();
//! let mut log = LogWriter::new(blobs.clone(), "app", 64 * 1024, std::time::Duration::from_secs(60));
//! let t0 = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
//! for n in 0..10 {
//!     log.append(t0 + Duration::seconds(n), &format!("event {n}")).await?;
//! }
//! let name = log.flush().await?.expect("written");
//! assert_eq!(name, "app/2026/11/22/1000/000001.log");
//! let some = read_range(&blobs, "app", t0 + Duration::seconds(2), t0 + Duration::seconds(4)).await?;
//! assert_eq!(some.len(), 3);
//! # Ok::<_, tablekit_patterns::Error>(())
//! # }).unwrap();
//! ```

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use tablekit_core::blob::BlobStore;

use crate::error::{Error, Result};

/// What a log blob's `.meta` companion holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogBlobMeta {
    /// The first record's timestamp.
    pub first: DateTime<Utc>,
    /// The last record's timestamp.
    pub last: DateTime<Utc>,
    /// How many records the blob holds.
    pub records: usize,
}

/// A buffered writer of log records into blobs.
#[derive(Debug)]
pub struct LogWriter {
    blobs: BlobStore,
    prefix: String,
    max_bytes: usize,
    max_age: Duration,
    buffer: Vec<(DateTime<Utc>, String)>,
    bytes: usize,
    opened: Option<std::time::Instant>,
}

fn line(at: DateTime<Utc>, text: &str) -> String {
    format!(
        "{}\t{text}\n",
        at.to_rfc3339_opts(SecondsFormat::Micros, true)
    )
}

impl LogWriter {
    /// A writer under `prefix` (a folder name, without a trailing `/`), flushing at
    /// `max_bytes` of buffered records or when the oldest buffered record is `max_age` old.
    pub fn new(blobs: BlobStore, prefix: &str, max_bytes: usize, max_age: Duration) -> Self {
        LogWriter {
            blobs,
            prefix: prefix.trim_end_matches('/').to_owned(),
            max_bytes: max_bytes.max(1),
            max_age,
            buffer: Vec::new(),
            bytes: 0,
            opened: None,
        }
    }

    /// Buffers a record; flushes when the buffer is full or old. Returns the blob written,
    /// if this call flushed.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for text holding a newline; the blob store's errors.
    pub async fn append(&mut self, at: DateTime<Utc>, text: &str) -> Result<Option<String>> {
        if text.contains('\n') || text.contains('\r') {
            return Err(Error::Unsupported(
                "a log record is one line: its text cannot hold a newline".to_owned(),
            ));
        }
        // A blob holds one UTC day at most, so a reader looks back one day only.
        let other_day = self
            .buffer
            .first()
            .is_some_and(|(first, _)| first.date_naive() != at.date_naive());
        let mut flushed = None;
        if other_day {
            flushed = self.flush().await?;
        }
        self.bytes += line(at, text).len();
        self.buffer.push((at, text.to_owned()));
        let opened = *self.opened.get_or_insert_with(std::time::Instant::now);
        if self.bytes >= self.max_bytes || opened.elapsed() >= self.max_age {
            return self.flush().await;
        }
        Ok(flushed)
    }

    /// Writes the buffered records to a new blob (and its `.meta`), if there are any.
    ///
    /// # Errors
    /// The blob store's errors; the records stay buffered.
    pub async fn flush(&mut self) -> Result<Option<String>> {
        if self.buffer.is_empty() {
            return Ok(None);
        }
        let first = self
            .buffer
            .iter()
            .map(|(t, _)| *t)
            .min()
            .unwrap_or_else(Utc::now);
        let last = self.buffer.iter().map(|(t, _)| *t).max().unwrap_or(first);
        let folder = format!("{}/{}/", self.prefix, first.format("%Y/%m/%d/%H%M"));
        let body: String = self.buffer.iter().map(|(t, s)| line(*t, s)).collect();
        let meta = serde_json::to_vec(&LogBlobMeta {
            first,
            last,
            records: self.buffer.len(),
        })
        .map_err(|e| Error::malformed("log blob metadata", e))?;
        let taken = self
            .blobs
            .list(&folder)
            .await?
            .iter()
            .filter_map(|b| {
                b.name
                    .strip_prefix(&folder)?
                    .strip_suffix(".log")?
                    .parse::<u64>()
                    .ok()
            })
            .max()
            .unwrap_or(0)
            .min(999_000);
        for n in taken + 1..taken + 1000 {
            let name = format!("{folder}{n:06}.log");
            // The log first, then its span: a writer that loses the name to another
            // never touches the winner's metadata; a log without metadata is read whole.
            if self
                .blobs
                .put_if_absent(&name, body.clone().into_bytes())
                .await?
            {
                self.blobs
                    .put(&format!("{name}.meta"), meta.clone())
                    .await?;
                self.buffer.clear();
                self.bytes = 0;
                self.opened = None;
                return Ok(Some(name));
            }
        }
        Err(Error::Contention {
            what: format!("log blob names in {folder}"),
            attempts: 999,
        })
    }
}

/// The records written from `from` to `to` (inclusive) under `prefix`, in time order.
///
/// # Errors
/// The blob store's errors; [`Error::Malformed`] for a blob that does not read.
pub async fn read_range(
    blobs: &BlobStore,
    prefix: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<(DateTime<Utc>, String)>> {
    let prefix = prefix.trim_end_matches('/');
    let mut out = Vec::new();
    // A blob is filed under its first record's minute: start a day early for spans that
    // began before `from`.
    let mut day = from
        .checked_sub_signed(chrono::Duration::days(1))
        .unwrap_or(from)
        .date_naive();
    while day <= to.date_naive() {
        let folder = format!("{prefix}/{}/", day.format("%Y/%m/%d"));
        for info in blobs.list(&folder).await? {
            let log = info.name.as_str();
            if !log.ends_with(".log") {
                continue;
            }
            if let Some(meta_bytes) = blobs.get(&format!("{log}.meta")).await? {
                let meta: LogBlobMeta = serde_json::from_slice(&meta_bytes)
                    .map_err(|e| Error::malformed(format!("blob {log}.meta"), e))?;
                if meta.last < from || meta.first > to {
                    continue;
                }
            }
            let Some(body) = blobs.get(log).await? else {
                continue; // metadata of a flush that never wrote its log
            };
            let text =
                String::from_utf8(body).map_err(|e| Error::malformed(format!("blob {log}"), e))?;
            for record in text.lines() {
                let (stamp, rest) = record.split_once('\t').ok_or_else(|| {
                    Error::malformed(format!("blob {log}"), "a record without a timestamp")
                })?;
                let at = DateTime::parse_from_rfc3339(stamp)
                    .map_err(|e| Error::malformed(format!("blob {log}"), e))?
                    .with_timezone(&Utc);
                if at >= from && at <= to {
                    out.push((at, rest.to_owned()));
                }
            }
        }
        let Some(next) = day.succ_opt() else { break };
        day = next;
    }
    out.sort_by_key(|(at, _)| *at);
    Ok(out)
}
