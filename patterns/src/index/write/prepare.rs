//! A write before its first plan: the request completed by the declarations, refused
//! before any I/O when its transaction cannot fit, its intent recorded, its steps outside
//! the transaction taken; and one write run through the engine.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tablekit_core::blob::BlobStore;
use tablekit_core::{Entity, IfMatch};

use super::super::reclaim::Reclaim;
use super::super::record::{EntityRef, Layout};
use super::super::registry::schema::SchemaRecord;
use super::super::registry::write_steps;
use super::declaration::{Prepared, Request, Writer};
use super::outcome::WriteOutcome;
use super::plan::IndexWrite;
use crate::consistency::Engine;
use crate::error::{Error, Result};
use crate::index::decl::denormalized::write::ATTRIBUTE as DENORMALIZED;

/// How often a table that no registered type copies from asks the registry again.
const DEPENDENTS_RECHECK: Duration = Duration::from_secs(30);

impl<S: tablekit_core::TableStore + Clone + 'static> Writer<S> {
    /// The writer of the primaries a layout describes, without their type: the untyped
    /// paths (the archive's delete, the sweeper) take the layout the registry holds.
    pub(crate) fn for_layout(engine: Engine<S>, layout: Layout) -> Self {
        Writer {
            table: layout.table.clone(),
            layout: Arc::new(layout),
            engine,
            blobs: None,
            blob_fields: Vec::new(),
            clock: tablekit_core::clock::system(),
            unique_lease: crate::index::decl::unique::DEFAULT_LEASE,
            track_dependents: Arc::new(AtomicBool::new(false)),
            dependents_checked: Arc::default(),
            indexed: true,
        }
    }

    /// The writer of primaries without an index record (`LargeTable`'s): no declaration
    /// but their blob fields, no intent (a blob a write that never commits uploaded is
    /// left to the table's sweep), a delete removes the row.
    pub(crate) fn unindexed(
        engine: Engine<S>,
        table: &str,
        blobs: BlobStore,
        blob_fields: Vec<&'static str>,
    ) -> Self {
        Writer {
            blobs: Some(blobs),
            blob_fields,
            indexed: false,
            ..Writer::for_layout(engine, Layout::bare(table))
        }
    }

    /// Deletes the primary at `source` if `if_match` holds, with everything its record
    /// names.
    ///
    /// # Errors
    /// `NotFound`, `PreconditionFailed`; as [`write`](Self::write).
    pub(crate) async fn delete(
        &self,
        source: EntityRef,
        if_match: IfMatch,
    ) -> Result<WriteOutcome> {
        self.run(Request::delete(source, if_match), None).await
    }

    /// Deletes the primary at `source`, which the caller has just read as `stored`: the
    /// first plan uses that read.
    ///
    /// # Errors
    /// As [`delete`](Self::delete).
    pub(crate) async fn delete_read(
        &self,
        source: EntityRef,
        if_match: IfMatch,
        stored: Entity,
    ) -> Result<WriteOutcome> {
        self.run(Request::delete(source, if_match), Some(stored))
            .await
    }

    /// Runs one write: prepares it, commits it through the engine, and undoes its steps
    /// outside the transaction when it fails.
    ///
    /// # Errors
    /// The write's refusals; the store's errors; [`Error::Contention`].
    pub(crate) async fn write(&self, request: Request) -> Result<WriteOutcome> {
        self.run(request, None).await
    }

    async fn run(&self, request: Request, known: Option<Entity>) -> Result<WriteOutcome> {
        let mut write = self.prepare(request).await?;
        write.known = known;
        let partition_key = write.source.partition_key.clone();
        let committed = match self
            .engine
            .commit(&self.table, &partition_key, &mut write)
            .await
        {
            Ok(committed) => committed,
            Err(e) => {
                write.abandon().await;
                return Err(e);
            }
        }
        .ok_or_else(|| Error::Unsupported("an indexed write planned nothing".to_owned()))?;
        Ok(WriteOutcome {
            etag: committed.etags.first().cloned().flatten(),
            version: write.version,
            operations: write.operations,
            published: committed.published,
        })
    }

    /// Everything a write needs before its first read: its request completed, refused
    /// before any I/O when its own transaction cannot fit, its intent recorded when it
    /// acts outside its transaction, and those steps taken.
    ///
    /// # Errors
    /// A write that cannot fit one transaction; the store's and blob store's errors (its
    /// steps are undone then).
    pub(crate) async fn prepare(&self, mut request: Request) -> Result<IndexWrite<'_, S>> {
        for declaration in write_steps::<S>() {
            declaration.complete(self, &mut request)?;
        }
        self.precheck(&request)?;
        // Only a new value can change what dependents copy.
        if self.indexed && request.entity.is_some() {
            self.recheck_dependents().await?;
        }
        // What the write does outside its transaction is recorded first, to be undone
        // if it never commits (see `super::super::reclaim`).
        let mut reclaim = Reclaim::of(&request.source, &request.targets);
        reclaim.blob_nonce = request.blob_nonce.clone();
        let intent = if reclaim.is_empty() || !self.indexed {
            None
        } else {
            Some(
                self.engine
                    .record_intent(
                        &self.table,
                        &request.source.partition_key,
                        reclaim.envelope()?,
                    )
                    .await?,
            )
        };
        let Request {
            kind,
            source,
            entity,
            targets,
            user_etag,
            ..
        } = request;
        let mut prepared = Prepared {
            source,
            entity,
            targets,
            reclaim,
        };
        for declaration in write_steps::<S>() {
            if let Err(e) = declaration.prepare(self, &mut prepared).await {
                if let Some(intent) = &intent {
                    self.engine.abandon(intent).await;
                }
                return Err(e);
            }
        }
        Ok(IndexWrite {
            writer: self,
            kind,
            source: prepared.source,
            new_entity: prepared.entity,
            new_targets: prepared.targets,
            user_etag,
            missing: HashSet::new(),
            version: 0,
            operations: 0,
            intent,
            read_taken: false,
            known: None,
        })
    }

    /// Refuses, before any I/O, a write whose entity group transaction cannot fit.
    fn precheck(&self, request: &Request) -> Result<()> {
        let source = &request.source;
        let atomic = request
            .targets
            .iter()
            .filter(|t| t.is_atomic(source))
            .count();
        let entries = usize::from(request.targets.iter().any(|t| !t.is_atomic(source)));
        let needed = 1 + atomic + entries;
        if needed > tablekit_core::limits::MAX_BATCH_OPERATIONS {
            return Err(tablekit_core::Error::from(
                tablekit_core::Violation::BatchTooManyOperations {
                    count: needed,
                    max: tablekit_core::limits::MAX_BATCH_OPERATIONS,
                },
            ));
        }
        Ok(())
    }

    /// Asks the registry whether a type copies a property from this one (then writes
    /// track the copies). Writes ask again every 30 seconds until one does, so a type
    /// registered after this table opened is picked up.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn check_dependents(&self) -> Result<()> {
        let copied = SchemaRecord::list(self.store(), None)
            .await?
            .iter()
            .any(|s| {
                s.declared.iter().any(|d| {
                    d.attribute == DENORMALIZED
                        && d.setting("from") == Some(self.layout.kind.as_str())
                })
            });
        if copied {
            self.track_dependents.store(true, Ordering::Relaxed);
        }
        if let Ok(mut checked) = self.dependents_checked.lock() {
            *checked = Some(tokio::time::Instant::now());
        }
        Ok(())
    }

    async fn recheck_dependents(&self) -> Result<()> {
        if self.track_dependents.load(Ordering::Relaxed) {
            return Ok(());
        }
        let due = self
            .dependents_checked
            .lock()
            .map(|c| c.is_none_or(|at| at.elapsed() >= DEPENDENTS_RECHECK))
            .unwrap_or(true);
        if due {
            self.check_dependents().await?;
        }
        Ok(())
    }
}
