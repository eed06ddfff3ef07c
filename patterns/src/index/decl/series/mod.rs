//! Typed data series (`#[series(..)]`) on the one write path: one entity per span (a
//! day of hourly counters, a year of daily values), a point per step. [`IndexedTable`]
//! gains, for a [`SeriesType`]:
//!
//! - [`add`](IndexedTable::add): adds to the point of an instant — a read of the span,
//!   then a replace under the ETag it read (or an insert of a new span), retried on a
//!   conflict. It is an ordinary indexed write: its indexes, change events and expiry
//!   follow, a write whose answer was lost is recognised by its version, and for a span
//!   spread over chunks only chunk 0 (which holds the version) and the chunk holding the
//!   point are written;
//! - [`span`](IndexedTable::span): the span holding an instant;
//! - [`points`](IndexedTable::points): the points between two instants, from the spans
//!   stored (one point read per span; a span never written reads as default points).
//!
//! Spans are aligned on the Unix epoch: a `span = "1d"` starts at midnight UTC.
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use tablekit_core::{Entity as _, MemoryStore, typed::Points};
//! use tablekit_derive::Entity;
//! use tablekit_patterns::index::IndexedTable;
//!
//! #[derive(Entity, Clone, Debug, Default)]
//! #[entity(table = "PageViews", partition_key = "{page}", row_key = "{day}", crate = "tablekit_core")]
//! #[series(start = "day", points = "views", every = "1h", span = "1d")]
//! struct DailyViews {
//!     page: String,
//!     day: chrono::DateTime<Utc>,
//!     views: Points<i64>,
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let views = IndexedTable::<DailyViews, _>::options().open(MemoryStore::new()).await?;
//! let home = DailyViews { page: "home".into(), ..Default::default() };
//! let at = Utc.with_ymd_and_hms(2026, 11, 26, 14, 30, 0).unwrap();
//! views.add(&home, at, 3).await?;
//! assert_eq!(views.add(&home, at, 2).await?, 5);
//! let day = views.span(&home, at).await?.expect("stored");
//! assert_eq!(day.value.views.get(14), Some(&5));
//! # Ok::<_, tablekit_patterns::Error>(())
//! # }).unwrap();
//! ```

use chrono::{DateTime, TimeDelta, Utc};
use tablekit_core::typed::{Points, SeriesType, SeriesValue as _, Stored};
use tablekit_core::{ErrorKind, IfMatch, TableStore};

use crate::error::{Error, Result};
use crate::index::record::{DeclaredLayout, Elsewhere, LaysOut};
use crate::index::table::IndexedTable;

/// `#[series]`: ordinary writes of the span's entity (spread over chunks by `wide` when
/// it spills), so no step, target, table or follow-up work of its own; only the typed
/// paths act on it, so the schema registry does not record it.
pub(crate) struct Spans;

impl LaysOut for Spans {
    fn check(&self, declared: &DeclaredLayout) -> Result<()> {
        declared.needs::<String>("start")?;
        declared.needs::<String>("points")?;
        declared.needs::<i64>("every")?;
        declared.needs::<i64>("span").map(drop)
    }

    fn follow_up(&self, _declared: &DeclaredLayout, _at: &Elsewhere<'_>) -> Option<String> {
        None
    }

    fn recorded(&self) -> bool {
        false
    }
}

crate::index::registry::roles::declaration! {
    Spans {
        attribute: "series",
        steps: [],
        targets: [],
        operations: [],
        lays_out: Spans,
    }
}

/// The start of the span holding `at`.
fn span_start<E: SeriesType>(at: DateTime<Utc>) -> Result<DateTime<Utc>> {
    let span = E::SPAN_SECONDS.max(1);
    let start = at.timestamp().div_euclid(span) * span;
    DateTime::from_timestamp(start, 0)
        .ok_or_else(|| Error::Unsupported(format!("{at} is outside the instants a series takes")))
}

/// The point of `at` in the span starting at `start`.
fn point_of<E: SeriesType>(start: DateTime<Utc>, at: DateTime<Utc>) -> usize {
    let seconds = (at - start).num_seconds().max(0);
    usize::try_from(seconds / E::EVERY_SECONDS.max(1)).unwrap_or(0)
}

