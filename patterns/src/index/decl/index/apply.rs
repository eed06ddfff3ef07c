//! How the worker applies the copies' follow-up work: a copy in another partition or
//! table put from its primary's current state (taken back when the primary moved on
//! meanwhile), and deleted only by an operation at least as new as the copy.

use tablekit_core::{ErrorKind, IfMatch, TableStore, WriteOp};

use super::record::{CopyTarget, DeleteCopy, PutCopy};
use crate::error::Result;
use crate::index::operation::{Applied, IndexApplier};
use crate::index::record::{EntityRef, IndexRecord, copy_of, copy_source, same_content};
use crate::index::stored::{delete_unless_changed, get_or_none};
use crate::index::upkeep::{Applies, Applying};

impl<S: TableStore + Clone + 'static> Applies<S> for PutCopy {
    fn apply<'a>(&'a self, applier: &'a IndexApplier<S>) -> Applying<'a> {
        Box::pin(applier.put_copy(
            &self.source,
            self.version,
            &self.index,
            &self.target,
            self.properties.as_deref(),
            &self.kind_property,
            false,
        ))
    }
}

impl<S: TableStore + Clone + 'static> Applies<S> for DeleteCopy {
    fn apply<'a>(&'a self, applier: &'a IndexApplier<S>) -> Applying<'a> {
        Box::pin(applier.delete_copy(&self.source, Some(self.version), &self.target))
    }
}

