//! Log data in blobs (the design guide's answer to the log-data anti-pattern): a buffered
//! writer stores newline-delimited records in blobs named
//! `<prefix>/yyyy/MM/dd/HHmm/000001.log`, flushed when the buffer reaches a size or an
//! age (by a background task, so an idle writer holds nothing in memory past its age),
//! each with a `.meta` companion holding its first and last timestamps and record
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
//! let log = LogWriter::new(blobs.clone(), "app", 64 * 1024, std::time::Duration::from_secs(60));
//! let t0 = Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0).unwrap();
//! for n in 0..10 {
//!     log.append(t0 + Duration::seconds(n), &format!("event {n}")).await?;
//! }
//! let name = log.close().await?.expect("written");
//! assert_eq!(name, "app/2026/11/22/1000/000001.log");
//! let some = read_range(&blobs, "app", t0 + Duration::seconds(2), t0 + Duration::seconds(4)).await?;
//! assert_eq!(some.len(), 3);
//! # Ok::<_, tablekit_patterns::Error>(())
//! # }).unwrap();
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use tablekit_core::blob::BlobStore;
use tokio::time::Instant;

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
///
/// Records leave memory by size (on the append that fills the buffer) and by age: a
/// background task, started on the first append, flushes the buffer when its oldest
/// record is `max_age` old even if no other record comes. Dropping the writer hands the
/// buffer to that task for a last flush, which runs as long as the runtime does;
/// [`LogWriter::close`] flushes and waits, and is the way to be sure at shutdown (a
/// runtime that is shutting down runs no more tasks).
///
/// The writer is used through `&self`: tasks may share it behind an `Arc`. A flush
/// that fails keeps its records buffered; the background task tries again with a
/// growing pause (up to 30 s) and logs each failure as a warning.
#[derive(Debug)]
pub struct LogWriter {
    shared: Arc<Shared>,
    /// The background flush, once an append started it (none outside a tokio runtime).
    flusher: std::sync::OnceLock<tokio::task::JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    blobs: BlobStore,
    prefix: String,
    max_bytes: usize,
    max_age: Duration,
    buffer: tokio::sync::Mutex<Buffer>,
    /// Wakes the background flush: a buffer was opened, or the writer is closing.
    wake: tokio::sync::Notify,
    closing: AtomicBool,
}

#[derive(Debug, Default)]
struct Buffer {
    records: Vec<(DateTime<Utc>, String)>,
    bytes: usize,
    /// When the oldest buffered record was appended.
    opened: Option<Instant>,
}

fn line(at: DateTime<Utc>, text: &str) -> String {
    format!(
        "{}\t{text}\n",
        at.to_rfc3339_opts(SecondsFormat::Micros, true)
    )
}

/// The longest pause between tries of a background flush that failed.
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(30);

impl LogWriter {
    /// A writer under `prefix` (a folder name, without a trailing `/`), flushing at
    /// `max_bytes` of buffered records or when the oldest buffered record is `max_age` old.
    pub fn new(blobs: BlobStore, prefix: &str, max_bytes: usize, max_age: Duration) -> Self {
        LogWriter {
            shared: Arc::new(Shared {
                blobs,
                prefix: prefix.trim_end_matches('/').to_owned(),
                max_bytes: max_bytes.max(1),
                max_age,
                buffer: tokio::sync::Mutex::new(Buffer::default()),
                wake: tokio::sync::Notify::new(),
                closing: AtomicBool::new(false),
            }),
            flusher: std::sync::OnceLock::new(),
        }
    }

    /// Buffers a record; flushes when the buffer is full or old. Returns the blob written,
    /// if this call flushed.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for text holding a newline; the blob store's errors.
    pub async fn append(&self, at: DateTime<Utc>, text: &str) -> Result<Option<String>> {
        if text.contains('\n') || text.contains('\r') {
            return Err(Error::Unsupported(
                "a log record is one line: its text cannot hold a newline".to_owned(),
            ));
        }
        self.start_flusher();
        let shared = &self.shared;
        let mut buffer = shared.buffer.lock().await;
        // A blob holds one UTC day at most, so a reader looks back one day only.
        let other_day = buffer
            .records
            .first()
            .is_some_and(|(first, _)| first.date_naive() != at.date_naive());
        let mut flushed = None;
        if other_day {
            flushed = shared.flush(&mut buffer).await?;
        }
        buffer.bytes += line(at, text).len();
        buffer.records.push((at, text.to_owned()));
        let opened = match buffer.opened {
            Some(opened) => opened,
            None => {
                let now = Instant::now();
                buffer.opened = Some(now);
                shared.wake.notify_one();
                now
            }
        };
        if buffer.bytes >= shared.max_bytes || opened.elapsed() >= shared.max_age {
            return shared.flush(&mut buffer).await;
        }
        Ok(flushed)
    }

