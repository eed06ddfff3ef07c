//! Queries: filter, `top`, projection and continuation; their classification (point,
//! range, partition scan, table scan) and the key range a backend scans for them.

use std::fmt;
use std::ops::{Bound, ControlFlow};
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::filter::{CompareOp, Filter};
use crate::limits::{self, MAX_FILTER_COMPARISONS, MAX_PAGE_SIZE, Violation};
use crate::model::{Entity, PARTITION_KEY, ROW_KEY, Value};

/// A query over one table.
///
/// ```
/// use tablekit_core::query::{Query, QueryClass};
///
/// let q = Query::parse("PartitionKey eq 'Sales' and RowKey ge 'empid_000100'")?.top(10);
/// assert!(matches!(q.explain(), QueryClass::Range { .. }));
/// # Ok::<_, tablekit_core::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Query {
    /// The filter; `None` returns every entity.
    pub filter: Option<Filter>,
    /// At most this many entities in a page (and in all, for a stream); 1 ..= 1000.
    pub top: Option<usize>,
    /// Projection: the user properties to return; `None` returns all of them.
    pub select: Option<Vec<String>>,
    /// Where to resume, from the previous page.
    pub continuation: Option<ContinuationToken>,
}

impl Query {
    /// A query returning every entity of the table.
    pub fn new() -> Self {
        Query::default()
    }

    /// A query with a filter.
    pub fn with_filter(filter: Filter) -> Self {
        Query {
            filter: Some(filter),
            ..Query::default()
        }
    }

    /// A query from an OData `$filter` string; an empty one (or only whitespace) is no
    /// filter, as on the table service.
    ///
    /// # Errors
    /// [`Error::Filter`] with the column and what was expected.
    pub fn parse(filter: &str) -> Result<Self> {
        if filter.trim_matches([' ', '\t', '\n', '\r']).is_empty() {
            return Ok(Query::new());
        }
        Ok(Query::with_filter(Filter::parse(filter)?))
    }

    /// Every entity of one partition.
    pub fn partition(partition_key: impl Into<String>) -> Self {
        Query::with_filter(Filter::Compare {
            property: PARTITION_KEY.to_owned(),
            op: CompareOp::Eq,
            value: Value::String(partition_key.into()),
        })
    }

    /// Limits the page size (and the total of a stream).
    pub fn top(mut self, top: usize) -> Self {
        self.top = Some(top);
        self
    }

    /// Returns only these user properties (system properties always come back).
    pub fn select<I, S>(mut self, properties: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.select = Some(properties.into_iter().map(Into::into).collect());
        self
    }

    /// Resumes after the page that returned `token`.
    pub fn continue_from(mut self, token: Option<ContinuationToken>) -> Self {
        self.continuation = token;
        self
    }

    /// Checks the query against the service's rules before any I/O: `top` in 1 ..= 1000,
    /// at most 15 comparisons, valid names in the filter and the projection.
    ///
    /// # Errors
    /// The [`Violation`] found.
    pub fn check(&self) -> Result<(), Violation> {
        if let Some(top) = self.top
            && !(1..=MAX_PAGE_SIZE).contains(&top)
        {
            return Err(Violation::TopOutOfRange {
                top,
                max: MAX_PAGE_SIZE,
            });
        }
        if let Some(filter) = &self.filter {
            let count = filter.comparisons();
            if count > MAX_FILTER_COMPARISONS {
                return Err(Violation::FilterTooComplex {
                    count,
                    max: MAX_FILTER_COMPARISONS,
                });
            }
            check_filter_names(filter)?;
        }
        for name in self.select.iter().flatten() {
            limits::check_selectable_name(name)?;
        }
        Ok(())
    }

    /// The class of the query, decided from its filter before it runs.
    pub fn explain(&self) -> QueryClass {
        self.key_range().class()
    }

    /// The key range the query can be answered from; entities outside it never match.
    pub fn key_range(&self) -> KeyRange {
        let mut range = KeyRange::default();
        if let Some(filter) = &self.filter {
            range.narrow(filter);
        }
        range
    }

    /// How many entities one page holds.
    pub fn page_size(&self) -> usize {
        self.top.unwrap_or(MAX_PAGE_SIZE).min(MAX_PAGE_SIZE)
    }
}

