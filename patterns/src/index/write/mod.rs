//! The one write path of indexed tables: every primary write — `IndexedTable`'s typed
//! writes, `update` and `write_all`, the untyped delete of the archive operation and the
//! sweeper — is one [`Request`] planned by one planner over the consistency engine, and
//! every declaration of the entity type plugs into it through small traits, one per
//! role: its steps of a write ([`WriteSteps`](declaration::WriteSteps)), of a read
//! ([`ReadSteps`](declaration::ReadSteps)), and the upkeep of what it keeps outside the
//! transaction (`super::upkeep`: `Applies` for its operations, `Kept` for its targets,
//! `Upkeep` for the rest).
//!
//! # The steps of a write
//! 1. **Request** (`IndexedTable`, or the registry's layout for the untyped paths): the
//!    primary's keys, its new entity (none for a delete), the targets the layout gives the
//!    new value (copies, id-list memberships, denormalised sources, unique values).
//! 2. **Complete** ([`complete`](declaration::WriteSteps::complete), before any I/O):
//!    the expiry time a ttl gives and its entry; whether blob fields go to the blob store.
//!    A write whose own transaction cannot fit is refused here.
//! 3. **Intent and steps outside the transaction**
//!    ([`prepare`](declaration::WriteSteps::prepare)): when the write acts outside its
//!    transaction (reservations, links, blobs) it first records an intent in its
//!    partition (`super::reclaim`); then blobs are uploaded and links put.
//! 4. **Plan** (`plan::IndexWrite`, each attempt of the engine's commit): read the stored
//!    primary and check the write's conditions against it (a tombstone or an expired
//!    entity counts as absent); choose the version; let each declaration
//!    [shape](declaration::WriteSteps::shape) the new value (reserve unique values, read
//!    denormalised sources); plan the primary under the ETag read, with its record (a
//!    delete: a tombstone, buried after the grace period); let each declaration
//!    [plan](declaration::WriteSteps::plan) its operations in the entity group
//!    transaction and its follow-up work; fence the intent.
//! 5. **Commit** (the engine): one transaction with an outbox entry per piece of
//!    follow-up work; a refusal goes to the declaration whose operation it was
//!    ([`refused`](declaration::WriteSteps::refused)); then the work goes to the sink (or
//!    waits for the relay), and the worker's `IndexApplier` applies it.
//!
//! # The read path
//! A read hands each stored primary, or index copy read as one, through the same
//! declarations (`read`): one may hide it
//! ([`ReadSteps::hides`](declaration::ReadSteps::hides): expiry, which also hides a
//! delete's tombstone), another restore it
//! ([`ReadSteps::restore`](declaration::ReadSteps::restore): blob fields), before it is
//! read as the entity type.
//!
//! # The declarations
//! Each lives in its own folder under `index/decl/`, named after its attribute — its
//! stored target and operation types in its `record` module, its write steps, its worker
//! steps (`apply`) and its audit — and the planner reaches it only through the registry
//! (`super::registry`), which lists it once for its stored types and once for its roles:
//! `index` (secondary indexes, and the expiry index's entries), `index_entity` (id
//! lists), `denormalized` (denormalised fields and the entities that copy from this
//! one), `unique` (unique values), `expiry` (time to live), `blob` (blob fields and
//! large values), `changes` (change events) and `wide` (chunks).

pub(crate) mod batch;
pub(crate) mod declaration;
pub(crate) mod outcome;
pub(crate) mod plan;
pub(crate) mod prepare;
pub(crate) mod read;

pub(crate) use declaration::{Kind, Request, Writer};
pub use outcome::{IndexedWriteReport, WriteOutcome};
