//! Where committed follow-up work goes: a queue (the worker crate's `QueueSink`), or
//! [`InlineSink`], which runs it in the writing process through a [`Registry`].

use super::BoxFuture;
use super::operation::{Envelope, Registry};
use crate::error::{Error, Result};

/// Where a writer hands its follow-up work after the commit.
pub trait OutboxSink: Send + Sync {
    /// Publishes one operation durably; `Ok` only once it cannot be lost.
    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<()>>;
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
}
