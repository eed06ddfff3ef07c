//! How an index entity lays out: its declaration (`index_entity`, with its `key`
//! template, its `table` and the setting `storage`: `partition`, `table` or `blob`) read
//! into a [`MemberLayout`], and a primary's membership in the id list of its value.

use tablekit_core::limits::KeyKind;
use tablekit_core::typed::KeyTemplate;

use super::record::{MemberStorage, MemberTarget};
use crate::error::Result;
use crate::index::record::{DeclaredLayout, Elsewhere, LaysOut, Layout, Primary, Target};

/// One declared index entity, with its template parsed.
#[derive(Clone, Debug)]
pub struct MemberLayout {
    /// The name.
    pub name: String,
    /// The template of the indexed value.
    pub key: KeyTemplate,
    /// The id lists' table; the primary's when `None`.
    pub table: Option<String>,
    /// Where the id lists live.
    pub storage: MemberStorage,
}

impl MemberLayout {
    /// The index entity `declared` describes.
    ///
    /// # Errors
    /// [`crate::Error::Malformed`] for a declaration without a key template or with a
    /// storage other than `partition`, `table` or `blob`.
    pub fn of(declared: &DeclaredLayout) -> Result<Self> {
        let storage = declared.setting("storage").unwrap_or("partition");
        Ok(MemberLayout {
            name: declared.name.clone(),
            key: declared.needs_template("key")?.clone(),
            table: declared.table.clone(),
            storage: MemberStorage::from_setting(storage).ok_or_else(|| {
                declared.malformed(format!(
                    "storage `{storage}` is none of `partition`, `table` and `blob`"
                ))
            })?,
        })
    }

    /// Every index entity `layout` declares.
    pub fn all(layout: &Layout) -> impl Iterator<Item = Result<Self>> + '_ {
        layout.declared_as(super::write::ATTRIBUTE).map(Self::of)
    }

    /// The table the id lists are in, for primaries in `table` (the primary's own for
    /// lists in its partition).
    pub fn table_for(&self, table: &str) -> String {
        match self.storage {
            MemberStorage::Partition => table.to_owned(),
            _ => self.table.clone().unwrap_or_else(|| table.to_owned()),
        }
    }
}

/// How `#[index_entity]` lays out: the primary's membership in the id list of its value.
pub(super) struct Lists;

impl LaysOut for Lists {
    fn check(&self, declared: &DeclaredLayout) -> Result<()> {
        MemberLayout::of(declared).map(drop)
    }

    fn targets(&self, declared: &DeclaredLayout, primary: &Primary<'_>) -> Result<Vec<Target>> {
        let member = MemberLayout::of(declared)?;
        Ok(vec![Target::from(MemberTarget {
            table: member.table_for(&primary.source.table),
            value: (primary.render)(&member.key, KeyKind::RowKey)?,
            index: member.name,
            storage: member.storage,
        })])
    }

    fn tables(&self, declared: &DeclaredLayout, _table: &str) -> Vec<String> {
        match MemberLayout::of(declared) {
            Ok(m) if m.storage == MemberStorage::Table => m.table.into_iter().collect(),
            _ => Vec::new(),
        }
    }

    fn follow_up(&self, declared: &DeclaredLayout, at: &Elsewhere<'_>) -> Option<String> {
        let member = MemberLayout::of(declared).ok()?;
        match member.storage {
            MemberStorage::Partition => None,
            MemberStorage::Table => Some(format!(
                "index entity `{}`: id lists in table `{}`",
                member.name,
                member.table.as_deref().unwrap_or(at.table)
            )),
            MemberStorage::Blob => Some(format!("index entity `{}`: id lists in blobs", member.name)),
        }
    }
}
