//! The consistency engine: one home for follow-up work. Every cross-partition guarantee
//! of tablekit — index copies in other partitions and tables, id lists, denormalised
//! fields, blobs a write stopped referencing, archive moves, an application's own
//! operations — rests on it; the pattern modules are its users.
//!
//! - [`operation`]: the operation envelope ([`Envelope`]), the [`Operation`] trait and the
//!   [`Registry`] mapping kinds to handlers — where an application registers its own.
//! - [`commit`]: the one commit primitive ([`Engine::commit`]: read, plan a batch plus its
//!   follow-up work, commit both in one entity group transaction, retry refusals with
//!   jittered backoff, hand the work to the sink) and the [`RetryPolicy`] every optimistic
//!   loop follows.
//! - [`outbox`]: the outbox entry each operation is recorded as, in the writer's
//!   partition and transaction.
//! - [`pending`]: the pending markers (one per partition with recent follow-up work) that
//!   let the relay find outbox entries without scanning tables.
//! - [`sink`]: where work goes after the commit: a queue, or [`InlineSink`].
//! - [`relay`]: the [`Relay`], which publishes what a crash or a failed publish left.
//!
//! The steps of a write with follow-up work, and what a crash between them leaves:
//!
//! | step | a crash after it leaves | finished by |
//! |---|---|---|
//! | 1. lease the partition's marker | a marker, no entry | the relay removes the marker once its lease is over |
//! | 2. commit batch + outbox entries | entries, marker | the relay publishes them after its grace period |
//! | 3. publish to the sink | entries already published | the relay publishes again (operations are idempotent) |
//! | 4. delete the entries | the marker | the relay removes it once its lease is over |
//! | 5. (relay) delete the marker | — | — |
//!
//! ```
//! use std::sync::Arc;
//! use serde::{Deserialize, Serialize};
//! use tablekit_core::{Entity, MemoryStore, TableStore, WriteOp};
//! use tablekit_patterns::consistency::{
//!     Engine, Envelope, InlineSink, Operation, Plan, Planner, Registry,
//! };
//!
//! /// Counts a visit in another partition.
//! #[derive(Serialize, Deserialize)]
//! struct CountVisit { page: String }
//! impl Operation for CountVisit {
//!     const KIND: &'static str = "count_visit";
//!     const VERSION: u32 = 1;
//! }
//!
//! struct Visit;
//! impl Planner for Visit {
//!     type Role = ();
//!     async fn plan(&mut self) -> tablekit_patterns::Result<Option<Plan<()>>> {
//!         let mut plan = Plan::new();
//!         plan.push(WriteOp::InsertOrReplace(Entity::new("visits", "v1")), ());
//!         plan.follow_up(Envelope::new(&CountVisit { page: "home".into() }).expect("json"));
//!         Ok(Some(plan))
//!     }
//!     fn refused(&mut self, e: tablekit_core::Error, _: Option<&()>) -> tablekit_patterns::Result<()> {
//!         Err(e.into())
//!     }
//!     fn what(&self) -> String { "visit".into() }
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let store = MemoryStore::new();
//! store.create_table("Visits").await?;
//! let counted = store.clone();
//! let registry = Registry::new().register(move |visit: CountVisit| {
//!     let store = counted.clone();
//!     async move {
//!         store.create_table_if_not_exists("Counts").await?;
//!         store.insert_or_replace("Counts", Entity::new("pages", visit.page)).await?;
//!         Ok(())
//!     }
//! });
//! let engine = Engine::options()
//!     .sink(Arc::new(InlineSink::new(registry)))
//!     .build(store.clone());
//! let committed = engine.commit("Visits", "visits", &mut Visit).await?.expect("planned");
//! assert!(committed.published);
//! assert!(store.get("Counts", "pages", "home", None).await?.is_some());
//! # Ok::<_, tablekit_patterns::Error>(())
//! # }).unwrap();
//! ```

// The mechanisms, hidden: not part of the API. What users call is re-exported below;
// tablekit's own tests, tools and worker crate reach the rest by these paths.
#[doc(hidden)]
pub mod commit;
#[doc(hidden)]
pub mod operation;
#[doc(hidden)]
pub mod outbox;
#[doc(hidden)]
pub mod pending;
#[doc(hidden)]
pub mod relay;
mod removal;
#[doc(hidden)]
pub mod sink;

use std::future::Future;
use std::pin::Pin;

pub use commit::{
    Committed, DEFAULT_TOMBSTONE_GRACE, Engine, EngineOptions, Intent, MAX_PLAN_AGE, Plan, Planner,
    Retry, RetryPolicy, lost_race,
};
pub use operation::{DEFAULT_QUEUE, Envelope, Operation, OperationError, Registry};
pub use pending::PENDING_TABLE;
pub use relay::{
    Backlog, RELAYS_TABLE, Relay, RelayOptions, RelayReport, RelayStatus, backlog, backlog_of,
    relays,
};
pub use sink::{InlineSink, OutboxSink, RoundTripSink, Unapplied};

/// A boxed future, for the object-safe sink and handlers.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
