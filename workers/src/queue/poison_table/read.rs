//! Reading the poison table: pages both ways, counts and groups from their count rows, a
//! message whole.

use std::collections::BTreeMap;

use futures::TryStreamExt as _;
use tablekit_core::{Entity, Query, TableStore, filter};

use super::rows::*;
use super::{POISON_TABLE, PoisonTable, SCAN_BUDGET, missing_table};
use crate::error::Result;
use crate::queue::poison::{Groups, Reasons};
use crate::queue::{PoisonFilter, PoisonMessage, PoisonPage, PoisonQuery, ReasonGroup};

/// The rows of `partition` whose keys start with `prefix` and come after `after` (when
/// given), in key order.
fn range(partition: &str, prefix: &str, after: Option<&str>) -> Query {
    // `.` + 1 is `/`: the first key past every key starting with `prefix`.
    let end = format!("{}/", prefix.trim_end_matches('.'));
    let start = match after {
        Some(after) => filter::row_key().gt(after.to_owned()),
        None => filter::row_key().ge(prefix.to_owned()),
    };
    Query::with_filter(
        filter::partition_key()
            .eq(partition.to_owned())
            .and(start)
            .and(filter::row_key().lt(end)),
    )
}

/// Whether a page of `filter` needs the rows' bodies (a body filter, or a preview longer
/// than the rows keep).
fn needs_body(filter: &PoisonFilter, preview: usize) -> bool {
    filter.body.is_some() || preview > PREVIEW
}

/// The kind and reason group a filter asks for, when it asks for nothing else (its counts
/// then come from the pair rows, without a scan).
/// Whether a view of `filter` — its reason groups, and its kinds (the filter without its
/// kind) — is read from the count rows rather than counted over the messages: when it
/// filters by nothing but a kind and a reason group (a kind never decides it).
fn from_count_rows(filter: &PoisonFilter) -> bool {
    filter.is_empty() || by_counts(filter).is_some()
}

fn by_counts(filter: &PoisonFilter) -> Option<(Option<&str>, Option<&str>)> {
    let text = filter.id.is_some() || filter.reason.is_some() || filter.body.is_some();
    if text || filter.is_empty() {
        return None;
    }
    let group = if filter.undecodable_reason {
        match filter.reason_group.as_deref() {
            Some(group) if group != crate::queue::UNDECODABLE_REASON_GROUP => return None,
            _ => Some(crate::queue::UNDECODABLE_REASON_GROUP),
        }
    } else {
        filter.reason_group.as_deref()
    };
    Some((filter.kind.as_deref(), group))
}

/// Whether a pair row counts messages of `kind` (in either case, as a filter matches it;
/// any when `None`) and `group` (any when `None`).
fn pair_passes(row: &Entity, kind: Option<&str>, group: Option<&str>) -> bool {
    kind.is_none_or(|kind| str_of(row, KIND).eq_ignore_ascii_case(kind))
        && group.is_none_or(|group| str_of(row, GROUP) == group)
}

/// Counts by kind, most first (then by kind), none of 0.
fn most_first(counted: BTreeMap<Option<String>, u64>) -> Vec<(Option<String>, u64)> {
    let mut kinds: Vec<_> = counted.into_iter().filter(|(_, n)| *n > 0).collect();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    kinds
}

impl<S: TableStore> PoisonTable<S> {
    /// The message a row holds with its body as a page shows it: whole (read from its
    /// pieces if need be) when `whole`, else its preview.
    async fn listed(&self, row: &Entity, whole: bool) -> Result<PoisonMessage> {
        let body = if !whole {
            preview_of(row)
        } else {
            self.whole_body(row).await?
        };
        Ok(message_of(row, body))
    }

    pub(super) async fn whole_body(&self, row: &Entity) -> Result<Vec<u8>> {
        let pieces = pieces_of(row);
        if pieces == 0 {
            return Ok(body_of(row));
        }
        let at = str_of(row, AT);
        let mut body = Vec::new();
        for n in 0..pieces {
            let piece = self
                .store
                .get(POISON_TABLE, &row.partition_key, &piece_key(at, n), None)
                .await?;
            match piece {
                Some(piece) => body.extend(body_of(&piece)),
                None => break,
            }
        }
        Ok(body)
    }

