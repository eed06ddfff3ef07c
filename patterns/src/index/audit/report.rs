//! What an audit reports and how it is asked: drift kinds, findings, the report, the
//! options and their progress callback.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tablekit_core::Entity;
use tablekit_core::blob::BlobStore;

use super::super::record::{EntityRef, Target};
use crate::error::Result;

/// The table holding checkpoints of audits and backfills.
pub(super) const JOBS_TABLE: &str = "TablekitJobs";
pub(super) const STATE_PROPERTY: &str = "State";

/// A kind of drift.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Drift {
    /// A copy or membership the primary should have is not there.
    Missing,
    /// A copy differs from what the primary's current version makes.
    Stale,
    /// A copy or membership that no primary claims.
    Orphaned,
    /// A record tablekit keeps (an index record, a page, a link) that does not read; it
    /// is reported, never repaired, and the scan goes on.
    Unreadable,
    /// A primary stored before keys were checked whose key field holds the separator that
    /// follows it in a template (or a character below it): its keys are ambiguous with
    /// another value's. It stays readable and is reported, never repaired; a new write of
    /// such a value is refused, so rewriting it with a value that renders unambiguously
    /// (or deleting it) is the fix.
    Ambiguous,
}

/// One drift found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// What is wrong.
    pub drift: Drift,
    /// The index or index entity.
    pub index: String,
    /// The primary concerned (for an orphan: the primary it names, if any).
    pub source: Option<EntityRef>,
    /// The copy or id list concerned.
    pub target: String,
    /// Whether it was repaired.
    pub repaired: bool,
}

impl Finding {
    /// A drift found, not (yet) repaired.
    pub(crate) fn new(
        drift: Drift,
        index: impl Into<String>,
        source: Option<EntityRef>,
        target: impl Into<String>,
    ) -> Self {
        Finding {
            drift,
            index: index.into(),
            source,
            target: target.into(),
            repaired: false,
        }
    }
}

/// What an audit or backfill found and did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    /// Entities scanned (primaries, copies, id-list pages).
    pub scanned: u64,
    /// Primaries checked.
    pub primaries: u64,
    /// Copies and memberships checked.
    pub checked: u64,
    /// Missing copies or memberships.
    pub missing: u64,
    /// Stale copies.
    pub stale: u64,
    /// Orphaned copies or memberships.
    pub orphaned: u64,
    /// Records that do not read.
    #[serde(default)]
    pub unreadable: u64,
    /// Primaries whose key fields hold the separator after them ([`Drift::Ambiguous`]).
    #[serde(default)]
    pub ambiguous: u64,
    /// Drift repaired (or, for a backfill, index entries written).
    pub repaired: u64,
    /// The first findings (at most [`AuditOptions::max_findings`]).
    pub findings: Vec<Finding>,
    /// Whether the run resumed from a checkpoint.
    pub resumed: bool,
    /// Seconds the run took.
    pub seconds: f64,
    /// A migration's count of the type's entities by stored version.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub versions: std::collections::BTreeMap<u32, u64>,
    /// A migration's rewrites left to a write that landed between its read and its
    /// rewrite.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub conflicts: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl AuditReport {
    /// Whether no drift was found.
    pub fn is_clean(&self) -> bool {
        self.missing + self.stale + self.orphaned + self.unreadable == 0
    }

    /// Entities scanned per second.
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.scanned as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Progress of a scan, for a progress bar.
#[derive(Clone, Debug)]
pub struct AuditProgress {
    /// The table being scanned.
    pub table: String,
    /// Entities scanned so far (all tables).
    pub scanned: u64,
    /// Drift found so far.
    pub drift: u64,
}

/// A progress callback.
pub type ProgressFn = Arc<dyn Fn(&AuditProgress) + Send + Sync>;

/// How a backfill computes a primary's targets for one index (`None`: not a primary of
/// the type).
pub(crate) type TargetsFn<'a> =
    dyn Fn(&EntityRef, &Entity) -> Result<Option<BTreeSet<Target>>> + Sync + 'a;

/// How an audit or backfill runs.
#[derive(Clone)]
pub struct AuditOptions {
    /// Repair the drift found (audit); always on for a backfill.
    pub repair: bool,
    /// Save a checkpoint under this job name, and resume from it.
    pub job: Option<String>,
    /// The blob store of blob-stored index entities.
    pub blobs: Option<BlobStore>,
    /// Called every [`progress_every`](Self::progress_every) entities.
    pub progress: Option<ProgressFn>,
    /// How often progress is reported and the checkpoint saved.
    pub progress_every: u64,
    /// How many findings the report lists (all are counted).
    pub max_findings: usize,
    /// Stop after this many entities, leaving the checkpoint (tests of resuming).
    pub stop_after: Option<u64>,
    /// Stop at the next entity once this is set, leaving the checkpoint (a job another
    /// runner took over).
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl AuditOptions {
    /// Whether the run was asked to stop.
    pub(crate) fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst))
    }
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            repair: false,
            job: None,
            blobs: None,
            progress: None,
            progress_every: 500,
            max_findings: 1000,
            stop_after: None,
            cancel: None,
        }
    }
}

impl std::fmt::Debug for AuditOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditOptions")
            .field("repair", &self.repair)
            .field("job", &self.job)
            .finish_non_exhaustive()
    }
}
