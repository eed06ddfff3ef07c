//! Parallel bulk import: a stream of entities (or typed records) grouped per partition
//! into entity group transactions of at most 100 operations (and 4 MiB), written with
//! bounded concurrency and bounded memory, retried when a failure is retryable, with
//! progress. Each batch is insert-or-replace, so an import that stops can simply run
//! again.
//!
//! ```
//! use tablekit_core::{Entity, MemoryStore, Query, TableStore};
//! use tablekit_patterns::import::bulk_import;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = MemoryStore::new();
//! store.create_table("Customers").await?;
//! let entities: Vec<Entity> = (0..1_000)
//!     .map(|i| Entity::new(format!("r{:02}", i % 10), format!("{i:06}")))
//!     .collect();
//! let report = bulk_import(&store, "Customers", entities, 8, |done, total| {
//!     assert!(done <= total); // drive a progress bar here
//! })
//! .await?;
//! assert_eq!((report.written, report.batches), (1_000, 10));
//! # Ok::<_, tablekit_patterns::Error>(())
//! # }).unwrap();
//! ```

use std::collections::{HashMap, HashSet, VecDeque};

use futures::stream::FuturesUnordered;
use futures::{Stream, StreamExt};
use tablekit_core::limits::{MAX_BATCH_BYTES, MAX_BATCH_OPERATIONS};
use tablekit_core::typed::{Record, Table};
use tablekit_core::{Batch, Entity, TableStore, WriteOp};

use crate::consistency::RetryPolicy;
use crate::error::Result;

/// A batch, or an entity, the import could not write: its keys and why. Nothing of a
/// failed batch was written; running the import again retries it.
#[derive(Debug)]
pub struct FailedBatch {
    /// The keys (PartitionKey, RowKey) of its entities.
    pub keys: Vec<(String, String)>,
    /// Why (after the retries, for a retryable failure).
    pub error: tablekit_core::Error,
}

/// What an import did.
#[derive(Debug, Default)]
pub struct ImportReport {
    /// Entities written.
    pub written: usize,
    /// Batches written.
    pub batches: usize,
    /// Batch writes retried after a retryable failure.
    pub retried: usize,
    /// What could not be written, with its keys.
    pub failed: Vec<FailedBatch>,
}

/// How an import runs.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// Batches in flight at most (each partition has at most one, so a partition's
    /// writes land in the order of the input and the last of repeated keys wins).
    pub concurrency: usize,
    /// Entities held in batches not yet full, at most; past it the largest is written.
    pub buffered: usize,
    /// How a batch that failed with a retryable error is retried.
    pub retry: RetryPolicy,
}

impl Default for ImportOptions {
    /// 8 batches in flight, 10,000 entities buffered, 5 attempts per batch.
    fn default() -> Self {
        ImportOptions {
            concurrency: 8,
            buffered: 10_000,
            retry: RetryPolicy::default().attempts(5),
        }
    }
}

/// A partition's batch being filled.
#[derive(Default)]
struct Open {
    ops: Vec<WriteOp>,
    /// RowKey → position in `ops` (a repeated key replaces its earlier write).
    at: HashMap<String, usize>,
    bytes: usize,
}

/// A batch ready to be written, and how often it was tried.
struct Ready {
    partition_key: String,
    ops: Vec<WriteOp>,
    attempt: usize,
}