    /// One page of `queue`'s poison messages as `query` asks, read from the oldest-first
    /// rows or their newest-first copies. A filter is applied to the rows in order, at
    /// most [`SCAN_BUDGET`] of them per page: a page that stops there holds what it found
    /// and a cursor to read on.
    ///
    /// # Errors
    /// The store's errors; [`Error::InvalidInput`](crate::Error) for a cursor this table
    /// did not give.
    pub async fn page(&self, queue: &str, query: &PoisonQuery) -> Result<PoisonPage> {
        let partition = crate::activity::encode_queue(queue);
        let prefix = if query.newest_first { NEWEST } else { OLDEST };
        if let Some(after) = &query.after
            && !after.starts_with(prefix)
        {
            return Err(tablekit_core::Error::InvalidContinuation {
                reason: format!("{after:?} is not a cursor of this poison page's order"),
            });
        }
        let whole = needs_body(&query.filter, query.preview);
        let mut rows_query = range(&partition, prefix, query.after.as_deref());
        if !whole {
            rows_query = rows_query.select(PAGE_PROPERTIES.iter().copied());
        }
        if query.filter.is_empty() && query.limit < 1_000 {
            // The page and one more (whether there is a next): read no more.
            rows_query = rows_query.top(query.limit + 1);
        }
        let mut rows = std::pin::pin!(self.store.query_stream(POISON_TABLE, rows_query));
        let mut page = PoisonPage::default();
        let mut examined = 0;
        let mut last = None;
        loop {
            let row = match rows.try_next().await {
                Ok(Some(row)) => row,
                Ok(None) => break,
                Err(e) if missing_table(&e) => break,
                Err(e) => return Err(e),
            };
            examined += 1;
            let message = self.listed(&row, whole).await?;
            if query.filter.matches(&message) {
                if page.messages.len() == query.limit {
                    // One more matches: the page has a next.
                    page.next = last;
                    return Ok(page);
                }
                page.messages.push(message.cut(query.preview));
            }
            last = Some(row.row_key);
            if examined >= SCAN_BUDGET {
                page.next = last;
                return Ok(page);
            }
        }
        Ok(page)
    }

