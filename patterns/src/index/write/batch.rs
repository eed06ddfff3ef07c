//! Several writes in entity group transactions: each write prepared and planned as on
//! its own ([`IndexWrite`]), packed per partition while a transaction holds them (100
//! operations, 4 MiB with the follow-up entries) and their writes touch distinct
//! entities. A write refused on its own is reported and taken out; the others go on.

use std::collections::{HashSet, VecDeque};

use tablekit_core::{ErrorKind, TableStore, WriteOp};

use super::declaration::{Request, Role, Writer};
use super::outcome::IndexedWriteReport;
use super::plan::{IndexWrite, WORK_CHARS};
use crate::consistency::{Plan, Planner, lost_race};
use crate::error::{Error, Result};

/// A prepared write and its input position.
type Numbered<'a, S> = (usize, IndexWrite<'a, S>);

/// The payload an outbox entry adds to a transaction, at most.
const ENTRY_BYTES: usize = 2 * WORK_CHARS + 1024;

impl<S: TableStore + Clone + 'static> Writer<S> {
    /// Prepares and commits `requests` (each with its input position; a request that
    /// could not be built carries its error), partition by partition, into `report`.
    ///
    /// # Errors
    /// A request that could not be built or cannot fit one transaction: nothing is
    /// written then (what earlier writes prepared is undone).
    pub(crate) async fn write_all(
        &self,
        requests: Vec<(usize, Result<Request>)>,
        report: &mut IndexedWriteReport,
    ) -> Result<()> {
        let mut by_partition: Vec<(String, Vec<Numbered<'_, S>>)> = Vec::new();
        for (at, request) in requests {
            let prepared = match request {
                Ok(request) => self.prepare(request).await,
                Err(e) => Err(e),
            };
            let prepared = match prepared {
                Ok(prepared) => prepared,
                // The store failed while the write was prepared (its intent, blobs or
                // links): it failed alone, what it did is undone.
                Err(e) if e.is_retryable() => {
                    report.failed.push((vec![at], e));
                    continue;
                }
                // A value that does not convert or fit: nothing is written.
                Err(e) => {
                    for (_, list) in &by_partition {
                        for (_, write) in list {
                            write.abandon().await;
                        }
                    }
                    return Err(e);
                }
            };
            let partition = prepared.source.partition_key.clone();
            match by_partition.iter_mut().find(|(pk, _)| *pk == partition) {
                Some((_, list)) => list.push((at, prepared)),
                None => by_partition.push((partition, vec![(at, prepared)])),
            }
        }
        for (partition, list) in by_partition {
            self.commit_partition(&partition, list, report).await;
        }
        Ok(())
    }

    /// Commits the prepared writes of one partition, as many per transaction as fit.
    async fn commit_partition(
        &self,
        partition: &str,
        list: Vec<Numbered<'_, S>>,
        report: &mut IndexedWriteReport,
    ) {
        let mut pending: VecDeque<Numbered<'_, S>> = list.into();
        while !pending.is_empty() {
            let mut batch = BatchWrite {
                writes: pending.drain(..).collect(),
                taken: 0,
                refused: Vec::new(),
                dropped: Vec::new(),
            };
            let committed = self.engine.commit(&self.table, partition, &mut batch).await;
            // A failed attempt fails at least one write, so the loop ends.
            let taken = if committed.is_err() {
                batch.taken.max(1)
            } else {
                batch.taken
            }
            .min(batch.writes.len());
            let rest: Vec<_> = batch.writes.drain(taken..).collect();
            report.refused.append(&mut batch.refused);
            for write in &batch.dropped {
                write.abandon().await;
            }
            match committed {
                Ok(Some(committed)) => {
                    report.published &= committed.published || committed.work == 0;
                    for (at, write) in &batch.writes {
                        report.written.push((*at, write.version));
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    for (_, write) in &batch.writes {
                        write.abandon().await;
                    }
                    report
                        .failed
                        .push((batch.writes.iter().map(|(at, _)| *at).collect(), e));
                }
            }
            pending.extend(rest);
        }
    }
}

/// Whether a write's own plan refused it (the others of a batch go on without it): its
/// unique value is taken, its key is, or the entity it must find is missing or changed.
fn refused_alone(error: &Error) -> bool {
    // A taken unique or index value answers AlreadyExists too; a failure of the store
    // itself (transient, a bad record) answers none of these.
    matches!(
        error.kind(),
        ErrorKind::AlreadyExists | ErrorKind::NotFound | ErrorKind::PreconditionFailed
    )
}

/// Several writes of one partition in one entity group transaction.
struct BatchWrite<'a, S> {
    writes: Vec<Numbered<'a, S>>,
    /// How many of `writes` (from the first) the last plan holds.
    taken: usize,
    /// Writes refused on their own, taken out of the batch.
    refused: Vec<(usize, Error)>,
    /// The refused writes, whose reservations go after the commit.
    dropped: Vec<IndexWrite<'a, S>>,
}

