//! A type's layout: what it declares (indexes, index entities, denormalised fields,
//! unique values, counts, expiry, change events, wide storage, data series), each
//! described by its attribute with its templates parsed and laid out by the declaration
//! the attribute names (`LaysOut`, found through the registry), and the targets a primary
//! has under them.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tablekit_core::Entity;
use tablekit_core::keys::KeyError;
use tablekit_core::limits::KeyKind;
use tablekit_core::typed::{ExpiryMeta, KeyTemplate, Schema};

use super::{EntityRef, Target};
use crate::error::{Error, Result};
use crate::index::decl::expiry::entry::EXPIRY_INDEX;

/// How a type's entities expire, as the layout keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExpiryLayout {
    /// Each write sets the expiry this many seconds after it.
    Ttl(u64),
    /// A field says when (the expiry is stored beside it, in `TablekitExpires`).
    Field,
}

impl From<ExpiryMeta> for ExpiryLayout {
    fn from(meta: ExpiryMeta) -> Self {
        match meta {
            ExpiryMeta::Ttl(seconds) => ExpiryLayout::Ttl(seconds),
            ExpiryMeta::Field(_) => ExpiryLayout::Field,
        }
    }
}

/// The indexes and index entities of an entity type: what its primaries keep in step.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The primaries' table.
    pub table: String,
    /// The kind of the primaries.
    pub kind: String,
    /// The property holding the kind.
    pub kind_property: String,
    /// What the type declares, each described by its attribute and laid out by the
    /// declaration the attribute names, through the registry.
    pub declared: Vec<DeclaredLayout>,
}

/// What a declaration's targets are worked out from: the primary at `source`, `render`
/// rendering a key template from its fields (PartitionKey or RowKey rules), and
/// `in_index` saying whether a sparse declaration holds it.
pub(crate) struct Primary<'a> {
    /// Where the primary is.
    pub source: &'a EntityRef,
    /// Renders a template from the primary's fields.
    pub render: &'a dyn Fn(&KeyTemplate, KeyKind) -> Result<String>,
    /// Whether a sparse declaration, by name, holds the primary.
    pub in_index: &'a dyn Fn(&str) -> bool,
}

/// How a declaration described by its attribute alone lays out from the type's layout:
/// the targets a primary has under it, the tables it keeps, and its follow-up work. Its
/// folder submits it as a [`LaidOut`].
pub(crate) trait LaysOut: Sync {
    /// Checks that `declared` has the templates and settings the declaration reads, so
    /// that a layout read back from the schema registry is whole or refused. Nothing to
    /// check by default.
    ///
    /// # Errors
    /// [`Error::Malformed`] naming what is missing or does not parse.
    fn check(&self, _declared: &DeclaredLayout) -> Result<()> {
        Ok(())
    }

    /// The targets of `primary` under `declared`. None by default.
    ///
    /// # Errors
    /// The rendering's errors; a setting the declaration cannot read.
    fn targets(&self, _declared: &DeclaredLayout, _primary: &Primary<'_>) -> Result<Vec<Target>> {
        Ok(Vec::new())
    }

    /// The tables it keeps its entities in, for primaries in `table`. None by default.
    fn tables(&self, _declared: &DeclaredLayout, _table: &str) -> Vec<String> {
        Vec::new()
    }

    /// Its follow-up work outside a write's transaction, described as
    /// [`Layout::follow_up`] lists it; `at` says where a template's entities are when
    /// they are not in the primary's partition.
    fn follow_up(&self, declared: &DeclaredLayout, at: &Elsewhere<'_>) -> Option<String>;

    /// Whether it copies whole primaries (an index that names no properties), which a
    /// primary stored in more than one chunk cannot give. No by default.
    fn copies_whole(&self, _declared: &DeclaredLayout) -> bool {
        false
    }

    /// Whether the schema registry records it (true by default): a declaration only the
    /// typed paths act on stays out of the record the untyped paths read.
    fn recorded(&self) -> bool {
        true
    }
}

/// A declaration's [`LaysOut`], submitted by its folder (`inventory::submit!`).
pub(crate) struct LaidOut {
    /// The attribute that declares it.
    pub attribute: &'static str,
    /// How it lays out.
    pub lays_out: &'static dyn LaysOut,
}

inventory::collect!(LaidOut);

/// How the declaration `attribute` lays out.
///
/// # Errors
/// [`crate::Error::Malformed`] when no declaration with that attribute submitted one.
pub(crate) fn lays_out(attribute: &str) -> Result<&'static dyn LaysOut> {
    inventory::iter::<LaidOut>
        .into_iter()
        .find(|l| l.attribute == attribute)
        .map(|l| l.lays_out)
        .ok_or_else(|| {
            crate::Error::malformed(
                format!("declaration `#[{attribute}]`"),
                "no registered declaration has that attribute",
            )
        })
}

