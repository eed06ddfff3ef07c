//! The upkeep of what a declaration keeps outside a write's transaction, in three small
//! traits, each dispatched by what it is given rather than by asking every declaration:
//!
//! - [`Applies`]: an operation of follow-up work (a copy put, a member added, a
//!   reservation released), applied by the worker; each operation type of a declaration
//!   implements it, and [`IndexOperation`](super::IndexOperation) hands each variant to its
//!   own (`super::write::list`);
//! - [`Kept`]: a target a primary's record names (a copy, a membership, a denormalised
//!   field, a reservation), checked by the audit and brought in line by a backfill; each
//!   target type implements it, and [`Target`](super::Target) hands each variant to its
//!   own;
//! - [`Upkeep`]: what a declaration does for entities that name no target — a stored
//!   entity of its kind checked as claimed by its primary (a copy, a link, an id-list
//!   page, a reservation), and a failed write's steps outside its transaction undone
//!   (reservations, links, blobs); every registered declaration is asked.

use std::future::Future;
use std::pin::Pin;

use tablekit_core::{Entity, TableStore};

use super::audit::auditor::Auditor;
use super::audit::report::AuditReport;
use super::operation::{Applied, IndexApplier};
use super::reclaim::Reclaim;
use super::record::EntityRef;
use super::write::declaration::{Step, nothing};
use crate::error::Result;

/// The worker's step of one operation (boxed: the traits are used as `dyn`).
pub(crate) type Applying<'a> = Pin<Box<dyn Future<Output = Result<Applied>> + Send + 'a>>;

/// An operation of follow-up work, applied idempotently by the worker.
pub(crate) trait Applies<S: TableStore + Clone + 'static>: Sync {
    /// Applies the operation.
    fn apply<'a>(&'a self, applier: &'a IndexApplier<S>) -> Applying<'a>;
}

/// A target of a primary's index record, as the audit and a backfill keep it.
pub(crate) trait Kept<S: TableStore + Clone + 'static>: Sync {
    /// Checks the target a primary's record names — there, and current — recording the
    /// drift it finds (and repairing it when the audit repairs).
    fn check<'a>(
        &'a self,
        auditor: &'a mut Auditor<'_, S>,
        primary: &'a Entity,
        source: &'a EntityRef,
        version: i64,
        report: &'a mut AuditReport,
    ) -> Step<'a>;

    /// Brings the target in line with the primary at `version` (`present`: the primary
    /// has it), whatever its state (a backfill, the audit's repair).
    fn backfill<'a>(
        &'a self,
        applier: &'a IndexApplier<S>,
        source: &'a EntityRef,
        version: i64,
        present: bool,
        kind_property: &'a str,
    ) -> Applying<'a>;
}

/// What a declaration keeps that no target names. Both hooks do nothing by default.
pub(crate) trait Upkeep<S: TableStore + Clone + 'static>: Sync {
    /// Checks that a stored entity of its own kind (a copy, a link, an id-list page, a
    /// reservation) is claimed by its primary, recording (and repairing) an orphan:
    /// `None` when `stored` is not of its kind.
    fn claimed<'a>(
        &'a self,
        _auditor: &'a mut Auditor<'_, S>,
        _table: &'a str,
        _stored: &'a Entity,
        _report: &'a mut AuditReport,
    ) -> Option<Step<'a>> {
        None
    }

    /// After the audit's scan of the tables: checks what it keeps outside them (the id
    /// lists in blobs), recording (and repairing) what no primary claims.
    fn beyond_tables<'a>(
        &'a self,
        _auditor: &'a mut Auditor<'_, S>,
        _report: &'a mut AuditReport,
    ) -> Step<'a> {
        nothing()
    }

    /// Undoes its part of what a write that never committed did outside its transaction
    /// (the reservations it made, the links it put, the blobs it uploaded).
    fn undo<'a>(&'a self, _applier: &'a IndexApplier<S>, _undoing: &'a Reclaim) -> Step<'a> {
        nothing()
    }
}