fn check_filter_names(filter: &Filter) -> Result<(), Violation> {
    match filter {
        Filter::Compare { property, .. } => limits::check_selectable_name(property),
        Filter::And(a, b) | Filter::Or(a, b) => {
            check_filter_names(a)?;
            check_filter_names(b)
        }
        Filter::Not(a) => check_filter_names(a),
        Filter::Literal(_) => Ok(()),
    }
}

/// How a query is answered, from cheapest to dearest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryClass {
    /// PartitionKey and RowKey both fixed: at most one entity.
    Point {
        /// The partition key.
        partition_key: String,
        /// The row key.
        row_key: String,
    },
    /// PartitionKey fixed and RowKey bounded: a range of one partition.
    Range {
        /// The partition key.
        partition_key: String,
        /// The lower RowKey bound.
        start: Bound<String>,
        /// The upper RowKey bound.
        end: Bound<String>,
    },
    /// PartitionKey fixed, RowKey free: the whole partition is read.
    PartitionScan {
        /// The partition key.
        partition_key: String,
    },
    /// PartitionKey not fixed: the table (or a PartitionKey range of it) is read.
    TableScan,
}

/// Bounds on (PartitionKey, RowKey) implied by the top-level `and` terms of a filter.
///
/// RowKey bounds are kept only where the PartitionKey is fixed, since only then do they
/// bound a contiguous key range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    /// Lower PartitionKey bound.
    pub pk_start: Bound<String>,
    /// Upper PartitionKey bound.
    pub pk_end: Bound<String>,
    /// Lower RowKey bound.
    pub rk_start: Bound<String>,
    /// Upper RowKey bound.
    pub rk_end: Bound<String>,
}

impl Default for KeyRange {
    fn default() -> Self {
        KeyRange {
            pk_start: Bound::Unbounded,
            pk_end: Bound::Unbounded,
            rk_start: Bound::Unbounded,
            rk_end: Bound::Unbounded,
        }
    }
}

fn tighter_start(a: Bound<String>, b: Bound<String>) -> Bound<String> {
    match (&a, &b) {
        (Bound::Unbounded, _) => b,
        (_, Bound::Unbounded) => a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            if x > y || (x == y && matches!(a, Bound::Excluded(_))) {
                a
            } else {
                b
            }
        }
    }
}

fn tighter_end(a: Bound<String>, b: Bound<String>) -> Bound<String> {
    match (&a, &b) {
        (Bound::Unbounded, _) => b,
        (_, Bound::Unbounded) => a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            if x < y || (x == y && matches!(a, Bound::Excluded(_))) {
                a
            } else {
                b
            }
        }
    }
}

fn after_start(value: &str, start: &Bound<String>) -> bool {
    match start {
        Bound::Unbounded => true,
        Bound::Included(s) => value >= s.as_str(),
        Bound::Excluded(s) => value > s.as_str(),
    }
}

fn before_end(value: &str, end: &Bound<String>) -> bool {
    match end {
        Bound::Unbounded => true,
        Bound::Included(e) => value <= e.as_str(),
        Bound::Excluded(e) => value < e.as_str(),
    }
}

impl KeyRange {
    fn narrow(&mut self, filter: &Filter) {
        match filter {
            Filter::And(a, b) => {
                self.narrow(a);
                self.narrow(b);
            }
            Filter::Compare {
                property,
                op,
                value: Value::String(v),
            } => {
                let (start, end) = match op {
                    CompareOp::Eq => (Bound::Included(v.clone()), Bound::Included(v.clone())),
                    CompareOp::Gt => (Bound::Excluded(v.clone()), Bound::Unbounded),
                    CompareOp::Ge => (Bound::Included(v.clone()), Bound::Unbounded),
                    CompareOp::Lt => (Bound::Unbounded, Bound::Excluded(v.clone())),
                    CompareOp::Le => (Bound::Unbounded, Bound::Included(v.clone())),
                    CompareOp::Ne => return,
                };
                if property == PARTITION_KEY {
                    self.pk_start = tighter_start(
                        std::mem::replace(&mut self.pk_start, Bound::Unbounded),
                        start,
                    );
                    self.pk_end =
                        tighter_end(std::mem::replace(&mut self.pk_end, Bound::Unbounded), end);
                } else if property == ROW_KEY {
                    self.rk_start = tighter_start(
                        std::mem::replace(&mut self.rk_start, Bound::Unbounded),
                        start,
                    );
                    self.rk_end =
                        tighter_end(std::mem::replace(&mut self.rk_end, Bound::Unbounded), end);
                }
            }
            _ => {}
        }
    }