impl<S: TableStore> IndexApplier<S> {
    /// Writes the copy of `source` at `target` from the primary's current state, if the
    /// primary is at `version`. With `force` (repair) a copy of the same version whose
    /// content differs is rewritten too.
    ///
    /// # Errors
    /// The store's errors; [`Error::Contention`](crate::Error::Contention).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn put_copy(
        &self,
        source: &EntityRef,
        version: i64,
        index: &str,
        target: &EntityRef,
        properties: Option<&[String]>,
        kind_property: &str,
        force: bool,
    ) -> Result<Applied> {
        let repair = force;
        // Set when the primary's content moved at the same version (a denormalised field
        // brought up to date) while the copy was written: the copy is made again.
        let mut force = force;
        let mut retry = self.retry.start();
        loop {
            retry.next(|| format!("copy {target} of {source}")).await?;
            // The primary and the copy's slot, read at once: the write below is
            // conditional on the slot's ETag and the primary is read again after it, so
            // the order of the two reads does not matter.
            let (primary, existing) = tokio::join!(
                get_or_none(&self.store, source),
                get_or_none(&self.store, target)
            );
            let primary = match primary? {
                Some(p) if IndexRecord::read(&p)?.is_some_and(|r| r.version == version) => Some(p),
                _ => None,
            };
            let Some(primary) = primary else {
                // The primary moved on. An earlier run of this work may have written the
                // copy and failed before taking it back (below): take it back now.
                self.take_back(source, version, target).await?;
                return Ok(Applied::Superseded);
            };
            let copy = copy_of(
                &primary,
                source,
                version,
                index,
                target,
                properties,
                kind_property,
            )?;
            let op = match existing? {
                Some(existing) => {
                    let Some((owner, existing_version)) = copy_source(&existing) else {
                        // Not a copy: an application entity holds the slot; never
                        // overwritten (the audit reports the copy missing).
                        tracing::warn!(%target, index, "an entity that is not a copy holds the index slot");
                        return Ok(Applied::Unchanged);
                    };
                    if owner != *source && self.claims(&owner, index, target).await? {
                        // Two primaries share one index value: the copy stays its
                        // holder's (the audit reports the other's copy missing).
                        tracing::warn!(%target, index, holder = %owner, "index value held by another entity");
                        return Ok(Applied::Unchanged);
                    }
                    let current = existing_version > version
                        || (existing_version == version
                            && (!force || same_content(&existing, &copy)));
                    if current {
                        // Another delivery of this work wrote it: this one may have read
                        // the primary before it moved on (and that delivery failed
                        // before taking the copy back).
                        if self.primary_version(source).await? != Some(version) {
                            self.take_back(source, version, target).await?;
                            return Ok(Applied::Superseded);
                        }
                        return Ok(Applied::Unchanged);
                    }
                    let etag = existing.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                    WriteOp::Replace(copy, etag)
                }
                None => WriteOp::Insert(copy),
            };
            let written = match self.store.execute(&target.table, op.clone()).await {
                Ok(etag) => etag,
                Err(e) if e.kind() == ErrorKind::TableNotFound => {
                    self.store.create_table_if_not_exists(&target.table).await?;
                    continue;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed
                            | ErrorKind::AlreadyExists
                            | ErrorKind::NotFound
                    ) =>
                {
                    continue;
                }
                Err(e) => {
                    // The write may have landed (its answer lost): if the primary moved
                    // on meanwhile, the copy is taken back before the work is retried
                    // (a concurrent delivery may settle the work first).
                    // (A read that fails proves nothing: the copy stays, the retry decides.)
                    if e.is_retryable()
                        && matches!(self.primary_version(source).await, Ok(now) if now != Some(version))
                    {
                        let _ = self.take_back(source, version, target).await;
                    }
                    return Err(e);
                }
            };
            // The primary may have moved on while the copy was written, and the newer
            // write's removal of this copy may already have run: take the copy back.
            let again = get_or_none(&self.store, source).await?;
            let still = match &again {
                Some(again) => IndexRecord::read(again)?.map(|r| r.version),
                None => None,
            };
            if still == Some(version) && again.and_then(|a| a.etag) != primary.etag {
                force = true;
                continue;
            }
            if still != Some(version) {
                delete_unless_changed(
                    &self.store,
                    target,
                    written.map_or(IfMatch::Any, IfMatch::ETag),
                )
                .await?;
                return Ok(Applied::Superseded);
            }
            if !repair {
                // A repair's copy (audit, backfill) is not a write converging.
                record_copy_lag(&source.table, index, version);
            }
            return Ok(Applied::Changed);
        }
    }

    /// The version of `source`'s current write (`None` when it is gone).
    async fn primary_version(&self, source: &EntityRef) -> Result<Option<i64>> {
        Ok(match get_or_none(&self.store, source).await? {
            Some(p) => IndexRecord::read(&p)?.map(|r| r.version),
            None => None,
        })
    }

    /// Deletes the copy at `target` if it is `source`'s at exactly `version` (one this
    /// work wrote for a write its primary has moved on from).
    async fn take_back(&self, source: &EntityRef, version: i64, target: &EntityRef) -> Result<()> {
        let Some(existing) = get_or_none(&self.store, target).await? else {
            return Ok(());
        };
        if copy_source(&existing) != Some((source.clone(), version)) {
            return Ok(());
        }
        let if_match = existing.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        delete_unless_changed(&self.store, target, if_match)
            .await
            .map(drop)
    }

    /// Whether a primary's record names the copy of `index` at `target`.
    async fn claims(&self, primary: &EntityRef, index: &str, target: &EntityRef) -> Result<bool> {
        Ok(match get_or_none(&self.store, primary).await? {
            Some(p) => IndexRecord::read(&p)?.is_some_and(|r| {
                r.targets.iter().any(
                    |t| matches!(t.get::<CopyTarget>(), Some(CopyTarget { index: i, at, .. }) if i == index && at == target),
                )
            }),
            None => false,
        })
    }

    /// Deletes the copy of `source` at `target` unless it is newer than `version` (any
    /// version when `None`: an orphan found by the audit).
    ///
    /// # Errors
    /// The store's errors; [`Error::Contention`](crate::Error::Contention).
    pub(crate) async fn delete_copy(
        &self,
        source: &EntityRef,
        version: Option<i64>,
        target: &EntityRef,
    ) -> Result<Applied> {
        let mut retry = self.retry.start();
        loop {
            retry.next(|| format!("copy {target} of {source}")).await?;
            let Some(existing) = get_or_none(&self.store, target).await? else {
                return Ok(Applied::Unchanged);
            };
            let Some((owner, existing_version)) = copy_source(&existing) else {
                return Ok(Applied::Unchanged);
            };
            if owner != *source || version.is_some_and(|v| existing_version > v) {
                return Ok(Applied::Unchanged);
            }
            let if_match = existing.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            match self
                .store
                .delete(
                    &target.table,
                    &target.partition_key,
                    &target.row_key,
                    if_match,
                )
                .await
            {
                Ok(()) => return Ok(Applied::Changed),
                Err(e) if e.kind() == ErrorKind::PreconditionFailed => continue,
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Applied::Unchanged),
                Err(e) => return Err(e),
            }
        }
    }
}

/// Records how long after its primary's write (the version: microseconds since the epoch)
/// a copy appeared: `tablekit_copy_lag_seconds{index,table}`, the convergence lag of an
/// index of the primaries' table.
fn record_copy_lag(table: &str, index: &str, version: i64) {
    let lag_micros = chrono::Utc::now()
        .timestamp_micros()
        .saturating_sub(version)
        .max(0);
    #[allow(clippy::cast_precision_loss)]
    let lag = lag_micros as f64 / 1e6;
    metrics::histogram!(
        "tablekit_copy_lag_seconds",
        "index" => index.to_owned(),
        "table" => table.to_owned()
    )
    .record(lag);
}
