//! What a declaration plugs into the write path: the [`WriteSteps`] trait, and what the
//! planner hands it — the table's [`Writer`], the write's [`Request`] and [`Prepared`]
//! steps outside its transaction, and each planned [`Attempt`].
//!
//! A leaf of the write path: it imports no declaration and not the planner, so every
//! declaration module imports it without a circle.

use std::any::Any;
use std::collections::{BTreeSet, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tablekit_core::blob::BlobStore;
use tablekit_core::clock::SharedClock;
use tablekit_core::{ETag, Entity, IfMatch, TableStore};

use super::super::operation::IndexOperation;
use super::super::reclaim::Reclaim;
use super::super::record::{EntityRef, Layout, Target};
use crate::consistency::{Engine, Envelope, Intent, Plan};
use crate::error::{Error, Result};

/// A future a declaration returns (boxed: the traits are used as `dyn WriteSteps<S>` and
/// the like).
pub(crate) type Step<'a> = Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>>;

/// The step of a declaration that does nothing at that point of the write.
pub(crate) fn nothing<'a>() -> Step<'a> {
    Box::pin(std::future::ready(Ok(())))
}

/// The steps of a write one declaration of an entity type (copies, id lists,
/// denormalised fields, unique values, expiry, change events, blob fields) takes on the
/// one write path. Every hook but [`plan`](Self::plan) does nothing by default. The
/// planner calls every registered declaration (`registry::write_steps`, in its order)
/// on every write; each acts on the targets of its own kind — the ones the table's layout
/// names for the new value, and the ones the stored record lists for the old (so a
/// declaration the type no longer makes is still undone) — and on what the layout
/// declares:
///
/// 1. [`complete`](Self::complete): before any I/O, completes the request (the expiry
///    time a ttl gives, its entry in the expiry index);
/// 2. [`prepare`](Self::prepare): after the write's intent is recorded, its steps outside
///    the transaction (blobs uploaded, links put beside sources in other partitions);
/// 3. per attempt, [`shape`](Self::shape): reads what the new value takes from elsewhere
///    (a denormalised source's value) and reserves what it holds across partitions (unique
///    values), before the primary is planned;
/// 4. per attempt, [`plan`](Self::plan): adds its operations to the entity group
///    transaction (copies, links, id-list pages) and its follow-up work (operations for
///    the worker, the change event, blob deletions);
/// 5. [`refused`](Self::refused): reads a refusal of one of its own operations.
///
/// A declaration's other roles are traits of their own: what a reader sees
/// ([`ReadSteps`]) and the upkeep of what it keeps outside the
/// transaction ([`super::super::upkeep`]: its operations applied, its targets checked and
/// backfilled, a failed write's steps undone).
pub(crate) trait WriteSteps<S: TableStore + Clone + 'static>: Sync {
    /// Completes the request before any I/O.
    ///
    /// # Errors
    /// A value the declaration cannot take.
    fn complete(&self, _writer: &Writer<S>, _request: &mut Request) -> Result<()> {
        Ok(())
    }

    /// The write's steps outside its transaction, after its intent.
    fn prepare<'a>(&'a self, _writer: &'a Writer<S>, _prepared: &'a mut Prepared) -> Step<'a> {
        nothing()
    }

    /// Shapes an attempt's new value, or reserves, before the primary is planned.
    fn shape<'a>(&'a self, _attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        nothing()
    }

    /// Adds its operations and follow-up work to the attempt.
    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a>;

    /// Reads a refusal of one of its own operations (the planner hands each
    /// [`Role::Of`] to the declaration it names, with its note): `None` when it has
    /// nothing to say (the planner retries a lost race, else fails), `Some(Ok(()))` to
    /// plan again, `Some(Err(_))` when the write fails with that error.
    fn refused(
        &self,
        _note: Option<&(dyn Any + Send + Sync)>,
        _error: &tablekit_core::Error,
    ) -> Option<Result<()>> {
        None
    }
}

/// A stored entity on its way to the reader (boxed: the trait is used as `dyn`).
pub(crate) type Restoring<'a> = Pin<Box<dyn Future<Output = Result<Entity>> + Send + 'a>>;

/// What one declaration does to an entity on its way to the reader. Both hooks do
/// nothing by default.
pub(crate) trait ReadSteps<S: TableStore + Clone + 'static>: Sync {
    /// Whether a reader must not see a stored entity, or an index copy of one.
    fn hides(&self, _writer: &Writer<S>, _stored: &Entity) -> bool {
        false
    }

    /// The stored entity as the reader sees it.
    fn restore<'a>(&'a self, _writer: &'a Writer<S>, stored: Entity) -> Restoring<'a> {
        Box::pin(std::future::ready(Ok(stored)))
    }
}

