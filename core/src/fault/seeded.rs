//! Seeded faults at every store call, for the deterministic simulation: a [`ChaosStore`]
//! wraps a store and, drawing from [`crate::random`] (so one seed decides every fault),
//! fails writes before they reach the store, loses the answers of writes it applied,
//! fails reads, delays calls (each delay a point where other tasks run) and crashes the
//! process a store handle belongs to: the call never returns and the process's
//! [`Crash`] flag is raised, so the simulation drops the task — its memory gone, the
//! store kept.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::model::{ETag, Entity};
use crate::query::{Page, Query};
use crate::random;
use crate::store::{Batch, TableStore, WriteOp};

/// How long the service may take to start a request before it gives it up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How likely each fault is, per store call (each a probability from 0 to 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultRates {
    /// A write fails before it reaches the store (nothing written).
    pub before_write: f64,
    /// A write is applied and its answer lost (the caller sees a transient error).
    pub lost_answer: f64,
    /// A read fails.
    pub failed_read: f64,
    /// A call waits up to `max_latency` first.
    pub latency: f64,
    /// The longest injected wait.
    pub max_latency: Duration,
    /// The process dies at the call (before or, for a write, after it is applied); only
    /// for handles made with [`ChaosStore::process`].
    pub crash: f64,
}

impl FaultRates {
    /// No faults.
    pub const NONE: FaultRates = FaultRates {
        before_write: 0.0,
        lost_answer: 0.0,
        failed_read: 0.0,
        latency: 0.0,
        max_latency: Duration::ZERO,
        crash: 0.0,
    };
}

/// The faults a [`ChaosStore`] injected, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Writes failed before the store.
    pub before_write: u64,
    /// Writes applied whose answer was lost.
    pub lost_answers: u64,
    /// Reads failed.
    pub failed_reads: u64,
    /// Calls delayed.
    pub delays: u64,
    /// Processes crashed at a call.
    pub crashes: u64,
}

impl FaultCounts {
    /// Every fault but the delays.
    pub fn total(&self) -> u64 {
        self.before_write + self.lost_answers + self.failed_reads + self.crashes
    }
}

#[derive(Debug, Default)]
struct Chaos {
    rates: Mutex<Option<FaultRates>>,
    before_write: AtomicU64,
    lost_answers: AtomicU64,
    failed_reads: AtomicU64,
    delays: AtomicU64,
    crashes: AtomicU64,
    log: Mutex<Vec<String>>,
}

/// The crash flag of one simulated process: raised when a store call killed it.
#[derive(Clone, Debug, Default)]
pub struct Crash(Arc<AtomicBool>);

