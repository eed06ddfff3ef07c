//! Migration on demand: every entity of a type stored under an older version of the type
//! is read (upcast to the current version, as every read is) and written back through the
//! write path, so that its indexes, id lists, unique values and change events follow.
//!
//! The table is read in pages after a saved checkpoint (as an audit is: `options.job`
//! names it, and a stopped run resumes there). Each rewrite is conditional on the ETag the
//! scan read: a write that lands in between wins and is left alone (counted as a
//! conflict; it wrote the current version anyway).

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tablekit_core::typed::EntityType;
use tablekit_core::{Entity, ErrorKind, IfMatch, TableStore, Value};
use tracing::Instrument;

use super::super::record::{SOURCE_PROPERTY, is_tombstone};
use super::super::table::IndexedTable;
use super::report::{AuditOptions, AuditReport};
use super::scan::{Scan, Visit};
use crate::error::Result;

/// What a migration found and did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MigrateReport {
    /// Entities read (the type's and any other in its table).
    pub scanned: u64,
    /// The type's entities by the version they were stored under, before the run.
    pub versions: BTreeMap<u32, u64>,
    /// Entities rewritten under the current version.
    pub rewritten: u64,
    /// Entities changed by another write between the read and the rewrite: left to that
    /// write.
    pub conflicts: u64,
    /// Entities that do not read as the type (another type's, or malformed).
    pub unreadable: u64,
    /// Entities stored before keys were checked whose key field holds the separator
    /// after it: left as they are (a rewrite would be refused), as the audit reports them
    /// ([`Drift::Ambiguous`](super::Drift::Ambiguous)).
    #[serde(default)]
    pub ambiguous: u64,
    /// Whether the run resumed from a checkpoint.
    pub resumed: bool,
    /// Seconds the run took.
    pub seconds: f64,
}

impl MigrateReport {
    /// The type's entities found under an older version than `current`.
    pub fn older(&self, current: u32) -> u64 {
        self.versions
            .iter()
            .filter(|(v, _)| **v < current)
            .map(|(_, n)| n)
            .sum()
    }

    /// The counts in the scan's report (kept in its checkpoint): the versions and the
    /// conflicts in its findings-free fields.
    fn from_scan(report: &AuditReport) -> Self {
        MigrateReport {
            scanned: report.scanned,
            versions: report.versions.clone(),
            rewritten: report.repaired,
            conflicts: report.conflicts,
            unreadable: report.unreadable,
            ambiguous: report.ambiguous,
            resumed: report.resumed,
            seconds: report.seconds,
        }
    }
}

/// The version a stored entity of `E` was written under (1 when it has none), or `None`
/// when the entity is not one of `E`'s primaries (a copy, an id-list page, an outbox
/// entry, a tombstone, another kind).
fn stored_version<E: EntityType>(entity: &Entity) -> Option<u32> {
    // Outbox entries, id-list pages and tombstones carry tablekit's own kinds in the
    // kind property; copies name their source.
    if is_tombstone(entity) || entity.properties.contains_key(SOURCE_PROPERTY) {
        return None;
    }
    match entity.properties.get(E::KIND_PROPERTY) {
        Some(Value::String(kind)) if kind == E::KIND => {}
        None if E::kind_filter().is_none() => {}
        _ => return None,
    }
    match entity.properties.get(E::VERSION_PROPERTY) {
        None => Some(1),
        Some(Value::Int32(v)) => u32::try_from(*v).ok(),
        Some(Value::Int64(v)) => u32::try_from(*v).ok(),
        Some(_) => Some(0),
    }
}

/// Rewrites every entity of `E` stored under an older version than `E::VERSION` through
/// `table`'s write path. `options.job` makes the run resumable; `options.progress`
/// reports the entities read; `options.stop_after` stops part way (leaving the
/// checkpoint). `options.repair` is not read: a migration always writes.
///
/// The future is `Send`: a table shared through an [`Arc`](std::sync::Arc) is migrated
/// on a Tokio task of its own.
///
/// ```
/// # use std::sync::Arc;
/// # use tablekit_core::MemoryStore;
/// # use tablekit_derive::Entity;
/// # use tablekit_patterns::index::{AuditOptions, IndexedTable, migrate};
/// # #[derive(Entity, Clone, Debug, PartialEq)]
/// # #[entity(table = "Members", version = 2, partition_key = "{team}", row_key = "{id}",
/// #          crate = "tablekit_core")]
/// # struct Member {
/// #     team: String,
/// #     id: u32,
/// # }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let members = Arc::new(IndexedTable::<Member, _>::options().open(MemoryStore::new()).await?);
/// let table = Arc::clone(&members);
/// let migration = tokio::spawn(async move { migrate(&*table, &AuditOptions::default()).await });
/// let report = migration.await.expect("the migration's task")?;
/// assert_eq!(report.older(2), 0);
/// # Ok::<_, tablekit_patterns::Error>(())
/// # }).unwrap();
/// ```
///
/// # Errors
/// The store's errors (a rewrite refused for a conflict is counted, not an error).
pub async fn migrate<E, S>(
    table: &IndexedTable<E, S>,
    options: &AuditOptions,
) -> Result<MigrateReport>
where
    E: EntityType + Send + Sync,
    S: TableStore + Clone + 'static,
{
    let name = table.table().name().to_owned();
    let scan = Scan {
        store: table.store(),
        options,
        started: Instant::now(),
        scope: format!("migrate {name} {} to v{}", E::KIND, E::VERSION),
    };
    let span = tracing::info_span!("tablekit.migrate", db.collection.name = %name, tablekit.kind = E::KIND);
    let (report, _finished) = scan
        .run(std::slice::from_ref(&name), &mut Rewrite { table })
        .instrument(span)
        .await?;
    Ok(MigrateReport::from_scan(&report))
}

/// A migration's rewrite, handed each entity of the scan.
struct Rewrite<'a, E, S> {
    table: &'a IndexedTable<E, S>,
}

impl<E, S> Visit for Rewrite<'_, E, S>
where
    E: EntityType,
    S: TableStore + Clone + 'static,
{
    async fn visit(
        &mut self,
        _table: &str,
        entity: Entity,
        report: &mut AuditReport,
    ) -> Result<()> {
        let Some(version) = stored_version::<E>(&entity) else {
            return Ok(());
        };
        *report.versions.entry(version).or_default() += 1;
        if version == E::VERSION {
            return Ok(());
        }
        // The rewrite is conditional on the ETag the scan read: a write since (another
        // program's, or a migration's) wins and is counted as a conflict.
        let Some(scanned) = entity.etag.clone() else {
            report.unreadable += 1;
            return Ok(());
        };
        // The read path: expired entities hidden, blob fields restored, the older
        // version upcast.
        let stored = match self.table.get(&entity.partition_key, &entity.row_key).await {
            Ok(Some(stored)) => stored,
            // Deleted since the scan read it: nothing to migrate.
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::InvalidInput || is_field_error(&e) => {
                report.unreadable += 1;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        if stored.etag.as_ref() != Some(&scanned) {
            report.conflicts += 1;
            return Ok(());
        }
        let if_match = IfMatch::ETag(scanned);
        match self.table.replace(&stored.value, if_match).await {
            Ok(_) => report.repaired += 1,
            Err(crate::Error::Key(e)) if e.is_separator_refusal() => {
                report.ambiguous += 1;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::PreconditionFailed | ErrorKind::NotFound
                ) =>
            {
                report.conflicts += 1;
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

fn is_field_error(e: &crate::Error) -> bool {
    matches!(e, crate::Error::Field(_))
}