/// What a table writes with: its store and engine, its layout, and the settings the
/// declarations read. `IndexedTable` holds one; the untyped paths (the archive's delete,
/// the sweeper) build one from the layout the registry holds.
#[derive(Clone)]
pub(crate) struct Writer<S> {
    /// The primaries' table.
    pub table: String,
    pub layout: Arc<Layout>,
    pub engine: Engine<S>,
    pub blobs: Option<BlobStore>,
    /// The properties the type keeps in the blob store (`#[entity(blob)]`).
    pub blob_fields: Vec<&'static str>,
    pub clock: SharedClock,
    /// How long a reservation of a unique value protects a write in flight.
    pub unique_lease: Duration,
    /// Whether another registered type copies a property of this one.
    pub track_dependents: Arc<AtomicBool>,
    /// When the registry was last asked whether another type copies from this one.
    pub dependents_checked: Arc<std::sync::Mutex<Option<tokio::time::Instant>>>,
    /// Whether the primaries carry an index record (their version and targets): then a
    /// write records an intent before acting outside its transaction and a delete leaves
    /// a tombstone. A `LargeTable`'s primaries carry none, only the version stamp by
    /// which a write whose answer was lost is recognised as landed.
    pub indexed: bool,
}

impl<S: TableStore> Writer<S> {
    /// The store.
    pub(crate) fn store(&self) -> &S {
        self.engine.store()
    }
}

/// What a write asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Insert,
    Upsert,
    Replace,
    Delete,
}

/// One write of a primary, untyped: its keys, its new entity (none for a delete) and the
/// targets the new value has.
#[derive(Debug)]
pub(crate) struct Request {
    pub kind: Kind,
    pub source: EntityRef,
    pub entity: Option<Entity>,
    pub targets: BTreeSet<Target>,
    /// The caller's ETag condition.
    pub user_etag: Option<ETag>,
    /// The part of the names of the blobs the write uploads, when it offloads any.
    pub blob_nonce: Option<String>,
}

impl Request {
    /// The delete of the primary at `source` if `if_match` holds.
    pub(crate) fn delete(source: EntityRef, if_match: IfMatch) -> Self {
        Request {
            kind: Kind::Delete,
            source,
            entity: None,
            targets: BTreeSet::new(),
            user_etag: match if_match {
                IfMatch::ETag(etag) => Some(etag),
                IfMatch::Any => None,
            },
            blob_nonce: None,
        }
    }
}

/// A request after its intent: what its steps outside the transaction may do.
pub(crate) struct Prepared {
    pub source: EntityRef,
    pub entity: Option<Entity>,
    pub targets: BTreeSet<Target>,
    pub reclaim: Reclaim,
}

/// The role of each operation of a write's batch, to read a refusal back: the planner's
/// own, or a declaration's (named by its attribute, read back by its
/// [`WriteSteps::refused`]).
#[derive(Debug)]
pub(crate) enum Role {
    /// The primary.
    Primary,
    /// The deletion of the write's intent (its steps outside the transaction).
    Intent,
    /// An entry the write drops (a copy, a link), deleted whatever its state: already
    /// gone, the next plan leaves it out.
    Dropped(EntityRef),
    /// An operation a declaration added: `by` names the declaration, `note` is what it
    /// left to know the operation by when a refusal comes back.
    Of {
        by: &'static str,
        note: Option<Box<dyn Any + Send + Sync>>,
    },
}

impl Role {
    /// An operation of the declaration `by`, with nothing to know it by.
    pub(crate) fn of(by: &'static str) -> Self {
        Role::Of { by, note: None }
    }

    /// An operation of the declaration `by`, known by `note`.
    pub(crate) fn noted(by: &'static str, note: impl Any + Send + Sync) -> Self {
        Role::Of {
            by,
            note: Some(Box::new(note)),
        }
    }
}

/// The unconditional delete of an entry at `at` (a dropped copy or link): with
/// [`Role::Dropped`], one already gone is left out of the next plan.
pub(crate) fn delete(at: &EntityRef) -> tablekit_core::WriteOp {
    tablekit_core::WriteOp::Delete {
        partition_key: at.partition_key.clone(),
        row_key: at.row_key.clone(),
        if_match: IfMatch::Any,
    }
}