impl<S: TableStore + Clone + 'static> BatchWrite<'_, S> {
    /// Plans the writes that fit one transaction, or names the first write whose unique
    /// value is taken.
    async fn plan_writes(
        &mut self,
    ) -> Result<std::result::Result<Option<Plan<(usize, Role)>>, (usize, Error)>> {
        let mut plan: Plan<(usize, Role)> = Plan::new();
        let mut keys: HashSet<String> = HashSet::new();
        let (mut ops, mut bytes) = (0usize, 0usize);
        self.taken = 0;
        for (slot, (_, write)) in self.writes.iter_mut().enumerate() {
            let own = match write.plan().await {
                Ok(Some(own)) => own,
                Ok(None) => {
                    self.taken = slot + 1;
                    continue;
                }
                // A write refused on its own (a unique value taken, its key taken, its
                // entity missing or changed) fails alone; the others go on.
                Err(own) if refused_alone(&own) => return Ok(Err((slot, own))),
                Err(e) => {
                    // The attempt fails with this write among its own.
                    self.taken = slot + 1;
                    return Err(e);
                }
            };
            let own_ops = own.operations().len() + own.work().len();
            let own_bytes = own
                .operations()
                .iter()
                .map(WriteOp::payload_size)
                .sum::<usize>()
                + own.work().len() * ENTRY_BYTES;
            let collides = own.operations().iter().any(|op| keys.contains(op.key().1));
            let fits = ops + own_ops <= tablekit_core::limits::MAX_BATCH_OPERATIONS
                && bytes + own_bytes <= tablekit_core::limits::MAX_BATCH_BYTES - 64 * 1024;
            if slot > 0 && (collides || !fits) {
                break;
            }
            ops += own_ops;
            bytes += own_bytes;
            if own.keeps_pending() {
                plan.keep_pending();
            }
            let (writes, roles, work) = own.into_parts();
            for (op, role) in writes.into_iter().zip(roles) {
                keys.insert(op.key().1.to_owned());
                plan.push(op, (slot, role));
            }
            for envelope in work {
                plan.follow_up(envelope);
            }
            self.taken = slot + 1;
        }
        Ok(Ok((!plan.is_empty()).then_some(plan)))
    }
}

impl<S: TableStore + Clone + 'static> Planner for BatchWrite<'_, S> {
    type Role = (usize, Role);

    async fn plan(&mut self) -> Result<Option<Plan<(usize, Role)>>> {
        loop {
            match self.plan_writes().await? {
                Ok(plan) => return Ok(plan),
                // A write refused on its own fails alone; the others are planned again
                // without it.
                Err((slot, taken)) => {
                    let (at, write) = self.writes.remove(slot);
                    self.refused.push((at, taken));
                    self.dropped.push(write);
                }
            }
        }
    }

    fn refused(&mut self, error: tablekit_core::Error, role: Option<&(usize, Role)>) -> Result<()> {
        let Some((slot, role)) = role else {
            return if lost_race(&error) {
                Ok(())
            } else {
                Err(error)
            };
        };
        let slot = *slot;
        let Some((_, write)) = self.writes.get_mut(slot) else {
            return Err(error);
        };
        if let Err(own) = write.refused(error, Some(role)) {
            // This write fails on its own; the others are planned again without it.
            let (at, write) = self.writes.remove(slot);
            self.refused.push((at, own));
            self.dropped.push(write);
        }
        Ok(())
    }

    fn what(&self) -> String {
        format!("{} indexed writes", self.writes.len())
    }
}