/// Imports a stream of entities into `table` (insert-or-replace), in entity group
/// transactions of at most 100 operations and 4 MiB per partition, at most
/// `options.concurrency` batches in flight; memory holds at most `options.buffered`
/// entities in open batches plus the batches in flight, whatever the stream's length.
/// A batch failing with a retryable error is retried under `options.retry`; other
/// failures (and entities breaking a limit, refused before any I/O) are reported with
/// their keys and the import goes on. `progress` sees the report after each batch.
///
/// # Errors
/// None of its own: failures are in the report.
pub async fn import_stream<S: TableStore>(
    store: &S,
    table: &str,
    entities: impl Stream<Item = Entity>,
    options: &ImportOptions,
    mut progress: impl FnMut(&ImportReport),
) -> Result<ImportReport> {
    let concurrency = options.concurrency.max(1);
    let mut report = ImportReport::default();
    let mut open: HashMap<String, Open> = HashMap::new();
    let mut held = 0usize;
    let mut ready: VecDeque<Ready> = VecDeque::new();
    let mut busy: HashSet<String> = HashSet::new();
    let mut in_flight = FuturesUnordered::new();
    let write = |batch: Ready| async move {
        let wait = options.retry.backoff(batch.attempt);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let mut request = Batch::new();
        for op in &batch.ops {
            request.push(op.clone());
        }
        let result = store.submit_batch(table, request).await;
        (batch, result)
    };
    let mut entities = std::pin::pin!(entities);
    let mut input_done = false;
    loop {
        // Read input while there is room to hold it.
        while !input_done && ready.len() < 2 * concurrency {
            let Some(entity) = entities.next().await else {
                input_done = true;
                for (partition_key, batch) in open.drain() {
                    ready.push_back(Ready {
                        partition_key,
                        ops: batch.ops,
                        attempt: 1,
                    });
                }
                held = 0;
                break;
            };
            let op = WriteOp::InsertOrReplace(entity);
            if let Err(violation) = op.checked_size() {
                let (pk, rk) = op.key();
                report.failed.push(FailedBatch {
                    keys: vec![(pk.to_owned(), rk.to_owned())],
                    error: violation.into(),
                });
                continue;
            }
            let (pk, rk) = (op.key().0.to_owned(), op.key().1.to_owned());
            let size = op.payload_size();
            let batch = open.entry(pk.clone()).or_default();
            if batch.ops.len() == MAX_BATCH_OPERATIONS
                || (!batch.at.contains_key(&rk) && batch.bytes + size > MAX_BATCH_BYTES - 64 * 1024)
            {
                let full = std::mem::take(batch);
                held -= full.ops.len();
                ready.push_back(Ready {
                    partition_key: pk.clone(),
                    ops: full.ops,
                    attempt: 1,
                });
            }
            let batch = open.entry(pk.clone()).or_default();
            match batch.at.get(&rk) {
                Some(&at) => batch.ops[at] = op,
                None => {
                    batch.at.insert(rk, batch.ops.len());
                    batch.ops.push(op);
                    batch.bytes += size;
                    held += 1;
                }
            }
            if held > options.buffered.max(MAX_BATCH_OPERATIONS) {
                let largest = open
                    .iter()
                    .max_by_key(|(_, b)| b.ops.len())
                    .map(|(pk, _)| pk.clone());
                if let Some(batch) = largest.and_then(|pk| open.remove_entry(&pk)) {
                    held -= batch.1.ops.len();
                    ready.push_back(Ready {
                        partition_key: batch.0,
                        ops: batch.1.ops,
                        attempt: 1,
                    });
                }
            }
        }
        // Start what may start: a partition's batches one after the other.
        while in_flight.len() < concurrency {
            let Some(at) = ready.iter().position(|b| !busy.contains(&b.partition_key)) else {
                break;
            };
            let Some(batch) = ready.remove(at) else {
                break;
            };
            busy.insert(batch.partition_key.clone());
            in_flight.push(write(batch));
        }
        if in_flight.is_empty() {
            if input_done && ready.is_empty() {
                return Ok(report);
            }
            continue;
        }
        // One batch completes.
        if let Some((batch, result)) = in_flight.next().await {
            busy.remove(&batch.partition_key);
            match result {
                Ok(_) => {
                    report.written += batch.ops.len();
                    report.batches += 1;
                }
                Err(e) if e.is_retryable() && batch.attempt < options.retry.max_attempts => {
                    report.retried += 1;
                    ready.push_front(Ready {
                        attempt: batch.attempt + 1,
                        ..batch
                    });
                    continue;
                }
                Err(error) => report.failed.push(FailedBatch {
                    keys: batch
                        .ops
                        .iter()
                        .map(|op| (op.key().0.to_owned(), op.key().1.to_owned()))
                        .collect(),
                    error,
                }),
            }
            progress(&report);
        }
    }
}

/// Imports a stream of typed records into their table, as [`import_stream`].
///
/// # Errors
/// A record that does not convert to an entity (what came before it is written).
pub async fn import_records<R: Record, S: TableStore>(
    table: &Table<R, S>,
    records: impl Stream<Item = R>,
    options: &ImportOptions,
    progress: impl FnMut(&ImportReport),
) -> Result<ImportReport> {
    let failed: std::sync::Mutex<Option<tablekit_core::Error>> = std::sync::Mutex::new(None);
    let entities = records.scan((), |(), record| {
        futures::future::ready(match record.to_entity() {
            Ok(entity) => Some(entity),
            Err(e) => {
                if let Ok(mut slot) = failed.lock() {
                    *slot = Some(e);
                }
                None
            }
        })
    });
    let report = import_stream(table.store(), table.name(), entities, options, progress).await?;
    match failed.into_inner().ok().flatten() {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// Imports entities into `table` (insert-or-replace), at most `concurrency` batches at a
/// time, calling `progress(entities_done, entities_total)` after each batch: the
/// collected form of [`import_stream`].
///
/// # Errors
/// None of its own: failures are in the report.
pub async fn bulk_import<S: TableStore>(
    store: &S,
    table: &str,
    entities: Vec<Entity>,
    concurrency: usize,
    progress: impl Fn(usize, usize),
) -> Result<ImportReport> {
    let total = entities.len();
    let options = ImportOptions {
        concurrency,
        ..ImportOptions::default()
    };
    import_stream(
        store,
        table,
        futures::stream::iter(entities),
        &options,
        |r| {
            progress(
                r.written + r.failed.iter().map(|f| f.keys.len()).sum::<usize>(),
                total,
            )
        },
    )
    .await
}

/// The baseline: the same entities written one at a time, in order.
///
/// # Errors
/// The first write's error.
pub async fn sequential_import<S: TableStore>(
    store: &S,
    table: &str,
    entities: Vec<Entity>,
) -> Result<usize> {
    let n = entities.len();
    for entity in entities {
        store.insert_or_replace(table, entity).await?;
    }
    Ok(n)
}
