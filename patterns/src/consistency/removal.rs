//! Removing published outbox entries off the write's critical path.
//!
//! Once a writer's operation is in the sink, the write is done: its outbox entry only
//! waits to be removed. A writer hands the removal to its engine's [`Remover`], a task of
//! the process that takes every removal waiting, groups them by partition and removes
//! each partition's in one entity group transaction (up to 100 entries, each under the
//! ETag its commit returned), so a write costs its commit and its publish, and a busy
//! partition's removals share transactions. A removal that does not land (the process
//! stops first, the store fails) leaves the entry to the relay, which publishes it again
//! after its grace period: a duplicate publish, which the operations' idempotence absorbs.
//! [`Engine::flush`](super::Engine::flush) waits for the removals handed over so far (a
//! process that stops calls it, and so do tests that look at the outbox).

use std::collections::BTreeMap;

use tablekit_core::{ETag, IfMatch, TableStore};
use tokio::sync::{mpsc, oneshot};

use super::outbox;

/// How many removals may wait before writers wait for the remover.
const WAITING: usize = 65_536;
/// How many partitions' transactions the remover sends at once.
const AT_ONCE: usize = 8;

/// One published entry to remove.
#[derive(Debug)]
pub(crate) struct Removal {
    pub(crate) table: String,
    pub(crate) partition_key: String,
    pub(crate) row_key: String,
    pub(crate) etag: Option<ETag>,
}

enum Message {
    Remove(Removal),
    Flush(oneshot::Sender<()>),
}

/// The handle of a process's remover task (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Remover {
    sender: mpsc::Sender<Message>,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Message::Remove(r) => f.debug_tuple("Remove").field(r).finish(),
            Message::Flush(_) => f.write_str("Flush"),
        }
    }
}

impl Remover {
    /// Starts the remover on the current Tokio runtime; `None` outside one (the writer
    /// then removes its entries itself).
    pub(crate) fn start<S: TableStore + Clone + 'static>(store: S) -> Option<Self> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (sender, receiver) = mpsc::channel(WAITING);
        runtime.spawn(run(store, receiver));
        Some(Remover { sender })
    }

    /// Hands over a removal; `Err` with it when the remover is gone.
    pub(crate) async fn remove(&self, removal: Removal) -> Result<(), Removal> {
        self.sender
            .send(Message::Remove(removal))
            .await
            .map_err(|e| match e.0 {
                Message::Remove(removal) => removal,
                Message::Flush(_) => unreachable!("only a removal was sent"),
            })
    }

    /// Waits until every removal handed over before is done (landed, or left to the
    /// relay).
    pub(crate) async fn flush(&self) {
        let (done, waited) = oneshot::channel();
        if self.sender.send(Message::Flush(done)).await.is_ok() {
            let _ = waited.await;
        }
    }
}

async fn run<S: TableStore>(store: S, mut receiver: mpsc::Receiver<Message>) {
    while let Some(first) = receiver.recv().await {
        // Everything waiting now goes in this round.
        let mut messages = vec![first];
        while let Ok(next) = receiver.try_recv() {
            messages.push(next);
        }
        let mut partitions: BTreeMap<(String, String), Vec<(String, IfMatch)>> = BTreeMap::new();
        let mut flushes = Vec::new();
        for message in messages {
            match message {
                Message::Remove(r) => partitions
                    .entry((r.table, r.partition_key))
                    .or_default()
                    .push((r.row_key, r.etag.map_or(IfMatch::Any, IfMatch::ETag))),
                Message::Flush(done) => flushes.push(done),
            }
        }
        let mut removals = Vec::new();
        for ((table, partition_key), entries) in &partitions {
            for chunk in entries.chunks(tablekit_core::limits::MAX_BATCH_OPERATIONS) {
                removals.push(outbox::remove_entries(
                    &store,
                    table,
                    partition_key,
                    chunk.to_vec(),
                ));
            }
        }
        use futures::StreamExt;
        let mut removals = futures::stream::iter(removals).buffer_unordered(AT_ONCE);
        while removals.next().await.is_some() {}
        for done in flushes {
            let _ = done.send(());
        }
    }
}
