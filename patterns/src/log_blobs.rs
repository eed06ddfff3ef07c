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

/// The records written from `from` to `to` (inclusive) under `prefix`, in time order,
/// collected: for ranges that fit in memory; [`read_range_stream`] reads any range.
///
/// # Errors
/// The blob store's errors; [`Error::Malformed`] for a blob that does not read.
pub async fn read_range(
    blobs: &BlobStore,
    prefix: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<(DateTime<Utc>, String)>> {
    use futures::TryStreamExt;
    read_range_stream(blobs, prefix, from, to)
        .try_collect()
        .await
}

/// The records written from `from` to `to` (inclusive) under `prefix`, in time order, as
/// a stream: day folders are listed as the read reaches them and a blob is read when the
/// read reaches its first record, so memory holds the blobs whose spans overlap the
/// current instant, never the range.
pub fn read_range_stream<'a>(
    blobs: &'a BlobStore,
    prefix: &'a str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> impl futures::Stream<Item = Result<(DateTime<Utc>, String)>> + Send + 'a {
    // A blob is filed under its first record's minute: start a day early for spans that
    // began before `from`.
    let first_day = from
        .checked_sub_signed(chrono::Duration::days(1))
        .unwrap_or(from)
        .date_naive();
    let reader = RangeReader {
        blobs,
        prefix: prefix.trim_end_matches('/'),
        from,
        to,
        next_day: Some(first_day),
        pending: Vec::new(),
        open: std::collections::BinaryHeap::new(),
        opened: 0,
    };
    futures::stream::try_unfold(reader, |mut reader| async move {
        Ok(reader.next().await?.map(|record| (record, reader)))
    })
}

/// A blob listed but not read yet: when its first record was written.
struct Listed {
    first: DateTime<Utc>,
    name: String,
}

/// The next record of a blob being read, ordered for the merge (the earliest first).
struct Open {
    at: DateTime<Utc>,
    blob: usize,
    rest: std::collections::VecDeque<(DateTime<Utc>, String)>,
    text: String,
}

impl PartialEq for Open {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.blob) == (other.at, other.blob)
    }
}
impl Eq for Open {}
impl PartialOrd for Open {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Open {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Reversed: the heap pops its greatest, the read wants the earliest.
        (other.at, other.blob).cmp(&(self.at, self.blob))
    }
}

struct RangeReader<'a> {
    blobs: &'a BlobStore,
    prefix: &'a str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    /// The next day folder to list.
    next_day: Option<chrono::NaiveDate>,
    /// Listed blobs, the earliest last (popped first).
    pending: Vec<Listed>,
    open: std::collections::BinaryHeap<Open>,
    opened: usize,
}

impl RangeReader<'_> {
    /// The earliest instant a record not yet returned can have, as far as is known.
    fn horizon(&self) -> Option<DateTime<Utc>> {
        let open = self.open.peek().map(|o| o.at);
        let listed = self.pending.last().map(|l| l.first);
        match (open, listed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    async fn next(&mut self) -> Result<Option<(DateTime<Utc>, String)>> {
        loop {
            // Every blob that may hold an earlier record is listed first: a day folder
            // holds the blobs whose first record is on that day.
            if let Some(day) = self.next_day
                && day <= self.to.date_naive()
                && self.horizon().is_none_or(|t| day <= t.date_naive())
            {
                self.list(day).await?;
                self.next_day = day.succ_opt();
                continue;
            }
            // A listed blob whose first record is due is read now.
            let due = match (self.pending.last(), self.open.peek()) {
                (Some(listed), Some(open)) => listed.first <= open.at,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if due {
                if let Some(listed) = self.pending.pop() {
                    self.read(listed).await?;
                }
                continue;
            }
            let Some(mut head) = self.open.pop() else {
                return Ok(None);
            };
            let record = (head.at, std::mem::take(&mut head.text));
            if let Some((at, text)) = head.rest.pop_front() {
                head.at = at;
                head.text = text;
                self.open.push(head);
            }
            return Ok(Some(record));
        }
    }

    async fn list(&mut self, day: chrono::NaiveDate) -> Result<()> {
        let folder = format!("{}/{}/", self.prefix, day.format("%Y/%m/%d"));
        for info in self.blobs.list(&folder).await? {
            let log = info.name;
            if !log.ends_with(".log") {
                continue;
            }
            let first = match self.blobs.get(&format!("{log}.meta")).await? {
                Some(meta_bytes) => {
                    let meta: LogBlobMeta = serde_json::from_slice(&meta_bytes)
                        .map_err(|e| Error::malformed(format!("blob {log}.meta"), e))?;
                    if meta.last < self.from || meta.first > self.to {
                        continue;
                    }
                    meta.first
                }
                // No metadata: the start of its day bounds its first record.
                None => day.and_hms_opt(0, 0, 0).map_or(self.from, |t| t.and_utc()),
            };
            self.pending.push(Listed { first, name: log });
        }
        self.pending
            .sort_by_key(|listed| std::cmp::Reverse(listed.first));
        Ok(())
    }

    async fn read(&mut self, listed: Listed) -> Result<()> {
        let log = listed.name;
        let Some(body) = self.blobs.get(&log).await? else {
            return Ok(()); // metadata of a flush that never wrote its log
        };
        let text =
            String::from_utf8(body).map_err(|e| Error::malformed(format!("blob {log}"), e))?;
        let mut records = Vec::new();
        for record in text.lines() {
            let (stamp, rest) = record.split_once('\t').ok_or_else(|| {
                Error::malformed(format!("blob {log}"), "a record without a timestamp")
            })?;
            let at = DateTime::parse_from_rfc3339(stamp)
                .map_err(|e| Error::malformed(format!("blob {log}"), e))?
                .with_timezone(&Utc);
            if at >= self.from && at <= self.to {
                records.push((at, rest.to_owned()));
            }
        }
        records.sort_by_key(|(at, _)| *at);
        let mut rest: std::collections::VecDeque<_> = records.into();
        if let Some((at, text)) = rest.pop_front() {
            self.opened += 1;
            self.open.push(Open {
                at,
                blob: self.opened,
                rest,
                text,
            });
        }
        Ok(())
    }
}
