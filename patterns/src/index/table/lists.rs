//! The reads of id lists (`#[index_entity]`) that [`IndexedTable`]'s `list` and
//! `list_named` are made of: the ids in a value's list, and pages of the primaries they
//! name.

use futures::{StreamExt, TryStreamExt};
use tablekit_core::TableStore;
use tablekit_core::typed::{EntityType, Stored};

use super::super::record::{EntityRef, MemberLayout, MemberStorage};
use super::IndexedTable;
use crate::cursor::{Cursor, CursorPage, Position};
use crate::error::{Error, Result};
use crate::index::decl::index_entity::{
    read_blob_members, read_partition_pages, read_table_members,
};

impl<E: EntityType, S: TableStore + Clone + 'static> IndexedTable<E, S> {
    /// The layout of the id list `name`.
    pub(super) fn list_layout(&self, name: &str) -> Result<&MemberLayout> {
        self.reads
            .lists
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| tablekit_core::Error::Undeclared {
                type_name: E::schema().type_name,
                what: "index entity",
                name: name.to_owned(),
            })
    }

    /// The members of the list `member` whose key renders as `value`.
    pub(super) async fn list_ids(
        &self,
        member: &MemberLayout,
        partition_key: Option<&str>,
        value: &str,
    ) -> Result<Vec<EntityRef>> {
        let name = member.name.as_str();
        let table = member.table.as_deref().unwrap_or(self.table.name());
        match member.storage {
            MemberStorage::Partition => {
                let pk = partition_key.ok_or_else(|| {
                    Error::Unsupported(format!(
                        "index entity `{name}` lives in the primaries' partitions: give the partition"
                    ))
                })?;
                let pages =
                    read_partition_pages(self.table.store(), self.table.name(), pk, name, value)
                        .await?;
                Ok(pages
                    .into_iter()
                    .flat_map(|p| p.ids)
                    .map(|rk| self.source(pk, &rk))
                    .collect())
            }
            MemberStorage::Table => Ok(read_table_members(self.table.store(), table, name, value)
                .await?
                .into_iter()
                .filter(|m| m.present)
                .map(|m| m.source)
                .collect()),
            MemberStorage::Blob => {
                let blobs = self
                    .writer
                    .blobs
                    .as_ref()
                    .ok_or_else(|| Error::NoBlobStore {
                        index: name.to_owned(),
                    })?;
                Ok(read_blob_members(blobs, table, name, value)
                    .await?
                    .into_iter()
                    .filter(|m| m.present)
                    .map(|m| m.source)
                    .collect())
            }
        }
    }

    /// One page of the primaries of the list `member` whose key renders as `value`.
    pub(super) async fn list_page(
        &self,
        member: &MemberLayout,
        partition_key: Option<&str>,
        value: &str,
        page_size: usize,
        concurrency: usize,
        cursor: Option<&Cursor>,
    ) -> Result<CursorPage<Stored<E>>> {
        let read = format!("members-{}-{}", self.table.name(), member.name);
        let position = match cursor {
            Some(cursor) => cursor.positions_for(&read, 1)?[0].clone(),
            None => Position::Start,
        };
        let mut ids = self.list_ids(member, partition_key, value).await?;
        ids.sort_by(|a, b| (&a.partition_key, &a.row_key).cmp(&(&b.partition_key, &b.row_key)));
        let size = page_size.clamp(1, 1000);
        let page: Vec<EntityRef> = ids
            .into_iter()
            .filter(|id| match &position {
                Position::Start => true,
                Position::After(pk, rk) => (&id.partition_key, &id.row_key) > (pk, rk),
                Position::Done => false,
            })
            .take(size + 1)
            .collect();
        let more = page.len() > size;
        let page = &page[..page.len().min(size)];
        let reads: Vec<_> = page
            .iter()
            .map(|id| self.get(&id.partition_key, &id.row_key))
            .collect();
        let found: Vec<Option<Stored<E>>> = futures::stream::iter(reads)
            .buffered(concurrency.max(1))
            .try_collect()
            .await?;
        let cursor = match (more, page.last()) {
            (true, Some(last)) => Some(Cursor::new(
                read,
                vec![Position::After(
                    last.partition_key.clone(),
                    last.row_key.clone(),
                )],
            )),
            _ => None,
        };
        Ok(CursorPage {
            items: found.into_iter().flatten().collect(),
            cursor,
        })
    }
}