impl<E: SeriesType, S: TableStore + Clone + 'static> IndexedTable<E, S> {
    /// The value `key` names (its fields other than the span's start and points) for the
    /// span holding `at`, with its keys.
    fn span_of(&self, key: &E, at: DateTime<Utc>) -> Result<(E, String, String)> {
        let mut value = key.clone();
        value.set_start(span_start::<E>(at)?);
        let (pk, rk) = (value.partition_key()?, value.row_key()?);
        Ok((value, pk, rk))
    }

    /// Adds `delta` to the point of `at` in the series `key` names (its key fields; its
    /// start and points are ignored), and returns the point's new value. A span not yet
    /// stored is inserted with `key`'s other fields and default points.
    ///
    /// # Errors
    /// The write path's refusals (a taken unique value, limits); the store's errors;
    /// [`Error::Contention`] when concurrent writers kept moving the span on.
    pub async fn add(&self, key: &E, at: DateTime<Utc>, delta: E::Value) -> Result<E::Value> {
        let (fresh, pk, rk) = self.span_of(key, at)?;
        let i = point_of::<E>(fresh.start(), at);
        let mut retry = self.engine().retry().start();
        loop {
            retry
                .next(|| format!("add to series {}/{pk}/{rk}", E::TABLE))
                .await?;
            let (mut value, if_match) = match self.get(&pk, &rk).await? {
                Some(stored) => (
                    stored.value,
                    Some(stored.etag.map_or(IfMatch::Any, IfMatch::ETag)),
                ),
                None => {
                    let mut value = fresh.clone();
                    *value.points_mut() = Points::zeros(E::POINTS);
                    (value, None)
                }
            };
            value.points_mut().resize(E::POINTS);
            let Some(point) = value.points_mut().get_mut(i) else {
                return Err(Error::Unsupported(format!(
                    "{at} is past the {} points of its span",
                    E::POINTS
                )));
            };
            *point = point.plus(delta);
            let new = *point;
            let written = match if_match {
                Some(if_match) => self.replace(&value, if_match).await,
                None => self.insert(&value).await,
            };
            match written {
                Ok(_) => return Ok(new),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed
                            | ErrorKind::NotFound
                            | ErrorKind::AlreadyExists
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The stored span of the series `key` names that holds `at`.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn span(&self, key: &E, at: DateTime<Utc>) -> Result<Option<Stored<E>>> {
        let (_, pk, rk) = self.span_of(key, at)?;
        let mut stored = self.get(&pk, &rk).await?;
        if let Some(stored) = &mut stored {
            stored.value.points_mut().resize(E::POINTS);
        }
        Ok(stored)
    }

    /// The points of the series `key` names from `from` (inclusive) to `to` (exclusive),
    /// with the instant each starts at; points of spans never written read as defaults.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a range of more than 100,000 points; the store's errors.
    pub async fn points(
        &self,
        key: &E,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<(DateTime<Utc>, E::Value)>> {
        let every = TimeDelta::seconds(E::EVERY_SECONDS.max(1));
        let steps = (to - from).num_seconds().max(0) / E::EVERY_SECONDS.max(1);
        if steps > 100_000 {
            return Err(Error::Unsupported(format!(
                "a range of {steps} points; read at most 100,000 at a time"
            )));
        }
        let mut out = Vec::new();
        let mut start = span_start::<E>(from)?;
        while start < to {
            let span = self.span(key, start).await?;
            let values = span.map(|s| s.value.points().clone());
            for i in 0..E::POINTS {
                let at = start + every * i32::try_from(i).unwrap_or(i32::MAX);
                if at >= to {
                    break;
                }
                if at + every > from {
                    let value = values
                        .as_ref()
                        .and_then(|p| p.get(i).copied())
                        .unwrap_or_default();
                    out.push((at, value));
                }
            }
            start += TimeDelta::seconds(E::SPAN_SECONDS.max(1));
        }
        Ok(out)
    }
}
