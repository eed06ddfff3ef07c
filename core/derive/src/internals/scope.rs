//! What a declaration is checked against: the entity's fields, its table and its keys, as
//! far as they checked.

use syn::LitStr;

use crate::internals::field::FieldModel;
use crate::internals::template::CheckedTemplate;

/// The entity a declaration belongs to.
pub(crate) struct Scope<'a> {
    pub(crate) fields: &'a [FieldModel],
    /// `#[entity(table = "…")]`.
    pub(crate) table: Option<&'a LitStr>,
    /// The entity's PartitionKey template, when it is valid.
    pub(crate) partition_key: Option<&'a CheckedTemplate>,
    /// The entity's RowKey template, when it is valid.
    pub(crate) row_key: Option<&'a CheckedTemplate>,
}