/// A declaration described by its attribute alone, with its key template parsed.
#[derive(Clone, Debug)]
pub struct DeclaredLayout {
    /// The attribute (`unique`, `count`).
    pub attribute: String,
    /// The name.
    pub name: String,
    /// The key template, if it has one.
    pub key: Option<KeyTemplate>,
    /// Its other key templates, by name (an index's `partition_key` and `row_key`).
    pub templates: Vec<(String, KeyTemplate)>,
    /// The table it keeps its entities in, when declared.
    pub table: Option<String>,
    /// Its other settings, as written.
    pub settings: Vec<(String, String)>,
}

impl DeclaredLayout {
    /// A setting by key.
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A key template by name: `key` is the key template, any other name one of
    /// [`templates`](Self::templates).
    pub fn template(&self, name: &str) -> Option<&KeyTemplate> {
        match name {
            "key" => self.key.as_ref(),
            _ => self
                .templates
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t),
        }
    }

    /// A key template the declaration needs.
    ///
    /// # Errors
    /// [`Error::Malformed`] when it has none of that name.
    pub(crate) fn needs_template(&self, name: &str) -> Result<&KeyTemplate> {
        self.template(name)
            .ok_or_else(|| self.malformed(format!("has no `{name}` template")))
    }

    /// A setting the declaration needs, parsed.
    ///
    /// # Errors
    /// [`Error::Malformed`] when it is missing or does not parse.
    pub(crate) fn needs<T: std::str::FromStr>(&self, key: &str) -> Result<T>
    where
        T::Err: std::fmt::Display,
    {
        let text = self
            .setting(key)
            .ok_or_else(|| self.malformed(format!("has no `{key}` setting")))?;
        text.parse()
            .map_err(|e| self.malformed(format!("setting `{key}` = `{text}`: {e}")))
    }

    /// The error for this declaration being malformed.
    pub(crate) fn malformed(&self, why: impl std::fmt::Display) -> Error {
        Error::malformed(
            format!("declaration `#[{}]` `{}`", self.attribute, self.name),
            why.to_string(),
        )
    }
}

/// Where a declaration's entities are, when not in the primary's partition: in another
/// table, or in other partitions of the primaries' table (a template whose parts differ
/// from the primaries' PartitionKey template).
pub(crate) struct Elsewhere<'a> {
    /// The primaries' table.
    pub table: &'a str,
    /// The primaries' PartitionKey template.
    pub partition_key: &'a KeyTemplate,
}

impl Elsewhere<'_> {
    /// Where entities in `table` (the primaries' when `None`) at PartitionKeys from
    /// `template` are, when that is not the primary's partition.
    pub(crate) fn of(&self, table: Option<&str>, template: &KeyTemplate) -> Option<String> {
        if let Some(table) = table.filter(|t| *t != self.table) {
            Some(format!("table `{table}`"))
        } else {
            (template.parts() != self.partition_key.parts())
                .then(|| format!("other partitions of `{}`", self.table))
        }
    }
}

impl Layout {
    /// The layout a derived entity type declares.
    pub fn of(schema: &Schema) -> Self {
        Layout {
            table: schema.table.to_owned(),
            kind: schema.kind.to_owned(),
            kind_property: schema.kind_property.to_owned(),
            declared: schema
                .declared
                .iter()
                .map(|d| DeclaredLayout {
                    attribute: d.attribute.to_owned(),
                    name: d.name.to_owned(),
                    key: d.key.clone(),
                    templates: d
                        .templates
                        .iter()
                        .map(|(n, t)| ((*n).to_owned(), t.clone()))
                        .collect(),
                    table: d.table.map(str::to_owned),
                    settings: d
                        .settings
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                })
                .collect(),
        }
    }

    /// The layout of primaries whose type is not registered: nothing declared, the
    /// default kind property. Deleting one through it removes what its record names.
    pub fn bare(table: &str) -> Self {
        Layout {
            table: table.to_owned(),
            kind: String::new(),
            kind_property: tablekit_core::typed::DEFAULT_KIND_PROPERTY.to_owned(),
            declared: Vec::new(),
        }
    }

    /// Whether the layout declares nothing the schema registry records (a wide type's
    /// chunks are its own entity's).
    pub fn is_bare(&self) -> bool {
        self.declared
            .iter()
            .all(|d| !lays_out(&d.attribute).is_ok_and(|l| l.recorded()))
    }

    /// The same layout on another table name (one table per tenant).
    pub fn on_table(mut self, table: &str) -> Self {
        self.table = table.to_owned();
        self
    }