    /// The PartitionKey, when the range is within one partition.
    pub fn partition(&self) -> Option<&str> {
        match (&self.pk_start, &self.pk_end) {
            (Bound::Included(a), Bound::Included(b)) if a == b => Some(a),
            _ => None,
        }
    }

    /// The class of a query over this range.
    pub fn class(&self) -> QueryClass {
        let Some(pk) = self.partition() else {
            return QueryClass::TableScan;
        };
        match (&self.rk_start, &self.rk_end) {
            (Bound::Included(a), Bound::Included(b)) if a == b => QueryClass::Point {
                partition_key: pk.to_owned(),
                row_key: a.clone(),
            },
            (Bound::Unbounded, Bound::Unbounded) => QueryClass::PartitionScan {
                partition_key: pk.to_owned(),
            },
            (start, end) => QueryClass::Range {
                partition_key: pk.to_owned(),
                start: start.clone(),
                end: end.clone(),
            },
        }
    }

    /// Whether the key lies inside the range.
    pub fn contains(&self, partition_key: &str, row_key: &str) -> bool {
        after_start(partition_key, &self.pk_start)
            && before_end(partition_key, &self.pk_end)
            && (self.partition().is_none()
                || (after_start(row_key, &self.rk_start) && before_end(row_key, &self.rk_end)))
    }

    /// Whether the key lies after the end of the range, so no later key can be inside it.
    pub fn is_past_end(&self, partition_key: &str, row_key: &str) -> bool {
        if !before_end(partition_key, &self.pk_end) {
            return true;
        }
        self.partition() == Some(partition_key) && !before_end(row_key, &self.rk_end)
    }
}

/// Where a query resumes: the key of the next entity to consider. Opaque to callers;
/// `to_string()` gives a URL-safe text form that [`str::parse`] reads back, so a token
/// can be stored and used after a restart.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ContinuationToken {
    #[serde(rename = "pk")]
    next_partition_key: String,
    #[serde(rename = "rk")]
    next_row_key: String,
}

impl ContinuationToken {
    /// A token resuming at (and including) this key.
    pub fn new(next_partition_key: impl Into<String>, next_row_key: impl Into<String>) -> Self {
        ContinuationToken {
            next_partition_key: next_partition_key.into(),
            next_row_key: next_row_key.into(),
        }
    }

    /// The partition key of the next entity.
    pub fn next_partition_key(&self) -> &str {
        &self.next_partition_key
    }

    /// The row key of the next entity.
    pub fn next_row_key(&self) -> &str {
        &self.next_row_key
    }
}

impl fmt::Display for ContinuationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let json = serde_json::to_vec(self).map_err(|_| fmt::Error)?;
        f.write_str(&URL_SAFE_NO_PAD.encode(json))
    }
}

impl FromStr for ContinuationToken {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bytes = URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|e| Error::InvalidContinuation {
                reason: format!("not base64url: {e}"),
            })?;
        let token: ContinuationToken =
            serde_json::from_slice(&bytes).map_err(|e| Error::InvalidContinuation {
                reason: format!("not a tablekit token: {e}"),
            })?;
        limits::check_keys(&token.next_partition_key, &token.next_row_key).map_err(|e| {
            Error::InvalidContinuation {
                reason: e.to_string(),
            }
        })?;
        Ok(token)
    }
}

/// One page of query results, in key order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Page {
    /// The entities, at most the page size.
    pub entities: Vec<Entity>,
    /// Set when more entities may follow: pass it to [`Query::continue_from`].
    pub continuation: Option<ContinuationToken>,
}

/// Collects one page from entities offered in key order: applies the filter and the
/// projection, and stops at the first match past a full page, whose key becomes the
/// continuation (so a page without a token is the last one).
#[derive(Debug)]
pub struct PageCollector<'q> {
    filter: Option<&'q Filter>,
    select: Option<&'q [String]>,
    limit: usize,
    page: Page,
}