    /// Writes the buffered records to a new blob (and its `.meta`), if there are any.
    ///
    /// # Errors
    /// The blob store's errors; the records stay buffered.
    pub async fn flush(&self) -> Result<Option<String>> {
        let mut buffer = self.shared.buffer.lock().await;
        self.shared.flush(&mut buffer).await
    }

    /// Flushes the buffered records and stops the background flush, waiting for it:
    /// after `close` returns `Ok`, every appended record is in a blob and nothing of the
    /// writer runs. Returns the blob written, if there were records.
    ///
    /// # Errors
    /// The blob store's errors. The records then stay buffered and the dropped writer's
    /// background flush makes one more try.
    pub async fn close(mut self) -> Result<Option<String>> {
        let written = self.flush().await?;
        self.shared.closing.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
        if let Some(flusher) = self.flusher.take() {
            // The task ends by itself once it sees `closing`; a panic in it was logged.
            let _ = flusher.await;
        }
        Ok(written)
    }

    /// Starts the background flush on the current tokio runtime, once.
    fn start_flusher(&self) {
        if self.flusher.get().is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // no runtime: flushes by age happen on appends only
        };
        self.flusher
            .get_or_init(|| runtime.spawn(Arc::clone(&self.shared).flush_by_age()));
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        // The background task flushes what is left and ends.
        self.shared.closing.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
        if self.flusher.get().is_none()
            && let Ok(buffer) = self.shared.buffer.try_lock()
            && !buffer.records.is_empty()
        {
            tracing::warn!(
                prefix = %self.shared.prefix,
                records = buffer.records.len(),
                "a log writer dropped outside a tokio runtime loses its buffered records: \
                 call close() first"
            );
        }
    }
}

impl Shared {
    /// The background flush: sleeps until the buffer's oldest record is `max_age` old and
    /// flushes it; on `closing`, flushes what is left and ends.
    async fn flush_by_age(self: Arc<Self>) {
        let mut pause = Duration::ZERO;
        loop {
            if self.closing.load(Ordering::SeqCst) {
                let mut buffer = self.buffer.lock().await;
                if let Err(error) = self.flush(&mut buffer).await {
                    tracing::warn!(
                        prefix = %self.prefix,
                        records = buffer.records.len(),
                        %error,
                        "the last flush of a dropped log writer failed: its records are lost"
                    );
                }
                return;
            }
            let due = self
                .buffer
                .lock()
                .await
                .opened
                .map(|opened| (opened + self.max_age).max(Instant::now() + pause));
            let Some(due) = due else {
                self.wake.notified().await;
                continue;
            };
            tokio::select! {
                () = tokio::time::sleep_until(due) => {}
                () = self.wake.notified() => continue,
            }
            let mut buffer = self.buffer.lock().await;
            if buffer
                .opened
                .is_none_or(|opened| opened.elapsed() < self.max_age)
            {
                continue; // flushed meanwhile, or a newer buffer
            }
            match self.flush(&mut buffer).await {
                Ok(_) => pause = Duration::ZERO,
                Err(error) => {
                    pause = (pause * 2).clamp(Duration::from_millis(100), MAX_RETRY_PAUSE);
                    tracing::warn!(
                        prefix = %self.prefix,
                        records = buffer.records.len(),
                        %error,
                        retry_in = ?pause,
                        "a log flush by age failed: the records stay buffered"
                    );
                }
            }
        }
    }

