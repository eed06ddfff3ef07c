//! The reads of index copies that [`IndexedTable`]'s look-ups (`lookup`, `lookup_named`)
//! are made of: one hit, pages of hits by key range or prefix, counts, each copy read back
//! as its primary (checked against it with verified look-ups; an expired one left out;
//! its blob fields restored).

use futures::{StreamExt, TryStreamExt};
use tablekit_core::typed::{EntityType, KeyBounds, Stored};
use tablekit_core::{Entity, Query, TableStore, filter};

use super::super::record::{EntityRef, IndexLayout, as_primary, copy_source};
use super::IndexedTable;
use crate::cursor::{Cursor, CursorPage, Position};
use crate::error::{Error, Result};

impl<E: EntityType, S: TableStore + Clone + 'static> IndexedTable<E, S> {
    pub(super) fn index(&self, name: &str) -> Result<&IndexLayout> {
        self.reads
            .indexes
            .iter()
            .find(|i| i.name == name)
            .ok_or_else(|| tablekit_core::Error::Undeclared {
                type_name: E::schema().type_name,
                what: "index",
                name: name.to_owned(),
            })
    }

    fn index_table<'a>(&'a self, index: &'a IndexLayout) -> &'a str {
        index.table.as_deref().unwrap_or(self.table.name())
    }

    /// Reads a copy as the primary's type (or, verified, the primary itself).
    pub(super) async fn read_hit(
        &self,
        index: &IndexLayout,
        copy: Entity,
        verify: bool,
    ) -> Result<Option<Stored<E>>> {
        let Some((source, _)) = copy_source(&copy) else {
            return Ok(None);
        };
        if verify {
            // The primary decides: a renewed entity's copy may still carry the old expiry.
            return self.verified_hit(index, &source, &copy).await;
        }
        if self.writer.hidden(&copy) {
            return Ok(None);
        }
        let restored = match self.writer.restore(copy.clone()).await {
            Ok(restored) => restored,
            // A stale copy whose blob the primary's newer write deleted: the primary
            // answers instead.
            Err(Error::Malformed { .. }) => {
                return self.verified_hit(index, &source, &copy).await;
            }
            Err(e) => return Err(e),
        };
        let mut stored = E::from_entity(as_primary(restored, &self.writer.layout.kind_property))?;
        stored.partition_key = source.partition_key;
        stored.row_key = source.row_key;
        stored.etag = None;
        Ok(Some(stored))
    }

    /// The primary of a copy, if it still has that copy.
    async fn verified_hit(
        &self,
        index: &IndexLayout,
        source: &EntityRef,
        copy: &Entity,
    ) -> Result<Option<Stored<E>>> {
        let Some(primary) = self.get(&source.partition_key, &source.row_key).await? else {
            return Ok(None);
        };
        let keys = primary.value.index_keys(&index.name)?;
        let matches = keys.is_some_and(|(pk, rk)| pk == copy.partition_key && rk == copy.row_key);
        Ok(matches.then_some(primary))
    }

    /// The hit whose copy has the keys `pk` and `rk`, if any.
    pub(super) async fn hit_at(
        &self,
        layout: &IndexLayout,
        pk: &str,
        rk: &str,
        verify: bool,
    ) -> Result<Option<Stored<E>>> {
        let copy = self
            .table
            .store()
            .get_if_table_exists(self.index_table(layout), pk, rk)
            .await?;
        match copy {
            Some(copy) => self.read_hit(layout, copy, verify).await,
            None => Ok(None),
        }
    }

    /// A page of copies; `keep_expired` keeps the copies whose expiry passed, for
    /// verified reads, where the primary decides (it may have been renewed after the
    /// copy was written).
    pub(super) async fn copies_page(
        &self,
        layout: &IndexLayout,
        pk: &str,
        bounds: &KeyBounds,
        page_size: usize,
        cursor: Option<&Cursor>,
        keep_expired: bool,
    ) -> Result<CursorPage<Entity>> {
        let query = self.copies_query(layout, pk, bounds);
        let read = format!("index-{}-{}", self.table.name(), layout.name);
        let position = match cursor {
            Some(cursor) => cursor.positions_for(&read, 1)?[0].clone(),
            None => Position::Start,
        };
        let (mut items, position) = crate::cursor::read_from(
            self.table.store(),
            self.index_table(layout),
            query,
            &position,
            page_size,
        )
        .await?;
        if !keep_expired {
            items.retain(|copy| !self.writer.hidden(copy));
        }
        let cursor = (position != Position::Done).then(|| Cursor::new(read, vec![position]));
        Ok(CursorPage { items, cursor })
    }

    /// The copies of an index in `bounds` of partition `pk` (those its kind marks).
    fn copies_query(&self, layout: &IndexLayout, pk: &str, bounds: &KeyBounds) -> Query {
        let marker = format!("{}#{}", self.writer.layout.kind, layout.name);
        Query::with_filter(
            bounds.in_partition(pk)
                & filter::property_named(self.writer.layout.kind_property.as_str())
                    .eq(marker.as_str()),
        )
    }

    /// How many live copies of an index lie in `bounds` of partition `pk`, reading their
    /// keys and the properties that hide one (its expiry) only, page after page.
    pub(super) async fn count_copies(
        &self,
        layout: &IndexLayout,
        pk: &str,
        bounds: &KeyBounds,
    ) -> Result<u64> {
        let query = self
            .copies_query(layout, pk, bounds)
            .select(super::HIDING_PROPERTIES.iter().copied());
        self.count_seen(
            self.table
                .store()
                .query_stream(self.index_table(layout), query),
        )
        .await
    }

    /// How many of `rows` a reader sees (those a declaration hides left out), counted as
    /// they stream.
    pub(super) async fn count_seen(
        &self,
        rows: impl futures::Stream<Item = Result<Entity>>,
    ) -> Result<u64> {
        rows.try_fold(0, |count, row| {
            std::future::ready(Ok(count + u64::from(!self.writer.hidden(&row))))
        })
        .await
    }

    pub(super) async fn read_hits_page(
        &self,
        layout: &IndexLayout,
        pk: &str,
        bounds: &KeyBounds,
        page_size: usize,
        cursor: Option<&Cursor>,
        verify: bool,
    ) -> Result<CursorPage<Stored<E>>> {
        let copies = self
            .copies_page(layout, pk, bounds, page_size, cursor, verify)
            .await?;
        let hits: Vec<Option<Stored<E>>> = futures::stream::iter(copies.items)
            .map(|copy| self.read_hit(layout, copy, verify))
            .buffered(self.lookup_concurrency)
            .try_collect()
            .await?;
        Ok(CursorPage {
            items: hits.into_iter().flatten().collect(),
            cursor: copies.cursor,
        })
    }
}