impl<'q> PageCollector<'q> {
    /// A collector for one page of `query`.
    pub fn new(query: &'q Query) -> Self {
        PageCollector {
            filter: query.filter.as_ref(),
            select: query.select.as_deref(),
            limit: query.page_size(),
            page: Page::default(),
        }
    }

    /// Offers the next entity in key order; `Break` once the page is complete.
    pub fn offer(&mut self, entity: Entity) -> ControlFlow<()> {
        if let Some(flow) = self.admit(&entity) {
            return flow;
        }
        self.take(entity);
        ControlFlow::Continue(())
    }

    /// Offers the next stored row in key order, read through `fields` (its encoded
    /// form, say): `build` makes the entity only when the page takes the row, so a row
    /// the filter rejects, or the one past a full page, is never built. `Break` once the
    /// page is complete.
    ///
    /// # Errors
    /// What `build` returns.
    #[cfg(feature = "sqlite")]
    pub(crate) fn offer_fields(
        &mut self,
        fields: &impl crate::filter::Fields,
        build: impl FnOnce() -> Result<Entity>,
    ) -> Result<ControlFlow<()>> {
        if let Some(flow) = self.admit(fields) {
            return Ok(flow);
        }
        self.take(build()?);
        Ok(ControlFlow::Continue(()))
    }

    /// What becomes of a row before it is built: `Continue` when the filter rejects it,
    /// `Break` (with the continuation token at it) when the page is full, `None` when
    /// the page takes it.
    fn admit(&mut self, fields: &impl crate::filter::Fields) -> Option<ControlFlow<()>> {
        if let Some(filter) = self.filter
            && !filter.matches_fields(fields)
        {
            return Some(ControlFlow::Continue(()));
        }
        if self.page.entities.len() == self.limit {
            self.page.continuation = Some(ContinuationToken::new(
                fields.partition_key().to_owned(),
                fields.row_key().to_owned(),
            ));
            return Some(ControlFlow::Break(()));
        }
        None
    }

    /// Adds a row the page takes, projected to the query's `select`.
    fn take(&mut self, mut entity: Entity) {
        if let Some(select) = self.select {
            entity.project(select);
        }
        self.page.entities.push(entity);
    }

    /// The page collected.
    pub fn finish(self) -> Page {
        self.page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(filter: &str) -> QueryClass {
        Query::parse(filter)
            .map(|q| q.explain())
            .unwrap_or(QueryClass::TableScan)
    }

    #[test]
    fn classifies_each_shape_of_query() {
        assert_eq!(
            class("PartitionKey eq 'Sales' and RowKey eq '1'"),
            QueryClass::Point {
                partition_key: "Sales".into(),
                row_key: "1".into()
            }
        );
        assert!(matches!(
            class("PartitionKey eq 'Sales' and RowKey ge 'B' and RowKey lt 'C'"),
            QueryClass::Range { start: Bound::Included(s), end: Bound::Excluded(e), .. } if s == "B" && e == "C"
        ));
        assert!(matches!(
            class("PartitionKey eq 'Sales' and Age gt 30"),
            QueryClass::PartitionScan { .. }
        ));
        assert_eq!(class("Age gt 30"), QueryClass::TableScan);
        assert_eq!(
            class("PartitionKey eq 'a' or PartitionKey eq 'b'"),
            QueryClass::TableScan
        );
        assert_eq!(class("PartitionKey ge 'a'"), QueryClass::TableScan);
        assert_eq!(Query::new().explain(), QueryClass::TableScan);
    }

    #[test]
    fn continuation_token_round_trips_through_text() {
        let t = ContinuationToken::new("Sales", "empid_'x'");
        let text = t.to_string();
        assert_eq!(text.parse::<ContinuationToken>().ok(), Some(t));
        assert!("not a token!".parse::<ContinuationToken>().is_err());
        assert!("e30".parse::<ContinuationToken>().is_err()); // "{}"
    }

    #[test]
    fn check_rejects_top_outside_the_page_limit() {
        assert!(Query::new().top(0).check().is_err());
        assert!(Query::new().top(1001).check().is_err());
        assert!(Query::new().top(1000).check().is_ok());
    }
}
