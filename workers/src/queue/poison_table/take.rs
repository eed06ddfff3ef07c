//! Taking messages off the poison table: discard (its rows and counts go), redrive (send
//! to the target queue, then its rows and counts go), each step idempotent (see the module
//! docs of [`super`]).

use tablekit_core::{Batch, Entity, IfMatch, TableStore, WriteOp};

use super::rows::*;
use super::{ATTEMPTS, POISON_TABLE, PoisonTable, conflicted};
use crate::error::{Error, Result};
use crate::queue::{PoisonAction, Queue};

/// Which steps of a take to run: all, or stop after one (what a test or the simulation
/// uses to stop a redrive between its steps, as a crash would).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TakeSteps {
    /// Every step.
    #[default]
    All,
    /// Only the first step of a redrive: the message marked as being redriven.
    MarkOnly,
    /// The first two steps of a redrive: marked and sent, its rows left.
    MarkAndSend,
}

impl<S: TableStore> PoisonTable<S> {
    /// Takes the messages named by `handles` off `queue`'s poison table, doing `action`
    /// with each (a redrive sends through `broker`); returns the handles taken, in the
    /// order asked, once each (those gone already are left out).
    ///
    /// # Errors
    /// The store's and the broker's errors; the messages taken before the failure stay
    /// taken, and a redrive stopped midway is completed by the next one.
    pub async fn take<Q: Queue>(
        &self,
        broker: &Q,
        queue: &str,
        handles: &[String],
        action: &PoisonAction,
    ) -> Result<Vec<String>> {
        self.take_steps(broker, queue, handles, action, TakeSteps::All)
            .await
    }

    /// [`take`](Self::take), stopping after the steps asked for.
    ///
    /// # Errors
    /// As [`take`](Self::take).
    pub async fn take_steps<Q: Queue>(
        &self,
        broker: &Q,
        queue: &str,
        handles: &[String],
        action: &PoisonAction,
        steps: TakeSteps,
    ) -> Result<Vec<String>> {
        let mut taken = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for handle in handles {
            if !seen.insert(handle.as_str()) {
                continue;
            }
            if self.take_one(broker, queue, handle, action, steps).await? {
                taken.push(handle.clone());
            }
        }
        Ok(taken)
    }

    async fn take_one<Q: Queue>(
        &self,
        broker: &Q,
        queue: &str,
        handle: &str,
        action: &PoisonAction,
        steps: TakeSteps,
    ) -> Result<bool> {
        let Some(mut row) = self.row(queue, handle).await? else {
            return Ok(false);
        };
        let target = match action {
            PoisonAction::Discard => None,
            PoisonAction::Replay => Some(queue),
            PoisonAction::ReplayTo(target) => Some(target.as_str()),
        };
        if let Some(target) = target {
            if !is_redriving(&row) {
                match self.mark_redriving(&row).await? {
                    Some(marked) => row = marked,
                    // Gone meanwhile: another operator took it.
                    None => return Ok(false),
                }
            }
            if steps == TakeSteps::MarkOnly {
                return Ok(false);
            }
            let id = str_of(&row, ID);
            let body = self.whole_body(&row).await?;
            broker.send(target, id, &body).await?;
            if steps == TakeSteps::MarkAndSend {
                return Ok(false);
            }
        }
        self.remove(&row).await
    }

    /// Step 1 of a redrive: deletes the id marker (when it still names this message) and
    /// marks both rows; returns the row as marked, `None` when it is gone.
    async fn mark_redriving(&self, row: &Entity) -> Result<Option<Entity>> {
        let partition = &row.partition_key;
        let newest_key = format!("{NEWEST}{}", inverted(str_of(row, AT)).unwrap_or_default());
        for _ in 0..ATTEMPTS {
            let mut batch = Batch::new();
            if let Some(delete) = self.marker_delete(row).await? {
                batch.push(delete);
            }
            let mark = |key: &str| Entity::new(partition, key).with(REDRIVING, true);
            batch.merge(
                mark(&row.row_key),
                row.etag.clone().map_or(IfMatch::Any, IfMatch::ETag),
            );
            batch.merge(mark(&newest_key), IfMatch::Any);
            match self.store.submit_batch(POISON_TABLE, batch).await {
                Ok(_) => {
                    return self
                        .store
                        .get(POISON_TABLE, partition, &row.row_key, None)
                        .await;
                }
                Err(e) if conflicted(&e) => {
                    // The row changed or went: read it again.
                    match self
                        .store
                        .get(POISON_TABLE, partition, &row.row_key, None)
                        .await?
                    {
                        Some(now) if is_redriving(&now) => return Ok(Some(now)),
                        Some(_) => {}
                        None => return Ok(None),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::Contention {
            what: "a poison message's redrive mark".into(),
            attempts: ATTEMPTS,
        })
    }

    /// The delete of the id marker of the message `row` holds, bound to the marker's ETag:
    /// `None` when the marker is gone or names another message (a poisoning of the same
    /// message recorded anew after a redrive's first step).
    async fn marker_delete(&self, row: &Entity) -> Result<Option<WriteOp>> {
        let marker_key = format!("{IDS}{}", str_of(row, ID_KEY));
        let marker = self
            .store
            .get(POISON_TABLE, &row.partition_key, &marker_key, None)
            .await?;
        Ok(marker
            .filter(|marker| str_of(marker, AT) == str_of(row, AT))
            .map(|marker| WriteOp::Delete {
                partition_key: row.partition_key.clone(),
                row_key: marker_key,
                if_match: marker.etag.map_or(IfMatch::Any, IfMatch::ETag),
            }))
    }

    /// The last step of a take: the message's rows, its marker (when it still names this
    /// message), its body's pieces and its counts go; `false` when it was gone already.
    pub(super) async fn remove(&self, row: &Entity) -> Result<bool> {
        let partition = &row.partition_key;
        let at = str_of(row, AT);
        let id_key = str_of(row, ID_KEY);
        let (group, reason, kind) = (str_of(row, GROUP), str_of(row, REASON), str_of(row, KIND));
        let newest_key = format!("{NEWEST}{}", inverted(at).unwrap_or_default());
        let mut current = row.clone();
        for _ in 0..ATTEMPTS {
            let row = &current;
            let mut batch = Batch::new();
            batch.push(WriteOp::Delete {
                partition_key: partition.clone(),
                row_key: row.row_key.clone(),
                if_match: row.etag.clone().map_or(IfMatch::Any, IfMatch::ETag),
            });
            batch.push(WriteOp::Delete {
                partition_key: partition.clone(),
                row_key: newest_key.clone(),
                if_match: IfMatch::Any,
            });
            if let Some(delete) = self.marker_delete(row).await? {
                batch.push(delete);
            }
            for op in self
                .count_writes(partition, shard_of(id_key), group, reason, kind, -1)
                .await?
            {
                batch.push(op);
            }
            match self.store.submit_batch(POISON_TABLE, batch).await {
                Ok(_) => {
                    // The pieces go after the rows naming them: a piece left by a stop
                    // here is named by no row (what it wastes is all it costs).
                    for n in 0..pieces_of(row) {
                        self.store
                            .delete_if_exists(POISON_TABLE, partition, &piece_key(at, n))
                            .await?;
                    }
                    return Ok(true);
                }
                Err(e) if conflicted(&e) => {
                    match self
                        .store
                        .get(POISON_TABLE, partition, &row.row_key, None)
                        .await?
                    {
                        Some(now) => current = now,
                        None => return Ok(false),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::Contention {
            what: "a poison message's removal".into(),
            attempts: ATTEMPTS,
        })
    }
}