impl Crash {
    /// Whether the process died at a store call.
    pub fn crashed(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A [`TableStore`] wrapper that injects seeded faults (see the module docs). Clones
/// share the rates, counters and log; [`process`](Self::process) gives a handle with
/// its own crash flag.
#[derive(Clone, Debug)]
pub struct ChaosStore<S> {
    inner: S,
    chaos: Arc<Chaos>,
    process: Option<Crash>,
}

enum Call {
    Read,
    Write,
}

enum Verdict {
    Pass,
    Fail(&'static str),
    LoseAnswer,
    CrashBefore,
    CrashAfter,
}

impl<S: TableStore + Clone> ChaosStore<S> {
    /// Wraps a store; faults are off until [`set_rates`](Self::set_rates).
    pub fn new(inner: S) -> Self {
        ChaosStore {
            inner,
            chaos: Arc::default(),
            process: None,
        }
    }

    /// The wrapped store (no faults).
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// A handle for one process: a fault may crash it (see [`FaultRates::crash`]).
    pub fn process(&self) -> (Self, Crash) {
        let crash = Crash::default();
        let store = ChaosStore {
            inner: self.inner.clone(),
            chaos: self.chaos.clone(),
            process: Some(crash.clone()),
        };
        (store, crash)
    }

    /// Turns faults on with `rates`, or off with `None`.
    pub fn set_rates(&self, rates: Option<FaultRates>) {
        *self.chaos.rates.lock().unwrap_or_else(|e| e.into_inner()) = rates;
    }

    /// The faults injected so far.
    pub fn counts(&self) -> FaultCounts {
        let c = &self.chaos;
        FaultCounts {
            before_write: c.before_write.load(Ordering::SeqCst),
            lost_answers: c.lost_answers.load(Ordering::SeqCst),
            failed_reads: c.failed_reads.load(Ordering::SeqCst),
            delays: c.delays.load(Ordering::SeqCst),
            crashes: c.crashes.load(Ordering::SeqCst),
        }
    }

    /// Takes the faults injected since the last call, one line each (what struck where).
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.chaos.log.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn note(&self, counter: &AtomicU64, what: impl FnOnce() -> String) {
        counter.fetch_add(1, Ordering::SeqCst);
        self.chaos
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(what());
    }

    fn chance(p: f64) -> bool {
        p > 0.0 && random::between(0.0, 1.0) < p
    }

    /// Waits (maybe) and decides the call's fate.
    async fn verdict(&self, call: Call, what: impl Fn() -> String) -> Verdict {
        // A dead process makes no more calls: a task it left behind (a writer's remover)
        // dies with it at its next call.
        if self.process.as_ref().is_some_and(Crash::crashed) {
            return Verdict::CrashBefore;
        }
        let rates = *self.chaos.rates.lock().unwrap_or_else(|e| e.into_inner());
        let Some(rates) = rates else {
            return Verdict::Pass;
        };
        if Self::chance(rates.latency) {
            self.chaos.delays.fetch_add(1, Ordering::SeqCst);
            let sent = tokio::time::Instant::now();
            tokio::time::sleep(random::up_to(rates.max_latency)).await;
            // A request the service did not start within its timeout is not applied
            // (Azure Table storage bounds a request at 30 seconds): a clock jump while
            // it waited fails it, so no write lands long after it was sent.
            if sent.elapsed() > REQUEST_TIMEOUT {
                self.note(&self.chaos.before_write, || format!("timed out {}", what()));
                return Verdict::Fail("the request timed out");
            }
        }
        if self.process.is_some() && Self::chance(rates.crash) {
            self.note(&self.chaos.crashes, || format!("crash at {}", what()));
            return match call {
                Call::Write if Self::chance(0.5) => Verdict::CrashAfter,
                _ => Verdict::CrashBefore,
            };
        }
        match call {
            Call::Read if Self::chance(rates.failed_read) => {
                self.note(&self.chaos.failed_reads, || {
                    format!("failed read {}", what())
                });
                Verdict::Fail("read failed")
            }
            Call::Write if Self::chance(rates.before_write) => {
                self.note(&self.chaos.before_write, || {
                    format!("failed write {}", what())
                });
                Verdict::Fail("write failed before reaching the store")
            }
            Call::Write if Self::chance(rates.lost_answer) => {
                self.note(&self.chaos.lost_answers, || {
                    format!("lost answer {}", what())
                });
                Verdict::LoseAnswer
            }
            _ => Verdict::Pass,
        }
    }

    /// The end of a crashed process: its flag raised, the call never answers.
    async fn die<T>(&self) -> T {
        if let Some(crash) = &self.process {
            crash.0.store(true, Ordering::SeqCst);
        }
        std::future::pending().await
    }

    async fn read<T>(
        &self,
        what: impl Fn() -> String,
        f: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        match self.verdict(Call::Read, what).await {
            Verdict::Fail(why) => Err(injected(why)),
            Verdict::CrashBefore | Verdict::CrashAfter => self.die().await,
            Verdict::Pass | Verdict::LoseAnswer => f.await,
        }
    }

    async fn write<T>(
        &self,
        what: impl Fn() -> String,
        f: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        match self.verdict(Call::Write, what).await {
            Verdict::Pass => f.await,
            Verdict::Fail(why) => Err(injected(why)),
            Verdict::LoseAnswer => {
                f.await?;
                Err(injected("write applied, answer lost"))
            }
            Verdict::CrashBefore => self.die().await,
            Verdict::CrashAfter => {
                let _ = f.await;
                self.die().await
            }
        }
    }
}

fn injected(what: &str) -> Error {
    Error::Transient {
        message: format!("injected fault: {what}"),
    }
}

impl<S: TableStore + Clone> TableStore for ChaosStore<S> {
    async fn create_table(&self, table: &str) -> Result<()> {
        self.write(|| format!("create {table}"), self.inner.create_table(table))
            .await
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        self.write(|| format!("drop {table}"), self.inner.delete_table(table))
            .await
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        self.read(|| format!("list {prefix}*"), self.inner.list_tables(prefix))
            .await
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        self.read(
            || format!("get {table}({partition_key}, {row_key})"),
            self.inner.get(table, partition_key, row_key, select),
        )
        .await
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        self.read(|| format!("query {table}"), self.inner.query(table, query))
            .await
    }

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        let (partition_key, row_key) = op.key();
        let name = match &op {
            WriteOp::Insert(_) => "insert",
            WriteOp::Replace(..) => "replace",
            WriteOp::Merge(..) => "merge",
            WriteOp::InsertOrReplace(_) => "upsert",
            WriteOp::InsertOrMerge(_) => "merge-upsert",
            WriteOp::Delete { .. } => "delete",
        };
        let what = format!("{name} {table}({partition_key}, {row_key})");
        self.write(|| what.clone(), self.inner.execute(table, op))
            .await
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        let what = match batch.operations().first() {
            Some(op) => {
                let (partition_key, row_key) = op.key();
                format!(
                    "batch of {} {table}({partition_key}, {row_key}…)",
                    batch.len()
                )
            }
            None => format!("empty batch {table}"),
        };
        self.write(|| what.clone(), self.inner.submit_batch(table, batch))
            .await
    }
}