    /// How many poison messages `queue` keeps: the sum of its count's shares.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn count(&self, queue: &str) -> Result<u64> {
        let rows = self.count_rows(queue, COUNTS).await?;
        Ok(rows
            .iter()
            .map(|r| u64::try_from(int(r, COUNT)).unwrap_or(0))
            .sum())
    }

    async fn count_rows(&self, queue: &str, prefix: &str) -> Result<Vec<Entity>> {
        let partition = crate::activity::encode_queue(queue);
        match self
            .store
            .query_stream(POISON_TABLE, range(&partition, prefix, None))
            .try_collect()
            .await
        {
            Ok(rows) => Ok(rows),
            Err(e) if missing_table(&e) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// The rows of the listing in order, oldest first (their whole bodies when `filter`
    /// reads them), at most `budget` of them: what a filtered count reads. Answers whether
    /// it read them all.
    async fn scan(
        &self,
        queue: &str,
        filter: &PoisonFilter,
        budget: usize,
        mut each: impl FnMut(PoisonMessage),
    ) -> Result<bool> {
        let partition = crate::activity::encode_queue(queue);
        let whole = needs_body(filter, 0);
        let mut query = range(&partition, OLDEST, None);
        if !whole {
            query = query.select(PAGE_PROPERTIES.iter().copied());
        }
        let mut rows = std::pin::pin!(self.store.query_stream(POISON_TABLE, query));
        let mut read = 0;
        loop {
            match rows.try_next().await {
                Ok(Some(_)) if read >= budget => return Ok(false),
                Ok(Some(row)) => {
                    read += 1;
                    each(self.listed(&row, whole).await?);
                }
                Ok(None) => return Ok(true),
                Err(e) if missing_table(&e) => return Ok(true),
                Err(e) => return Err(e),
            }
        }
    }

    /// The reason groups of `queue`'s poison messages `filter` passes, most first: from
    /// the count rows when the filter names at most a kind and a reason group, else
    /// counted over the oldest [`SCAN_BUDGET`] messages (a page stays under a second
    /// whatever the queue holds; [`counted_whole`](Self::counted_whole) says whether a
    /// filter's counts cover every message).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn reason_groups(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<ReasonGroup>> {
        let mut groups = Groups::new(filter);
        if let Some((kind, group)) = by_counts(filter) {
            for row in self.count_rows(queue, PAIRS).await? {
                if pair_passes(&row, kind, group) {
                    groups.add(
                        str_of(&row, GROUP).to_owned(),
                        u64::try_from(int(&row, COUNT)).unwrap_or(0),
                        str_of(&row, EXAMPLE).to_owned(),
                    );
                }
            }
        } else if filter.is_empty() {
            for row in self.count_rows(queue, GROUPS).await? {
                groups.add(
                    str_of(&row, GROUP).to_owned(),
                    u64::try_from(int(&row, COUNT)).unwrap_or(0),
                    str_of(&row, EXAMPLE).to_owned(),
                );
            }
        } else {
            self.scan(queue, filter, SCAN_BUDGET, |m| groups.offer(m))
                .await?;
        }
        Ok(groups.finish())
    }

    /// The operation kinds of `queue`'s poison messages `filter` (its kind left out)
    /// passes, most first: from the count rows when the rest of the filter names at most
    /// a reason group, else counted over the oldest [`SCAN_BUDGET`] messages, as
    /// [`reason_groups`](Self::reason_groups).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn kinds(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<Vec<(Option<String>, u64)>> {
        let others = PoisonFilter {
            kind: None,
            ..filter.clone()
        };
        if let Some((_, group)) = by_counts(&others) {
            let mut counted: BTreeMap<Option<String>, u64> = BTreeMap::new();
            for row in self.count_rows(queue, PAIRS).await? {
                if pair_passes(&row, None, group) {
                    let kind = Some(str_of(&row, KIND).to_owned()).filter(|k| !k.is_empty());
                    *counted.entry(kind).or_default() +=
                        u64::try_from(int(&row, COUNT)).unwrap_or(0);
                }
            }
            return Ok(most_first(counted));
        }
        if !others.is_empty() {
            let mut counted: BTreeMap<Option<String>, u64> = BTreeMap::new();
            self.scan(queue, &others, SCAN_BUDGET, |m| {
                if others.matches(&m) {
                    *counted
                        .entry(m.operation.map(|(kind, _)| kind))
                        .or_default() += 1;
                }
            })
            .await?;
            return Ok(most_first(counted));
        }
        let mut counted: BTreeMap<Option<String>, u64> = BTreeMap::new();
        for row in self.count_rows(queue, KINDS).await? {
            let kind = Some(str_of(&row, KIND).to_owned()).filter(|k| !k.is_empty());
            *counted.entry(kind).or_default() += u64::try_from(int(&row, COUNT)).unwrap_or(0);
        }
        Ok(most_first(counted))
    }

    /// [`reason_groups`](Self::reason_groups) and [`kinds`](Self::kinds) of `filter` at
    /// once: a filter the count rows cannot answer is counted in one scan of the oldest
    /// [`SCAN_BUDGET`] messages for both, not one each.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn facets(
        &self,
        queue: &str,
        filter: &PoisonFilter,
    ) -> Result<(Vec<ReasonGroup>, Vec<(Option<String>, u64)>)> {
        if from_count_rows(filter) {
            return Ok((
                self.reason_groups(queue, filter).await?,
                self.kinds(queue, filter).await?,
            ));
        }
        let others = PoisonFilter {
            kind: None,
            ..filter.clone()
        };
        let mut groups = Groups::new(filter);
        let mut kinds: BTreeMap<Option<String>, u64> = BTreeMap::new();
        self.scan(queue, &others, SCAN_BUDGET, |m| {
            if others.matches(&m) {
                *kinds
                    .entry(m.operation.as_ref().map(|(kind, _)| kind.clone()))
                    .or_default() += 1;
                groups.offer(m);
            }
        })
        .await?;
        Ok((groups.finish(), most_first(kinds)))
    }

    /// Whether [`reason_groups`](Self::reason_groups) and [`kinds`](Self::kinds) of
    /// `filter` count every message of a queue holding `total`: they do from count rows,
    /// and when a scan reads them all.
    pub fn counted_whole(filter: &PoisonFilter, total: u64) -> bool {
        from_count_rows(filter) || total <= SCAN_BUDGET as u64
    }

    /// The reasons of `queue`'s poison messages `filter` passes, with their counts, most
    /// first.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn reasons(&self, queue: &str, filter: &PoisonFilter) -> Result<Vec<(String, u64)>> {
        let mut reasons = Reasons::new(filter);
        self.scan(queue, filter, usize::MAX, |m| reasons.offer(m))
            .await?;
        Ok(reasons.finish())
    }

    /// One poison message whole, by its handle; `None` once it left the table.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn message(&self, queue: &str, handle: &str) -> Result<Option<PoisonMessage>> {
        Ok(match self.row(queue, handle).await? {
            Some(row) => Some(self.listed(&row, true).await?),
            None => None,
        })
    }

    /// The oldest-first row of a handle; `None` for a handle of no message kept.
    pub(super) async fn row(&self, queue: &str, handle: &str) -> Result<Option<Entity>> {
        if !is_time_key(handle) {
            return Ok(None);
        }
        let partition = crate::activity::encode_queue(queue);
        match self
            .store
            .get(POISON_TABLE, &partition, &format!("{OLDEST}{handle}"), None)
            .await
        {
            Ok(row) => Ok(row),
            Err(e) if missing_table(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
