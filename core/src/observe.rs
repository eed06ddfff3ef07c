//! Observability of store calls: a tracing span with OpenTelemetry's database fields
//! (`db.system`, `db.operation`, `db.collection.name`, `tablekit.partition_key`) around
//! every call of every backend, and the metrics an operator charts:
//!
//! - `tablekit_store_operations_total{backend, operation, outcome}`: calls, by outcome
//!   (`ok`, or the error's kind: `not_found`, `precondition_failed`, …);
//! - `tablekit_store_operation_seconds{backend, operation}`: their latency (a histogram).
//!
//! - `tablekit_hot_partition_writes_per_second{table, partition_key}`: the write rate of
//!   the busiest partitions this process wrote over the last window, refreshed by
//!   [`report_hot_partitions`] (the worker does every minute) — a partition serves about
//!   2,000 entities per second on the table service.
//!
//! Spans follow the `tracing` subscriber's filter (debug level, target
//! `tablekit_core::observe`): with none, or with debug off, a call pays the callsite's
//! cached check. Metrics are off until a process turns them on with [`enable`] (the
//! worker binary does when it serves metrics), and then go to the `metrics` recorder it
//! installed.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use tracing::Instrument;

use crate::error::Result;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns spans and metrics of store calls on for this process.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Turns them off again.
pub fn disable() {
    ENABLED.store(false, Ordering::Relaxed);
}

/// Whether store calls are observed.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The `db.system` of a backend.
pub mod system {
    /// The embedded SQLite backend.
    pub const SQLITE: &str = "sqlite";
    /// The Table service (Azure, Azurite, Cosmos DB for Table).
    pub const AZURE_TABLE: &str = "azure_table";
    /// The in-memory store.
    pub const MEMORY: &str = "memory";
}

/// Runs one store call of `backend` observed: a span, a count by outcome, a latency.
/// Every backend of this crate wraps each of its calls in it; a backend written outside
/// it can do the same (`backend` is its `db.system`, `operation` the `TableStore`
/// method).
///
/// # Errors
/// The call's own.
pub async fn call<T>(
    backend: &'static str,
    operation: &'static str,
    table: &str,
    partition_key: Option<&str>,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    let span = tracing::debug_span!(
        "tablekit.store",
        otel.kind = "client",
        db.system = backend,
        db.operation = operation,
        db.collection.name = table,
        tablekit.partition_key = partition_key,
        otel.status_code = tracing::field::Empty,
    );
    if !enabled() {
        if span.is_disabled() {
            return call.await;
        }
        return call.instrument(span).await;
    }
    let started = Instant::now();
    let result = call.instrument(span.clone()).await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => {
            span.record("otel.status_code", "ERROR");
            e.kind().label()
        }
    };
    metrics::counter!(
        "tablekit_store_operations_total",
        "backend" => backend,
        "operation" => operation,
        "outcome" => outcome,
    )
    .increment(1);
    metrics::histogram!(
        "tablekit_store_operation_seconds",
        "backend" => backend,
        "operation" => operation,
    )
    .record(started.elapsed().as_secs_f64());
    result
}

/// The most partitions a window counts: past it, only those already counted are (a bulk
/// import over millions of partitions does not grow the map without bound).
const MAX_COUNTED: usize = 10_000;

/// Entities written per partition since the window began, and the partitions last shown.
struct HotPartitions {
    since: Instant,
    counts: HashMap<(String, String), u64>,
    shown: Vec<(String, String)>,
}

static HOT: Mutex<Option<HotPartitions>> = Mutex::new(None);

/// Counts `entities` written to a partition, for the hot partitions (with observability
/// on). Every backend of this crate counts its writes; a backend written outside it can
/// do the same.
pub fn written(table: &str, partition_key: Option<&str>, entities: usize) {
    if let (true, Some(partition_key)) = (enabled(), partition_key) {
        count_write(table, partition_key, entities as u64);
    }
}

fn count_write(table: &str, partition_key: &str, entities: u64) {
    let mut hot = HOT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let hot = hot.get_or_insert_with(|| HotPartitions {
        since: Instant::now(),
        counts: HashMap::new(),
        shown: Vec::new(),
    });
    let key = (table.to_owned(), partition_key.to_owned());
    if hot.counts.len() < MAX_COUNTED {
        *hot.counts.entry(key).or_default() += entities;
    } else if let Some(count) = hot.counts.get_mut(&key) {
        *count += entities;
    }
}

/// One partition's write rate over a window.
#[derive(Clone, Debug, PartialEq)]
pub struct HotPartition {
    /// The table.
    pub table: String,
    /// The partition.
    pub partition_key: String,
    /// Writes per second over the window.
    pub writes_per_second: f64,
}

/// Ends the current window: sets the gauge of its `top` busiest partitions (and zeroes
/// those shown before that are no longer among them), starts a new window and returns
/// them, busiest first.
pub fn report_hot_partitions(top: usize) -> Vec<HotPartition> {
    let mut guard = HOT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(hot) = guard.as_mut() else {
        return Vec::new();
    };
    let seconds = hot.since.elapsed().as_secs_f64().max(1e-3);
    let mut counts: Vec<((String, String), u64)> = hot.counts.drain().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts.truncate(top);
    #[allow(clippy::cast_precision_loss)]
    let busiest: Vec<HotPartition> = counts
        .into_iter()
        .map(|((table, partition_key), writes)| HotPartition {
            table,
            partition_key,
            writes_per_second: writes as f64 / seconds,
        })
        .collect();
    for (table, partition_key) in &hot.shown {
        if !busiest
            .iter()
            .any(|h| &h.table == table && &h.partition_key == partition_key)
        {
            hot_gauge(table, partition_key).set(0.0);
        }
    }
    for h in &busiest {
        hot_gauge(&h.table, &h.partition_key).set(h.writes_per_second);
    }
    hot.shown = busiest
        .iter()
        .map(|h| (h.table.clone(), h.partition_key.clone()))
        .collect();
    hot.since = Instant::now();
    busiest
}

fn hot_gauge(table: &str, partition_key: &str) -> metrics::Gauge {
    metrics::gauge!(
        "tablekit_hot_partition_writes_per_second",
        "table" => table.to_owned(),
        "partition_key" => partition_key.to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_partitions_come_first_and_a_new_window_starts() {
        for _ in 0..5 {
            count_write("Orders", "hot", 1);
        }
        count_write("Orders", "cold", 1);
        count_write("Users", "warm", 2);
        let top = report_hot_partitions(2);
        let names: Vec<&str> = top.iter().map(|h| h.partition_key.as_str()).collect();
        assert_eq!(names, ["hot", "warm"]);
        assert!(top[0].writes_per_second > top[1].writes_per_second);
        assert!(report_hot_partitions(2).is_empty(), "a new window");
    }
}
