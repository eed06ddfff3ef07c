//! Parallel bulk import: entities grouped per partition into entity group transactions
//! of at most 100 operations (and 4 MiB), the batches shuffled so concurrent writers hit
//! different partitions, written with bounded concurrency, with progress. Each batch is
//! insert-or-replace, so an import that stops can simply run again.
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

use futures::StreamExt;
use rand::seq::SliceRandom;
use tablekit_core::store::plan_batches;
use tablekit_core::{Entity, TableStore, WriteOp};

use crate::error::Result;

/// What an import did.
#[derive(Debug, Default)]
pub struct ImportReport {
    /// Entities written.
    pub written: usize,
    /// Batches written.
    pub batches: usize,
    /// Batches that failed, with their first entity's keys and the error (nothing of a
    /// failed batch was written; running the import again retries it).
    pub failed: Vec<(String, String, tablekit_core::Error)>,
}

/// Imports entities into `table` (insert-or-replace), at most `concurrency` batches at a
/// time, calling `progress(entities_done, entities_total)` after each batch.
///
/// # Errors
/// A limit violation of an entity (before anything is written).
pub async fn bulk_import<S: TableStore>(
    store: &S,
    table: &str,
    entities: Vec<Entity>,
    concurrency: usize,
    progress: impl Fn(usize, usize),
) -> Result<ImportReport> {
    // Batches run in any order: of entities with the same keys, the last one is written.
    let mut last: std::collections::HashMap<(String, String), usize> =
        std::collections::HashMap::with_capacity(entities.len());
    for (at, e) in entities.iter().enumerate() {
        last.insert((e.partition_key.clone(), e.row_key.clone()), at);
    }
    let entities: Vec<Entity> = entities
        .into_iter()
        .enumerate()
        .filter(|(at, e)| last.get(&(e.partition_key.clone(), e.row_key.clone())) == Some(at))
        .map(|(_, e)| e)
        .collect();
    let total = entities.len();
    let ops: Vec<WriteOp> = entities.into_iter().map(WriteOp::InsertOrReplace).collect();
    let mut planned = plan_batches(ops).map_err(tablekit_core::Error::from)?;
    planned.shuffle(&mut rand::rng());
    let mut report = ImportReport::default();
    let mut results = futures::stream::iter(planned)
        .map(|p| async move {
            let first = p
                .batch
                .operations()
                .first()
                .map(|op| (op.key().0.to_owned(), op.key().1.to_owned()))
                .unwrap_or_default();
            let size = p.batch.len();
            (first, size, store.submit_batch(table, p.batch).await)
        })
        .buffer_unordered(concurrency.max(1));
    let mut done = 0;
    while let Some(((pk, rk), size, result)) = results.next().await {
        match result {
            Ok(_) => {
                report.written += size;
                report.batches += 1;
            }
            Err(e) => report.failed.push((pk, rk, e)),
        }
        done += size;
        progress(done, total);
    }
    Ok(report)
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