    async fn flush(&self, buffer: &mut Buffer) -> Result<Option<String>> {
        if buffer.records.is_empty() {
            return Ok(None);
        }
        let first = buffer
            .records
            .iter()
            .map(|(t, _)| *t)
            .min()
            .unwrap_or_else(Utc::now);
        let last = buffer
            .records
            .iter()
            .map(|(t, _)| *t)
            .max()
            .unwrap_or(first);
        let folder = format!("{}/{}/", self.prefix, first.format("%Y/%m/%d/%H%M"));
        let body: String = buffer.records.iter().map(|(t, s)| line(*t, s)).collect();
        let meta = serde_json::to_vec(&LogBlobMeta {
            first,
            last,
            records: buffer.records.len(),
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
                *buffer = Buffer::default();
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(second: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 10, 0, 0)
            .single()
            .expect("a valid instant")
            + chrono::Duration::seconds(second)
    }

    async fn records(blobs: &BlobStore) -> Vec<String> {
        read_range(blobs, "app", at(-60), at(3600))
            .await
            .expect("read")
            .into_iter()
            .map(|(_, text)| text)
            .collect()
    }

    /// Polls for up to five seconds until the blob store holds `want` records.
    async fn wait_for(blobs: &BlobStore, want: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let found = records(blobs).await;
            if found.len() >= want || Instant::now() > deadline {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn an_idle_writer_flushes_by_age_without_another_call() {
        let blobs = BlobStore::memory();
        let log = LogWriter::new(blobs.clone(), "app", 1 << 20, Duration::from_millis(200));
        for n in 0..3 {
            assert_eq!(
                log.append(at(n), &format!("event {n}"))
                    .await
                    .expect("blob store"),
                None
            );
        }
        // Younger than its age: still buffered.
        assert!(records(&blobs).await.is_empty());
        // The writer goes idle: no append, no flush, and the records reach a blob.
        assert_eq!(wait_for(&blobs, 3).await, ["event 0", "event 1", "event 2"]);
        let names: Vec<String> = blobs
            .list("app/")
            .await
            .expect("test setup")
            .into_iter()
            .map(|b| b.name)
            .collect();
        assert_eq!(
            names,
            [
                "app/2026/11/22/1000/000001.log",
                "app/2026/11/22/1000/000001.log.meta"
            ]
        );
        // A later buffer gets its own flush by age.
        log.append(at(10), "event 10").await.expect("blob store");
        assert_eq!(wait_for(&blobs, 4).await.len(), 4);
        assert_eq!(
            log.close().await.expect("blob store"),
            None,
            "nothing was left to write"
        );
    }

    #[tokio::test]
    async fn close_writes_what_is_buffered_and_stops_the_background_flush() {
        let blobs = BlobStore::memory();
        let log = LogWriter::new(blobs.clone(), "app", 1 << 20, Duration::from_secs(3600));
        log.append(at(0), "first").await.expect("blob store");
        log.append(at(1), "second").await.expect("blob store");
        let name = log.close().await.expect("blob store");
        assert_eq!(name.as_deref(), Some("app/2026/11/22/1000/000001.log"));
        assert_eq!(records(&blobs).await, ["first", "second"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_writer_flushes_its_buffer() {
        let blobs = BlobStore::memory();
        let log = LogWriter::new(blobs.clone(), "app", 1 << 20, Duration::from_secs(3600));
        log.append(at(0), "kept").await.expect("blob store");
        drop(log);
        assert_eq!(wait_for(&blobs, 1).await, ["kept"]);
    }

    #[tokio::test]
    async fn appends_shared_between_tasks_all_reach_blobs() {
        let blobs = BlobStore::memory();
        let log = Arc::new(LogWriter::new(
            blobs.clone(),
            "app",
            256,
            Duration::from_millis(50),
        ));
        let tasks: Vec<_> = (0..4)
            .map(|task| {
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    for n in 0..25 {
                        log.append(at(task * 100 + n), &format!("t{task} n{n}"))
                            .await
                            .expect("test setup");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("blob store");
        }
        assert_eq!(wait_for(&blobs, 100).await.len(), 100);
        let log = Arc::into_inner(log).expect("the only owner");
        assert_eq!(log.close().await.expect("blob store"), None);
    }

    #[tokio::test]
    async fn a_failed_flush_by_age_keeps_its_records_and_tries_again() {
        let dir = tempfile::tempdir().expect("test setup");
        let blobs = BlobStore::local(dir.path()).expect("test setup");
        // A file where the log's folder goes: every write under `app/` fails.
        let blocker = dir.path().join("app");
        std::fs::write(&blocker, b"not a folder").expect("test setup");
        let log = LogWriter::new(blobs.clone(), "app", 1 << 20, Duration::from_millis(50));
        log.append(at(0), "kept through failures")
            .await
            .expect("blob store");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(
            log.shared.buffer.lock().await.records.len() == 1,
            "still buffered"
        );
        std::fs::remove_file(&blocker).expect("test setup");
        assert_eq!(wait_for(&blobs, 1).await, ["kept through failures"]);
        assert_eq!(log.close().await.expect("blob store"), None);
    }

    #[tokio::test]
    async fn a_record_with_a_newline_is_refused_and_nothing_is_buffered() {
        let blobs = BlobStore::memory();
        let log = LogWriter::new(blobs.clone(), "app", 1 << 20, Duration::from_secs(3600));
        let refused = log.append(at(0), "two\nlines").await.expect_err("refused");
        assert!(matches!(refused, Error::Unsupported(_)), "{refused:?}");
        assert_eq!(log.close().await.expect("blob store"), None);
        assert!(records(&blobs).await.is_empty());
    }
}
