//! Where committed follow-up work goes: a queue (the worker crate's `QueueSink`), or
//! [`InlineSink`], which runs it in the writing process through a [`Registry`].

use super::BoxFuture;
use super::operation::{Envelope, Registry};
use crate::error::{Error, Result};

/// Where a writer hands its follow-up work after the commit.
pub trait OutboxSink: Send + Sync {
    /// Publishes one operation durably; `Ok` only once it cannot be lost.
    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<()>>;

    /// Publishes the operation of an outbox entry of `table`'s partition
    /// `partition_key`: the call the writer (right after its commit) and the relay make.
    /// By default [`publish`](Self::publish); a sink that routes or checks by partition
    /// (an ordered queue per partition, an audit of who publishes what) overrides it.
    fn publish_entry<'a>(
        &'a self,
        table: &'a str,
        partition_key: &'a str,
        envelope: &'a Envelope,
    ) -> BoxFuture<'a, Result<()>> {
        let _ = (table, partition_key);
        self.publish(envelope)
    }

    /// The work this sink was handed and that is not applied yet, as far as it can
    /// tell: by default it cannot ([`Unapplied::Unknown`]).
    fn unapplied(&self) -> BoxFuture<'_, Result<Unapplied>> {
        Box::pin(async { Ok(Unapplied::Unknown) })
    }
}

/// The work a sink was handed and that is not applied yet ([`OutboxSink::unapplied`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unapplied {
    /// None: the sink applies work as it is handed it (inline).
    Nothing,
    /// Messages of a queue that no worker has settled yet (waiting, leased or delayed
    /// for a retry); any of them may hold a given write's work.
    Queued {
        /// The queue.
        queue: String,
        /// Its unsettled messages.
        messages: u64,
    },
    /// The sink cannot tell (a sink of another process, or one that does not say).
    Unknown,
}

impl Unapplied {
    /// Whether it is known that nothing handed on waits to be applied.
    pub fn is_nothing(&self) -> bool {
        match self {
            Unapplied::Nothing => true,
            Unapplied::Queued { messages, .. } => *messages == 0,
            Unapplied::Unknown => false,
        }
    }
}

impl std::fmt::Display for Unapplied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unapplied::Nothing => f.write_str("nothing handed on waits"),
            Unapplied::Queued { queue, messages } => {
                write!(
                    f,
                    "{messages} message(s) not yet applied in queue `{queue}`"
                )
            }
            Unapplied::Unknown => f.write_str("the sink cannot tell what it holds unapplied"),
        }
    }
}

/// A sink that runs each operation at once, in the writing process: no queue, and the
/// copies are up to date when the write returns (unless the process stops first; the
/// relay then finishes the work).
#[derive(Clone, Debug)]
pub struct InlineSink {
    registry: Registry,
}

impl InlineSink {
    /// A sink running operations through `registry`.
    pub fn new(registry: Registry) -> Self {
        InlineSink { registry }
    }

    /// The handlers.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

impl OutboxSink for InlineSink {
    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.registry
                .handle(envelope.clone())
                .await
                .map_err(|e| Error::Publish(Box::new(e)))
        })
    }

    fn unapplied(&self) -> BoxFuture<'_, Result<Unapplied>> {
        Box::pin(async { Ok(Unapplied::Nothing) })
    }
}

/// A sink whose every publish is counted and waits the latency of a
/// [`RoundTrips`](tablekit_core::roundtrip::RoundTrips) before it reaches the sink it
/// wraps: the queue's share of the round-trip model (see [`tablekit_core::roundtrip`]).
/// Share the store wrapper's counters to count a path's store calls and publishes in one
/// place.
pub struct RoundTripSink {
    inner: std::sync::Arc<dyn OutboxSink>,
    trips: tablekit_core::roundtrip::RoundTrips,
}

impl RoundTripSink {
    /// Wraps `inner`, counting into `trips`.
    pub fn new(
        inner: std::sync::Arc<dyn OutboxSink>,
        trips: tablekit_core::roundtrip::RoundTrips,
    ) -> Self {
        RoundTripSink { inner, trips }
    }

    /// The counters and the latency.
    pub fn trips(&self) -> &tablekit_core::roundtrip::RoundTrips {
        &self.trips
    }
}

impl std::fmt::Debug for RoundTripSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoundTripSink")
            .field("trips", &self.trips)
            .finish_non_exhaustive()
    }
}

impl OutboxSink for RoundTripSink {
    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.trips.call(
            tablekit_core::roundtrip::CallKind::Publish,
            self.inner.publish(envelope),
        ))
    }

    fn unapplied(&self) -> BoxFuture<'_, Result<Unapplied>> {
        self.inner.unapplied()
    }
}
