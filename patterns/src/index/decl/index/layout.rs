//! How a secondary index lays out: its declaration (`index`, with the templates
//! `partition_key` and `row_key`, its copies' `table` when they live in another table,
//! and the settings `properties` and `sparse`) read into an [`IndexLayout`], and a
//! primary's copy under it.

use tablekit_core::limits::KeyKind;
use tablekit_core::typed::KeyTemplate;

use super::record::CopyTarget;
use crate::error::Result;
use crate::index::record::{
    DeclaredLayout, Elsewhere, EntityRef, LaysOut, Layout, Primary, Target,
};

/// One declared secondary index, with its templates parsed.
#[derive(Clone, Debug)]
pub struct IndexLayout {
    /// The name.
    pub name: String,
    /// The copies' table; the primary's when `None`.
    pub table: Option<String>,
    /// The copies' PartitionKey template.
    pub partition_key: KeyTemplate,
    /// The copies' RowKey template.
    pub row_key: KeyTemplate,
    /// The properties a copy carries; all of them when `None`.
    pub properties: Option<Vec<String>>,
    /// Whether some entities have no copy.
    pub sparse: bool,
}

impl IndexLayout {
    /// The index `declared` describes.
    ///
    /// # Errors
    /// [`crate::Error::Malformed`] for a declaration without both templates.
    pub fn of(declared: &DeclaredLayout) -> Result<Self> {
        Ok(IndexLayout {
            name: declared.name.clone(),
            table: declared.table.clone(),
            partition_key: declared.needs_template("partition_key")?.clone(),
            row_key: declared.needs_template("row_key")?.clone(),
            properties: declared.setting("properties").map(|list| {
                list.split(',')
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect()
            }),
            sparse: declared.setting("sparse").is_some(),
        })
    }

    /// Every index `layout` declares.
    pub fn all(layout: &Layout) -> impl Iterator<Item = Result<Self>> + '_ {
        layout.declared_as(super::write::ATTRIBUTE).map(Self::of)
    }
}

/// How `#[index]` lays out: a copy of the primary under the index's keys, unless a sparse
/// index leaves it out.
pub(super) struct Copies;

impl LaysOut for Copies {
    fn check(&self, declared: &DeclaredLayout) -> Result<()> {
        IndexLayout::of(declared).map(drop)
    }

    fn targets(&self, declared: &DeclaredLayout, primary: &Primary<'_>) -> Result<Vec<Target>> {
        let index = IndexLayout::of(declared)?;
        if index.sparse && !(primary.in_index)(&index.name) {
            return Ok(Vec::new());
        }
        let at = EntityRef::new(
            index.table.unwrap_or_else(|| primary.source.table.clone()),
            (primary.render)(&index.partition_key, KeyKind::PartitionKey)?,
            (primary.render)(&index.row_key, KeyKind::RowKey)?,
        );
        Ok(vec![Target::from(CopyTarget {
            index: index.name,
            at,
            properties: index.properties,
        })])
    }

    fn tables(&self, declared: &DeclaredLayout, _table: &str) -> Vec<String> {
        declared.table.iter().cloned().collect()
    }

    fn follow_up(&self, declared: &DeclaredLayout, at: &Elsewhere<'_>) -> Option<String> {
        let template = declared.template("partition_key")?;
        let elsewhere = at.of(declared.table.as_deref(), template)?;
        Some(format!("index `{}`: copies in {elsewhere}", declared.name))
    }

    fn copies_whole(&self, declared: &DeclaredLayout) -> bool {
        declared.setting("properties").is_none()
    }
}