    /// The targets of a primary: `render` renders a template (PartitionKey or RowKey
    /// rules), `in_index` says whether a sparse index holds the primary. With `only`, the
    /// targets of that index or index entity alone.
    ///
    /// # Errors
    /// The rendering's errors.
    pub fn targets(
        &self,
        source: &EntityRef,
        render: &dyn Fn(&KeyTemplate, KeyKind) -> Result<String>,
        in_index: &dyn Fn(&str) -> bool,
        only: Option<&str>,
    ) -> Result<BTreeSet<Target>> {
        let mut targets = BTreeSet::new();
        let primary = Primary {
            source,
            render,
            in_index,
        };
        for declared in &self.declared {
            if only.is_some_and(|o| o != declared.name) {
                continue;
            }
            let lays_out = lays_out(&declared.attribute)?;
            // A key refused (a value holding its separator) names the declaration.
            let laid_out = lays_out.targets(declared, &primary).map_err(|e| match e {
                Error::Key(source) => Error::Key(KeyError::Declaration {
                    attribute: declared.attribute.clone(),
                    name: declared.name.clone(),
                    source: Box::new(source),
                }),
                other => other,
            })?;
            targets.extend(laid_out);
        }
        Ok(targets)
    }

    /// The most chunks a primary may take, if the type is wide (the declaration `wide`,
    /// with the setting `chunks`).
    /// A layout read back from the schema registry has had its settings checked, so a
    /// setting that does not parse here (a layout built by hand) reads as none.
    pub fn wide(&self) -> Option<usize> {
        self.declared
            .iter()
            .find(|d| d.attribute == "wide")?
            .needs("chunks")
            .ok()
    }

    /// How the primaries expire, if they do (the declaration `expiry`, with the setting
    /// `ttl` in seconds or `field`): each has an entry in the expiry index.
    pub fn expiry(&self) -> Option<ExpiryLayout> {
        let declared = self.declared.iter().find(|d| d.attribute == "expiry")?;
        match (declared.setting("ttl"), declared.setting("field")) {
            (Some(_), _) => declared.needs("ttl").ok().map(ExpiryLayout::Ttl),
            (None, Some(_)) => Some(ExpiryLayout::Field),
            (None, None) => None,
        }
    }

    /// The queue the type's change events go to, if it publishes them (the declaration
    /// `changes`).
    pub fn changes(&self) -> Option<&str> {
        self.declared
            .iter()
            .find(|d| d.attribute == "changes")
            .and_then(|d| d.setting("queue"))
    }

    /// The declaration of `attribute` named `name`, if the layout has it.
    pub fn declared(&self, attribute: &str, name: &str) -> Option<&DeclaredLayout> {
        self.declared
            .iter()
            .find(|d| d.attribute == attribute && d.name == name)
    }

    /// The declarations of one attribute, in declaration order.
    pub fn declared_as<'a>(
        &'a self,
        attribute: &'a str,
    ) -> impl Iterator<Item = &'a DeclaredLayout> {
        self.declared
            .iter()
            .filter(move |d| d.attribute == attribute)
    }

    /// Whether the layout declares an index, index entity or other declaration of that
    /// name.
    pub fn declares(&self, name: &str) -> bool {
        (self.expiry().is_some() && name == EXPIRY_INDEX)
            || self.declared.iter().any(|d| d.name == name)
    }

    /// The entry of a primary in the expiry index, when the layout expires its primaries
    /// and the primary (`entity`, as it is written) has an expiry time.
    pub fn expiry_target(&self, source: &EntityRef, entity: &Entity) -> Option<Target> {
        self.expiry()?;
        let at = tablekit_core::typed::expires_at(entity)?;
        Some(crate::index::decl::expiry::entry_target(source, at))
    }

    /// The declarations whose upkeep is follow-up work outside a write's own entity group
    /// transaction — the work the writer records in the partition's outbox for a sink,
    /// the relay or the inline applier — each named as its attribute names it, with where
    /// its work goes: copies in another partition or table, id lists in a table or in
    /// blobs, denormalised fields whose source is in another partition or table, unique
    /// values (released after the write), expiry (entries in the expiry table) and change
    /// events. `partition_key` is the primaries' PartitionKey template: a copy or source
    /// whose template has the same parts is in the primary's partition, written in its
    /// transaction. Same-partition copies, id lists and sources, and a wide entity's
    /// chunks, need none.
    pub fn follow_up(&self, partition_key: &KeyTemplate) -> Vec<String> {
        let at = Elsewhere {
            table: &self.table,
            partition_key,
        };
        let mut work = Vec::new();
        for declared in &self.declared {
            if let Ok(lays_out) = lays_out(&declared.attribute) {
                work.extend(lays_out.follow_up(declared, &at));
            }
        }
        work
    }

    /// The tables other than the primaries' that hold copies, id lists or reservations.
    pub fn other_tables(&self) -> BTreeSet<String> {
        self.declared
            .iter()
            .flat_map(|d| {
                lays_out(&d.attribute)
                    .map(|l| l.tables(d, &self.table))
                    .unwrap_or_default()
            })
            .filter(|t| *t != self.table)
            .collect()
    }
}
