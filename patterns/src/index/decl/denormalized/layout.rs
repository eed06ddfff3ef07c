//! How a denormalised field lays out: its declaration (`denormalized`, named after the
//! property holding the copy, with the source's `partition_key` and `row_key` templates,
//! its `table`, and the settings `field`, `from` and `property`) read into a
//! [`DenormalizedLayout`], and a primary's link to its source under it.

use tablekit_core::limits::KeyKind;
use tablekit_core::typed::KeyTemplate;

use super::record::DenormalizedTarget;
use crate::error::Result;
use crate::index::record::{
    DeclaredLayout, Elsewhere, EntityRef, LaysOut, Primary, Target,
};

/// One declared denormalised field, with its templates parsed.
#[derive(Clone, Debug)]
pub struct DenormalizedLayout {
    /// The property holding the copy.
    pub property: String,
    /// The kind of the source.
    pub from_kind: String,
    /// The source's table; the primary's when `None`.
    pub table: Option<String>,
    /// The source's PartitionKey, from the primary's fields.
    pub partition_key: KeyTemplate,
    /// The source's RowKey, from the primary's fields.
    pub row_key: KeyTemplate,
    /// The source's property.
    pub source_property: String,
}

impl DenormalizedLayout {
    /// The denormalised field `declared` describes.
    ///
    /// # Errors
    /// [`crate::Error::Malformed`] for a declaration without its templates, `from` or
    /// `property`.
    pub fn of(declared: &DeclaredLayout) -> Result<Self> {
        Ok(DenormalizedLayout {
            property: declared.name.clone(),
            from_kind: declared.needs("from")?,
            table: declared.table.clone(),
            partition_key: declared.needs_template("partition_key")?.clone(),
            row_key: declared.needs_template("row_key")?.clone(),
            source_property: declared.needs("property")?,
        })
    }

}

/// How `denormalized(..)` lays out: the primary's link to the source it copies from.
pub(super) struct Links;

impl LaysOut for Links {
    fn check(&self, declared: &DeclaredLayout) -> Result<()> {
        DenormalizedLayout::of(declared).map(drop)
    }

    fn targets(&self, declared: &DeclaredLayout, primary: &Primary<'_>) -> Result<Vec<Target>> {
        let field = DenormalizedLayout::of(declared)?;
        let source = EntityRef::new(
            field.table.unwrap_or_else(|| primary.source.table.clone()),
            (primary.render)(&field.partition_key, KeyKind::PartitionKey)?,
            (primary.render)(&field.row_key, KeyKind::RowKey)?,
        );
        Ok(vec![Target::from(DenormalizedTarget {
            property: field.property,
            source,
            source_property: field.source_property,
        })])
    }

    fn follow_up(&self, declared: &DeclaredLayout, at: &Elsewhere<'_>) -> Option<String> {
        let template = declared.template("partition_key")?;
        let elsewhere = at.of(declared.table.as_deref(), template)?;
        Some(format!(
            "denormalized `{}` from `{}`: its source in {elsewhere}",
            declared.name,
            declared.setting("from").unwrap_or_default()
        ))
    }
}
