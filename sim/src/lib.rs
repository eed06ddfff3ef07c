//! The deterministic simulation of the whole tablekit system.
//!
//! One seed decides everything: the operations writers issue, how the tasks interleave
//! ([`exec`]), and the faults — errors before writes, lost answers, failed reads,
//! latency, process crashes at store calls (core's [`ChaosStore`]), duplicated, delayed,
//! reordered deliveries and lapsing leases ([`queue`]), and jumps of the clock. The
//! system under test runs unchanged: typed writes and batches through
//! [`IndexedTable`](tablekit_patterns::index::IndexedTable), the relay, the index and
//! archive workers (the workers' own delivery handling), the expiry sweeper, change
//! consumers, the change feed's groups of consumers and its retention, and audits. After the faults stop and everything drains, a small
//! reference model ([`model`]) checks the invariants of the design: acknowledged writes
//! visible, refused writes absent, audits clean, unique values held exactly once,
//! nothing expired readable, the last change event equal to the state, every committed
//! change in the feed's log once and delivered to every group with no gap, every archive
//! exactly once with its blobs, nothing left in outboxes, nothing poisoned by accident.
//!
//! `TABLEKIT_SIM_SEED=<n>` replays one seed; `scripts/simulate.sh` runs many.
//!
//! [`ChaosStore`]: tablekit_core::fault::ChaosStore

#![allow(missing_docs, unreachable_pub)]

pub mod entities;
pub mod exec;
pub mod fixture;
pub mod model;
pub mod queue;
pub mod stall;
mod world;

pub use world::{Options, Report, StoreKind, simulate};
