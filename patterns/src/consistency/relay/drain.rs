//! Draining one partition's outbox: a page of entries at a time, intents claimed and
//! operations published concurrently (a pipeline of `publishes` in flight), published
//! entries removed in entity group transactions of up to `batch` (each delete under the
//! ETag the relay read or wrote, so an entry changed meanwhile stays).

use futures::StreamExt;
use tablekit_core::{ETag, Entity, IfMatch, TableStore};

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
    let claimed: Vec<Result<Option<Entity>>> = bounded(claims, settings.publishes).await;
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
            let ok = outbox::hand_over(table, partition_key, sink, &ready.envelope).await;
            (ready, ok)
        })
        .collect();
    let results: Vec<(Ready, bool)> = bounded(publishes, settings.publishes).await;
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
    let chunks: Vec<Vec<Ready>> = chunked(published, settings.batch.clamp(1, 100));
    let removals: Vec<_> = chunks
        .into_iter()
        .map(|chunk| {
            let entries = chunk
                .into_iter()
                .map(|ready| {
                    let if_match = ready.etag.map_or(IfMatch::Any, IfMatch::ETag);
                    (ready.row_key, if_match)
                })
                .collect();
            outbox::remove_entries(store, table, partition_key, entries)
        })
        .collect();
    let removed: Vec<(usize, usize)> = bounded(removals, settings.publishes).await;
    for (gone, stayed) in removed {
        drained.published += gone;
        drained.deferred += stayed;
        drained.left += stayed;
    }
    Ok(())
}

/// Runs `futures` with at most `limit` in flight; the outputs in the futures' order.
async fn bounded<F: std::future::Future>(futures: Vec<F>, limit: usize) -> Vec<F::Output> {
    let mut outputs: Vec<Option<F::Output>> = Vec::new();
    outputs.resize_with(futures.len(), || None);
    let mut waiting = futures.into_iter().enumerate();
    let mut in_flight = futures::stream::FuturesUnordered::new();
    loop {
        while in_flight.len() < limit.max(1) {
            let Some((i, future)) = waiting.next() else {
                break;
            };
            in_flight.push(async move { (i, future.await) });
        }
        let Some((i, output)) = in_flight.next().await else {
            break;
        };
        outputs[i] = Some(output);
    }
    outputs.into_iter().flatten().collect()
}

fn chunked<T>(items: Vec<T>, size: usize) -> Vec<Vec<T>> {
    let mut chunks: Vec<Vec<T>> = Vec::new();
    for item in items {
        match chunks.last_mut() {
            Some(chunk) if chunk.len() < size => chunk.push(item),
            _ => chunks.push(vec![item]),
        }
    }
    chunks
}