/// One planned attempt of a write, as the declarations add to it.
pub(crate) struct Attempt<'a, S> {
    pub writer: &'a Writer<S>,
    pub source: &'a EntityRef,
    /// The version this attempt records.
    pub version: i64,
    /// The stored primary as read (`None`: absent).
    pub old: Option<&'a Entity>,
    /// Whether the stored primary counts as absent (expired, or a tombstone).
    pub old_absent: bool,
    pub old_targets: &'a BTreeSet<Target>,
    pub new_targets: &'a BTreeSet<Target>,
    /// The new value: shaped before the primary is planned, then the primary as written
    /// (with its record). `None` for a delete.
    pub entity: Option<Entity>,
    /// Same-partition entries found missing (their delete is left out).
    pub missing: &'a HashSet<EntityRef>,
    /// The write's intent, if it recorded one.
    pub intent: Option<&'a Intent>,
    /// Sources in the partition, under the ETags their values were read at.
    pub guards: Vec<(EntityRef, ETag)>,
    pub plan: Plan<Role>,
    /// Index work for the worker (packed into outbox entries after the plan).
    pub operations: Vec<IndexOperation>,
    /// Follow-up work besides the index work (change events, blob deletions), recorded
    /// after the index work.
    pub work: Vec<Envelope>,
    /// The operations `work` hands on (a blob deletion names several blobs).
    pub work_operations: usize,
}

impl<S: TableStore> Attempt<'_, S> {
    /// The write's follow-up operation for `target`: adding it (`add`) or removing it.
    pub(crate) fn follow_up(&self, target: &Target, add: bool) -> IndexOperation {
        IndexOperation::for_target(
            self.source,
            self.version,
            target,
            add,
            &self.writer.layout.kind_property,
        )
    }

    /// The change this attempt's write makes, as an event for `queue` (the change events'
    /// queue; the feed names none): `None` for a delete of nothing.
    pub(crate) fn change_event(&self, queue: &str) -> Option<crate::changes::ChangeEvent> {
        crate::changes::ChangeEvent::of_write(
            queue,
            &self.writer.layout.kind,
            &self.source.table,
            self.version,
            self.entity.as_ref(),
            self.old.filter(|_| !self.old_absent),
        )
    }

    /// Hands `target` to the worker as follow-up work: adding it (`add`) or removing it.
    pub(crate) fn hand_on(&mut self, target: &Target, add: bool) {
        let operation = self.follow_up(target, add);
        self.operations.push(operation);
    }

    /// The old targets the new value drops, of the kind `mine` picks.
    pub(crate) fn dropped(&self, mine: impl Fn(&Target) -> bool) -> Vec<Target> {
        self.old_targets
            .iter()
            .filter(|o| mine(o) && !self.new_targets.iter().any(|n| n.same_slot(o)))
            .cloned()
            .collect()
    }

    /// Fails when the write stalled and was fenced and undone meanwhile (see
    /// [`undone_while_stalled`]).
    ///
    /// # Errors
    /// [`Error::Contention`] when it was; the store's errors.
    pub(crate) async fn check_not_undone(&self) -> Result<()> {
        if undone_while_stalled(self.writer, self.intent).await? {
            return Err(undone(self.source));
        }
        Ok(())
    }

    /// Whether the new value keeps the slot of `target`.
    pub(crate) fn kept(&self, target: &Target) -> bool {
        self.old_targets.iter().any(|o| o.same_slot(target))
    }
}

/// Whether a write's intent, recorded long ago (past half the unique lease: the write
/// stalled), was claimed meanwhile: its undoing may have run. One point read, only for
/// such old intents.
///
/// # Errors
/// The store's errors.
pub(crate) async fn undone_while_stalled<S: TableStore>(
    writer: &Writer<S>,
    intent: Option<&Intent>,
) -> Result<bool> {
    match intent {
        Some(intent) if intent.age() > writer.unique_lease / 2 => {
            Ok(!intent.pending(writer.store()).await?)
        }
        _ => Ok(false),
    }
}

/// The error of a write whose intent was claimed (it stalled past the relay's grace):
/// what it did outside its transaction is being undone, so it must not go on.
pub(crate) fn undone(source: &EntityRef) -> Error {
    Error::Contention {
        what: format!(
            "{}: it stalled past the relay's grace period and its steps outside the transaction were undone",
            what(source)
        ),
        attempts: 1,
    }
}

/// How a write names itself in errors and traces.
pub(crate) fn what(source: &EntityRef) -> String {
    format!("indexed write of {source}")
}
