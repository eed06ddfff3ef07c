//! Draining one partition's outbox: a page of entries at a time, intents claimed and
//! operations published concurrently (a pipeline of `publishes` in flight), published
//! entries removed in entity group transactions of up to `batch` (each delete under the
//! ETag the relay read or wrote, so an entry changed meanwhile stays).

use futures::StreamExt;
use tablekit_core::{ETag, Entity, IfMatch, TableStore};
use tokio::time::Instant;

use super::super::operation::Envelope;
use super::super::outbox;
use super::super::sink::OutboxSink;
use crate::error::Result;

/// How a partition is drained.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DrainSettings {
    pub(crate) publishes: usize,
    pub(crate) batch: usize,
}

/// What draining a partition did.
#[derive(Debug, Default)]
pub(crate) struct Drained {
    pub(crate) entries: usize,
    pub(crate) published: usize,
    pub(crate) deferred: usize,
    pub(crate) malformed: usize,
    /// Entries left in the partition (deferred, malformed, or not reached).
    pub(crate) left: usize,
    /// Feed changes sequenced.
    pub(crate) sequenced: usize,
}

/// One entry ready to publish: its envelope, row key and the ETag to remove it under.
struct Ready {
    envelope: Envelope,
    row_key: String,
    etag: Option<ETag>,
}

/// The partition being drained, and how.
pub(crate) struct Partition<'a, S> {
    pub(crate) store: &'a S,
    pub(crate) sink: &'a dyn OutboxSink,
    pub(crate) table: &'a str,
    pub(crate) partition_key: &'a str,
    /// Entries written after it are left to their writers.
    pub(crate) cutoff: chrono::DateTime<chrono::Utc>,
    pub(crate) settings: DrainSettings,
    /// When the share's lease nears its end: no entry is claimed or published after it
    /// (the relay that takes the share over publishes the rest).
    pub(crate) fence: Option<Instant>,
}

impl<S> Partition<'_, S> {
    /// Whether the share is still held (before its fence).
    pub(crate) fn held(&self) -> bool {
        self.fence.is_none_or(|fence| Instant::now() < fence)
    }
}

/// Drains a page of one partition's entries.
pub(crate) async fn drain_page<S: TableStore>(
    partition: &Partition<'_, S>,
    page: Vec<Entity>,
    drained: &mut Drained,
) -> Result<()> {
    let (store, sink, table, partition_key) = (
        partition.store,
        partition.sink,
        partition.table,
        partition.partition_key,
    );
    let (cutoff, settings) = (partition.cutoff, partition.settings);
    drained.entries += page.len();
    let mut candidates = Vec::new();
    for entry in page {
        if outbox::created_at(&entry).is_some_and(|created| created > cutoff)
            || outbox::waiting(&entry)
        {
            drained.deferred += 1;
            drained.left += 1;
        } else {
            candidates.push(entry);
        }
    }
    // Intents their writes left past the grace period: claimed first (concurrently), so
    // the writes can no longer commit, then published as their undoing.
    let claims: Vec<_> = candidates
        .into_iter()
        .map(|entry| async move {
            if !outbox::is_intent(&entry) {
                return Ok(Some(entry));
            }
            if !partition.held() {
                return Ok(None);
            }
            let Some(current) = entry.etag.clone() else {
                return Ok(None);
            };
            // `None`: committed or claimed meanwhile; the next pass sees.
            Ok(outbox::claim_intent(store, table, &entry, current)
                .await?
                .map(|etag| Entity {
                    etag: Some(etag),
                    ..entry
                }))
        })
        .collect();
    let claimed: Vec<Result<Option<Entity>>> = futures::stream::iter(claims)
        .buffered(settings.publishes)
        .collect()
        .await;
    let mut ready = Vec::new();
    for claim in claimed {
        let Some(entry) = claim? else {
            drained.left += 1;
            continue;
        };
        match outbox::read_entry(&entry) {
            Ok(envelope) => ready.push(Ready {
                envelope,
                row_key: entry.row_key,
                etag: entry.etag,
            }),
            Err(e) => {
                tracing::error!(table, partition_key, error = %e, "outbox entry does not read; left in place");
                drained.malformed += 1;
                drained.left += 1;
            }
        }
    }
    // Publish in a pipeline: up to `publishes` in flight.
    let publishes: Vec<_> = ready
        .into_iter()
        .map(|ready| async move {
            // Checked at each publish: a pass that stalled past its fence (a slow store,
            // a paused process) publishes nothing more of the share.
            let ok = partition.held()
                && outbox::hand_over(table, partition_key, sink, &ready.envelope).await;
            (ready, ok)
        })
        .collect();
    let results: Vec<(Ready, bool)> = futures::stream::iter(publishes)
        .buffer_unordered(settings.publishes)
        .collect()
        .await;
    let mut published = Vec::new();
    for (ready, ok) in results {
        if ok {
            published.push(ready);
        } else {
            drained.deferred += 1;
            drained.left += 1;
        }
    }
    // Remove what was published, in transactions of up to `batch`, as many at once as
    // publishes.
    let entries: Vec<(String, IfMatch)> = published
        .into_iter()
        .map(|ready| {
            (
                ready.row_key,
                ready.etag.map_or(IfMatch::Any, IfMatch::ETag),
            )
        })
        .collect();
    let removals: Vec<_> = entries
        .chunks(settings.batch)
        .map(|chunk| outbox::remove_entries(store, table, partition_key, chunk.to_vec()))
        .collect();
    let removed: Vec<(usize, usize)> = futures::stream::iter(removals)
        .buffer_unordered(settings.publishes)
        .collect()
        .await;
    for (gone, stayed) in removed {
        drained.published += gone;
        drained.deferred += stayed;
        drained.left += stayed;
    }
    Ok(())
}
